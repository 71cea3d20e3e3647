"""The 5.x gRPC path next to the remoting path, and pocketmq's proxy next to Apache RocketMQ's.

For each system, on free loopback ports with a temporary store, 1 KiB messages (`--size`) to a
NORMAL topic of 4 queues:

- send: `--concurrency` callers, each sending one message at a time and waiting for its
  answer, `--messages` in all: throughput, latency p50 / p99;
- receive+ack: `--concurrency` callers, each receiving up to 32 messages (invisible 30 s) and
  acking them in one AckMessage, until every message was acked: throughput, round p50 / p99.

Systems: `pocketmq-grpc` (the proxy of `pocketmq up`, local mode; TLS permissive, RocketMQ's
default, clients in plaintext), `pocketmq-remoting` (the same broker through remoting, the
same load shape: pocketmq's producer, and POP over remoting for receive+ack), and `apache-grpc`
(Apache RocketMQ 5.5.0's NameServer, broker and proxy in cluster mode, the reference fixture's
jars). The gRPC load generator is the same for both proxies: the generated stubs on grpcio's
asyncio channel, with the Telemetry settings a client sends first.

`python benchmarks/proxy_bench.py [--system all|pocketmq|apache] [--messages N] [--json]`
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import grpc  # noqa: E402

from pocketmq.client.admin import AdminClient, TopicSettings  # noqa: E402
from pocketmq.client.aio import Message, Producer  # noqa: E402
from pocketmq.client.pop import PopClient  # noqa: E402
from pocketmq.proxy.grpc_v2 import definition_pb2 as v2  # noqa: E402
from pocketmq.proxy.grpc_v2 import service_pb2 as rpc  # noqa: E402
from pocketmq.proxy.grpc_v2 import service_pb2_grpc  # noqa: E402
from pocketmq.remoting.transport import RemotingClient  # noqa: E402
from pocketmq.testing import start_up_process  # noqa: E402

TOPIC = "ProxyBench"
GROUP = "proxy-bench"


def _percentiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)

    def at(fraction: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(len(ordered) * fraction))] * 1000, 2)

    return {"p50_ms": at(0.5), "p99_ms": at(0.99)} if ordered else {}


async def _workers(
    count: int, work: Callable[[], Awaitable[bool | None]], deadline_s: float
) -> tuple[float, list[float]]:
    """Runs `count` callers of `work` (True when there is no more to do, None for a call that
    found nothing and is not counted); returns the elapsed time and each call's latency."""
    latencies: list[float] = []
    end = time.monotonic() + deadline_s

    async def caller() -> None:
        while time.monotonic() < end:
            started = time.monotonic()
            done = await work()
            if done is not None:
                latencies.append(time.monotonic() - started)
            if done:
                return

    started = time.monotonic()
    await asyncio.gather(*(caller() for _ in range(count)))
    return time.monotonic() - started, latencies


async def _create_topic(namesrv: str) -> None:
    async with AdminClient([namesrv]) as admin:
        await admin.create_topic(
            TopicSettings(TOPIC, read_queue_nums=4, write_queue_nums=4,
                          attributes="+message.type=NORMAL"),
            cluster="DefaultCluster",
        )  # fmt: skip
        await admin.wait_for_route(TOPIC)


async def grpc_run(proxy: str, messages: int, size: int, concurrency: int) -> dict[str, Any]:
    client_id = f"bench@{os.getpid()}@{uuid.uuid4().hex[:8]}"
    metadata = (("x-mq-client-id", client_id), ("x-mq-language", "PYTHON"),
                ("x-mq-protocol", "v2"))  # fmt: skip
    channel = grpc.aio.insecure_channel(proxy)
    stub: Any = service_pb2_grpc.MessagingServiceStub(channel)  # type: ignore[no-untyped-call]
    endpoints = v2.Endpoints(
        scheme=v2.IPv4,
        addresses=[v2.Address(host=proxy.split(":")[0], port=int(proxy.split(":")[1]))],
    )
    outbox: asyncio.Queue[rpc.TelemetryCommand] = asyncio.Queue()

    async def commands() -> Any:
        while True:
            yield await outbox.get()

    telemetry = stub.Telemetry(commands(), metadata=metadata)
    settings = v2.Settings(
        client_type=v2.PRODUCER,
        access_point=endpoints,
        publishing=v2.Publishing(topics=[v2.Resource(name=TOPIC)]),
    )
    await outbox.put(rpc.TelemetryCommand(settings=settings))
    await telemetry.read()
    body = os.urandom(size)
    sent = itertools.count()

    async def send() -> bool:
        if next(sent) >= messages:
            return True
        message = v2.Message(
            topic=v2.Resource(name=TOPIC),
            body=body,
            system_properties=v2.SystemProperties(
                message_id=uuid.uuid4().hex.upper(), message_type=v2.NORMAL, tag="bench",
                body_encoding=v2.IDENTITY,
            ),
        )  # fmt: skip
        response = await stub.SendMessage(
            rpc.SendMessageRequest(messages=[message]), metadata=metadata, timeout=30
        )
        if response.status.code != v2.OK:
            raise RuntimeError(f"send failed: {response.status}")
        return False

    send_s, send_latencies = await _workers(concurrency, send, 600)
    consumer_settings = v2.Settings(
        client_type=v2.SIMPLE_CONSUMER,
        access_point=endpoints,
        subscription=v2.Subscription(
            group=v2.Resource(name=GROUP),
            subscriptions=[
                v2.SubscriptionEntry(
                    topic=v2.Resource(name=TOPIC),
                    expression=v2.FilterExpression(type=v2.TAG, expression="*"),
                )
            ],
        ),
    )
    await outbox.put(rpc.TelemetryCommand(settings=consumer_settings))
    await telemetry.read()
    acked = 0

    async def receive_and_ack() -> bool | None:
        nonlocal acked
        if acked >= messages:
            return True
        request = rpc.ReceiveMessageRequest(
            group=v2.Resource(name=GROUP),
            message_queue=v2.MessageQueue(topic=v2.Resource(name=TOPIC)),
            filter_expression=v2.FilterExpression(type=v2.TAG, expression="*"),
            batch_size=32,
        )
        request.invisible_duration.FromSeconds(30)
        request.long_polling_timeout.FromSeconds(5)
        entries = []
        async for response in stub.ReceiveMessage(request, metadata=metadata, timeout=30):
            if response.WhichOneof("content") == "message":
                system = response.message.system_properties
                entries.append(
                    rpc.AckMessageEntry(
                        message_id=system.message_id, receipt_handle=system.receipt_handle
                    )
                )
        if entries:
            answer = await stub.AckMessage(
                rpc.AckMessageRequest(
                    group=v2.Resource(name=GROUP), topic=v2.Resource(name=TOPIC), entries=entries
                ),
                metadata=metadata,
                timeout=30,
            )
            acked += sum(1 for entry in answer.entries if entry.status.code == v2.OK)
        return acked >= messages if entries else None

    receive_s, receive_latencies = await _workers(concurrency, receive_and_ack, 600)
    telemetry.cancel()
    await channel.close()
    return {
        "send_per_s": round(messages / send_s),
        **{f"send_{k}": v for k, v in _percentiles(send_latencies).items()},
        "receive_ack_per_s": round(acked / receive_s),
        **{f"round_{k}": v for k, v in _percentiles(receive_latencies).items()},
    }


