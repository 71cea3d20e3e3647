"""Timer messages: how late they arrive (before and after a broker restart), and what a million
pending timers cost the broker.

Starts `pocketmq namesrv` and `pocketmq broker` on free loopback ports with data in a temporary
directory (RocketMQ's defaults: `timerPrecisionMs=1000`, `timerMaxDelaySec` 3 days), then:

1. lateness, steady: `--messages` sends with a delivery time 1-10 s ahead (any millisecond) at
   random; lateness = receive time - delivery time, from one push consumer, and at the broker
   = store time of the delivered message - delivery time (without the consumer's pull);
2. lateness, restart: `--messages` more, then the broker is killed with SIGKILL right away and
   started again on the same data; those messages' lateness includes the downtime;
3. pending: `--timers` sends with delivery times spread over hours (1-4 h ahead), pipelined;
   the broker's memory (VmRSS, and its anonymous and file-backed parts, from
   /proc/<pid>/status) before, during and after, the send and enqueue rates, the disk the
   timer files take; then a SIGKILL and restart with all of them pending (wheel rebuild time,
   memory after);
4. store only: `--store-timers` timer records enqueued into the wheel by the timer store in
   this process, without network or client (the wheel's own enqueue rate), then the files
   closed without a clean stop and loaded again (the time to rebuild the wheel).

`python benchmarks/timer_bench.py [--messages N] [--timers N] [--store-timers N]`
(`--timers 0` or `--messages 0` skips a part; the 1,000,000 default of `--timers` takes minutes)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import re
import socket
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from pocketmq.client.admin import AdminClient  # noqa: E402
from pocketmq.client.aio import Message, MessageExt, Producer, PushConsumer  # noqa: E402
from pocketmq.testing import ServerProcess, start_server_process  # noqa: E402

TOPIC = "TimerBench"
PENDING_TOPIC = "TimerBenchPending"
WINDOW = 1000
"""Sends in flight while filling the wheel."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Servers:
    """A NameServer and a broker process on fixed ports; the broker can be killed and restarted."""

    def __init__(self, work: Path) -> None:
        self.work = work
        self.namesrv_port, self.broker_port = _free_port(), _free_port()
        self.namesrv_addr = f"127.0.0.1:{self.namesrv_port}"
        (work / "broker.properties").write_text("bindAddress=127.0.0.1\nbrokerIP1=127.0.0.1\n")
        (work / "namesrv.properties").write_text("bindAddress=127.0.0.1\n")
        self.namesrv = start_server_process(
            ["namesrv", "-c", str(work / "namesrv.properties"), "--port", str(self.namesrv_port)],
            work / "namesrv.log",
        )
        self.broker_log = work / "broker-0.log"
        self.broker = self._start_broker()
        self.broker_addr = self.broker.address
        self.starts = 1

    def _start_broker(self) -> ServerProcess:
        return start_server_process(
            [
                "broker",
                "-c",
                str(self.work / "broker.properties"),
                "-n",
                self.namesrv_addr,
                "--port",
                str(self.broker_port),
                "--data-dir",
                str(self.work / "broker-store"),
            ],
            self.broker_log,
            timeout_s=600,
        )

    def kill_and_restart(self) -> float:
        """SIGKILL, then start on the same data; returns seconds until it serves again."""
        started = time.monotonic()
        self.broker.kill()
        self.broker_log = self.work / f"broker-{self.starts}.log"
        self.starts += 1
        self.broker = self._start_broker()
        return time.monotonic() - started

    def memory_kb(self) -> dict[str, int]:
        """VmRSS, RssAnon and RssFile of the broker process, in KiB."""
        status = Path(f"/proc/{self.broker.process.pid}/status").read_text()
        found = {}
        for name in ("VmRSS", "RssAnon", "RssFile"):
            match = re.search(rf"^{name}:\s+(\d+) kB", status, re.MULTILINE)
            found[name] = int(match.group(1)) if match else -1
        return found

    def stop(self) -> None:
        self.broker.stop()
        self.namesrv.stop()


