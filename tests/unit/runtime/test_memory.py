"""`keep_freed_memory`: large frames decoded one after another must reuse the same memory
instead of faulting fresh pages in for each (what glibc's defaults do), and a user's own
allocator settings must be left alone."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(
    platform.system() != "Linux" or platform.libc_ver()[0] != "glibc",
    reason="the settings are glibc's",
)

# Decodes rounds of 8 frames of 256 KiB that arrive together in 64 KiB reads (as a socket
# hands them over), holds their commands until the round is decoded, as requests in flight are
# held, then lets them go; reports the minor page faults a frame after a warm-up.
_DECODE_FRAMES = """
import json, resource, sys
from pocketmq.common.codes import SerializeType
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.frame import FrameDecoder, encode_frame
from pocketmq.runtime.memory import keep_freed_memory

applied = keep_freed_memory() if sys.argv[1] == "keep" else None
command = RemotingCommand.request(320, {"a": "b"}, b"x" * (256 << 10))
frames = bytes(encode_frame(command, SerializeType.JSON)) * 8
reads = [frames[i : i + (64 << 10)] for i in range(0, len(frames), 64 << 10)]
decoder = FrameDecoder()

def decode(rounds):
    for _ in range(rounds):
        held = []
        for read in reads:
            decoder.feed(read)
            while (command := decoder.next_command()) is not None:
                held.append(command)
        assert len(held) == 8
        del held

decode(2)
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
decode(10)
faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
print(json.dumps({"applied": applied, "faults_a_frame": faults / 80}))
"""


def _decode_frames(mode: str, **env: str) -> tuple[bool | None, float]:
    """Whether the settings were applied (None: not asked) and the faults a frame."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("MALLOC_", "GLIBC_"))}
    done = subprocess.run(
        [sys.executable, "-c", _DECODE_FRAMES, mode],
        env={**environment, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    result = json.loads(done.stdout)
    return result["applied"], float(result["faults_a_frame"])


def test_large_frames_reuse_memory_once_it_is_kept() -> None:
    applied, faults = _decode_frames("keep")
    assert applied is True
    # A 256 KiB frame spans 64 pages; with the memory kept, decoding one faults none in.
    assert faults < 2


def test_without_the_settings_each_large_frame_faults_its_pages_in() -> None:
    # The cost the settings remove: if glibc stopped faulting here, they would be moot.
    _, faults = _decode_frames("default")
    assert faults >= 16


@pytest.mark.parametrize(
    "setting",
    [
        {"MALLOC_TRIM_THRESHOLD_": "131072"},
        {"GLIBC_TUNABLES": "glibc.malloc.trim_threshold=131072"},
    ],
)
def test_a_users_own_allocator_settings_are_left_alone(setting: dict[str, str]) -> None:
    # glibc read this at start: the user chose to trim at once, so frames fault as before.
    applied, faults = _decode_frames("keep", **setting)
    assert applied is False
    assert faults >= 16


def test_tunables_of_other_parts_of_glibc_do_not_count_as_allocator_settings() -> None:
    applied, faults = _decode_frames("keep", GLIBC_TUNABLES="glibc.pthread.mutex_spin_count=100")
    assert applied is True
    assert faults < 2
