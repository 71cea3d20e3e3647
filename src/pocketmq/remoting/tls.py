"""TLS on pocketmq's TCP listeners and clients, with RocketMQ's `tls.*` keys.

RocketMQ keeps its TLS settings per process (`TlsSystemConfig`, read from `-Dtls.*` and from
`tls.config.file`); so does pocketmq: a server command reads the `tls.*` keys of its config
file (then those of `tls.config.file`, which win, as in RocketMQ) and `configure`s them once;
every listener it opens (remoting, HA, Raft, controller) then follows `tls.server.mode`:

- `disabled`: plaintext only;
- `permissive` (RocketMQ's default): TLS and plaintext on the same port, told apart by the
  first byte the client sends (a TLS ClientHello starts with 0x16), peeked before the
  connection is handed to asyncio, so nothing is copied twice;
- `enforcing`: TLS only; a plaintext client sees its connection closed.

`tls.server.need.client.auth` = none / optional / require asks clients for a certificate,
checked against `tls.server.trustCertPath` (mutual TLS between brokers and Raft peers).
Without `tls.server.certPath`/`keyPath`, `tls.test.mode.enable` (on by default, as in
RocketMQ) serves a throwaway self-signed certificate made once per process.

Outgoing connections use TLS when `tls.enable` is on; `tls.client.authServer` checks the
server's certificate against `tls.client.trustCertPath` (RocketMQ checks no host name, so
neither does this); `tls.client.certPath`/`keyPath` present a certificate when asked.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime
import enum
import functools
import ipaddress
import logging
import os
import socket
import ssl
import tempfile
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from pocketmq.common.config import ConfigError, apply_properties, key, load_properties

log = logging.getLogger(__name__)

TLS_RECORD_HANDSHAKE: Final = 0x16
FIRST_BYTE_TIMEOUT_S: Final = 30.0
READ_LIMIT_BYTES: Final = 256 * 1024
DEFAULT_CONFIG_FILE: Final = "/etc/rocketmq/tls.properties"

Accept = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


class TlsMode(enum.Enum):
    DISABLED = "disabled"
    PERMISSIVE = "permissive"
    ENFORCING = "enforcing"


class ClientAuth(enum.Enum):
    NONE = "none"
    OPTIONAL = "optional"
    REQUIRE = "require"


class TlsConfigError(ConfigError):
    """The TLS settings cannot work (a missing or unreadable certificate, a missing CA)."""

    def __init__(self, message: str) -> None:
        ValueError.__init__(self, message)
        self.key, self.value, self.expected = "tls", "", message


@dataclass(slots=True)
class TlsConfig:
    """RocketMQ's `tls.*` keys (`TlsSystemConfig`)."""

    server_mode: TlsMode = key("tls.server.mode", TlsMode.PERMISSIVE)
    server_need_client_auth: ClientAuth = key("tls.server.need.client.auth", ClientAuth.NONE)
    server_key_path: str = key("tls.server.keyPath", "")
    server_key_password: str = key("tls.server.keyPassword", "")
    server_cert_path: str = key("tls.server.certPath", "")
    server_trust_cert_path: str = key("tls.server.trustCertPath", "")
    client_enable: bool = key("tls.enable", False)
    client_auth_server: bool = key("tls.client.authServer", False)
    client_key_path: str = key("tls.client.keyPath", "")
    client_key_password: str = key("tls.client.keyPassword", "")
    client_cert_path: str = key("tls.client.certPath", "")
    client_trust_cert_path: str = key("tls.client.trustCertPath", "")
    test_mode: bool = key("tls.test.mode.enable", True)
    config_file: str = key("tls.config.file", DEFAULT_CONFIG_FILE)

    @classmethod
    def from_properties(cls, properties: Mapping[str, str]) -> TlsConfig:
        """The `tls.*` keys of `properties`, then those of its `tls.config.file` (if that file
        exists; an explicitly named one must).

        Raises:
            ConfigError: a bad value, or a named `tls.config.file` that cannot be read.
        """
        config = cls()
        apply_properties(config, {k: v for k, v in properties.items() if k.startswith("tls.")})
        path = Path(config.config_file)
        if path.is_file() or "tls.config.file" in properties:
            from_file = load_properties(path)
            apply_properties(config, {k: v for k, v in from_file.items() if k.startswith("tls.")})
        return config

    def server_context(self) -> ssl.SSLContext | None:
        """The context of TLS connections accepted; None when `tls.server.mode=disabled`.

        Raises:
            TlsConfigError: no certificate and test mode off, unreadable files, or client
                authentication without a CA to check against.
        """
        if self.server_mode is TlsMode.DISABLED:
            return None
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        if self.server_cert_path and self.server_key_path:
            _load_chain(
                context, self.server_cert_path, self.server_key_path, self.server_key_password
            )
        elif self.test_mode:
            _load_throwaway(context)
        else:
            raise TlsConfigError(
                f"tls.server.mode={self.server_mode.value} needs tls.server.certPath and "
                "tls.server.keyPath, or tls.test.mode.enable=true"
            )
        if self.server_need_client_auth is not ClientAuth.NONE:
            if not self.server_trust_cert_path:
                raise TlsConfigError(
                    f"tls.server.need.client.auth={self.server_need_client_auth.value} needs "
                    "tls.server.trustCertPath (the CA that signs client certificates)"
                )
            _load_trust(context, self.server_trust_cert_path, "tls.server.trustCertPath")
            required = self.server_need_client_auth is ClientAuth.REQUIRE
            context.verify_mode = ssl.CERT_REQUIRED if required else ssl.CERT_OPTIONAL
        return context

    def client_context(self) -> ssl.SSLContext | None:
        """The context of outgoing connections; None unless `tls.enable`.

        Raises:
            TlsConfigError: unreadable certificate, key or CA files.
        """
        if not self.client_enable:
            return None
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False  # RocketMQ's clients check the chain, not the name
        if self.client_auth_server:
            if self.client_trust_cert_path:
                _load_trust(context, self.client_trust_cert_path, "tls.client.trustCertPath")
            else:
                context.load_default_certs()
        else:
            context.verify_mode = ssl.CERT_NONE
        if self.client_cert_path and self.client_key_path:
            _load_chain(
                context, self.client_cert_path, self.client_key_path, self.client_key_password
            )
        return context

    def described(self) -> str:
        """One line for the startup log (no password, no key material)."""
        certificate = self.server_cert_path or ("throwaway" if self.test_mode else "none")
        return (
            f"tls.server.mode={self.server_mode.value} "
            f"need.client.auth={self.server_need_client_auth.value} certificate={certificate} "
            f"tls.enable={str(self.client_enable).lower()}"
        )


