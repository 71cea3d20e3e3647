"""The run the failover benchmarks share: load, rounds of faults, audit, tables.

A benchmark (`dledger_failover.py`, `controller_failover.py`) brings its servers (how its
group starts, for pocketmq and for Apache RocketMQ) and says what healthy means; this module
owns the rest, alike for both:

- the load: one producer thread sending 1 KiB messages numbered in their bodies without
  pause, recording when each send was acknowledged and by which broker, and when sends
  failed. Acknowledgement times are appended in increasing order, so a round's questions
  (when did the failover happen, how long was the longest pause) are binary searches;
- a round: wait until healthy, a fault at a random moment, the first acknowledgement by
  another broker, the restart, healthy again; the per-round figures and their summary;
- the audit: every queue of the topic read from one broker, counting acknowledged messages
  missing there and messages stored twice;
- Apache RocketMQ's JVMs: ports, a home and a log per start in the work directory, every
  process stopped by PID, on errors too;
- the command line both share (`--system`, `--rounds`, `--seed`) and the Markdown tables.

It does not start pocketmq's servers (the integration tests' groups do) nor decide health,
and it prints no JSON: what a benchmark's JSON holds is the benchmark's own.
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import itertools
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

from tests.conformance.reference import (
    JAVA_DIR,
    SERVER_JVM,
    ReferenceUnavailable,
    fetch_jars,
    free_port,
    log_tail,
    wait_until_ready,
)

from pocketmq.client import Admin, Message, Producer, RocketMQError, SendStatus
from pocketmq.client.admin import AdminError, TopicSettings
from pocketmq.common.message_id import MessageIdError, decode_offset_msg_id
from pocketmq.testing import wait_until

SEQUENCE_DIGITS = 12
BODY_PAD = b"x" * (1024 - SEQUENCE_DIGITS)
SEND_TIMEOUT_S = 3.0
FIRST_SENDS = 100
"""Acknowledgements awaited before the first fault, so that the producer has found the master."""


@dataclass(frozen=True)
class Benchmark:
    """What one failover benchmark chooses besides its servers and its health check."""

    name: str
    """Prefixes the work directory."""
    topic: str
    producer_group: str
    failover_wait_s: float
    health_wait_s: float
    healthy_means: str
    """What the first wait for health awaits, in words, for its failure message."""
    summary_title: str
    """The first header cell of the summary table."""
    send_ok_only: bool = True
    """Whether only SEND_OK acknowledges a send; otherwise any answer does, and only a send
    that raised failed."""


class Servers(Protocol):
    """What a run needs from a group of servers, whichever system runs them."""

    @property
    def namesrv_addr(self) -> str: ...

    def start_all(self) -> None: ...

    def brokers(self) -> dict[str, str]:
        """Broker name -> address, for every broker."""

    def kill(self, name: str) -> None: ...

    def start(self, name: str) -> object:
        """Starts the server `name` again; what it returns is not used."""

    def close(self) -> None: ...

    def logs(self) -> str: ...


S = TypeVar("S", bound=Servers)


# -- Apache RocketMQ's JVMs --------------------------------------------------------------------


def free_broker_port() -> int:
    """A port p with p-2 .. p+1 free: RocketMQ's broker also listens on p-2 (its "fast"
    channel) and reserves p+1 for HA."""
    for _ in range(100):
        port = free_port()
        if port < 1026:
            continue
        probes = [socket.socket() for _ in range(4)]
        try:
            for offset, probe in zip((-2, -1, 0, 1), probes, strict=True):
                probe.bind(("127.0.0.1", port + offset))
        except OSError:
            continue
        finally:
            for probe in probes:
                probe.close()
        return port
    raise RuntimeError("no four adjacent free ports on 127.0.0.1")


@dataclass
class JavaProcess:
    process: subprocess.Popen[bytes]
    log: Path


class JavaServers:
    """Apache RocketMQ's NameServer and the JVMs a benchmark adds, in one work directory: each
    with its own home (`<name>/home`, where its logs go), a `<name>.properties` and a log of
    its output per start (`<name>-<start>.log`)."""

    def __init__(self, work: Path, pom: str) -> None:
        self.work = work
        self.lib = fetch_jars(JAVA_DIR / pom)
        self.namesrv_port = free_port()
        self.namesrv_addr = f"127.0.0.1:{self.namesrv_port}"
        self.processes: dict[str, JavaProcess] = {}
        self.starts: dict[str, int] = {}

    def start_namesrv(self) -> None:
        self.write_properties("namesrv", {"listenPort": str(self.namesrv_port)})
        self._launch(
            "namesrv", "org.apache.rocketmq.namesrv.NamesrvStartup", self.namesrv_port, None
        )

    def write_properties(self, name: str, settings: dict[str, str]) -> None:
        (self.work / f"{name}.properties").write_text(
            "".join(f"{key}={value}\n" for key, value in settings.items())
        )

    def _launch(self, name: str, main: str, port: int, ready_line: str | None) -> None:
        home = self.work / name / "home"
        home.mkdir(parents=True, exist_ok=True)
        self.starts[name] = self.starts.get(name, 0) + 1
        log = self.work / f"{name}-{self.starts[name]}.log"
        command = [
            "java",
            *SERVER_JVM,
            f"-Duser.home={home}",
            "-cp",
            f"{self.lib}/*",
            main,
            "-c",
            str(self.work / f"{name}.properties"),
        ]
        env = dict(os.environ, ROCKETMQ_HOME=str(home))
        with log.open("wb") as output:
            process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, env=env)
        self.processes[name] = JavaProcess(process, log)
        wait_until_ready(port, process, log, ready_line)

    def kill(self, name: str) -> None:
        running = self.processes.pop(name, None)
        if running is None:
            return
        if running.process.poll() is None:
            running.process.kill()
        running.process.wait(30)

    def close(self) -> None:
        """Kills every JVM, the NameServer last: the stores are throwaways, and an orderly
        shutdown takes 15 s."""
        for name in sorted(self.processes, key=lambda name: name == "namesrv"):
            self.kill(name)

    def logs(self) -> str:
        return "\n".join(
            f"--- {path.name}\n{log_tail(path)}" for path in sorted(self.work.glob("*.log"))
        )


# -- the load ----------------------------------------------------------------------------------


@dataclass
class Load:
    """A producer thread sending numbered messages without pause; which it sent, which were
    acknowledged, when and by which broker, and when sends failed.

    Acknowledgement times are appended by one thread in increasing order, so they stay
    sorted and the round's questions are binary searches."""

    namesrv: str
    topic: str
    producer_group: str
    send_ok_only: bool = True
    acked: list[float] = field(default_factory=list)
    acked_by_port: list[int] = field(default_factory=list)
    """The port of the broker that stored each acknowledged message (from its offset id)."""
    acked_sequences: set[int] = field(default_factory=set)
    sent: int = 0
    failed: list[tuple[float, float, str]] = field(default_factory=list)
    """(when it failed, how long it took, the error or the status that did not acknowledge)"""
    stop: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def run(self) -> None:
        with Producer(
            self.producer_group, namesrv=self.namesrv, send_timeout_s=SEND_TIMEOUT_S
        ) as producer:
            for sequence in itertools.count():
                if self.stop.is_set():
                    break
                body = f"{sequence:0{SEQUENCE_DIGITS}d}".encode() + BODY_PAD
                started = time.monotonic()
                self.sent = sequence + 1
                try:
                    result = producer.send(Message(self.topic, body))
                except RocketMQError as exc:
                    self._failed(started, f"{type(exc).__name__}: {exc}")
                    continue
                if self.send_ok_only and result.status != SendStatus.SEND_OK:
                    self._failed(started, str(result.status))
                    continue
                acked_at = time.monotonic()
                try:
                    port = decode_offset_msg_id(result.offset_msg_id)[0][1]
                except MessageIdError:
                    port = -1
                with self.lock:
                    self.acked.append(acked_at)
                    self.acked_by_port.append(port)
                    self.acked_sequences.add(sequence)

    def _failed(self, started: float, what: str) -> None:
        ended = time.monotonic()
        with self.lock:
            self.failed.append((ended, ended - started, what))

    def failover(self, fault_at: float, killed_port: int) -> tuple[float, float] | None:
        """(the killed master's last acknowledgement, its successor's first), once there is
        one. Not simply the first after the kill: answers the killed master wrote before it
        died can still arrive after the signal."""
        with self.lock:
            index = bisect.bisect_right(self.acked, fault_at)
            while index < len(self.acked) and self.acked_by_port[index] == killed_port:
                index += 1
            if index == len(self.acked) or index == 0:
                return None
            return self.acked[index - 1], self.acked[index]

    def longest_gap(self, start: float, end: float) -> float:
        with self.lock:
            times = self.acked[
                bisect.bisect_left(self.acked, start) : bisect.bisect_right(self.acked, end)
            ]
        return max((b - a for a, b in itertools.pairwise(times)), default=0.0)

    def failures_between(self, start: float, end: float) -> list[tuple[float, str]]:
        """(how long the send took, the error) of each send that failed in the interval."""
        with self.lock:
            return [(took, what) for moment, took, what in self.failed if start < moment <= end]


