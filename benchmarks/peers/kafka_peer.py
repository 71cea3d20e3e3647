"""Apache Kafka as a peer: a single-node KRaft server on loopback and the four workloads on
confluent-kafka (librdkafka), Kafka's usual Python client.

Durability is Kafka's default as its users run it: the producer waits for `acks=all` (with one
node, the leader's append), and the broker leaves flushing to the page cache (no fsync per
write; `log.flush.interval.*` unset), as pocketmq's ASYNC_FLUSH and Redis's `everysec` rows do.

The server's jars come from Maven Central once (`org.apache.kafka:kafka_2.13` and its runtime
dependencies) into `~/.cache/pocketmq-reference/kafka-<version>/`, beside RocketMQ's jars of
`tests/conformance/reference.py`, and are reused from there.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
import subprocess
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from servers import Server, free_port, wait_for_port

KAFKA_VERSION = "4.1.1"
CACHE = Path(
    os.environ.get("POCKETMQ_REFERENCE_CACHE", Path.home() / ".cache" / "pocketmq-reference")
)
FETCH_TIMEOUT_S = 900
BOOT_TIMEOUT_S = 120
# Kafka's own start script's heap and collector settings (kafka-server-start.sh,
# kafka-run-class.sh).
JVM = [
    "-Xms1g", "-Xmx1g", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
    "-Djava.awt.headless=true",
]  # fmt: skip
PARTITIONS = 4
"""As many partitions as pocketmq's row has queues: its producer creates the topic on the first
send with RocketMQ's `defaultTopicQueueNums`, 4. (8 measured the same within noise.)"""

POM = f"""<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>pocketmq.bench</groupId>
  <artifactId>kafka-server</artifactId>
  <version>1</version>
  <dependencies>
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka_2.13</artifactId>
      <version>{KAFKA_VERSION}</version>
    </dependency>
    <!-- Kafka's pom leaves the SLF4J binding to the distribution, which ships this one. -->
    <dependency>
      <groupId>org.apache.logging.log4j</groupId>
      <artifactId>log4j-slf4j-impl</artifactId>
      <version>2.24.3</version>
      <scope>runtime</scope>
    </dependency>
  </dependencies>
</project>
"""

LOG4J2 = """status = error
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.file.ref = file
# Its one line at INFO tells when the broker serves requests.
logger.started.name = kafka.server.KafkaRaftServer
logger.started.level = INFO
"""
STARTED = "Kafka Server started"


def kafka_jars() -> Path:
    """The folder of the broker's jars, fetched once with Maven into the cache."""
    home = CACHE / f"kafka-{KAFKA_VERSION}"
    lib = home / "lib"
    if (home / ".complete").exists():
        return lib
    home.mkdir(parents=True, exist_ok=True)
    pom = home / "pom.xml"
    pom.write_text(POM)
    command = [
        "mvn", "-q", "-B", f"-Dmaven.repo.local={CACHE / 'm2'}", "-f", str(pom),
        "dependency:copy-dependencies", f"-DoutputDirectory={lib}",
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=FETCH_TIMEOUT_S)
    if done.returncode:
        raise RuntimeError(
            f"fetching Kafka {KAFKA_VERSION} failed; retry: {' '.join(command)}\n"
            f"{done.stdout[-3000:]}"
        )
    (home / ".complete").touch()
    return lib


def _cluster_id() -> str:
    """A random UUID in Kafka's URL-safe base64, as `random-uuid` prints it: never starting
    with "-", which StorageTool's argument parser would take for an option (1 id in 64)."""
    while True:
        cluster = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not cluster.startswith("-"):
            return cluster


