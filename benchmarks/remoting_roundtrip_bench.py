"""Remoting round trips per second over loopback: one client, one server, a trivial handler.

Measures the transport (framing, headers, asyncio, sockets), not any broker logic:
`python benchmarks/remoting_roundtrip_bench.py [--requests N] [--concurrency C]`.
"""

from __future__ import annotations

import argparse
import asyncio
import time

from pocketmq.common.codes import ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.transport import Channel, RemotingClient, RemotingServer
from pocketmq.runtime import event_loop

PING = 9000


async def pong(request: RemotingCommand, channel: Channel) -> RemotingCommand:
    return RemotingCommand.response_to(request, ResponseCode.SUCCESS, body=request.body)


async def run(requests: int, concurrency: int, body: bytes) -> float:
    server = RemotingServer({PING: pong})
    port = await server.start()
    client = RemotingClient()
    address = f"127.0.0.1:{port}"
    per_worker = requests // concurrency

    async def worker() -> None:
        for _ in range(per_worker):
            await client.invoke(address, RemotingCommand.request(PING, {"k": "v"}, body), 5)

    await client.invoke(address, RemotingCommand.request(PING), 5)  # connect first
    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed = time.perf_counter() - start
    await client.close()
    await server.stop()
    return per_worker * concurrency / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=50_000)
    parser.add_argument("--body", type=int, default=1024, help="body bytes per request")
    args = parser.parse_args()
    for concurrency in (1, 64):
        rate = event_loop.run(run(args.requests, concurrency, bytes(args.body)))
        print(
            f"round trips, {concurrency:>2} in flight, {args.body} B body: {rate:>10,.0f} /s",
            flush=True,
        )


if __name__ == "__main__":
    main()
