"""The proxy's gRPC service driven with the generated stubs: bad requests get RocketMQ's v2 codes
and the proxy keeps serving; TLS in each `tls.server.mode` (permissive serves TLS and plaintext
on one port)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from pocketmq.proxy.config import ProxyConfig
from pocketmq.proxy.grpc_v2 import definition_pb2 as v2
from pocketmq.proxy.grpc_v2 import service_pb2 as rpc
from pocketmq.proxy.grpc_v2 import service_pb2_grpc
from pocketmq.proxy.server import ProxyServer
from pocketmq.proxy.tls import TlsMode, throwaway_certificate
from pocketmq.testing.cluster import InProcessCluster

METADATA = (("x-mq-client-id", "test-client@1"), ("x-mq-language", "PYTHON"))


@pytest.fixture
def certificate(tmp_path: Path) -> tuple[Path, Path, bytes]:
    key, cert = throwaway_certificate()
    (tmp_path / "key.pem").write_bytes(key)
    (tmp_path / "cert.pem").write_bytes(cert)
    return tmp_path / "key.pem", tmp_path / "cert.pem", cert


def _proxy(cluster: InProcessCluster, mode: TlsMode, certificate: tuple[Path, Path, bytes]) -> Any:
    key, cert, _ = certificate
    return ProxyServer(
        ProxyConfig(
            namesrv_addr=cluster.namesrv_addr,
            grpc_server_port=0,
            bind_address="127.0.0.1",
            tls_mode=mode,
            tls_cert_path=str(cert),
            tls_key_path=str(key),
        )
    )


async def _route(channel: grpc.aio.Channel) -> Any:
    stub = service_pb2_grpc.MessagingServiceStub(channel)  # type: ignore[no-untyped-call]
    return await stub.QueryRoute(
        rpc.QueryRouteRequest(topic=v2.Resource(name="NoSuchTopic")), metadata=METADATA, timeout=5
    )


@pytest.mark.parametrize("mode", list(TlsMode), ids=lambda m: m.value)
def test_tls_modes(
    pocketmq_cluster: InProcessCluster, mode: TlsMode, certificate: tuple[Path, Path, bytes]
) -> None:
    async def scenario() -> dict[str, bool]:
        proxy = _proxy(pocketmq_cluster, mode, certificate)
        port = await proxy.start()
        answered = {}
        try:
            target = f"127.0.0.1:{port}"
            credentials = grpc.ssl_channel_credentials(root_certificates=certificate[2])
            channels = {
                "plain": grpc.aio.insecure_channel(target),
                "tls": grpc.aio.secure_channel(target, credentials),
            }
            for kind, channel in channels.items():
                try:
                    response = await _route(channel)
                    answered[kind] = response.status.code == v2.TOPIC_NOT_FOUND
                except grpc.aio.AioRpcError:
                    answered[kind] = False
                finally:
                    await channel.close()
        finally:
            await proxy.stop()
        return answered

    answered = pocketmq_cluster.call(scenario())
    expected = {
        TlsMode.DISABLED: {"plain": True, "tls": False},
        TlsMode.ENFORCING: {"plain": False, "tls": True},
        TlsMode.PERMISSIVE: {"plain": True, "tls": True},
    }[mode]
    assert answered == expected


@pytest.fixture
def stub(pocketmq_cluster: InProcessCluster) -> Iterator[Any]:
    proxy = ProxyServer(
        ProxyConfig(
            namesrv_addr=pocketmq_cluster.namesrv_addr,
            grpc_server_port=0,
            bind_address="127.0.0.1",
            tls_mode=TlsMode.DISABLED,
        )
    )
    port = pocketmq_cluster.call(proxy.start())

    async def open_channel() -> Any:
        return grpc.aio.insecure_channel(f"127.0.0.1:{port}")

    channel = pocketmq_cluster.call(open_channel())
    try:
        yield service_pb2_grpc.MessagingServiceStub(channel)  # type: ignore[no-untyped-call]
    finally:
        pocketmq_cluster.call(channel.close())
        pocketmq_cluster.call(proxy.stop())


def _message(topic: str, body: bytes = b"x", **system: Any) -> v2.Message:
    return v2.Message(
        topic=v2.Resource(name=topic),
        body=body,
        system_properties=v2.SystemProperties(message_id="01ABC", **system),
    )


async def _receive_statuses(stub: Any, request: rpc.ReceiveMessageRequest) -> list[int]:
    stream: AsyncIterator[Any] = stub.ReceiveMessage(request, metadata=METADATA, timeout=30)
    return [r.status.code async for r in stream if r.WhichOneof("content") == "status"]


def test_bad_requests_get_rocketmq_codes_and_the_proxy_keeps_serving(
    pocketmq_cluster: InProcessCluster, stub: Any
) -> None:
    async def scenario() -> dict[str, int]:
        codes: dict[str, int] = {}
        send = stub.SendMessage
        codes["no messages"] = (await send(rpc.SendMessageRequest(), metadata=METADATA)).status.code
        codes["illegal topic"] = (
            await send(rpc.SendMessageRequest(messages=[_message("bad topic!")]), metadata=METADATA)
        ).status.code
        codes["empty body"] = (
            await send(rpc.SendMessageRequest(messages=[_message("T", b"")]), metadata=METADATA)
        ).status.code
        codes["body too large"] = (
            await send(
                rpc.SendMessageRequest(messages=[_message("T", b"x" * (4 * 1024 * 1024 + 1))]),
                metadata=METADATA,
            )
        ).status.code
        codes["tag with |"] = (
            await send(
                rpc.SendMessageRequest(messages=[_message("T", tag="a|b")]), metadata=METADATA
            )
        ).status.code
        codes["unknown topic"] = (
            await send(
                rpc.SendMessageRequest(messages=[_message("NoSuchTopic")]), metadata=METADATA
            )
        ).status.code
        codes["heartbeat of an unknown client"] = (
            await stub.Heartbeat(rpc.HeartbeatRequest(), metadata=METADATA)
        ).status.code
        ack = await stub.AckMessage(
            rpc.AckMessageRequest(
                group=v2.Resource(name="g"),
                topic=v2.Resource(name="T"),
                entries=[rpc.AckMessageEntry(message_id="m", receipt_handle="not a handle")],
            ),
            metadata=METADATA,
        )
        codes["malformed handle"] = ack.entries[0].status.code
        expired = "0 1000 1000 0 0 broker-a 0 0 100"
        change = await stub.ChangeInvisibleDuration(
            rpc.ChangeInvisibleDurationRequest(
                group=v2.Resource(name="g"),
                topic=v2.Resource(name="T"),
                receipt_handle=expired,
                message_id="m",
            ),
            metadata=METADATA,
        )
        codes["expired handle"] = change.status.code
        statuses = await _receive_statuses(
            stub,
            rpc.ReceiveMessageRequest(
                group=v2.Resource(name="g"),
                message_queue=v2.MessageQueue(topic=v2.Resource(name="T")),
                batch_size=1,
            ),
        )
        codes["receive of an unknown topic"] = statuses[0]
        codes["still serving"] = (
            await stub.QueryRoute(
                rpc.QueryRouteRequest(topic=v2.Resource(name="NoSuchTopic")), metadata=METADATA
            )
        ).status.code
        return codes

    codes = pocketmq_cluster.call(scenario(), timeout_s=60)
    assert codes == {
        "no messages": v2.MESSAGE_CORRUPTED,
        "illegal topic": v2.ILLEGAL_TOPIC,
        "empty body": v2.MESSAGE_BODY_EMPTY,
        "body too large": v2.MESSAGE_BODY_TOO_LARGE,
        "tag with |": v2.ILLEGAL_MESSAGE_TAG,
        "unknown topic": v2.TOPIC_NOT_FOUND,
        "heartbeat of an unknown client": v2.UNRECOGNIZED_CLIENT_TYPE,
        "malformed handle": v2.INVALID_RECEIPT_HANDLE,
        "expired handle": v2.INVALID_RECEIPT_HANDLE,
        "receive of an unknown topic": v2.TOPIC_NOT_FOUND,
        "still serving": v2.TOPIC_NOT_FOUND,
    }