def _load_chain(context: ssl.SSLContext, cert: str, key_path: str, password: str) -> None:
    try:
        context.load_cert_chain(cert, key_path, password or None)
    except (OSError, ssl.SSLError) as exc:
        raise TlsConfigError(f"cannot load the certificate {cert} with its key: {exc}") from None


def _load_trust(context: ssl.SSLContext, path: str, name: str) -> None:
    try:
        context.load_verify_locations(cafile=path)
    except (OSError, ssl.SSLError) as exc:
        raise TlsConfigError(f"cannot load {name} {path}: {exc}") from None


def _load_throwaway(context: ssl.SSLContext) -> None:
    # The ssl module loads certificates only from files: write them to a private directory
    # for the moment it takes.
    key_pem, cert_pem = throwaway_certificate()
    with tempfile.TemporaryDirectory(prefix="pocketmq-tls-") as folder:
        cert, key_file = os.path.join(folder, "cert.pem"), os.path.join(folder, "key.pem")
        Path(cert).write_bytes(cert_pem)
        Path(key_file).write_bytes(key_pem)
        context.load_cert_chain(cert, key_file)


@functools.cache
def throwaway_certificate(host: str = "127.0.0.1") -> tuple[bytes, bytes]:
    """A self-signed certificate for `host` and localhost, and its key, PEM; made once per
    process (RocketMQ's test mode)."""
    # Imported here: the library costs about 15 MiB of memory, which a process that never
    # serves a TLS client (a client, a permissive server with plaintext clients) should not pay.
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key_ = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "pocketmq")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key_.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=365))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address(host))]
            ),
            critical=False,
        )
        .sign(key_, hashes.SHA256())
    )
    return (
        key_.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ),
        certificate.public_bytes(serialization.Encoding.PEM),
    )


# -- the process's settings --------------------------------------------------------------------

_current = TlsConfig()


def configure(config: TlsConfig) -> None:
    """Sets the process's TLS settings (a server command does it once, before listening)."""
    global _current
    # Fail at start, with one line, not at the first connection; a permissive server's
    # throwaway certificate is made when a TLS client first comes (`Listener`).
    throwaway = config.test_mode and not (config.server_cert_path and config.server_key_path)
    if config.server_mode is TlsMode.ENFORCING or (
        config.server_mode is TlsMode.PERMISSIVE and not throwaway
    ):
        config.server_context()
    config.client_context()
    _current = dataclasses.replace(config)
    _cached_server_context.cache_clear()  # keyed by id: a new object may reuse an old id
    _cached_client_context.cache_clear()
    # RocketMQ's defaults (permissive, test certificate, plaintext out) are not news.
    level = logging.DEBUG if config == TlsConfig(config_file=config.config_file) else logging.INFO
    log.log(level, "TLS: %s", config.described())
    if config.server_mode is TlsMode.ENFORCING and not config.client_enable:
        log.warning(
            "tls.server.mode=enforcing without tls.enable=true: this process's own connections "
            "(to NameServers, masters, Raft peers) are plaintext, which enforcing peers refuse"
        )


def current() -> TlsConfig:
    return _current


@functools.cache
def _cached_server_context(config_id: int) -> ssl.SSLContext | None:
    del config_id  # the cache key: one context per configured settings object
    return _current.server_context()


