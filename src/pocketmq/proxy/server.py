"""The proxy's gRPC server: `MessagingService` on grpcio's asyncio server, in front of the
brokers a `Brokers` reaches (cluster mode: through the NameServers; local mode: the broker in
the same process)."""

from __future__ import annotations

import logging
from typing import Final

import grpc

from pocketmq.acl.auth_hook import AuthHook
from pocketmq.acl.hook import AclHook
from pocketmq.client.credentials import SessionCredentials
from pocketmq.proxy.auth import AuthInterceptor, acl1_check
from pocketmq.proxy.auth_v2 import acl2_check
from pocketmq.proxy.brokers import Brokers
from pocketmq.proxy.config import ProxyConfig
from pocketmq.proxy.grpc_v2 import service_pb2_grpc
from pocketmq.proxy.service import MessagingService
from pocketmq.proxy.tls import PermissiveFront
from pocketmq.remoting.tls import TlsMode

log = logging.getLogger(__name__)

MAX_INBOUND_BYTES: Final = 130 * 1024 * 1024
"""`grpcMaxInboundMessageSize`."""
STOP_GRACE_S: Final = 2.0


class ProxyServer:
    def __init__(
        self,
        config: ProxyConfig,
        *,
        acl: AclHook | None = None,
        auth: AuthHook | None = None,
        inner: SessionCredentials | None = None,
    ) -> None:
        """`acl`: rules shared with a broker in the same process (local mode), else the proxy
        loads its own when `enableACL`; `inner`: the account it signs broker requests with
        (else `innerClientAuthenticationCredentials`)."""
        self.config = config
        self.acl = acl
        self.auth = auth
        self._own_acl = False
        self.inner = inner
        self.brokers: Brokers | None = None
        self._server: grpc.aio.Server | None = None
        self.port = 0
        self.service: MessagingService | None = None
        self._front: PermissiveFront | None = None

    async def start(self) -> int:
        """Binds and serves; returns the port (the configured one, or a free one for 0).

        Raises:
            OSError: the port cannot be bound.
        """
        config = self.config
        inner = self.inner or config.inner_account()
        if self.acl is None and config.enable_acl:
            self.acl, self._own_acl = AclHook(config.acl_file_path), True
            self.acl.start()
        if self.acl is not None:
            interceptors = [AuthInterceptor(acl1_check(self.acl.validator))]
        elif self.auth is not None:
            interceptors = [AuthInterceptor(acl2_check(self.auth))]
        else:
            interceptors = []
        server = grpc.aio.server(
            interceptors=interceptors,
            options=[
                ("grpc.max_receive_message_length", MAX_INBOUND_BYTES),
                ("grpc.so_reuseport", 0),
            ],
        )
        tls = config.tls()
        address = f"{config.bind_address}:{config.grpc_server_port}"
        try:
            if tls.mode is TlsMode.DISABLED:
                port = server.add_insecure_port(address)
            elif tls.mode is TlsMode.ENFORCING:
                port = server.add_secure_port(address, tls.credentials())
            else:
                plain = server.add_insecure_port("127.0.0.1:0")
                secure = server.add_secure_port("127.0.0.1:0", tls.credentials())
                self._front = PermissiveFront(plain, secure)
                port = await self._front.start(config.bind_address, config.grpc_server_port)
        except RuntimeError as exc:
            raise OSError(98, f"cannot bind {address}: {exc}") from None
        host = config.advertised_host or (
            "127.0.0.1" if config.bind_address in ("0.0.0.0", "") else config.bind_address
        )
        self.brokers = brokers = Brokers(config.namesrv_addresses(), credentials=inner)
        self.service = MessagingService(brokers, config.settings(), advertised=(host, port))
        service_pb2_grpc.add_MessagingServiceServicer_to_server(  # type: ignore[no-untyped-call]
            self.service, server
        )
        await brokers.start()
        await server.start()
        self._server = server
        self.port = port
        log.info(
            "proxy (%s mode) serving gRPC at %s:%d (TLS %s, ACL %s), NameServers %s",
            config.proxy_mode.value,
            host,
            port,
            tls.mode.value,
            "1.0" if self.acl is not None else "2.0" if self.auth is not None else "off",
            config.namesrv_addr,
        )
        return port

    async def stop(self) -> None:
        if self._front is not None:
            await self._front.stop()
            self._front = None
        if self._server is not None:
            await self._server.stop(STOP_GRACE_S)
            self._server = None
        if self.brokers is not None:
            await self.brokers.close()
            self.brokers = None
        if self.acl is not None and self._own_acl:
            await self.acl.stop()
            self.acl, self._own_acl = None, False
