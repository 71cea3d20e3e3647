"""How late delayed messages (delay levels) arrive, before and after a broker restart.

Starts `pocketmq up` on two fixed free loopback ports with data in a temporary directory and
RocketMQ's default `messageDelayLevel`, a push consumer, then:

1. steady: `--messages` sends with levels 1-3 (1 s, 5 s, 10 s) at random; lateness = receive
   time - (send time + the level's delay);
2. restart: `--messages` sends with levels 2-3, then the broker is killed with SIGKILL right away
   and started again on the same data; lateness of those messages includes the downtime.

Prints p50/p99/max lateness per phase, the restart time, and lost and repeated messages.
`python benchmarks/delay_bench.py [--messages N]`
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import socket
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from pocketmq.client.aio import Message, MessageExt, Producer, PushConsumer  # noqa: E402
from pocketmq.testing import ServerProcess, start_server_process  # noqa: E402

DELAYS_S = {1: 1.0, 2: 5.0, 3: 10.0}
TOPIC = "DelayBench"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start(work: Path, namesrv_port: int, broker_port: int) -> ServerProcess:
    return start_server_process(
        [
            "up",
            "--namesrv-port",
            str(namesrv_port),
            "--broker-port",
            str(broker_port),
            "--data-dir",
            str(work / "up"),
        ],
        work / f"up-{time.monotonic_ns()}.log",
    )


def _summary(name: str, lateness_s: list[float]) -> str:
    values = sorted(lateness_s)
    if not values:
        return f"{name}: nothing received"
    p50 = values[len(values) // 2]
    p99 = values[min(len(values) - 1, int(len(values) * 0.99))]
    return (
        f"{name}: {len(values)} messages, lateness p50 {p50 * 1000:.0f} ms, "
        f"p99 {p99 * 1000:.0f} ms, max {values[-1] * 1000:.0f} ms"
    )


async def _run(messages: int, work: Path) -> None:
    namesrv_port, broker_port = _free_port(), _free_port()
    server = _start(work, namesrv_port, broker_port)
    namesrv = f"127.0.0.1:{namesrv_port}"
    due: dict[str, float] = {}
    lateness: dict[str, list[float]] = {"steady": [], "restart": []}
    seen: dict[str, int] = {}
    phase_of: dict[str, str] = {}
    waiting: set[str] = set()
    all_in = asyncio.Event()

    async def listener(batch: list[MessageExt]) -> None:
        now = time.time()
        for message in batch:
            seen[message.msg_id] = seen.get(message.msg_id, 0) + 1
            if seen[message.msg_id] == 1 and message.msg_id in due:
                lateness[phase_of[message.msg_id]].append(now - due[message.msg_id])
            waiting.discard(message.msg_id)
        if not waiting:
            all_in.set()

    consumer = PushConsumer("delay-bench", namesrv=namesrv)
    consumer.subscribe(TOPIC)
    consumer.register_listener(listener)
    rng = random.Random(7)
    try:
        async with Producer("delay-bench", namesrv=namesrv) as producer:
            await producer.send(Message(TOPIC, b"warm-up"))
            await consumer.start()
            for phase, levels in (("steady", (1, 2, 3)), ("restart", (2, 3))):
                print(f"{phase}: sending {messages} delayed messages ...", flush=True)
                ids = []
                all_in.clear()
                for _ in range(messages):
                    level = rng.choice(levels)
                    result = await producer.send(Message(TOPIC, b"x" * 128, delay_level=level))
                    due[result.msg_id] = time.time() + DELAYS_S[level]
                    phase_of[result.msg_id] = phase
                    ids.append(result.msg_id)
                    if result.msg_id not in seen:
                        waiting.add(result.msg_id)
                if phase == "restart":
                    started = time.monotonic()
                    server.kill()
                    server = _start(work, namesrv_port, broker_port)
                    print(f"broker killed and back in {time.monotonic() - started:.1f} s")
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(all_in.wait(), max(DELAYS_S.values()) + 60)
                lost = sum(i not in seen for i in ids)
                repeated = sum(seen.get(i, 0) > 1 for i in ids)
                print(_summary(phase, lateness[phase]) + f", {lost} lost, {repeated} repeated")
    finally:
        await consumer.close()
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=300)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="pocketmq-delay-bench-") as work:
        asyncio.run(_run(args.messages, Path(work)))


if __name__ == "__main__":
    main()
