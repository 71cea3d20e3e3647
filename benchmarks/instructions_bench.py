"""The instructions the broker spends on one send, counted by valgrind: a figure that does not
move with the machine's speed.

`python benchmarks/instructions_bench.py [--requests N] [--batch N] [--socket] [--src DIR ...]`

On a virtual machine whose speed drifts by 20-40 % within an hour, timing cannot show a change
of a few percent; the instructions a request executes can, as they repeat from run to run
within about 1 %. This runs the broker's send path in one process (a `BrokerServer` with a
real store in a temporary directory: each frame decoded, the send handler awaited, its answer
encoded, and a turn of the loop every 16 requests for dispatch, as the remoting loop gives it)
under valgrind's callgrind, once with no request and once with `--requests`, and reports the
difference a request (a message, with `--batch`). The requests are `send_path_bench.py`'s: the
fields and properties of RocketMQ's Java producer, a binary header, 1 KiB bodies.

With `--socket`, the whole broker instead: `pocketmq up` runs under callgrind, and
`send_path_bench.py`'s client sends it the requests over loopback, 16 in flight (its remoting
channel, event loop and dispatch counted too); the count then varies a little more, with how
the requests group into reads.

Instructions are not time: cache misses, system calls and the work of the store's threads are
left out, so this is for before/after comparisons of the Python work, beside the timed
benchmarks. `--src` takes source trees (another checkout's `src`, with its compiled kernels) and
measures each in turn. Needs valgrind (Debian's `valgrind` package); the hash seed is fixed so
that the runs hash alike.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DISPATCH_EVERY = 16
"""Requests between the turns of the loop that let dispatch run."""


async def _send_path(requests: int, batch: int, store_dir: str) -> None:
    """The measured work: `requests` sends through the broker's handler, in process."""
    # The tree under test is first on sys.path: its package is imported before
    # send_path_bench (which puts this checkout's src first), so the frames are its own too.
    from pocketmq.broker.config import BrokerConfig
    from pocketmq.broker.server import BrokerServer
    from pocketmq.common.codes import RequestCode, ResponseCode, SerializeType
    from pocketmq.remoting.frame import FrameDecoder, encode_frame
    from pocketmq.store.config import MessageStoreConfig

    sys.path.insert(1, str(ROOT / "benchmarks"))
    from send_path_bench import send_frames

    broker = BrokerServer(
        BrokerConfig(listen_port=0, bind_address="127.0.0.1", broker_ip1="127.0.0.1"),
        MessageStoreConfig(store_path_root_dir=store_dir),
    )
    await broker.start()

    class Peer:
        remote_address = "127.0.0.1:40000"

    try:
        code = RequestCode.SEND_BATCH_MESSAGE if batch else RequestCode.SEND_MESSAGE_V2
        handler = broker.server.handlers[code]
        frames = [bytes(frame) for frame in send_frames(b"x" * 1024, batch)]
        decoder = FrameDecoder()
        peer = Peer()
        decoder.feed(frames[0])
        first = decoder.next_command()
        assert first is not None
        await handler(first, peer)  # creates the topic: not measured
        for number in range(requests):
            decoder.feed(frames[number % len(frames)])
            request = decoder.next_command()
            assert request is not None
            answer = await handler(request, peer)
            assert answer.code == ResponseCode.SUCCESS, (answer.code, answer.remark)
            encode_frame(answer, SerializeType.JSON)
            if number % DISPATCH_EVERY == DISPATCH_EVERY - 1:
                await asyncio.sleep(0)
        await asyncio.sleep(0.05)  # dispatch catches up
    finally:
        await broker.stop()


def inner(requests: int, batch: int) -> None:
    import pocketmq

    source = os.environ.get("POCKETMQ_BENCH_SRC")
    assert source is None or pocketmq.__file__.startswith(source), pocketmq.__file__
    import uvloop

    with tempfile.TemporaryDirectory(prefix="pocketmq-instructions-") as store_dir:
        uvloop.run(_send_path(requests, batch, store_dir))


def over_socket(requests: int, batch: int, out: str) -> None:
    """`pocketmq up` under callgrind (writing `out`), sent `requests` over loopback after the
    topic's creation and a warm-up."""
    sys.path.insert(1, str(ROOT / "benchmarks"))
    from pocketmq.testing import start_up_process
    from send_path_bench import one_round

    with tempfile.TemporaryDirectory(prefix="pocketmq-instructions-") as work:
        server = start_up_process(
            Path(work) / "data",
            Path(work) / "up.log",
            timeout_s=600,
            command_prefix=["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"],
        )
        try:
            broker = server.named_address("broker-a")
            asyncio.run(one_round(broker, server.process.pid, 200, 16))
            if requests:
                asyncio.run(one_round(broker, server.process.pid, requests, 16, batch))
        finally:
            server.stop(timeout_s=600)  # callgrind writes its counts at a clean exit


def instructions(source: Path, requests: int, batch: int, socket: bool) -> int:
    """What callgrind counts in a run of the harness (or, with `socket`, of the broker) on
    `source`."""
    with tempfile.TemporaryDirectory() as out:
        counts = Path(out) / "callgrind.out"
        valgrind = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={counts}"]
        # With `socket` the harness runs natively and starts the broker under valgrind.
        command = [] if socket else valgrind
        command += [sys.executable, __file__, "--batch", str(batch)]
        command += ["--inner-socket", str(requests), "--out", str(counts)] if socket else []
        command += [] if socket else ["--inner", str(requests)]
        run = subprocess.run(
            command,
            env={
                **os.environ,
                "PYTHONPATH": str(source),
                "POCKETMQ_BENCH_SRC": str(source),
                "PYTHONHASHSEED": "0",
            },
            capture_output=True,
            text=True,
            check=False,
        )
        found = re.search(r"^summary: (\d+)", counts.read_text() if counts.exists() else "", re.M)
    if run.returncode != 0 or found is None:
        raise SystemExit(f"the run under valgrind failed ({run.returncode}):\n{run.stderr[-3000:]}")
    return int(found.group(1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=600)
    parser.add_argument("--batch", type=int, default=0, help="messages a batch send; 0: single")
    parser.add_argument("--src", type=Path, nargs="*", default=[ROOT / "src"])
    parser.add_argument("--socket", action="store_true", help="the whole broker, over loopback")
    parser.add_argument("--inner", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--inner-socket", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inner is not None:
        inner(args.inner, args.batch)
        return 0
    if args.inner_socket is not None:
        over_socket(args.inner_socket, args.batch, args.out)
        return 0
    if shutil.which("valgrind") is None:
        sys.stderr.write("valgrind is not installed (Debian: apt-get install valgrind)\n")
        return 2
    per = "message" if args.batch else "request"
    for source in args.src:
        source = source.resolve()
        sys.stderr.write(f"{source}: counting, two runs under valgrind...\n")
        baseline = instructions(source, 0, args.batch, args.socket)
        loaded = instructions(source, args.requests, args.batch, args.socket)
        each = (loaded - baseline) / args.requests / (args.batch or 1)
        where = "the broker over loopback" if args.socket else "in process"
        print(f"{source}: {each:,.0f} instructions a {per} ({args.requests} requests, {where})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
