"""Pull bodies into the `MessageExt`s that consumers get, decoding only what is read.

A pull carries up to hundreds of records and a listener often reads only the body: each
record's fixed part is unpacked in one call, the body and topic sliced, and the properties kept
as their text until something reads them (`LazyProperties`). A record of another layout (IPv6
hosts, the V2 magic code, lengths that do not add up) or with a compressed body takes the
general decoder, which inflates the body or names what is wrong.
"""

from __future__ import annotations

from typing import Final

from pocketmq.client.message import MessageExt, MessageQueue
from pocketmq.common import stored_layout as layout
from pocketmq.common.constants import (
    COMPRESSED_FLAG,
    MESSAGE_MAGIC_CODE_V1,
    NAME_VALUE_SEPARATOR,
    PROPERTY_RETRY_TOPIC,
)
from pocketmq.common.properties import LazyProperties
from pocketmq.common.stored_layout import MIN_RECORD_SIZE
from pocketmq.common.stored_message import decode_record, host_v4

# Bound by assignment: see `stored_message` (the method-call fast path, once per record).
_FIXED_V4: Final = layout.FIXED_V4
_FIXED_V4_SIZE: Final = layout.FIXED_V4.size
_UNSIGNED_SHORT: Final = layout.UNSIGNED_SHORT
_UNCOMMON_FLAGS: Final = layout.V6_FLAGS | COMPRESSED_FLAG
_RETRY_TOPIC_KEY: Final = PROPERTY_RETRY_TOPIC + NAME_VALUE_SEPARATOR


def decode_pulled(body: bytes, queue: MessageQueue) -> list[MessageExt]:
    """The messages of a pull body read from `queue` (records back to back).

    Raises:
        MessageDecodeError: a record is torn or corrupt; nothing partial is returned.
        zlib.error: a record is flagged compressed but its body is not zlib data.
    """
    messages: list[MessageExt] = []
    unpack = _FIXED_V4.unpack_from
    unpack_short = _UNSIGNED_SHORT.unpack_from
    available = len(body)
    pos = 0
    while pos < available:
        if available - pos >= _FIXED_V4_SIZE:
            (
                size, magic, _, queue_id, flag, queue_offset, physical_offset, sys_flag,
                born_timestamp, born_host, store_timestamp, store_host, reconsume_times, _,
                body_len,
            ) = unpack(body, pos)  # fmt: skip
            end = pos + size
            body_pos = pos + _FIXED_V4_SIZE
            topic_pos = body_pos + body_len + 1  # past the topic's length byte
            if (
                magic == MESSAGE_MAGIC_CODE_V1
                and not sys_flag & _UNCOMMON_FLAGS
                and MIN_RECORD_SIZE <= size <= available - pos
                and body_len >= 0
                and topic_pos <= end
            ):
                properties_len_pos = topic_pos + body[topic_pos - 1]
                properties_pos = properties_len_pos + 2
                try:
                    if (
                        properties_pos <= end
                        and properties_pos + unpack_short(body, properties_len_pos)[0] == end
                    ):
                        stored_topic = body[topic_pos:properties_len_pos].decode()
                        text = body[properties_pos:end].decode()
                    else:
                        stored_topic = None
                except UnicodeDecodeError:
                    stored_topic = None  # the general decoder says which field
                if stored_topic is not None:
                    properties = LazyProperties(text)
                    topic = stored_topic
                    if _RETRY_TOPIC_KEY in text:  # redelivered: listeners see the original
                        topic = properties.get(PROPERTY_RETRY_TOPIC) or topic
                    messages.append(
                        MessageExt(
                            topic,
                            body[body_pos : topic_pos - 1],
                            properties,
                            queue
                            if queue.queue_id == queue_id and queue.topic == stored_topic
                            else MessageQueue(stored_topic, queue.broker_name, queue_id),
                            queue_offset,
                            physical_offset,
                            born_timestamp,
                            store_timestamp,
                            host_v4(born_host),
                            host_v4(store_host),
                            reconsume_times,
                            flag,
                            sys_flag,
                        )
                    )
                    pos = end
                    continue
        stored = decode_record(body, pos, check_crc=False)
        messages.append(MessageExt.from_stored(stored, queue.broker_name, pulled_from=queue))
        pos += stored.store_size
    return messages
