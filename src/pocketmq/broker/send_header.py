"""The header of a send request (`SendMessageRequestHeader`), in either of its key sets: V1 long
names for SEND_MESSAGE (10), the V2 letters `a`..`n` for SEND_MESSAGE_V2 (310) and
SEND_BATCH_MESSAGE (320)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, NamedTuple

from pocketmq.broker.headers import (
    INT_DIGITS,
    HeaderError,
    optional_int,
    required_int,
    required_long,
    required_text,
)
from pocketmq.common.codes import RequestCode
from pocketmq.remoting.command import RemotingCommand


class SendRequestHeader(NamedTuple):
    """A send request's header, whichever key set it came in (`SendMessageRequestHeader`).

    A tuple: one is built for every send request, and a tuple is built in half the time of a
    frozen dataclass."""

    producer_group: str
    topic: str
    default_topic: str
    default_topic_queue_nums: int
    queue_id: int
    sys_flag: int
    born_timestamp: int
    flag: int
    properties: str = ""
    reconsume_times: int = 0
    unit_mode: bool = False
    max_reconsume_times: int | None = None
    batch: bool = False
    broker_name: str | None = None


class _HeaderKeys(NamedTuple):
    """The ext field names of one header version, by `SendRequestHeader` attribute."""

    producer_group: str
    topic: str
    default_topic: str
    default_topic_queue_nums: str
    queue_id: str
    sys_flag: str
    born_timestamp: str
    flag: str
    properties: str
    reconsume_times: str
    unit_mode: str
    max_reconsume_times: str
    batch: str
    broker_name: str


_V1_KEYS: Final = _HeaderKeys(
    "producerGroup",
    "topic",
    "defaultTopic",
    "defaultTopicQueueNums",
    "queueId",
    "sysFlag",
    "bornTimestamp",
    "flag",
    "properties",
    "reconsumeTimes",
    "unitMode",
    "maxReconsumeTimes",
    "batch",
    "bname",  # from the 5.x `TopicRequestHeader` base class
)
_V2_KEYS: Final = _HeaderKeys(*"abcdefghijklmn")


def decode_send_header(command: RemotingCommand) -> SendRequestHeader:
    """Reads the header of a send request.

    Code 10 carries V1 names (`producerGroup`, `topic`, ...), codes 310 and 320 the V2 letters
    `a`..`n`. Numbers are parsed as Java's `Integer.parseInt` / `Long.parseLong` would, so
    values a C++ client sent as JSON numbers (already strings here) parse alike. A batch is
    marked by the `batch`/`m` flag ("true" in any case, or "1" as the C++ client sends it) or
    by code 320.

    Args:
        command: A request with code SEND_MESSAGE, SEND_MESSAGE_V2 or SEND_BATCH_MESSAGE.

    Returns:
        The decoded header.

    Raises:
        HeaderError: a required field is missing, a number does not parse or does not fit its
            Java type, or the code is not a send code. The message names the field; the
            handler answers with it as the remark.
    """
    code = command.code
    if code == RequestCode.SEND_MESSAGE:
        keys = _V1_KEYS
    elif code in (RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE):
        keys = _V2_KEYS
    else:
        raise HeaderError(f"the request code {code} is not a send request", "code")
    fields = command.ext_fields
    return _usual_header(fields, keys, code) or _careful_header(fields, keys, code)


def _careful_header(fields: Mapping[str, str], keys: _HeaderKeys, code: int) -> SendRequestHeader:
    """Any header, field by field, raising `HeaderError` for the first bad one."""
    reconsume_times = _optional_int(fields, keys.reconsume_times)
    return SendRequestHeader(
        producer_group=required_text(fields, keys.producer_group),
        topic=required_text(fields, keys.topic),
        default_topic=required_text(fields, keys.default_topic),
        default_topic_queue_nums=required_int(fields, keys.default_topic_queue_nums),
        queue_id=required_int(fields, keys.queue_id),
        sys_flag=required_int(fields, keys.sys_flag),
        born_timestamp=required_long(fields, keys.born_timestamp),
        flag=required_int(fields, keys.flag),
        properties=fields.get(keys.properties) or "",
        reconsume_times=reconsume_times or 0,
        unit_mode=_flag(fields, keys.unit_mode),
        max_reconsume_times=_optional_int(fields, keys.max_reconsume_times),
        batch=_flag(fields, keys.batch) or code == RequestCode.SEND_BATCH_MESSAGE,
        broker_name=fields.get(keys.broker_name) or None,
    )


def _usual_header(
    fields: Mapping[str, str], keys: _HeaderKeys, code: int
) -> SendRequestHeader | None:
    """The header of the usual send, read in one pass; None for anything else (a field
    missing, a sign, more digits than surely fit), which the careful path then reads or
    refuses field by field. A send request comes for every message a client sends one by one,
    and this reads it in about a third of the careful path's time."""
    get = fields.get
    queue_nums = get(keys.default_topic_queue_nums)
    queue_id = get(keys.queue_id)
    sys_flag = get(keys.sys_flag)
    born = get(keys.born_timestamp)
    flag = get(keys.flag)
    reconsume = get(keys.reconsume_times) or "0"
    if (
        queue_nums is None
        or queue_id is None
        or sys_flag is None
        or born is None
        or flag is None
        or not 0 < len(queue_nums) <= INT_DIGITS
        or not 0 < len(queue_id) <= INT_DIGITS
        or not 0 < len(sys_flag) <= INT_DIGITS
        or not 0 < len(born) <= 2 * INT_DIGITS
        or not 0 < len(flag) <= INT_DIGITS
        or len(reconsume) > INT_DIGITS
    ):
        return None
    digits = queue_nums + queue_id + sys_flag + born + flag + reconsume
    producer_group = get(keys.producer_group)
    topic = get(keys.topic)
    default_topic = get(keys.default_topic)
    if (
        not digits.isdigit()
        or not digits.isascii()
        or producer_group is None
        or topic is None
        or default_topic is None
        or get(keys.max_reconsume_times)
    ):
        return None
    return SendRequestHeader(
        producer_group,
        topic,
        default_topic,
        int(queue_nums),
        int(queue_id),
        int(sys_flag),
        int(born),
        int(flag),
        get(keys.properties) or "",
        int(reconsume),
        _flag(fields, keys.unit_mode),
        None,
        _flag(fields, keys.batch) or code == RequestCode.SEND_BATCH_MESSAGE,
        get(keys.broker_name) or None,
    )


def _optional_int(fields: Mapping[str, str], key: str) -> int | None:
    if not fields.get(key):  # absent, or the empty string some clients send for "not set"
        return None
    return optional_int(fields, key)


def _flag(fields: Mapping[str, str], key: str) -> bool:
    value = fields.get(key)
    return value is not None and (value.lower() == "true" or value == "1")
