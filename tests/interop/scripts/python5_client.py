"""Drives the official 5.x Python client (PyPI `rocketmq-python-client`) through one scenario
against a proxy, printing JSON lines: one per message seen, then a `summary`.

    python5_client.py SCENARIO PROXY TOPIC GROUP [COUNT]

With PM_ACCESS_KEY and PM_SECRET_KEY set, every call is signed with that ACL account; with
PM_TLS=1 the client speaks TLS.

Scenarios: produce (normal sends with tag, keys and a property), receive (SimpleConsumer:
receive and ack COUNT), redeliver (receive, change the invisible time, receive again, ack),
dead-letter (never ack: after the group's max attempts the message goes to its DLQ), fifo (FIFO
sends in three message groups), delay (a delivery time 2 s ahead), transaction (commit, roll
back, and one left for the check-back, which commits), push (PushConsumer, first delivery of each
message fails), push-fifo (a FIFO PushConsumer).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time

from rocketmq import (
    ClientConfiguration,
    ConsumeResult,
    Credentials,
    FilterExpression,
    Message,
    MessageListener,
    Producer,
    PushConsumer,
    SimpleConsumer,
    TransactionChecker,
    TransactionResolution,
)

WAIT_S = 60.0
QUIET_S = 3.0
TLS = os.environ.get("PM_TLS") == "1"
"""TLS to the proxy (the client checks its certificate against the system's CAs, or the file
GRPC_DEFAULT_SSL_ROOTS_FILE_PATH names)."""


def say(**fields: object) -> None:
    print(json.dumps(fields, sort_keys=True), flush=True)


def config(proxy: str) -> ClientConfiguration:
    # An ACL account, when the test gives one.
    credentials = Credentials(
        os.environ.get("PM_ACCESS_KEY", ""), os.environ.get("PM_SECRET_KEY", "")
    )
    return ClientConfiguration(proxy, credentials, request_timeout=10)


def seen(message: object, **extra: object) -> dict[str, object]:
    line = {
        "message_id": message.message_id,
        "body": message.body.decode(),
        "tag": message.tag,
        "keys": sorted(message.keys or []),
        "properties": dict(message.properties or {}),
        "attempt": message.delivery_attempt,
        "group": message.message_group,
        "handle": message.receipt_handle,
        "t": time.time(),
        **extra,
    }
    say(**line)
    return line


def message(topic: str, body: str, **options: object) -> Message:
    built = Message()
    built.topic = topic
    built.body = body.encode()
    built.tag = options.get("tag", "TagA")
    built.keys = options.get("keys", f"key-{body}")
    built.add_property("origin", "python5")
    if "group" in options:
        built.message_group = options["group"]
    if "deliver_at" in options:
        built.delivery_timestamp = options["deliver_at"]
    return built


def produce(proxy: str, topic: str, count: int, **options: object) -> list[str]:
    producer = Producer(config(proxy), (topic,), tls_enable=TLS)
    producer.startup()
    try:
        ids = []
        for i in range(count):
            receipt = producer.send(message(topic, f"m{i}", **options))
            ids.append(receipt.message_id)
        return ids
    finally:
        producer.shutdown()


def receive_all(proxy: str, topic: str, group: str, count: int, *, ack: bool = True) -> list[dict]:
    consumer = SimpleConsumer(
        config(proxy),
        group,
        {topic: FilterExpression("*")},
        await_duration=5,
        tls_enable=TLS,
    )
    consumer.startup()
    got: list[dict] = []
    try:
        deadline = time.monotonic() + WAIT_S
        while len(got) < count and time.monotonic() < deadline:
            for received in consumer.receive(16, 15):
                got.append(seen(received))
                if ack:
                    consumer.ack(received)
    finally:
        consumer.shutdown()
    return got


def redeliver(proxy: str, topic: str, group: str) -> dict[str, object]:
    consumer = SimpleConsumer(
        config(proxy),
        group,
        {topic: FilterExpression("*")},
        await_duration=5,
        tls_enable=TLS,
    )
    consumer.startup()
    try:
        first = None
        deadline = time.monotonic() + WAIT_S
        while first is None and time.monotonic() < deadline:
            batch = consumer.receive(1, 30)
            first = batch[0] if batch else None
        assert first is not None, "nothing to receive"
        seen(first, phase="first")
        consumer.change_invisible_duration(first, 1)
        again = None
        changed_at = time.monotonic()
        while again is None and time.monotonic() < deadline:
            batch = consumer.receive(1, 30)
            again = batch[0] if batch else None
        assert again is not None, "not delivered again"
        seen(again, phase="again")
        consumer.ack(again)
        stale = None
        try:
            consumer.ack(first)
        except Exception as exc:
            stale = type(exc).__name__
        return {
            "same_message": first.message_id == again.message_id,
            "attempts": [first.delivery_attempt, again.delivery_attempt],
            "back_after_s": round(time.monotonic() - changed_at, 1),
            "stale_ack": stale,
        }
    finally:
        consumer.shutdown()


def dead_letter(proxy: str, topic: str, group: str, attempts: int) -> dict[str, object]:
    """Receives without acking, the invisible time cut to 0 each time, until the message stops
    coming back: 3 s without one, where a redelivery takes milliseconds."""
    consumer = SimpleConsumer(
        config(proxy), group, {topic: FilterExpression("*")}, await_duration=3
    )
    consumer.startup()
    try:
        deliveries = []
        deadline = time.monotonic() + WAIT_S
        last = 0.0
        while time.monotonic() < deadline:
            batch = consumer.receive(1, 10)
            if not batch:
                if deliveries and time.monotonic() - last >= QUIET_S:
                    break
                continue
            last = time.monotonic()
            deliveries.append(seen(batch[0])["attempt"])
            consumer.change_invisible_duration(batch[0], 0)
        return {"attempts": deliveries}
    finally:
        consumer.shutdown()


class Checker(TransactionChecker):
    def __init__(self) -> None:
        self.checked: list[str] = []

    def check(self, message: Message) -> TransactionResolution:
        self.checked.append(message.body.decode())
        say(checked=message.body.decode())
        return TransactionResolution.COMMIT


def transaction(proxy: str, topic: str, group: str) -> dict[str, object]:
    checker = Checker()
    producer = Producer(config(proxy), (topic,), checker)
    producer.startup()
    try:
        for body, outcome in (("commit", "commit"), ("rollback", "rollback"), ("orphan", None)):
            tx = producer.begin_transaction()
            producer.send(message(topic, body), tx)
            if outcome == "commit":
                tx.commit()
            elif outcome == "rollback":
                tx.rollback()
        deadline = time.monotonic() + WAIT_S
        while not checker.checked and time.monotonic() < deadline:
            time.sleep(0.2)
        # The client answers a check on its own once the checker returns: the producer stays
        # up until the orphan's commit can be read (by a group of its own), or stopping it
        # could cut the answer off and leave the orphan a half with no producer to ask.
        probe = SimpleConsumer(
            config(proxy), f"{group}-probe", {topic: FilterExpression("*")},
            await_duration=5, tls_enable=TLS,
        )  # fmt: skip
        probe.startup()
        try:
            committed = False
            while not committed and time.monotonic() < deadline:
                committed = any(m.body == b"orphan" for m in probe.receive(16, 15))
        finally:
            probe.shutdown()
        return {"checked": checker.checked}
    finally:
        producer.shutdown()


class Listener(MessageListener):
    def __init__(self, fail_first: bool) -> None:
        self.fail_first = fail_first
        self.lines: list[dict] = []
        self.lock = threading.Lock()

    def consume(self, received: Message) -> ConsumeResult:
        with self.lock:
            self.lines.append(seen(received))
        if self.fail_first and received.delivery_attempt == 1:
            return ConsumeResult.FAILURE
        return ConsumeResult.SUCCESS


def push(proxy: str, topic: str, group: str, count: int, *, fail_first: bool) -> list[dict]:
    listener = Listener(fail_first)
    consumer = PushConsumer(config(proxy), group, listener, {topic: FilterExpression("*")})
    consumer.startup()
    try:
        wanted = count * (2 if fail_first else 1)
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            with listener.lock:
                if len(listener.lines) >= wanted:
                    break
            time.sleep(0.1)
        return list(listener.lines)
    finally:
        consumer.shutdown()


def main() -> None:
    scenario, proxy, topic, group, *rest = sys.argv[1:]
    count = int(rest[0]) if rest else 3
    if scenario == "produce":
        summary: object = {"sent": produce(proxy, topic, count)}
    elif scenario == "fifo":
        ids = []
        producer = Producer(config(proxy), (topic,), tls_enable=TLS)
        producer.startup()
        try:
            for i in range(count):
                sent = producer.send(message(topic, f"m{i}", group=f"g{i % 3}"))
                ids.append(sent.message_id)
        finally:
            producer.shutdown()
        summary = {"sent": ids}
    elif scenario == "delay":
        deliver_at = int(time.time()) + 2
        summary = {"sent": produce(proxy, topic, count, deliver_at=deliver_at), "at": deliver_at}
    elif scenario == "receive":
        summary = {
            "received": [line["message_id"] for line in receive_all(proxy, topic, group, count)]
        }
    elif scenario == "redeliver":
        summary = redeliver(proxy, topic, group)
    elif scenario == "dead-letter":
        summary = dead_letter(proxy, topic, group, count)
    elif scenario == "transaction":
        summary = transaction(proxy, topic, group)
    elif scenario in ("push", "push-fifo"):
        lines = push(proxy, topic, group, count, fail_first=scenario == "push")
        summary = {"consumed": [[line["body"], line["attempt"], line["group"]] for line in lines]}
    else:
        raise SystemExit(f"unknown scenario {scenario}")
    say(summary=summary)


if __name__ == "__main__":
    main()
