"""The proxy's gRPC service driven with the generated stubs: bad requests get RocketMQ's v2 codes
and the proxy keeps serving; TLS in each `tls.server.mode` (permissive serves TLS and plaintext
on one port)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from pocketmq.client.admin import AdminClient, TopicSettings
from pocketmq.proxy.config import ProxyConfig
from pocketmq.proxy.grpc_v2 import definition_pb2 as v2
from pocketmq.proxy.grpc_v2 import service_pb2 as rpc
from pocketmq.proxy.grpc_v2 import service_pb2_grpc
from pocketmq.proxy.server import ProxyServer
from pocketmq.remoting.tls import TlsMode, throwaway_certificate
from pocketmq.testing.cluster import InProcessCluster, start_cluster

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


@pytest.fixture
def recall_cluster(tmp_path: Path) -> Iterator[InProcessCluster]:
    cluster = start_cluster(tmp_path / "store", recall_message_enable=True)
    try:
        yield cluster
    finally:
        cluster.stop()


def test_recall_and_offsets(recall_cluster: InProcessCluster) -> None:
    cluster = recall_cluster

    async def scenario() -> dict[str, Any]:
        async with AdminClient([cluster.namesrv_addr]) as admin:
            await admin.create_topic(
                TopicSettings("Later", 1, 1, attributes="+message.type=DELAY"),
                cluster="DefaultCluster",
            )
            assert await admin.wait_for_route("Later")
        proxy = ProxyServer(
            ProxyConfig(
                namesrv_addr=cluster.namesrv_addr,
                grpc_server_port=0,
                bind_address="127.0.0.1",
                tls_mode=TlsMode.DISABLED,
            )
        )
        port = await proxy.start()
        seen: dict[str, Any] = {}
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                stub: Any = service_pb2_grpc.MessagingServiceStub(channel)  # type: ignore[no-untyped-call]
                later = _message("Later", message_type=v2.DELAY)
                later.system_properties.delivery_timestamp.FromSeconds(int(time.time()) + 600)
                sent = await stub.SendMessage(
                    rpc.SendMessageRequest(messages=[later]), metadata=METADATA
                )
                handle = sent.entries[0].recall_handle
                seen["handle given"] = bool(handle)
                recall = rpc.RecallMessageRequest(
                    topic=v2.Resource(name="Later"), recall_handle=handle
                )
                answer = await stub.RecallMessage(recall, metadata=METADATA)
                seen["recall"] = (answer.status.code, answer.message_id)
                bad = rpc.RecallMessageRequest(
                    topic=v2.Resource(name="Later"), recall_handle="not-a-handle"
                )
                seen["bad recall"] = (await stub.RecallMessage(bad, metadata=METADATA)).status.code
                queue = v2.MessageQueue(
                    topic=v2.Resource(name="Later"), id=0, broker=v2.Broker(name="broker-a")
                )
                update = rpc.UpdateOffsetRequest(
                    group=v2.Resource(name="g"), message_queue=queue, offset=1
                )
                seen["update"] = (await stub.UpdateOffset(update, metadata=METADATA)).status.code
                got = await stub.GetOffset(
                    rpc.GetOffsetRequest(group=v2.Resource(name="g"), message_queue=queue),
                    metadata=METADATA,
                )
                seen["get"] = (got.status.code, got.offset)
                ends = {}
                for policy in (v2.BEGINNING, v2.END):
                    query = rpc.QueryOffsetRequest(message_queue=queue, query_offset_policy=policy)
                    ends[policy] = (await stub.QueryOffset(query, metadata=METADATA)).offset
                seen["ends"] = ends
        finally:
            await proxy.stop()
        return seen

    seen = cluster.call(scenario(), timeout_s=60)
    assert seen["handle given"]
    assert seen["recall"] == (v2.OK, "01ABC")
    assert seen["bad recall"] == v2.BAD_REQUEST
    assert seen["update"] == v2.OK
    assert seen["get"] == (v2.OK, 1)
    assert seen["ends"] == {v2.BEGINNING: 0, v2.END: 0}  # the message waits in the timer