def create_topic(admin: Admin, addresses: dict[str, str], topic: str) -> None:
    """On every broker that takes it: a RocketMQ follower keeps a topic a master created only
    after its next metadata sync (10 s), a pocketmq follower refuses and gets it from the
    Raft log."""
    took = []
    for address in addresses.values():
        try:
            admin.create_topic(TopicSettings(topic), broker=address)
        except AdminError:
            continue
        took.append(address)
    if not took:
        raise RuntimeError(f"no replica created topic {topic}")


# -- rounds ------------------------------------------------------------------------------------


def fail_over(
    bench: Benchmark,
    servers: Servers,
    load: Load,
    rng: random.Random,
    number: int,
    healthy: Callable[[], str | None],
    also_kill: Callable[[int], list[str]],
) -> dict[str, Any]:
    """One round: the master (and whatever `also_kill` names for this round) killed at a
    random moment, restarted once a successor serves."""
    master = wait_until(
        healthy,
        "the group healthy before the fault",
        timeout_s=bench.health_wait_s,
        describe=servers.logs,
    )
    killed = [master, *also_kill(number)]
    killed_port = int(servers.brokers()[master].rpartition(":")[2])
    time.sleep(rng.uniform(0.5, 2.5))  # the fault's moment: random, by design
    fault_at = time.monotonic()
    for name in killed:
        servers.kill(name)
    last, first = wait_until(
        lambda: load.failover(fault_at, killed_port),
        "an acknowledged send by a new master",
        timeout_s=bench.failover_wait_s,
        describe=servers.logs,
    )
    # Restarted only after the failover, so that a process booting does not take the CPU
    # the election needs; the last killed first, as a broker registers with a controller.
    for name in reversed(killed):
        servers.start(name)
    wait_until(
        healthy,
        "the group healthy after the restart",
        timeout_s=bench.health_wait_s,
        describe=servers.logs,
    )
    healthy_at = time.monotonic()
    failures = load.failures_between(fault_at, healthy_at)
    return {
        "round": number,
        "killed": "+".join(killed),
        "failover_s": round(first - last, 3),
        "failed_sends": len(failures),
        "failed_sends_after_failover": len(load.failures_between(first, healthy_at)),
        "healthy_after_s": round(healthy_at - fault_at, 3),
        "rejoin_pause_s": round(load.longest_gap(first, healthy_at), 3),
        "failed_send_took_s_max": round(max((took for took, _ in failures), default=0.0), 3),
        "first_failure": failures[0][1] if failures else None,
    }


