"""The instructions the broker spends on one send, counted by valgrind: a figure that does not
move with the machine's speed.

`python benchmarks/instructions_bench.py [--requests N] [--batch N | --pull N] [--socket]
[--src DIR ...]`

On a virtual machine whose speed drifts by 20-40 % within an hour, timing cannot show a change
of a few percent; the instructions a request executes can, as they repeat from run to run
within about 1 %. This runs the broker's send path in one process (a `BrokerServer` with a
real store in a temporary directory: each frame decoded, the send handler awaited, its answer
encoded, and a turn of the loop every 16 requests for dispatch, as the remoting loop gives it)
under valgrind's callgrind, once with no request and once with `--requests`, and reports the
difference a request (a message, with `--batch`). The requests are `send_path_bench.py`'s: the
fields and properties of RocketMQ's Java producer, a binary header, 1 KiB bodies.

With `--pull N`, the pull path instead: both runs store the same 4,000 messages, and the
second then pulls `--requests` times, N messages a pull, with the fields RocketMQ's Java push
consumer sends (the figure is a pull's).

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
STORED = 4_000
"""Messages stored before the pulls (`--pull`), in both runs: enough for 1,000 pulls of 4."""


async def _broker_path(requests: int, batch: int, pull: int, store_dir: str) -> None:
    """The measured work, in process: `requests` sends through the broker's send handler; or,
    with `pull`, `requests` pulls of `pull` messages each, after sends of `STORED` messages
    that both runs make alike."""
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
        for number in range(STORED if pull else requests):
            decoder.feed(frames[number % len(frames)])
            request = decoder.next_command()
            assert request is not None
            answer = await handler(request, peer)
            assert answer.code == ResponseCode.SUCCESS, (answer.code, answer.remark)
            encode_frame(answer, SerializeType.JSON)
            if number % DISPATCH_EVERY == DISPATCH_EVERY - 1:
                await asyncio.sleep(0)
        await asyncio.sleep(0.05)  # dispatch catches up
        if pull:
            pulls = pull_frames(len(frames), pull)  # made alike in both runs
            handler = broker.server.handlers[RequestCode.PULL_MESSAGE]
            for frame in pulls[:requests]:
                decoder.feed(frame)
                request = decoder.next_command()
                assert request is not None
                answer = await handler(request, peer)
                assert answer.code == ResponseCode.SUCCESS, (answer.code, answer.remark)
                assert len(answer.body) > pull * 1024, "a pull carries fewer messages"
                encode_frame(answer, SerializeType.JSON)
    finally:
        await broker.stop()


def pull_frames(queues: int, pull: int) -> list[bytes]:
    """PULL_MESSAGE requests for the stored messages, `pull` at a time, round the queues, with
    the fields RocketMQ's Java push consumer sets (a binary header, commit offset and suspend
    flags, a tag expression)."""
    from pocketmq.common.codes import LanguageCode, RequestCode, SerializeType
    from pocketmq.remoting.command import RemotingCommand
    from pocketmq.remoting.frame import encode_frame
    from send_path_bench import TOPIC

    frames = []
    for number in range(STORED // pull):
        offset = number // queues * pull
        fields = {
            "consumerGroup": "instructions_bench",
            "topic": TOPIC,
            "queueId": str(number % queues),
            "queueOffset": str(offset),
            "maxMsgNums": str(pull),
            "sysFlag": "3",
            "commitOffset": str(offset),
            "suspendTimeoutMillis": "15000",
            "subVersion": "1764430000000",
            "expressionType": "TAG",
        }
        request = RemotingCommand.request(RequestCode.PULL_MESSAGE, fields)
        request.language = LanguageCode.JAVA
        frames.append(encode_frame(request, SerializeType.ROCKETMQ))
    return frames


def inner(requests: int, batch: int, pull: int) -> None:
    import pocketmq

    source = os.environ.get("POCKETMQ_BENCH_SRC")
    assert source is None or pocketmq.__file__.startswith(source), pocketmq.__file__
    import uvloop

    with tempfile.TemporaryDirectory(prefix="pocketmq-instructions-") as store_dir:
        uvloop.run(_broker_path(requests, batch, pull, store_dir))


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


def instructions(source: Path, requests: int, batch: int, socket: bool, pull: int = 0) -> int:
    """What callgrind counts in a run of the harness (or, with `socket`, of the broker) on
    `source`."""
    with tempfile.TemporaryDirectory() as out:
        counts = Path(out) / "callgrind.out"
        valgrind = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={counts}"]
        # With `socket` the harness runs natively and starts the broker under valgrind.
        command = [] if socket else valgrind
        command += [sys.executable, __file__, "--batch", str(batch), "--pull", str(pull)]
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
    parser.add_argument("--pull", type=int, default=0, help="messages a pull; 0: sends")
    parser.add_argument("--inner", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--inner-socket", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inner is not None:
        inner(args.inner, args.batch, args.pull)
        return 0
    if args.inner_socket is not None:
        over_socket(args.inner_socket, args.batch, args.out)
        return 0
    if shutil.which("valgrind") is None:
        sys.stderr.write("valgrind is not installed (Debian: apt-get install valgrind)\n")
        return 2
    if args.pull and (args.socket or args.batch or args.requests * args.pull > STORED):
        sys.stderr.write(f"--pull: in process, single sends stored, requests x pull <= {STORED}\n")
        return 2
    per = f"pull of {args.pull}" if args.pull else "message" if args.batch else "request"
    for source in args.src:
        source = source.resolve()
        sys.stderr.write(f"{source}: counting, two runs under valgrind...\n")
        baseline = instructions(source, 0, args.batch, args.socket, args.pull)
        loaded = instructions(source, args.requests, args.batch, args.socket, args.pull)
        each = (loaded - baseline) / args.requests / (args.batch or 1)
        where = "the broker over loopback" if args.socket else "in process"
        print(f"{source}: {each:,.0f} instructions a {per} ({args.requests} requests, {where})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
