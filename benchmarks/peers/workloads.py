"""The four workloads, for each system with its usual Python client; one run per process.

`python workloads.py SYSTEM WORKLOAD ADDRESS [--variant V] [--messages N] [--size B] ...`
prints one JSON line: the figure, and the client's own CPU seconds.

  produce   pipelined sends, up to `--window` unacknowledged (a)
  sync      one send at a time, latency per send (b)
  drain     consume `--messages` stored messages with acks or offset commits (c)
  e2e       send at `--rate` per second for `--seconds`, end-to-end latency (d)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

Sender = Callable[[bytes], Awaitable[Any]]


async def wait_received(received: list[float], sent: int, timeout_s: float = 10) -> None:
    """Gives the consumer up to `timeout_s` to receive what was sent (polling a list that the
    client's callbacks fill: the clients offer no common completion signal)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if len(received) >= sent:
            return
        await asyncio.sleep(0.05)


def percentiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)

    def at(fraction: float) -> float:
        return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] if ordered else 0.0

    return {"p50_us": at(0.5), "p99_us": at(0.99), "p999_us": at(0.999)}


async def pipelined(
    send: Callable[[bytes], Awaitable[Any]], body: bytes, count: int, window: int
) -> float:
    """Sends `count` messages keeping up to `window` unacknowledged: each completion starts the
    next send. Nothing waits in a queue for a slot: a client whose send returns a future
    (pocketmq's `send_async`) costs no task per message; a coroutine gets the one task it
    needs to run."""
    loop = asyncio.get_running_loop()
    finished: asyncio.Future[None] = loop.create_future()
    started = done = 0

    def launch() -> None:
        nonlocal started
        started += 1
        asyncio.ensure_future(send(body)).add_done_callback(landed)

    def landed(future: asyncio.Future[Any]) -> None:
        nonlocal done
        if finished.done():
            return
        error = future.exception()
        if error is not None:
            finished.set_exception(error)
            return
        done += 1
        if started < count:
            launch()
        elif done == count:
            finished.set_result(None)

    began = time.perf_counter()
    for _ in range(min(window, count)):
        launch()
    await finished
    return count / (time.perf_counter() - began)


async def one_at_a_time(send: Sender, body: bytes, count: int) -> dict[str, float]:
    latencies = []
    for _ in range(count):
        began = time.perf_counter()
        await send(body)
        latencies.append((time.perf_counter() - began) * 1e6)
    return percentiles(latencies)


def stamped(body: bytes) -> bytes:
    """The body with the send time in front (end-to-end latency)."""
    return f"{time.time():.6f}|".encode() + body


def latency_of(data: bytes) -> float:
    return (time.time() - float(data.split(b"|", 1)[0])) * 1e6


async def paced(send: Sender, body: bytes, rate: float, seconds: float) -> int:
    sent, started = 0, time.perf_counter()
    pending: set[asyncio.Task[None]] = set()
    while (elapsed := time.perf_counter() - started) < seconds:
        due = int(elapsed * rate) - sent
        for _ in range(due):
            task = asyncio.ensure_future(send(stamped(body)))
            pending.add(task)
            task.add_done_callback(pending.discard)
            sent += 1
        await asyncio.sleep(0.001)
    if pending:
        await asyncio.gather(*pending)
    return sent


# -- pocketmq ---------------------------------------------------------------------------------


