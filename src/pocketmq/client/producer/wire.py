"""A send as it travels: the prepared message (body, flags, properties, ids) and the
SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE header built from it, and the answer read back; and a
timer message's recall (RECALL_MESSAGE), its header and answer.

A message is prepared once (its unique id made, its body compressed when large) and the same
bytes go to every broker a retry tries, so a retried message keeps its UNIQ_KEY and a consumer
can tell a duplicate from a new message.

Pure: the caller passes the clock reading.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from pocketmq.client.errors import MessageError, error_for_response
from pocketmq.client.message import (
    Message,
    MessageQueue,
    SendResult,
    SendStatus,
    UniqueIdGenerator,
    batch_msg_ids,
)
from pocketmq.common.batch import BatchError, encode_batch_body
from pocketmq.common.codes import ResponseCode
from pocketmq.common.constants import (
    COMPRESSED_FLAG,
    MAX_MESSAGE_SIZE_DEFAULT,
    PROPERTY_MSG_REGION,
    PROPERTY_WAIT_STORE_MSG_OK,
)
from pocketmq.common.properties import PropertyError, encode_properties
from pocketmq.common.recall_handle import RecallHandle, RecallHandleError, decode_recall_handle
from pocketmq.common.topic_names import (
    AUTO_CREATE_TOPIC_KEY_TOPIC,
    DLQ_GROUP_TOPIC_PREFIX,
    RETRY_GROUP_TOPIC_PREFIX,
    TopicError,
    validate_topic_name,
)
from pocketmq.remoting.command import RemotingCommand

AUTO_CREATE_TOPIC: Final = AUTO_CREATE_TOPIC_KEY_TOPIC
"""The topic whose route a producer borrows for a topic that does not exist yet."""
COMPRESS_OVER_BYTES_DEFAULT: Final = 4096
COMPRESS_LEVEL_DEFAULT: Final = 5

_STATUS_BY_CODE: Final[dict[int, SendStatus]] = {
    ResponseCode.SUCCESS: SendStatus.SEND_OK,
    ResponseCode.FLUSH_DISK_TIMEOUT: SendStatus.FLUSH_DISK_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: SendStatus.FLUSH_SLAVE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: SendStatus.SLAVE_NOT_AVAILABLE,
}


@dataclass(frozen=True, slots=True)
class PreparedSend:
    """One send request's payload, ready for any queue of its topic.

    Attributes:
        topic: The topic.
        body: The request body: the (maybe compressed) message body, or a batch body.
        properties: The header's properties string.
        sys_flag: RocketMQ's sysFlag (compressed bit).
        flag: The application flag.
        msg_ids: The unique id of each message (one unless a batch).
        batch: Whether the body is a batch.
    """

    topic: str
    body: bytes
    properties: str
    sys_flag: int
    flag: int
    msg_ids: tuple[str, ...]
    batch: bool = False

    def header(
        self, group: str, queue: MessageQueue, born_ms: int, default_topic_queue_nums: int
    ) -> dict[str, str]:
        """The SEND_MESSAGE_V2 header (one-letter names) for sending to `queue`."""
        return {
            "a": group,
            "b": self.topic,
            "c": AUTO_CREATE_TOPIC,
            "d": str(default_topic_queue_nums),
            "e": str(queue.queue_id),
            "f": str(self.sys_flag),
            "g": str(born_ms),
            "h": str(self.flag),
            "i": self.properties,
            "j": "0",
            "k": "false",
            "m": "true" if self.batch else "false",
            "n": queue.broker_name,
        }


def check_topic(topic: str) -> None:
    """Raises MessageError for a topic name RocketMQ refuses (the reason is in the message)."""
    try:
        validate_topic_name(topic)
    except TopicError as exc:
        raise MessageError(f"cannot send to {topic!r}: {exc}") from None


def prepare_message(
    message: Message,
    ids: UniqueIdGenerator,
    now_ms: int,
    *,
    compress_over_bytes: int = COMPRESS_OVER_BYTES_DEFAULT,
    compress_level: int = COMPRESS_LEVEL_DEFAULT,
    max_message_bytes: int = MAX_MESSAGE_SIZE_DEFAULT,
) -> PreparedSend:
    """Checks and encodes one message.

    Raises:
        MessageError: a bad topic, an empty or oversized body, or bad properties.
    """
    check_topic(message.topic)
    body = _checked_body(message, max_message_bytes)
    unique_id = ids.next(now_ms)
    try:
        properties = message.encode_properties(unique_id)
    except (PropertyError, ValueError) as exc:
        raise MessageError(f"cannot send to {message.topic}: {exc}") from None
    sys_flag = 0
    if len(body) > compress_over_bytes:
        compressed = zlib.compress(body, compress_level)
        if len(compressed) < len(body):
            body, sys_flag = compressed, COMPRESSED_FLAG
    return PreparedSend(message.topic, body, properties, sys_flag, message.flag, (unique_id,))


def prepare_batch(
    messages: Sequence[Message],
    ids: UniqueIdGenerator,
    now_ms: int,
    *,
    max_message_bytes: int = MAX_MESSAGE_SIZE_DEFAULT,
) -> PreparedSend:
    """Checks and encodes messages of one topic as one batch (RocketMQ's `MessageBatch`).

    Raises:
        MessageError: no messages, several topics, a delayed or timer message (batches cannot
            carry delays), differing `wait_store_msg_ok`, bad properties, or a batch over
            `max_message_bytes`.
    """
    if not messages:
        raise MessageError("a batch needs at least one message")
    topic = messages[0].topic
    check_topic(topic)
    wait = messages[0].wait_store_msg_ok
    entries = []
    unique_ids = ids.next_many(now_ms, len(messages))
    for index, message in enumerate(messages):
        if message.topic != topic:
            raise MessageError(
                f"a batch goes to one topic: message {index} is for {message.topic}, the first "
                f"for {topic}"
            )
        if message.delivers_later:
            raise MessageError(
                f"message {index}: delayed and timer messages cannot be sent in a batch"
            )
        if message.wait_store_msg_ok != wait:
            raise MessageError("every message of a batch needs the same wait_store_msg_ok")
        body = _checked_body(message, max_message_bytes)
        try:
            entries.append((message.flag, body, message.encode_properties(unique_ids[index])))
        except (PropertyError, ValueError) as exc:
            raise MessageError(f"message {index} of the batch: {exc}") from None
    try:
        body = encode_batch_body(entries)
    except BatchError as exc:
        raise MessageError(f"cannot encode the batch: {exc}") from None
    return prepared_batch(
        topic, body, unique_ids, wait_store_msg_ok=wait, max_message_bytes=max_message_bytes
    )


def prepared_batch(
    topic: str,
    body: bytes,
    unique_ids: Sequence[str],
    *,
    wait_store_msg_ok: bool = True,
    max_message_bytes: int = MAX_MESSAGE_SIZE_DEFAULT,
) -> PreparedSend:
    """The send of a batch body encoded already (`encode_batch_body`, or a caller's own
    encoder of the same layout), whose entries carry `unique_ids` as their UNIQ_KEY.

    Raises:
        MessageError: the body is over `max_message_bytes`.
    """
    if len(body) > max_message_bytes:
        raise MessageError(
            f"the batch is {len(body)} bytes, over the {max_message_bytes}-byte limit: send it "
            "in smaller batches"
        )
    properties = _WAIT_PROPERTIES[wait_store_msg_ok]
    return PreparedSend(topic, body, properties, 0, 0, tuple(unique_ids), batch=True)


_WAIT_PROPERTIES: Final = {
    wait: encode_properties({PROPERTY_WAIT_STORE_MSG_OK: None if wait else "false"})
    for wait in (True, False)
}


def _checked_body(message: Message, max_message_bytes: int) -> bytes:
    body = bytes(message.body)
    if not body:
        raise MessageError(f"cannot send to {message.topic}: the body is empty")
    if len(body) > max_message_bytes:
        raise MessageError(
            f"cannot send to {message.topic}: the body is {len(body)} bytes, over the "
            f"{max_message_bytes}-byte limit (maxMessageSize): split it or store it elsewhere"
        )
    return body


def read_send_response(
    response: RemotingCommand, prepared: PreparedSend, queue: MessageQueue, what: str
) -> SendResult:
    """The result of a send from the broker's answer.

    Raises:
        RocketMQError: the broker refused (the subclass by the response code).
    """
    status = _STATUS_BY_CODE.get(response.code)
    if status is None:
        raise error_for_response(response.code, response.remark, what)
    fields = response.ext_fields
    try:
        queue_id = int(fields.get("queueId", queue.queue_id))
        queue_offset = int(fields.get("queueOffset", -1))
    except ValueError:
        queue_id, queue_offset = queue.queue_id, -1
    return SendResult(
        status=status,
        msg_id=batch_msg_ids(prepared.msg_ids),
        offset_msg_id=fields.get("msgId", ""),
        queue=MessageQueue(queue.topic, queue.broker_name, queue_id),
        queue_offset=queue_offset,
        region_id=fields.get(PROPERTY_MSG_REGION) or "DefaultRegion",
        transaction_id=fields.get("transactionId") or None,
        recall_handle=fields.get("recallHandle") or None,
        durability=fields.get("durability") or None,
        replicas=_optional_int(fields.get("replicas")),
    )


def _optional_int(text: str | None) -> int | None:
    try:
        return int(text) if text else None
    except ValueError:
        return None


def split_batch_result(result: SendResult, prepared: PreparedSend) -> list[SendResult]:
    """One result per message of a batch sent as one request (for the automatic batcher)."""
    msg_ids = prepared.msg_ids
    count = len(msg_ids)
    offset_ids = result.offset_msg_id.split(",")[:count] if result.offset_msg_id else []
    offset_ids += [""] * (count - len(offset_ids))  # a broker that names fewer records
    first = result.queue_offset
    queue_offsets = range(first, first + count) if first >= 0 else [-1] * count
    status, queue, region_id = result.status, result.queue, result.region_id
    durability, replicas = result.durability, result.replicas
    return [
        SendResult(
            status=status,
            msg_id=msg_id,
            offset_msg_id=offset_id,
            queue=queue,
            queue_offset=queue_offset,
            region_id=region_id,
            durability=durability,
            replicas=replicas,
        )
        for msg_id, offset_id, queue_offset in zip(msg_ids, offset_ids, queue_offsets, strict=True)
    ]


def recall_request(
    group: str, topic: str, recall_handle: str
) -> tuple[RecallHandle, dict[str, str]]:
    """The decoded handle and the RECALL_MESSAGE header of a recall.

    Raises:
        MessageError: the topic name is bad, a retry or dead-letter topic, or the handle does
            not decode.
    """
    check_topic(topic)
    if topic.startswith((RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX)):
        raise MessageError(f"cannot recall in {topic}: retry and dead-letter topics")
    try:
        handle = decode_recall_handle(recall_handle)
    except RecallHandleError as exc:
        raise MessageError(f"cannot recall in {topic}: {exc}") from None
    header = {
        "producerGroup": group,
        "topic": topic,
        "recallHandle": recall_handle,
        "bname": handle.broker_name,
    }
    return handle, header


def read_recall_response(response: RemotingCommand, topic: str, handle: RecallHandle) -> str:
    """The recalled message's id, or the broker's refusal as an error."""
    if response.code != ResponseCode.SUCCESS:
        raise error_for_response(
            response.code, response.remark, f"recall in {topic} on {handle.broker_name}"
        )
    return response.ext_fields.get("msgId") or handle.message_id