def server_context() -> ssl.SSLContext | None:
    """The process's server context (built once per `configure`)."""
    return _cached_server_context(id(_current))


def client_context() -> ssl.SSLContext | None:
    """The process's client context, or None when outgoing TLS is off."""
    return _cached_client_context(id(_current))


@functools.cache
def _cached_client_context(config_id: int) -> ssl.SSLContext | None:
    del config_id
    return _current.client_context()


# -- listening ---------------------------------------------------------------------------------


class Listener:
    """A TCP listener that hands each connection, plaintext or TLS as the mode says, to
    `accept` as an asyncio stream pair."""

    def __init__(
        self,
        accept: Accept,
        mode: TlsMode,
        context: ssl.SSLContext | Callable[[], ssl.SSLContext | None] | None,
    ) -> None:
        """`context`: the TLS context, or what makes it when first needed."""
        if mode is not TlsMode.DISABLED and context is None:
            raise TlsConfigError(f"tls.server.mode={mode.value} needs a server context")
        self._accept = accept
        self.mode = mode
        self._make_context = context if callable(context) else lambda: context
        self._server: asyncio.Server | None = None
        self._socket: socket.socket | None = None
        self._accepting: asyncio.Task[None] | None = None
        self._pending: set[asyncio.Task[None]] = set()
        self.port = 0

    @classmethod
    def for_process(cls, accept: Accept) -> Listener:
        """A listener following the process's `tls.server.mode`."""
        mode = current().server_mode
        return cls(accept, mode, server_context if mode is not TlsMode.DISABLED else None)

    async def start(self, host: str, port: int, *, serve: bool = True) -> int:
        """Binds `host:port` (0 picks a free port); returns the port. Raises OSError."""
        if self.mode is not TlsMode.PERMISSIVE:
            self._server = await asyncio.start_server(
                self._accept,
                host,
                port,
                ssl=self._make_context(),
                limit=READ_LIMIT_BYTES,
                start_serving=serve,
                reuse_address=True,
            )
            self.port = self._server.sockets[0].getsockname()[1]
            return self.port
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._socket = socket.create_server((host, port), family=family, reuse_port=False)
        self._socket.setblocking(False)
        self.port = self._socket.getsockname()[1]
        if serve:
            await self.serve()
        return self.port

    async def serve(self) -> None:
        if self._server is not None:
            await self._server.start_serving()
        elif self._socket is not None and self._accepting is None:
            self._accepting = asyncio.get_running_loop().create_task(self._accept_loop())

    async def _accept_loop(self) -> None:
        assert self._socket is not None
        loop = asyncio.get_running_loop()
        while True:
            try:
                connection, _ = await loop.sock_accept(self._socket)
            except OSError as exc:  # EMFILE and the like: say so, keep listening
                log.warning("cannot accept a connection on port %d: %s", self.port, exc)
                await asyncio.sleep(0.1)
                continue
            task = loop.create_task(self._sort(connection))
            self._pending.add(task)
            task.add_done_callback(self._pending.discard)

    async def _sort(self, connection: socket.socket) -> None:
        """Peeks at the first byte, then serves the connection as TLS or plaintext."""
        loop = asyncio.get_running_loop()
        connection.setblocking(False)
        try:
            first = await asyncio.wait_for(_peek(loop, connection), FIRST_BYTE_TIMEOUT_S)
            if not first:
                connection.close()
                return
            tls = first[0] == TLS_RECORD_HANDSHAKE
            reader = asyncio.StreamReader(limit=READ_LIMIT_BYTES)
            transport, protocol = await loop.connect_accepted_socket(
                lambda: asyncio.StreamReaderProtocol(reader),
                connection,
                ssl=self._make_context() if tls else None,
            )
        except TlsConfigError as exc:  # cannot happen after `configure`; say so if it does
            log.warning("a TLS client came but TLS cannot be served: %s", exc)
            connection.close()
            return
        except (OSError, TimeoutError, ssl.SSLError) as exc:
            log.debug("connection dropped before it spoke: %s", exc)
            connection.close()
            return
        writer = asyncio.StreamWriter(transport, protocol, reader, loop)
        await self._accept(reader, writer)

    def close(self) -> None:
        if self._server is not None:
            self._server.close()
        if self._accepting is not None:
            self._accepting.cancel()
        for task in self._pending:
            task.cancel()
        if self._socket is not None:
            self._socket.close()

    async def wait_closed(self) -> None:
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None
        if self._accepting is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._accepting
            self._accepting = None
        for task in list(self._pending):
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._socket = None


async def _peek(loop: asyncio.AbstractEventLoop, connection: socket.socket) -> bytes:
    """The first byte the peer sent, left in the socket; b"" when it closed first."""
    readable: asyncio.Future[None] = loop.create_future()

    def ready() -> None:
        if not readable.done():
            readable.set_result(None)

    loop.add_reader(connection.fileno(), ready)
    try:
        await readable
    finally:
        loop.remove_reader(connection.fileno())
    return connection.recv(1, socket.MSG_PEEK)