async def pocketmq(args: argparse.Namespace, body: bytes) -> dict[str, Any]:
    from pocketmq.client.aio import ConsumeFromWhere, Message, Producer, PushConsumer

    topic = f"Peers{args.tag}"
    # Its automatic batcher is how pocketmq's client keeps up with many sends; for the paced
    # end-to-end run nothing waits for company (what is sent in one turn of the loop still goes
    # together), as Kafka's producer there.
    batched = args.workload in ("produce", "e2e")
    linger_ms = 0.0 if args.workload == "e2e" else 5.0
    async with Producer(
        "peers", namesrv=args.address, auto_batch=batched, batch_linger_ms=linger_ms
    ) as producer:

        def send(data: bytes) -> Awaitable[Any]:
            # With the batcher, `send_async` hands back a future: no coroutine per message.
            message = Message(topic, data)
            return producer.send_async(message) if batched else producer.send(message)

        await producer.send(Message(topic, b"warm-up"))
        if args.workload == "produce":
            return {"msgs_per_s": await pipelined(send, body, args.messages, args.window)}
        if args.workload == "sync":
            return await one_at_a_time(send, body, args.messages)
        received: list[float] = []
        done = asyncio.Event()
        target = args.messages + 1 if args.workload == "drain" else 0

        async def listener(messages: list[Any]) -> None:
            if args.workload == "e2e":
                received.extend(latency_of(m.body) for m in messages if b"|" in m.body)
            else:
                received.extend(0.0 for _ in messages)
                if len(received) >= target:
                    done.set()

        consumer = PushConsumer(
            f"peers-{args.workload}-{args.tag}",
            namesrv=args.address,
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
            consume_batch_max_size=32,
            pull_batch_size=256 if args.workload == "drain" else 32,
        )
        consumer.subscribe(topic)
        consumer.register_listener(listener)
        if args.workload == "drain":
            for start in range(0, args.messages, 1000):
                await producer.send_batch(
                    [Message(topic, body) for _ in range(min(1000, args.messages - start))]
                )
            started = time.perf_counter()
            async with consumer:
                await asyncio.wait_for(done.wait(), 600)
            # Offsets ride on each pull (RocketMQ's commitOffset flag) and every queue's is
            # committed when the consumer closes: the clock stops once that commit was
            # answered, so the drain counts its acknowledgements as the peers' rows do.
            rate = len(received) / (time.perf_counter() - started)
            return {"msgs_per_s": rate}
        async with consumer:
            await asyncio.sleep(1)  # the consumer owns its queues
            sent = await paced(send, body, args.rate, args.seconds)
            await wait_received(received, sent)
        return {**percentiles(received), "received": len(received), "sent": sent}


# -- Redis Streams ----------------------------------------------------------------------------


async def redis(args: argparse.Namespace, body: bytes) -> dict[str, Any]:
    import redis.asyncio as aioredis

    client = aioredis.from_url(args.address)
    stream = f"peers-{args.tag}"
    try:
        if args.workload == "produce":
            started = time.perf_counter()
            for start in range(0, args.messages, args.window):
                pipe = client.pipeline(transaction=False)
                for _ in range(min(args.window, args.messages - start)):
                    pipe.xadd(stream, {"b": body})
                await pipe.execute()
            return {"msgs_per_s": args.messages / (time.perf_counter() - started)}

        async def send(data: bytes) -> None:
            await client.xadd(stream, {"b": data})

        if args.workload == "sync":
            return await one_at_a_time(send, body, args.messages)
        await client.xgroup_create(stream, "g", id="$", mkstream=True)
        if args.workload == "drain":
            for start in range(0, args.messages, 1000):
                pipe = client.pipeline(transaction=False)
                for _ in range(min(1000, args.messages - start)):
                    pipe.xadd(stream, {"b": body})
                await pipe.execute()
            await client.xgroup_setid(stream, "g", id="0")
            started, got = time.perf_counter(), 0
            while got < args.messages:
                batch = await client.xreadgroup("g", "c", {stream: ">"}, count=1000)
                ids = [entry_id for _, entries in batch for entry_id, _ in entries]
                got += len(ids)
                if ids:
                    await client.xack(stream, "g", *ids)
            return {"msgs_per_s": got / (time.perf_counter() - started)}
        latencies: list[float] = []
        reader = await aioredis.from_url(args.address)
        stop = asyncio.Event()

        async def read() -> None:
            while not stop.is_set():
                batch = await reader.xreadgroup("g", "c", {stream: ">"}, count=1000, block=100)
                ids = []
                for _, entries in batch or []:
                    for entry_id, fields in entries:
                        latencies.append(latency_of(fields[b"b"]))
                        ids.append(entry_id)
                if ids:
                    await reader.xack(stream, "g", *ids)

        reading = asyncio.create_task(read())
        sent = await paced(send, body, args.rate, args.seconds)
        await wait_received(latencies, sent)
        stop.set()
        await reading
        await reader.aclose()
        return {**percentiles(latencies), "received": len(latencies), "sent": sent}
    finally:
        await client.aclose()


# -- NATS JetStream ---------------------------------------------------------------------------