def start_kafka(work: Path) -> Server:
    """One combined broker and controller (KRaft, a static one-voter quorum) on loopback."""
    classpath = f"{kafka_jars()}/*"
    port, controller_port = free_port(), free_port()
    config = work / "server.properties"
    config.write_text(
        "\n".join(
            [
                "process.roles=broker,controller",
                "node.id=1",
                f"controller.quorum.voters=1@127.0.0.1:{controller_port}",
                f"listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
                f"advertised.listeners=PLAINTEXT://127.0.0.1:{port}",
                "controller.listener.names=CONTROLLER",
                "inter.broker.listener.name=PLAINTEXT",
                "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
                f"log.dirs={work / 'kafka-logs'}",
                f"num.partitions={PARTITIONS}",
                # One node: the internal topics cannot have the default three replicas.
                "offsets.topic.replication.factor=1",
                "transaction.state.log.replication.factor=1",
                "transaction.state.log.min.isr=1",
                "share.coordinator.state.topic.replication.factor=1",
                "share.coordinator.state.topic.min.isr=1",
                # The consumer offsets topic is created on a group's first request: with its
                # default 50 partitions that creation would land inside the drain's clock.
                "offsets.topic.num.partitions=1",
                # Kafka's shipped server.properties does the same for a development node: a
                # lone consumer need not wait 3 s for company before its group settles.
                "group.initial.rebalance.delay.ms=0",
            ]
        )
        + "\n"
    )
    (work / "log4j2.properties").write_text(LOG4J2.format(log=work / "kafka.log"))
    java = ["java", *JVM, f"-Dlog4j2.configurationFile={work / 'log4j2.properties'}"]
    cluster = _cluster_id()
    out = (work / "kafka.out").open("wb")
    formatted = subprocess.run(
        [*java, "-cp", classpath, "kafka.tools.StorageTool", "format", "-t", cluster,
         "-c", str(config)],
        stdout=out, stderr=out, timeout=BOOT_TIMEOUT_S,
    )  # fmt: skip
    if formatted.returncode != 0:
        out.close()
        said = (work / "kafka.out").read_text(errors="replace").strip().splitlines()[-5:]
        raise RuntimeError(
            f"Kafka's storage format exited {formatted.returncode}: " + " | ".join(said)
        )
    process = subprocess.Popen(
        [*java, "-cp", classpath, "kafka.Kafka", str(config)], stdout=out, stderr=out
    )
    wait_for_port(port, BOOT_TIMEOUT_S, process)
    # The port opens before the broker has caught up with the metadata log and serves.
    deadline = time.monotonic() + BOOT_TIMEOUT_S
    log = work / "kafka.log"
    while not (log.exists() and STARTED in log.read_text(errors="replace")):
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            process.wait()
            raise RuntimeError(f"Kafka did not start, see {log}")
        time.sleep(0.1)
    return Server("kafka", f"127.0.0.1:{port}", [process], [process.pid])


# -- the workloads ----------------------------------------------------------------------------


