"""`pocketmq admin` message commands: queryMsgById, queryMsgByKey, queryMsgByOffset,
queryMsgTraceById, sendMessage and consumeMessage, with a message printed as mqadmin's
`queryMsgById` block."""

from __future__ import annotations

import argparse
import base64
import time
import zlib
from datetime import datetime
from typing import Any

from pocketmq.cli.admin_report import Report, human_time_ms, key_values, table
from pocketmq.client.admin import AdminClient, AdminError, FoundMessage
from pocketmq.common.constants import COMPRESSED_FLAG
from pocketmq.observability.trace import (
    TraceContext,
    TraceDecodeError,
    TraceType,
    decode,
)
from pocketmq.observability.trace_view import TraceMessage, format_trace_view


def _message_document(found: FoundMessage) -> dict[str, Any]:
    message = found.message
    return {
        "msgId": found.msg_id,
        "offsetMsgId": found.offset_msg_id,
        "topic": message.topic,
        "brokerName": found.broker_name,
        "queueId": message.queue_id,
        "queueOffset": message.queue_offset,
        "commitLogOffset": message.physical_offset,
        "tags": found.tags,
        "keys": found.keys,
        "reconsumeTimes": message.reconsume_times,
        "bornTimestamp": message.born_timestamp,
        "storeTimestamp": message.store_timestamp,
        "bornHost": _host(message.born_host),
        "storeHost": _host(message.store_host),
        "sysFlag": message.sys_flag,
        "properties": dict(message.properties),
        "body": message.body.decode("utf-8", "replace"),
        "bodyBase64": base64.b64encode(message.body).decode("ascii"),
    }


def _host(host: tuple[str, int]) -> str:
    ip, port = host
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"


def _message_lines(found: FoundMessage) -> list[str]:
    """The block mqadmin's `queryMsgById` prints, with the body inline."""
    message = found.message
    properties = ", ".join(f"{k}={v}" for k, v in sorted(message.properties.items()))
    return key_values(
        [
            ("OffsetID:", found.offset_msg_id),
            ("Message ID:", found.msg_id),
            ("Topic:", message.topic),
            ("Broker Name:", found.broker_name),
            ("Tags:", f"[{found.tags}]" if found.tags is not None else "[null]"),
            ("Keys:", f"[{found.keys}]" if found.keys is not None else "[null]"),
            ("Queue ID:", message.queue_id),
            ("Queue Offset:", message.queue_offset),
            ("CommitLog Offset:", message.physical_offset),
            ("Reconsume Times:", message.reconsume_times),
            ("Born Timestamp:", human_time_ms(message.born_timestamp)),
            ("Store Timestamp:", human_time_ms(message.store_timestamp)),
            ("Born Host:", _host(message.born_host)),
            ("Store Host:", _host(message.store_host)),
            ("System Flag:", message.sys_flag),
            ("Properties:", "{" + properties + "}"),
            ("Message Body:", message.body.decode("utf-8", "replace")),
        ],
        separator=" ",
    )


async def query_msg_by_id(admin: AdminClient, args: argparse.Namespace) -> Report:
    ids = [i.strip() for i in args.msgId.split(",") if i.strip()]
    if not ids:
        raise AdminError("-i needs at least one message id")
    found = [await admin.query_message_by_id(msg_id, args.topic) for msg_id in ids]
    lines: list[str] = []
    for index, message in enumerate(found):
        if index:
            lines.append("")
        lines.extend(_message_lines(message))
    return Report([_message_document(m) for m in found], lines)


async def query_msg_by_key(admin: AdminClient, args: argparse.Namespace) -> Report:
    found = await admin.query_message_by_key(
        args.topic,
        args.msgKey,
        max_num=args.maxNum,
        begin_ms=args.beginTimestamp,
        end_ms=args.endTimestamp,
    )
    if not found:
        return Report([], [f"no message with key {args.msgKey} in topic {args.topic}"])
    rows = [
        [f.msg_id, f.broker_name, f.message.queue_id, f.message.queue_offset, f.offset_msg_id]
        for f in found
    ]
    headers = ["#Message ID", "#Broker Name", "#QID", "#Offset", "#Offset Message ID"]
    return Report([_message_document(f) for f in found], table(headers, rows))


