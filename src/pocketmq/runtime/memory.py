"""The C allocator's settings for processes that move large buffers: freed memory is kept for
the next request instead of being handed back to the kernel and faulted in again.

A batch send arrives as a frame of hundreds of KiB, a bulk pull leaves as one of MiB. glibc
serves allocations of 128 KiB or more with `mmap` (unmapped again on `free`) until a free
raises that threshold, and gives the heap's top back to the kernel beyond twice it, so such
buffers are paid for again and again in page faults, one a 4 KiB page the kernel zeroes:
decoding 256 KiB frames took 144-240 us a frame that way against 21 us with the memory kept
(`docs/perf/README.md`). Raising glibc's mmap threshold to its largest value, with the heap's
top trimmed only beyond `TRIM_THRESHOLD_BYTES`, keeps such buffers on the heap, where the next
one reuses the same pages.

Settings a user gave (glibc reads `MALLOC_MMAP_THRESHOLD_`, `MALLOC_TRIM_THRESHOLD_` and the
`glibc.malloc` tunables of `GLIBC_TUNABLES` at start) are left as they are; another C library
is left alone too.
"""

from __future__ import annotations

import ctypes
import functools
import logging
import os
import platform
from typing import Final

log = logging.getLogger(__name__)

# mallopt's parameter numbers (glibc's malloc.h).
_M_TRIM_THRESHOLD: Final = -1
_M_MMAP_THRESHOLD: Final = -3

MMAP_THRESHOLD_BYTES: Final = 32 << 20
"""Allocations below this come from the heap: glibc's largest accepted value on 64-bit
(`HEAP_MAX_SIZE / 2`), above the largest frame a broker accepts by default (16 MiB)."""
TRIM_THRESHOLD_BYTES: Final = 128 << 20
"""Free memory at the heap's top beyond this goes back to the kernel: a few bulk pulls' worth
stays for the next ones."""


@functools.cache
def keep_freed_memory() -> bool:
    """Sets glibc's mmap and trim thresholds (above) for this process, once; returns whether
    they are set. Does nothing under another C library or where the user set them."""
    given = [
        name for name in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_") if name in os.environ
    ]
    if "glibc.malloc" in os.environ.get("GLIBC_TUNABLES", ""):
        given.append("GLIBC_TUNABLES")
    if given:
        log.debug("allocator settings left as given (%s)", ", ".join(given))
        return False
    if platform.libc_ver()[0] != "glibc":
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    # Without the mmap threshold a higher trim threshold would only keep more memory.
    if not mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES):
        log.debug("glibc refused an mmap threshold of %d bytes", MMAP_THRESHOLD_BYTES)
        return False
    mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES)
    return True