async def remoting_run(
    namesrv: str, broker: str, messages: int, size: int, concurrency: int
) -> dict[str, Any]:
    body = os.urandom(size)
    sent = itertools.count()
    async with Producer("proxy-bench-remoting", namesrv=namesrv) as producer:

        async def send() -> bool:
            if next(sent) >= messages:
                return True
            await producer.send(Message(TOPIC, body, tags="bench"))
            return False

        send_s, send_latencies = await _workers(concurrency, send, 600)
    client = RemotingClient()
    pop = PopClient(client, GROUP + "-remoting", broker_name="broker-a")
    acked = 0

    async def receive_and_ack() -> bool | None:
        nonlocal acked
        if acked >= messages:
            return True
        result = await pop.pop(broker, TOPIC, max_nums=32, invisible_ms=30_000, poll_ms=5_000)
        await asyncio.gather(*(pop.ack(broker, TOPIC, p.handle) for p in result.messages))
        acked += len(result.messages)
        return acked >= messages if result.messages else None

    receive_s, receive_latencies = await _workers(concurrency, receive_and_ack, 600)
    await client.close()
    return {
        "send_per_s": round(messages / send_s),
        **{f"send_{k}": v for k, v in _percentiles(send_latencies).items()},
        "receive_ack_per_s": round(acked / receive_s),
        **{f"round_{k}": v for k, v in _percentiles(receive_latencies).items()},
    }


def run_pocketmq(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    config = work / "up.properties"
    config.write_text(f"tls.server.mode={args.tls}\n")
    up = start_up_process(work / "data", work / "up.log", "-c", str(config))
    try:
        broker = up.named_address("broker-a")
        asyncio.run(_create_topic(up.address))
        grpc_figures = asyncio.run(
            grpc_run(up.named_address("proxy"), args.messages, args.size, args.concurrency)
        )
        remoting_figures = asyncio.run(
            remoting_run(up.address, broker, args.messages, args.size, args.concurrency)
        )
    finally:
        up.stop()
    return {"pocketmq-grpc": grpc_figures, "pocketmq-remoting": remoting_figures}


def run_apache(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    from tests.conformance.reference import ApacheRocketMQ

    server = ApacheRocketMQ(work)
    server.start()
    try:
        proxy = server.start_proxy()
        asyncio.run(_create_topic(server.namesrv_addr))
        figures = asyncio.run(grpc_run(proxy, args.messages, args.size, args.concurrency))
    finally:
        server.stop()
    return {"apache-grpc": figures}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--system", choices=["all", "pocketmq", "apache"], default="all")
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument(
        "--tls", default="permissive", help="pocketmq's tls.server.mode (clients use plaintext)"
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="proxy-bench-") as tmp:
        if args.system in ("all", "pocketmq"):
            (Path(tmp) / "pocketmq").mkdir()
            results.update(run_pocketmq(args, Path(tmp) / "pocketmq"))
        if args.system in ("all", "apache"):
            (Path(tmp) / "apache").mkdir()
            results.update(run_apache(args, Path(tmp) / "apache"))
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"{args.messages} messages of {args.size} B, {args.concurrency} callers")
    columns = ["send_per_s", "send_p50_ms", "send_p99_ms", "receive_ack_per_s",
               "round_p50_ms", "round_p99_ms"]  # fmt: skip
    print(f"{'system':20}" + "".join(f"{c:>19}" for c in columns))
    for system, figures in results.items():
        print(f"{system:20}" + "".join(f"{figures.get(c, '-')!s:>19}" for c in columns))


if __name__ == "__main__":
    main()
