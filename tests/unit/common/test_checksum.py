"""`common.checksum.crc32` gives zlib's values, with zlib-ng or without it."""

from __future__ import annotations

import subprocess
import sys
import zlib

from hypothesis import given
from hypothesis import strategies as st

from pocketmq.common.checksum import crc32


@given(st.binary(max_size=5000), st.integers(0, 2**32 - 1))
def test_the_crc_is_zlibs(data: bytes, start: int) -> None:
    assert crc32(data) == zlib.crc32(data)
    assert crc32(memoryview(data)[1:]) == zlib.crc32(data[1:])
    assert crc32(data, start) == zlib.crc32(data, start)


def test_without_zlib_ng_it_is_zlibs_own() -> None:
    code = (
        "import sys; sys.modules['zlib_ng'] = None\n"
        "import zlib\n"
        "from pocketmq.common.checksum import crc32\n"
        "assert crc32 is zlib.crc32, crc32\n"
    )
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
