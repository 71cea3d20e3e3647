"""The broker's cost of one send request, as the official Java client sends it.

`python benchmarks/send_path_bench.py [--requests N] [--in-flight W] [--rounds R] [--batch N]
[--pin] [--flush SYNC_FLUSH]`

Starts `pocketmq up` (ASYNC_FLUSH, or `--flush`) on free loopback ports and sends it SEND_MESSAGE_V2
requests with a 1 KiB body, one message each, framed with the binary ROCKETMQ header and the
fields and properties RocketMQ's Java producer puts there (its benchmark Producer's load),
keeping `--in-flight` requests outstanding on one connection. The frames are encoded once and
only their opaque changes, and the answers are counted by their length prefix, so the client
costs little next to the broker. Reported per round: requests a second, the broker process's
CPU (user + system, from `/proc`) per request, the figure this benchmark is for, and its minor
page faults per request (pages the kernel mapped in and zeroed for it).

With `--batch N`, each request is a SEND_BATCH_MESSAGE of N such messages, each entry with its
own UNIQ_KEY and KEYS as the Spark sink and the Java client's batches carry them; the figures
are then per message.

With `--pin`, the broker runs on the last CPU and this client on the first (`taskset`): on a
2-core machine that keeps the scheduler from moving either, which otherwise spreads the same
code's figures by 15 % or more between rounds. `PYTHONPATH=<checkout>/src` runs another
checkout's broker under the same client.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from pocketmq.common.batch import encode_batch_body  # noqa: E402
from pocketmq.common.codes import RequestCode, ResponseCode, SerializeType  # noqa: E402
from pocketmq.remoting.command import RemotingCommand  # noqa: E402
from pocketmq.remoting.frame import decode_frame, encode_frame  # noqa: E402
from pocketmq.testing import start_up_process  # noqa: E402
from pocketmq.testing.proc_stat import proc_stat  # noqa: E402

TOPIC = "SendPathBench"
QUEUES = 4
# Where the opaque sits in a frame with a binary header: after the 4-byte length, the 4-byte
# header length and the header's code (2), language (1) and version (2).
OPAQUE_AT = 13


def send_frames(body: bytes, batch: int = 0) -> list[bytearray]:
    """One encoded request a queue, as RocketMQ's Java producer frames a single send, or with
    `batch`, a batch send of that many messages."""
    frames = []
    for queue_id in range(QUEUES):
        properties = "UNIQ_KEY\x017F0000011B6E18B4AAC2A3D1F0000000\x02WAIT\x01true\x02"
        code = RequestCode.SEND_MESSAGE_V2
        payload = body
        if batch:
            code = RequestCode.SEND_BATCH_MESSAGE
            properties = "WAIT\x01true\x02"
            payload = encode_batch_body(
                (0, body, f"KEYS\x01k{n}\x02UNIQ_KEY\x017F0000011B6E18B4AAC2A3D1{n:08X}\x02")
                for n in range(batch)
            )
        fields = {
            "a": "send_path_bench",
            "b": TOPIC,
            "c": "TBW102",
            "d": str(QUEUES),
            "e": str(queue_id),
            "f": "0",
            "g": str(int(time.time() * 1000)),
            "h": "0",
            "i": properties,
            "j": "0",
            "k": "false",
            "m": "true" if batch else "false",
            "n": "broker-a",
        }
        request = RemotingCommand.request(code, fields, payload)
        frames.append(bytearray(encode_frame(request, SerializeType.ROCKETMQ)))
    return frames


class Sender(asyncio.Protocol):
    """Keeps `in_flight` requests outstanding and counts whole answers."""

    def __init__(self, frames: list[bytearray], total: int, in_flight: int) -> None:
        self.frames = frames
        self.total = total
        self.in_flight = in_flight
        self.sent = 0
        self.answered = 0
        self.pending = b""
        self.first_answer: bytes | None = None
        self.done = asyncio.get_running_loop().create_future()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def send(self, count: int) -> None:
        assert self.transport is not None
        out = []
        for _ in range(min(count, self.total - self.sent)):
            frame = self.frames[self.sent % QUEUES]
            struct.pack_into(">i", frame, OPAQUE_AT, self.sent)
            out.append(bytes(frame))
            self.sent += 1
        self.transport.writelines(out)

    def data_received(self, data: bytes) -> None:
        buffer = self.pending + data
        position = 0
        answered = 0
        while len(buffer) - position >= 4:
            length = int.from_bytes(buffer[position : position + 4], "big")
            if len(buffer) - position < 4 + length:
                break
            if self.first_answer is None:
                self.first_answer = buffer[position : position + 4 + length]
            position += 4 + length
            answered += 1
        self.pending = buffer[position:]
        self.answered += answered
        if self.answered >= self.total:
            if not self.done.done():
                self.done.set_result(None)
        elif answered:
            self.send(answered)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_exception(ConnectionError(f"broker closed the connection: {exc}"))


def process_usage(pid: int) -> tuple[float, int]:
    """The process's CPU seconds (user + system) and minor page faults (each a page the kernel
    mapped in and zeroed) so far."""
    stat = proc_stat(pid)
    return stat.cpu_s, stat.minor_faults


async def one_round(
    address: str, pid: int, requests: int, in_flight: int, batch: int = 0
) -> tuple[float, float, float]:
    """Returns messages a second, the broker's CPU in microseconds a message and its minor
    page faults a message."""
    host, _, port = address.rpartition(":")
    loop = asyncio.get_running_loop()
    frames = send_frames(b"x" * 1024, batch)
    _, sender = await loop.create_connection(
        lambda: Sender(frames, requests, in_flight), host, int(port)
    )
    cpu_before, faults_before = process_usage(pid)
    began = time.perf_counter()
    sender.send(in_flight)
    await asyncio.wait_for(sender.done, timeout=max(60.0, requests / 500))
    elapsed = time.perf_counter() - began
    cpu_after, faults_after = process_usage(pid)
    cpu, faults = cpu_after - cpu_before, faults_after - faults_before
    assert sender.transport is not None
    assert sender.first_answer is not None
    sender.transport.close()
    answer = decode_frame(sender.first_answer)
    if answer.code != ResponseCode.SUCCESS:
        raise SystemExit(f"the broker refused the send: code {answer.code}, {answer.remark}")
    messages = requests * max(batch, 1)
    return messages / elapsed, cpu / messages * 1e6, faults / messages


def pinned() -> list[str]:
    """Moves this process to the first CPU it may use; the command prefix that starts the
    broker on the last one. Nothing is pinned with a single CPU or without `taskset`."""
    cpus = sorted(os.sched_getaffinity(0))
    taskset = shutil.which("taskset")
    if len(cpus) < 2 or taskset is None:
        sys.stderr.write("--pin: needs two CPUs and taskset; running unpinned\n")
        return []
    os.sched_setaffinity(0, {cpus[0]})
    return [taskset, "-c", str(cpus[-1])]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=100_000)
    parser.add_argument("--in-flight", type=int, default=16, help="like the tools' -w 16")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch", type=int, default=0, help="messages a batch send; 0: single")
    parser.add_argument("--pin", action="store_true", help="broker and client on a CPU each")
    parser.add_argument("--flush", choices=("ASYNC_FLUSH", "SYNC_FLUSH"), default="ASYNC_FLUSH")
    args = parser.parse_args()
    prefix = pinned() if args.pin else []
    unit = "message" if args.batch else "request"
    with tempfile.TemporaryDirectory(prefix="pocketmq-send-path-") as work:
        config = Path(work) / "broker.properties"
        config.write_text(f"flushDiskType={args.flush}\n")
        server = start_up_process(
            Path(work) / "data", Path(work) / "up.log", "-c", str(config), command_prefix=prefix
        )
        try:
            broker = server.named_address("broker-a")
            # The first sends create the topic from TBW102; warm up before measuring.
            asyncio.run(one_round(broker, server.process.pid, 5_000, args.in_flight))
            rates, costs, faults = [], [], []
            for number in range(1, args.rounds + 1):
                rate, cost, fault = asyncio.run(
                    one_round(broker, server.process.pid, args.requests, args.in_flight, args.batch)
                )
                rates.append(rate)
                costs.append(cost)
                faults.append(fault)
                sys.stderr.write(
                    f"round {number}: {rate:,.0f} {unit}s/s, broker CPU {cost:.1f} us a {unit}, "
                    f"{fault:.2f} page faults a {unit}\n"
                )
        finally:
            server.stop()
    print(
        f"median: {statistics.median(rates):,.0f} {unit}s/s, broker CPU "
        f"{statistics.median(costs):.1f} us a {unit}, {statistics.median(faults):.2f} page "
        f"faults a {unit} ({args.requests:,} x "
        f"{f'{args.batch} x ' if args.batch else ''}1 KiB sends, {args.in_flight} in flight)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