async def nats(args: argparse.Namespace, body: bytes) -> dict[str, Any]:
    import nats as nats_client

    connection = await nats_client.connect(args.address)
    js = connection.jetstream()
    subject = f"peers.{args.tag}"
    await js.add_stream(name=f"PEERS{args.tag}", subjects=[subject])
    try:

        async def send(data: bytes) -> None:
            await js.publish(subject, data)

        if args.workload == "produce":
            return {"msgs_per_s": await pipelined(send, body, args.messages, args.window)}
        if args.workload == "sync":
            return await one_at_a_time(send, body, args.messages)
        if args.workload == "drain":
            await pipelined(send, body, args.messages, 1000)
            subscription = await js.pull_subscribe(subject, durable="drain")
            started, got = time.perf_counter(), 0
            while got < args.messages:
                messages = await subscription.fetch(1000, timeout=5)
                for message in messages:
                    await message.ack()
                got += len(messages)
            return {"msgs_per_s": got / (time.perf_counter() - started)}
        latencies: list[float] = []

        async def on_message(message: Any) -> None:
            latencies.append(latency_of(message.data))
            await message.ack()

        await js.subscribe(subject, cb=on_message, durable="e2e", manual_ack=True)
        sent = await paced(send, body, args.rate, args.seconds)
        await wait_received(latencies, sent)
        return {**percentiles(latencies), "received": len(latencies), "sent": sent}
    finally:
        await connection.close()


# -- RabbitMQ ---------------------------------------------------------------------------------


async def rabbitmq(args: argparse.Namespace, body: bytes) -> dict[str, Any]:
    import aio_pika

    connection = await aio_pika.connect_robust(args.address)
    try:
        channel = await connection.channel(publisher_confirms=True)
        await channel.set_qos(prefetch_count=1000)
        queue = await channel.declare_queue(
            f"peers-{args.tag}", durable=True, arguments={"x-queue-type": args.variant}
        )
        exchange = channel.default_exchange

        async def send(data: bytes) -> None:
            await exchange.publish(
                aio_pika.Message(data, delivery_mode=aio_pika.DeliveryMode.PERSISTENT),
                routing_key=queue.name,
            )

        if args.workload == "produce":
            return {"msgs_per_s": await pipelined(send, body, args.messages, args.window)}
        if args.workload == "sync":
            return await one_at_a_time(send, body, args.messages)
        if args.workload == "drain":
            await pipelined(send, body, args.messages, 1000)
            started, got = time.perf_counter(), 0
            async with queue.iterator() as messages:
                async for message in messages:
                    got += 1
                    if got % 100 == 0 or got == args.messages:
                        await message.ack(multiple=True)
                    if got >= args.messages:
                        break
            return {"msgs_per_s": got / (time.perf_counter() - started)}
        latencies: list[float] = []

        async def on_message(message: Any) -> None:
            latencies.append(latency_of(message.body))
            await message.ack()

        await queue.consume(on_message)
        sent = await paced(send, body, args.rate, args.seconds)
        await wait_received(latencies, sent)
        return {**percentiles(latencies), "received": len(latencies), "sent": sent}
    finally:
        await connection.close()


# -- peers whose server comes from Maven Central (their own modules) ---------------------------


async def kafka(args: argparse.Namespace, body: bytes) -> dict[str, Any]:
    from kafka_peer import kafka as run

    return await run(args, body)


async def rocketmq(args: argparse.Namespace, body: bytes) -> dict[str, Any]:
    from rocketmq_peer import rocketmq as run

    return await run(args, body)


CLIENTS = {
    "pocketmq": pocketmq,
    "redis": redis,
    "nats": nats,
    "rabbitmq": rabbitmq,
    "kafka": kafka,
    "rocketmq": rocketmq,
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("system", choices=sorted(CLIENTS))
    parser.add_argument("workload", choices=["produce", "sync", "drain", "e2e"])
    parser.add_argument("address")
    parser.add_argument("--variant", default="classic")
    parser.add_argument("--tag", default="0")
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--window", type=int, default=1000)
    parser.add_argument("--rate", type=float, default=5000)
    parser.add_argument("--seconds", type=float, default=20)
    args = parser.parse_args()
    body = b"x" * args.size
    try:
        import uvloop

        result = uvloop.run(CLIENTS[args.system](args, body))
    except ImportError:
        result = asyncio.run(CLIENTS[args.system](args, body))
    usage = resource.getrusage(resource.RUSAGE_SELF)
    result["client_cpu_s"] = usage.ru_utime + usage.ru_stime
    print(json.dumps(result))


if __name__ == "__main__":
    main()
