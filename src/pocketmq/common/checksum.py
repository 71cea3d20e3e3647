"""CRC32 as zlib computes it (RocketMQ's BODYCRC and `UtilAll.crc32`), from ISA-L when the
`isal` package is installed: the store checksums every body it writes, and ISA-L does a 1 KiB
body about 8 times faster than the zlib that CPython links (1.2.x). Without it, zlib's."""

from __future__ import annotations

try:
    from isal.isal_zlib import crc32 as crc32
except ImportError:  # a platform without its wheels: the same values, slower
    from zlib import crc32 as crc32

__all__ = ["crc32"]