def run_rounds(
    bench: Benchmark,
    servers: Servers,
    admin: Admin,
    rounds: int,
    rng: random.Random,
    system: str,
    healthy: Callable[[], str | None],
    also_kill: Callable[[int], list[str]],
) -> tuple[list[dict[str, Any]], Load]:
    """The topic created, the load started, `rounds` rounds, the load stopped."""
    wait_until(healthy, bench.healthy_means, timeout_s=bench.health_wait_s, describe=servers.logs)
    create_topic(admin, servers.brokers(), bench.topic)
    load = Load(
        servers.namesrv_addr, bench.topic, bench.producer_group, send_ok_only=bench.send_ok_only
    )
    sender = threading.Thread(target=load.run, name="failover-load", daemon=True)
    sender.start()
    results: list[dict[str, Any]] = []
    try:
        wait_until(lambda: len(load.acked) >= FIRST_SENDS, "the first sends", timeout_s=60)
        for number in range(1, rounds + 1):
            result = fail_over(bench, servers, load, rng, number, healthy, also_kill)
            results.append(result)
            print(
                f"{system} round {number}: killed {result['killed']}, failover "
                f"{result['failover_s']:.2f} s, {result['failed_sends']} failed sends, "
                f"healthy after {result['healthy_after_s']:.1f} s",
                file=sys.stderr,
                flush=True,
            )
    finally:
        load.stop.set()
        sender.join(timeout=SEND_TIMEOUT_S + 30)
    return results, load


