"""Apache RocketMQ 5.5.0 as a peer: its NameServer, one broker and its 5.x gRPC proxy (cluster
mode) on loopback, from the Maven Central jars the conformance tests use, driven by its official
Python client (PyPI `rocketmq-python-client`, the gRPC one).

The proxy creates no topic on demand (its routes come from the NameServer, and its remoting port
refuses admin requests), so the workloads create theirs, 4 queues of NORMAL messages, through
the NameServer and broker: `start_rocketmq` leaves the NameServer's address in the environment
(`ROCKETMQ_PEER_NAMESRV`) that the workloads' process inherits.

The client is thread and future based: its sends and receives run on its own event loop in a
thread of its own, and a push consumer calls its listener from a thread pool. It logs at INFO
to `~/logs/rocketmq_python/rocketmq_client.log`; the workloads raise that to WARNING.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

from servers import Server

ROOT = Path(__file__).resolve().parents[2]
NAMESRV_ENV = "ROCKETMQ_PEER_NAMESRV"
# What benchmarks/broker_vs_broker.py gives RocketMQ: its own scripts' collector, sized for
# this machine.
ROCKETMQ_JVM = ["-Xms1g", "-Xmx1g", "-XX:+UseG1GC"]
QUEUES = 4
"""As many queues as pocketmq's row: its producer creates the topic with 4 (RocketMQ's
`defaultTopicQueueNums`)."""


class RocketMQServer(Server):
    """The three JVMs, stopped as the conformance tests stop them (killed: the store is a
    throwaway and RocketMQ's orderly shutdown takes 15 s)."""

    def __init__(self, reference: Any, address: str) -> None:
        pids = [process.pid for process in reference.processes]
        super().__init__("rocketmq", address, list(reference.processes), pids)
        self.reference = reference

    def stop(self) -> None:
        self.reference.stop()


def start_rocketmq(work: Path) -> Server:
    """NameServer, broker (ASYNC_FLUSH, its default) and proxy; the address is the proxy's."""
    for path in (ROOT, ROOT / "src"):
        if str(path) not in sys.path:
            sys.path.insert(0, str(path))
    from tests.conformance.reference import ApacheRocketMQ

    reference = ApacheRocketMQ(work, jvm=ROCKETMQ_JVM)
    reference.start()
    try:
        proxy = reference.start_proxy()
    except BaseException:
        reference.stop()
        raise
    os.environ[NAMESRV_ENV] = reference.namesrv_addr
    return RocketMQServer(reference, proxy)


async def _create_topic(namesrv: str, topic: str) -> None:
    from pocketmq.client.admin import AdminClient, TopicSettings

    async with AdminClient([namesrv]) as admin:
        await admin.create_topic(
            TopicSettings(topic, read_queue_nums=QUEUES, write_queue_nums=QUEUES,
                          attributes="+message.type=NORMAL"),
            cluster="DefaultCluster",
        )  # fmt: skip
        await admin.wait_for_route(topic)


async def rocketmq(args: argparse.Namespace, body: bytes) -> dict[str, Any]:
    from rocketmq import (
        ClientConfiguration,
        ConsumeResult,
        Credentials,
        FilterExpression,
        Message,
        MessageListener,
        Producer,
        PushConsumer,
    )
    from rocketmq.v5.exception import TooManyRequestsException
    from workloads import latency_of, one_at_a_time, paced, percentiles, pipelined, wait_received

    logging.getLogger("rocketmq-python-client").setLevel(logging.WARNING)
    namesrv = os.environ.get(NAMESRV_ENV)
    if not namesrv:
        raise RuntimeError(f"{NAMESRV_ENV} is not set: start the server with start_rocketmq")
    topic = f"Peers{args.tag}"
    await _create_topic(namesrv, topic)
    configuration = ClientConfiguration(args.address, Credentials())
    producer = Producer(configuration, (topic,))
    # Its start blocks on the proxy's settings and the topic's route.
    await asyncio.to_thread(producer.startup)
    loop = asyncio.get_running_loop()

    def message(data: bytes) -> Any:
        built = Message()
        built.topic = topic
        built.body = data
        return built

    async def send(data: bytes) -> Any:
        # `send_async` hands back a concurrent future, resolved on the client's own thread.
        # The broker sheds a send that waited over 200 ms in its queue (flow control,
        # `waitTimeMillsInSendQueue`) and the client does not retry those: its users do.
        for attempt in range(50):
            try:
                return await asyncio.wrap_future(producer.send_async(message(data)), loop=loop)
            except TooManyRequestsException:
                await asyncio.sleep(0.01 * min(attempt + 1, 10))
        raise RuntimeError("the broker stayed busy")

    try:
        await send(b"warm-up")
        if args.workload == "produce":
            return {"msgs_per_s": await pipelined(send, body, args.messages, args.window)}
        if args.workload == "sync":
            return await one_at_a_time(send, body, args.messages)
        received: list[float] = []
        target = args.messages + 1 if args.workload == "drain" else 0
        done = asyncio.Event()
        lock = threading.Lock()

        class Listener(MessageListener):
            """Runs on the consumer's threads; the consumer acks each message it returns
            SUCCESS for, before the thread takes the next."""

            def consume(self, received_message: Any) -> Any:
                data = received_message.body
                with lock:
                    if target:
                        received.append(0.0)
                        if len(received) == target:
                            loop.call_soon_threadsafe(done.set)
                    elif b"|" in data:
                        received.append(latency_of(data))
                    else:
                        loop.call_soon_threadsafe(done.set)  # the warm-up: it polls
                return ConsumeResult.SUCCESS

        def consumer() -> Any:
            # Receives in batches of 32 (its default), one long poll per queue at a time.
            return PushConsumer(
                configuration,
                f"peers-{args.workload}-{args.tag}",
                Listener(),
                {topic: FilterExpression()},
            )

        if args.workload == "drain":
            await pipelined(send, body, args.messages, 1000)
            started = time.perf_counter()
            drainer = consumer()
            await asyncio.to_thread(drainer.startup)
            try:
                await asyncio.wait_for(done.wait(), 600)
                # The clock stops at the last message delivered: at most one ack per
                # consumption thread is then still on its way.
                rate = len(received) / (time.perf_counter() - started)
            finally:
                await asyncio.to_thread(drainer.shutdown)
            return {"msgs_per_s": rate}
        listener = consumer()
        await asyncio.to_thread(listener.startup)
        try:
            # Its queue assignments and first long polls: the warm-up arrived on one queue
            # (a new group starts at the first offset while that is still in memory).
            await asyncio.wait_for(done.wait(), 60)
            await asyncio.sleep(1)
            sent = await paced(send, body, args.rate, args.seconds)
            await wait_received(received, sent)
        finally:
            await asyncio.to_thread(listener.shutdown)
        return {**percentiles(received), "received": len(received), "sent": sent}
    finally:
        await asyncio.to_thread(producer.shutdown)