async def query_msg_trace_by_id(admin: AdminClient, args: argparse.Namespace) -> Report:
    """mqadmin's `queryMsgTraceById`: the trace messages whose KEYS hold the id, printed as
    Pub and SubAfter rows in the local time zone."""
    found = await admin.query_message_by_key(
        args.traceTopic,
        args.msgId,
        max_num=args.maxNum,
        begin_ms=args.beginTimestamp,
        end_ms=args.endTimestamp,
    )
    now_ms = time.time_ns() // 1_000_000
    messages = [_trace_message(f, now_ms) for f in found]
    local_zone = datetime.now().astimezone().tzinfo
    assert local_zone is not None
    text = format_trace_view(messages, args.msgId, tz=local_zone)
    document = [
        _trace_document(context, message.born_host)
        for message in messages
        for context in message.contexts
        if context.beans and context.beans[0].msg_id == args.msgId
        if context.trace_type in (TraceType.PUB, TraceType.SUB_AFTER)
    ]
    return Report(document, text.split("\n")[:-1] if text else [])


def _trace_message(found: FoundMessage, now_ms: int) -> TraceMessage:
    message = found.message
    body = message.body
    if message.sys_flag & COMPRESSED_FLAG:
        try:
            body = zlib.decompress(body)
        except zlib.error as exc:
            raise AdminError(
                f"trace message {found.msg_id} has a bad compressed body: {exc}"
            ) from None
    try:
        contexts = decode(body.decode("utf-8", "replace"), now_ms=now_ms)
    except TraceDecodeError as exc:
        raise AdminError(f"trace message {found.msg_id} does not decode: {exc}") from None
    return TraceMessage(born_host=message.born_host[0], contexts=tuple(contexts))


def _trace_document(context: TraceContext, client_host: str | None) -> dict[str, Any]:
    bean = context.beans[0]
    return {
        "type": "Pub" if context.trace_type is TraceType.PUB else "Sub",
        "group": context.group_name,
        "clientHost": client_host,
        "timestamp": context.timestamp_ms,
        "costTimeMs": context.cost_time_ms,
        "status": "success" if context.success else "failed",
        "msgId": bean.msg_id,
        "topic": bean.topic,
    }


async def query_msg_by_offset(admin: AdminClient, args: argparse.Namespace) -> Report:
    found = await admin.message_at(args.topic, args.brokerName, args.queueId, args.offset)
    return Report(_message_document(found), _message_lines(found))


async def send_message(admin: AdminClient, args: argparse.Namespace) -> Report:
    if args.qid is not None and args.broker is None:
        raise AdminError(
            "-i QUEUE_ID needs -b BROKER_NAME: a queue id only means something on one broker"
        )
    result = await admin.send_message(
        args.topic,
        args.body.encode("utf-8"),
        keys=args.key,
        tags=args.tags,
        broker_name=args.broker,
        queue_id=args.qid,
    )
    headers = ["#Broker Name", "#QID", "#Send Result", "#MsgId", "#OffsetMsgId"]
    row = [
        result.queue.broker_name,
        result.queue.queue_id,
        result.status.value,
        result.msg_id,
        result.offset_msg_id,
    ]
    document = {
        "brokerName": result.queue.broker_name,
        "queueId": result.queue.queue_id,
        "queueOffset": result.queue_offset,
        "sendStatus": result.status.value,
        "msgId": result.msg_id,
        "offsetMsgId": result.offset_msg_id,
    }
    return Report(document, table(headers, [row]))


async def consume_message(admin: AdminClient, args: argparse.Namespace) -> Report:
    if args.queueId is not None and args.brokerName is None:
        raise AdminError("-i QUEUE_ID needs -b BROKER_NAME: set the broker name before the queue")
    if args.offset is not None and args.queueId is None:
        raise AdminError("-o OFFSET needs -b BROKER_NAME and -i QUEUE_ID: set the queue first")
    found = await admin.consume(
        args.topic,
        broker_name=args.brokerName,
        queue_id=args.queueId,
        offset=args.offset,
        count=args.MessageNumber,
    )
    rows = [
        [
            f.broker_name,
            f.message.queue_id,
            f.message.queue_offset,
            f.msg_id,
            f.tags or "",
            f.keys or "",
            f.message.body.decode("utf-8", "replace"),
        ]
        for f in found
    ]
    headers = ["#Broker Name", "#QID", "#Offset", "#MsgId", "#Tags", "#Keys", "#Body"]
    lines = table(headers, rows) if found else [f"no message in topic {args.topic} to consume"]
    return Report([_message_document(f) for f in found], lines)