@contextlib.contextmanager
def work_dir(prefix: str, keep: Path | None) -> Iterator[Path]:
    """A temporary directory, or `keep` (created, never reused) when given."""
    if keep is None:
        with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
            yield Path(tmp)
    else:
        keep.mkdir(parents=True, exist_ok=False)
        yield keep


def measure(
    bench: Benchmark,
    system: str,
    servers: Callable[[Path], S],
    rounds: int,
    rng: random.Random,
    *,
    healthy: Callable[[Admin, S], str | None],
    also_kill: Callable[[Admin, S, int], list[str]] | None = None,
    audit: Callable[[Admin, S, Load], dict[str, Any]] | None = None,
    keep: Path | None = None,
) -> dict[str, Any]:
    """One system's run: its servers started in a work directory, the rounds, the audit when
    given, every server stopped; the rounds and their summary, then what `audit` returned.

    `keep` names a directory to work in (`<keep>/<system>`) and keep afterwards."""
    with work_dir(f"{bench.name}-{system}-", None if keep is None else keep / system) as work:
        group = servers(work)
        try:
            group.start_all()
            with Admin([group.namesrv_addr], timeout_s=3.0) as admin:
                per_round, load = run_rounds(
                    bench,
                    group,
                    admin,
                    rounds,
                    rng,
                    system,
                    lambda: healthy(admin, group),
                    lambda number: [] if also_kill is None else also_kill(admin, group, number),
                )
                audited = {} if audit is None else audit(admin, group, load)
        finally:
            group.close()
    failovers = [r["failover_s"] for r in per_round]
    return {
        "rounds": per_round,
        "failover_s_median": statistics.median(failovers),
        "failover_s_worst": max(failovers),
        "failed_sends": sum(r["failed_sends"] for r in per_round),
        "rounds_with_failed_sends": sum(1 for r in per_round if r["failed_sends"]),
        "healthy_after_s_median": statistics.median(r["healthy_after_s"] for r in per_round),
        "rejoin_pause_s_worst": max(r["rejoin_pause_s"] for r in per_round),
        **audited,
    }


# -- the audit ---------------------------------------------------------------------------------


def stored_sequences(admin: Admin, address: str, topic: str) -> Counter[int]:
    """How often each numbered message is stored in the topic's queues on `address`."""
    route = admin.topic_route(topic)
    queues = max(q.read_queue_nums for q in route.queue_datas)
    found: Counter[int] = Counter()
    for queue_id in range(queues):
        position = admin.min_offset(address, topic, queue_id)
        end = admin.max_offset(address, topic, queue_id)
        for _ in range(end - position + 8):  # every pull advances, or the queue ends
            if position >= end:
                break
            batch = admin.pull(address, topic, queue_id, position, 32)
            found.update(int(m.body[:SEQUENCE_DIGITS]) for m in batch.messages)
            if batch.next_begin_offset <= position:
                break
            position = batch.next_begin_offset
    return found