async def kafka(args: argparse.Namespace, body: bytes) -> dict[str, Any]:
    """produce, sync, drain and e2e on confluent-kafka's Producer and Consumer.

    Its calls block (librdkafka runs its own threads and hands back deliveries in `poll`), so
    the loops here call it directly rather than through `pipelined`: each workload has its own
    process, and the client at its best is a tight produce/poll loop."""
    from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient
    from confluent_kafka.cimpl import NewTopic
    from workloads import latency_of, one_at_a_time, paced, percentiles, wait_received

    topic = f"peers-{args.tag}"
    # The admin client must outlive its futures: destroyed, it fails them.
    admin = AdminClient({"bootstrap.servers": args.address})
    created = admin.create_topics(
        [NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)]
    )
    try:
        created[topic].result(timeout=30)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise
    config: dict[str, Any] = {"bootstrap.servers": args.address, "acks": "all"}
    if args.workload in ("sync", "e2e"):
        # One message at a time, or a paced few, have nothing to wait for (librdkafka lingers
        # 5 ms by default); as pocketmq's batcher in the paced run, what queued while a request
        # was on its way still goes together.
        config["linger.ms"] = 0
    producer = Producer(config)
    failures: list[Any] = []

    def failed(error: Any, _message: Any) -> None:
        if error is not None:
            failures.append(error)

    def produce_all(count: int, window: int) -> float:
        """Sends `count` messages keeping at most `window` unacknowledged; returns msgs/s."""
        in_flight = 0

        def delivered(error: Any, _message: Any) -> None:
            nonlocal in_flight
            in_flight -= 1
            if error is not None:
                failures.append(error)

        began = time.perf_counter()
        for _ in range(count):
            while in_flight >= window:
                producer.poll(1)
            producer.produce(topic, body, on_delivery=delivered)
            in_flight += 1
            producer.poll(0)
        if producer.flush(60):
            raise RuntimeError("deliveries still pending after 60 s")
        if failures:
            raise RuntimeError(f"{len(failures)} sends failed, first: {failures[0]}")
        return count / (time.perf_counter() - began)

    # The first send fetches the topic's metadata and opens the connection, outside any clock.
    producer.produce(topic, b"warm-up")
    producer.flush(30)
    if args.workload == "produce":
        return {"msgs_per_s": produce_all(args.messages, args.window)}
    if args.workload == "sync":

        async def send_one(data: bytes) -> None:
            producer.produce(topic, data, on_delivery=failed)
            producer.flush(30)
            if failures:
                raise RuntimeError(f"send failed: {failures[0]}")

        return await one_at_a_time(send_one, body, args.messages)
    committing = False

    def commit_answered(_error: Any, _partitions: Any) -> None:
        nonlocal committing
        committing = False

    consumer = Consumer(
        {
            "bootstrap.servers": args.address,
            "group.id": f"peers-{args.workload}-{args.tag}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "on_commit": commit_answered,
        }
    )
    try:
        if args.workload == "drain":
            produce_all(args.messages, 1000)
            # The broker creates its offsets topic on the first group request (seconds): that
            # one-time set-up stays outside the clock, as the warm-up send does for the topic.
            consumer.committed([TopicPartition(topic, 0)], timeout=30)
            target = args.messages + 1  # and the warm-up message
            started, got = time.perf_counter(), 0
            consumer.subscribe([topic])
            while got < target:
                # `consume` returns once it has `num_messages` or at the timeout: never ask for
                # more than are left.
                messages = consumer.consume(num_messages=min(1000, target - got), timeout=5)
                for message in messages:
                    if message.error() is not None:
                        raise KafkaException(message.error())
                got += len(messages)
                if messages:
                    # Synchronous: the batch counts once the group coordinator stored it.
                    consumer.commit(asynchronous=False)
            return {"msgs_per_s": got / (time.perf_counter() - started)}
        latencies: list[float] = []
        # Assigned partitions are not enough: the consumer is ready once it fetches, which the
        # warm-up message, sent before, shows.
        ready, stop = threading.Event(), threading.Event()

        def read() -> None:
            nonlocal committing
            # librdkafka's consumer is not asyncio-aware: a thread of its own keeps its fetched
            # messages from waiting behind the sender's event loop.
            consumer.subscribe([topic])
            while not stop.is_set():
                # `consume` would hold the first message until its batch filled: wait for one,
                # then take what else has arrived.
                first = consumer.poll(0.1)
                if first is None:
                    continue
                ready.set()
                messages = [first, *consumer.consume(num_messages=1000, timeout=0)]
                values = [m.value() or b"" for m in messages if m.error() is None]
                latencies.extend(latency_of(value) for value in values if b"|" in value)
                # Each commit covers all before it, as the other rows' acks of every message
                # do; one at a time, as commits sent faster than answered pile up in the broker.
                if not committing:
                    committing = True
                    consumer.commit(asynchronous=True)

        reading = threading.Thread(target=read, daemon=True)
        reading.start()
        await asyncio.to_thread(ready.wait, 30)

        async def send(data: bytes) -> None:
            producer.produce(topic, data, on_delivery=failed)
            producer.poll(0)

        sent = await paced(send, body, args.rate, args.seconds)
        producer.flush(30)
        await wait_received(latencies, sent)
        stop.set()
        reading.join()
        if failures:
            raise RuntimeError(f"{len(failures)} sends failed, first: {failures[0]}")
        return {**percentiles(latencies), "received": len(latencies), "sent": sent}
    finally:
        consumer.close()