def _percentiles(values_s: list[float]) -> str:
    values = sorted(values_s)
    if not values:
        return "nothing received"
    p50 = values[len(values) // 2]
    p99 = values[min(len(values) - 1, int(len(values) * 0.99))]
    early = sum(v < 0 for v in values)
    return (
        f"{len(values)} messages, lateness p50 {p50 * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms, "
        f"max {values[-1] * 1000:.0f} ms, min {values[0] * 1000:.0f} ms, {early} early"
    )


def _mib(kib: int) -> str:
    return f"{kib / 1024:.1f} MiB"


def _disk_bytes(path: Path) -> int:
    """Bytes allocated on disk under `path` (sparse files count what they use)."""
    if not path.exists():
        return 0
    files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
    return sum(p.stat().st_blocks * 512 for p in files)


# -- 1 and 2: lateness ------------------------------------------------------------------------
async def lateness(servers: Servers, messages: int) -> None:
    due: dict[str, float] = {}
    phase_of: dict[str, str] = {}
    late: dict[str, list[float]] = {"steady": [], "restart": []}
    late_at_broker: dict[str, list[float]] = {"steady": [], "restart": []}
    seen: dict[str, int] = {}
    waiting: set[str] = set()
    all_in = asyncio.Event()

    async def listener(batch: list[MessageExt]) -> None:
        now = time.time()
        for message in batch:
            seen[message.msg_id] = seen.get(message.msg_id, 0) + 1
            if seen[message.msg_id] == 1 and message.msg_id in due:
                phase = phase_of[message.msg_id]
                late[phase].append(now - due[message.msg_id])
                late_at_broker[phase].append(
                    message.store_timestamp_ms / 1000 - due[message.msg_id]
                )
            waiting.discard(message.msg_id)
        if not waiting:
            all_in.set()

    consumer = PushConsumer("timer-bench", namesrv=servers.namesrv_addr)
    consumer.subscribe(TOPIC)
    consumer.register_listener(listener)
    rng = random.Random(7)
    try:
        async with Producer("timer-bench", namesrv=servers.namesrv_addr) as producer:
            await producer.send(Message(TOPIC, b"warm-up"))
            await consumer.start()
            for phase in ("steady", "restart"):
                print(f"{phase}: sending {messages} timer messages, 1-10 s ahead ...", flush=True)
                ids = []
                all_in.clear()
                for _ in range(messages):
                    deliver_ms = int(time.time() * 1000) + rng.randrange(1000, 10_000)
                    result = await producer.send(
                        Message(TOPIC, b"x" * 128, deliver_time_ms=deliver_ms)
                    )
                    due[result.msg_id] = deliver_ms / 1000
                    phase_of[result.msg_id] = phase
                    ids.append(result.msg_id)
                    if result.msg_id not in seen:
                        waiting.add(result.msg_id)
                if phase == "restart":
                    took = servers.kill_and_restart()
                    print(f"broker killed and serving again in {took:.1f} s")
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(all_in.wait(), 70)
                lost = sum(i not in seen for i in ids)
                repeated = sum(seen.get(i, 0) > 1 for i in ids)
                print(f"{phase}: {_percentiles(late[phase])}, {lost} lost, {repeated} repeated")
                print(f"{phase}, at the broker: {_percentiles(late_at_broker[phase])}")
    finally:
        await consumer.close()


# -- 3: a million pending timers ----------------------------------------------------------------
async def _runtime(servers: Servers) -> dict[str, str]:
    async with AdminClient([servers.namesrv_addr]) as admin:
        return await admin.broker_runtime_info(servers.broker_addr)


async def _wait_enqueued(servers: Servers, expected: int, timeout_s: float) -> dict[str, str]:
    deadline = time.monotonic() + timeout_s
    while True:
        info = await _runtime(servers)
        if (
            info.get("timerOffsetBehind") == "0"
            and int(info.get("timerCongestNum", -1)) >= expected
        ):
            return info
        if time.monotonic() > deadline:
            raise RuntimeError(f"timers not all enqueued in {timeout_s:.0f} s: {info}")
        await asyncio.sleep(0.2)


async def pending(servers: Servers, timers: int) -> None:
    rng = random.Random(11)
    samples: list[tuple[str, dict[str, int]]] = [("before", servers.memory_kb())]
    checkpoints = {timers * k // 4 for k in (1, 2, 3)}
    window = asyncio.Semaphore(WINDOW)
    failures: list[BaseException] = []
    print(f"pending: sending {timers:,} timer messages 1-4 h ahead ...", flush=True)
    async with Producer("timer-bench-pending", namesrv=servers.namesrv_addr) as producer:
        await producer.send(Message(PENDING_TOPIC, b"warm-up"))
        started = time.monotonic()
        now_ms = int(time.time() * 1000)
        for index in range(timers):
            await window.acquire()
            deliver_ms = now_ms + rng.randrange(3_600_000, 4 * 3_600_000)
            future = producer.send_async(
                Message(PENDING_TOPIC, b"p" * 64, deliver_time_ms=deliver_ms)
            )
            future.add_done_callback(
                lambda f: (window.release(), f.exception() and failures.append(f.exception()))
            )
            if index + 1 in checkpoints:
                samples.append((f"{index + 1:,} sent", servers.memory_kb()))
        for _ in range(WINDOW):
            await window.acquire()
        sent_s = time.monotonic() - started
    if failures:
        raise RuntimeError(f"{len(failures)} sends failed, first: {failures[0]!r}")
    info = await _wait_enqueued(servers, timers, 600)
    enqueued_s = time.monotonic() - started
    samples.append((f"all {timers:,} enqueued", servers.memory_kb()))
    store = servers.work / "broker-store"
    print(f"sent {timers:,} in {sent_s:.1f} s ({timers / sent_s:,.0f} msgs/s)")
    print(
        f"all in the wheel after {enqueued_s:.1f} s ({timers / enqueued_s:,.0f} timers/s "
        f"end to end); runtime info: timerCongestNum={info['timerCongestNum']} "
        f"timerOffsetBehind={info['timerOffsetBehind']}"
    )
    took = servers.kill_and_restart()
    info = await _runtime(servers)
    samples.append(("after SIGKILL + restart", servers.memory_kb()))
    rebuilt = re.search(r"timer wheel rebuilt .*", servers.broker_log.read_text())
    print(
        f"SIGKILL with {timers:,} pending; serving again in {took:.1f} s; "
        f"timerCongestNum={info.get('timerCongestNum')}"
    )
    if rebuilt:
        print(f"  broker log: {rebuilt.group(0)}")
    print("broker memory (KiB = /proc/<pid>/status):")
    print(f"  {'when':<26} {'VmRSS':>12} {'RssAnon':>12} {'RssFile':>12}")
    for when, memory in samples:
        print(
            f"  {when:<26} {_mib(memory['VmRSS']):>12} {_mib(memory['RssAnon']):>12} "
            f"{_mib(memory['RssFile']):>12}"
        )
    print("disk:")
    for name in ("timer/log", "timer/wheel", "timer/checkpoint", "commitlog"):
        print(f"  {name:<20} {_disk_bytes(store / name) / 2**20:10.1f} MiB allocated")
    timer_queue = store / "consumequeue" / "rmq_sys_wheel_timer"
    print(f"  {'timer topic queue':<20} {_disk_bytes(timer_queue) / 2**20:10.1f} MiB allocated")


# -- 4: the timer store alone ---------------------------------------------------------------------
def store_only(count: int, work: Path) -> None:
    from pocketmq.broker.put_path import PutPath, PutSettings
    from pocketmq.common.properties import encode_properties
    from pocketmq.runtime.clock import SystemClock
    from pocketmq.store.api import MessageToStore
    from pocketmq.store.config import MessageStoreConfig
    from pocketmq.store.message_store import MessageStore
    from pocketmq.store.timer import TIMER_TOPIC, TimerMessageStore

    config = MessageStoreConfig(store_path_root_dir=str(work / "store-only"))
    store = MessageStore(config, clock=SystemClock())
    store.load()
    put_path = PutPath(store, SystemClock(), PutSettings())
    rng = random.Random(3)
    now_ms = int(time.time() * 1000)
    for index in range(count):
        out_ms = (now_ms + rng.randrange(3_600_000, 4 * 3_600_000)) // 1000 * 1000
        properties = {
            "TIMER_OUT_MS": str(out_ms),
            "REAL_TOPIC": PENDING_TOPIC,
            "REAL_QID": "0",
            "UNIQ_KEY": f"{index:032X}",
        }
        store.put_messages_now(
            [MessageToStore(TIMER_TOPIC, b"p" * 64, encode_properties(properties))]
        )
    timer = TimerMessageStore(store, config, SystemClock(), deliver=put_path.deliver)
    timer.load()

    async def enqueue_all() -> float:
        started = time.perf_counter()
        while await timer.enqueue_available():
            pass
        return time.perf_counter() - started

    took = asyncio.run(enqueue_all())
    print(
        f"store only: {count:,} timer records enqueued into the wheel in {took:.2f} s "
        f"({count / took:,.0f} timers/s, one event loop, no network)"
    )
    timer.close()  # no clean stop: the next load rebuilds the wheel from the log
    again = TimerMessageStore(store, config, SystemClock(), deliver=put_path.deliver)
    started = time.perf_counter()
    loaded = again.load()
    print(
        f"store only: wheel rebuilt from {loaded.rebuilt_entries:,} log entries after an "
        f"unclean stop in {time.perf_counter() - started:.2f} s, {loaded.pending:,} pending"
    )
    again.close()
    store.close()


async def _run(args: argparse.Namespace, work: Path) -> None:
    servers = Servers(work)
    try:
        if args.messages:
            await lateness(servers, args.messages)
        if args.timers:
            await pending(servers, args.timers)
    finally:
        servers.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=300, help="per lateness phase")
    parser.add_argument("--timers", type=int, default=1_000_000, help="pending timers")
    parser.add_argument("--store-timers", type=int, default=200_000, help="store-only enqueue")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="pocketmq-timer-bench-") as work:
        if args.messages or args.timers:
            asyncio.run(_run(args, Path(work)))
        if args.store_timers:
            store_only(args.store_timers, Path(work))


if __name__ == "__main__":
    main()