def audit_stored(admin: Admin, address: str, load: Load) -> dict[str, Any]:
    """Acknowledged messages missing from the broker at `address`, and messages stored twice;
    read after the load stopped."""
    found = stored_sequences(admin, address, load.topic)
    with load.lock:
        acked = set(load.acked_sequences)
    return {
        "sent": load.sent,
        "acked": len(acked),
        "stored": sum(found.values()),
        "acked_lost": len(acked - found.keys()),
        "duplicates": sum(count - 1 for count in found.values() if count > 1),
        "stored_unacked": len(found.keys() - acked),
    }


# -- command line and tables -------------------------------------------------------------------


def argument_parser(doc: str, rounds: int) -> argparse.ArgumentParser:
    """The options every failover benchmark takes; a benchmark adds its own after them."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--system", choices=("pocketmq", "rocketmq", "both"), default="both")
    parser.add_argument("--rounds", type=int, default=rounds)
    parser.add_argument("--seed", type=int, default=None, help="for the faults' moments")
    return parser


def seed_of(args: argparse.Namespace) -> int:
    """`--seed`, or a fresh one (printed, so that a run can be repeated)."""
    return int(args.seed) if args.seed is not None else random.randrange(1 << 32)


def measure_each(
    args: argparse.Namespace, seed: int, measure_one: Callable[[str], dict[str, Any]]
) -> dict[str, dict[str, Any]]:
    """`measure_one(system)` of each system `--system` names, one after the other (never both
    at once: the machine has few cores); a system that cannot run is said and left out."""
    systems = ["pocketmq", "rocketmq"] if args.system == "both" else [args.system]
    results: dict[str, dict[str, Any]] = {}
    for system in systems:
        print(f"{system}: {args.rounds} rounds (seed {seed}) ...", file=sys.stderr, flush=True)
        try:
            results[system] = measure_one(system)
        except ReferenceUnavailable as exc:
            print(f"{system}: could not run: {exc}", file=sys.stderr)
    return results


Row = Callable[[dict[str, Any]], str]


def print_tables(
    results: dict[str, dict[str, Any]], title: str, more_rows: dict[str, Row] | None = None
) -> None:
    """The rounds of every system, then the summary (`title` heads its first column) with
    `more_rows` after the rows every benchmark has."""
    print("| system | round | killed | failover s | failed sends | healthy after s | "
          "rejoin pause s |")  # fmt: skip
    print("| --- | ---: | --- | ---: | ---: | ---: | ---: |")
    for system, summary in results.items():
        for r in summary["rounds"]:
            print(
                f"| {system} | {r['round']} | {r['killed']} | {r['failover_s']:.2f} | "
                f"{r['failed_sends']} | {r['healthy_after_s']:.1f} | {r['rejoin_pause_s']:.2f} |"
            )
    systems = list(results)
    print(f"\n| {title} | {' | '.join(systems)} |")
    print(f"| --- |{' ---: |' * len(systems)}")

    rows: dict[str, Row] = {
        "failover median / worst": lambda s: (
            f"{s['failover_s_median']:.2f} s / {s['failover_s_worst']:.2f} s"
        ),
        "rounds with a failed send (sends)": lambda s: (
            f"{s['rounds_with_failed_sends']} of {len(s['rounds'])} ({s['failed_sends']})"
        ),
        "healthy again after (median)": lambda s: f"{s['healthy_after_s_median']:.1f} s",
        "longest pause while the old master rejoins": lambda s: (
            f"{s['rejoin_pause_s_worst']:.2f} s"
        ),
        **(more_rows or {}),
    }
    for name, render in rows.items():
        print(f"| {name} | {' | '.join(render(results[s]) for s in systems)} |")
