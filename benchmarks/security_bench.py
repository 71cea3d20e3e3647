"""What TLS and ACL cost per request: remoting round trips over loopback with a 1 KiB body, one
client and one server in one process, a handler that echoes, in five set-ups:

- `plaintext, tls disabled`: the listener as before TLS existed;
- `plaintext, tls permissive`: RocketMQ's default listener (it peeks at each new connection's
  first byte), a plaintext client;
- `tls, tls permissive`: the same listener, a TLS client;
- `tls, tls enforcing`;
- `plaintext + ACL`: a permissive listener that checks ACL 1.0 on every request (a signed
  SEND_MESSAGE_V2 header naming a topic the account may publish to), the client signing each.

`python benchmarks/security_bench.py [--requests N]`; each set-up runs with 1 and 64 requests
in flight.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from pocketmq.acl.hook import AclHook
from pocketmq.client.credentials import SessionCredentials, client_tls
from pocketmq.common.codes import RequestCode, ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.tls import Listener, TlsConfig, TlsMode
from pocketmq.remoting.transport import Channel, RemotingClient, RemotingServer
from pocketmq.runtime import event_loop

RULES = """\
accounts:
  - accessKey: benchAccount
    secretKey: bench-secret-1
    defaultTopicPerm: DENY
    topicPerms:
      - BenchTopic=PUB
"""
HEADER = {"a": "bench-producers", "b": "BenchTopic", "c": "TBW102", "d": "4", "e": "0", "f": "0"}


async def echo(request: RemotingCommand, channel: Channel) -> RemotingCommand:
    return RemotingCommand.response_to(request, ResponseCode.SUCCESS, body=request.body)


class ModeServer(RemotingServer):
    """A remoting server whose listener mode the benchmark chooses."""

    def __init__(self, mode: TlsMode) -> None:
        super().__init__({RequestCode.SEND_MESSAGE_V2: echo})
        self.mode = mode

    async def start(self, *, serve: bool = True) -> int:
        context = TlsConfig(server_mode=self.mode).server_context()
        self._listener = Listener(self._accept, self.mode, context)
        self.port = await self._listener.start(self.host, self.port, serve=serve)
        return self.port


async def run(
    mode: TlsMode, tls: bool, acl: AclHook | None, requests: int, concurrency: int, body: bytes
) -> float:
    server = ModeServer(mode)
    if acl is not None:
        server.guard = acl.guard
    port = await server.start()
    signer: Callable[[RemotingCommand], None] | None = None
    if acl is not None:
        signer = SessionCredentials("benchAccount", "bench-secret-1").sign
    client = RemotingClient(ssl_context=client_tls(tls), before_request=signer)
    address = f"127.0.0.1:{port}"
    per_worker = requests // concurrency

    async def worker() -> None:
        for _ in range(per_worker):
            request = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, HEADER, body)
            answer = await client.invoke(address, request, 5)
            assert answer.code == ResponseCode.SUCCESS, answer.remark

    await client.invoke(address, RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, HEADER), 5)
    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed = time.perf_counter() - start
    await client.close()
    await server.stop()
    return per_worker * concurrency / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=40_000)
    args = parser.parse_args()
    body = bytes(1024)
    with tempfile.TemporaryDirectory() as folder:
        rules = Path(folder) / "plain_acl.yml"
        rules.write_text(RULES)
        acl = AclHook(str(rules))
        setups = [
            ("plaintext, tls disabled", TlsMode.DISABLED, False, None),
            ("plaintext, tls permissive", TlsMode.PERMISSIVE, False, None),
            ("tls, tls permissive", TlsMode.PERMISSIVE, True, None),
            ("tls, tls enforcing", TlsMode.ENFORCING, True, None),
            ("plaintext + ACL", TlsMode.PERMISSIVE, False, acl),
        ]
        for name, mode, tls, hook in setups:
            for concurrency in (1, 64):
                rate = event_loop.run(run(mode, tls, hook, args.requests, concurrency, body))
                print(
                    f"{name:<28} {concurrency:>2} in flight: {rate:>9,.0f} round trips/s",
                    flush=True,
                )


if __name__ == "__main__":
    main()
