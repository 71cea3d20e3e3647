"""PULL_MESSAGE as a consumer sends it and reads the answer (`PullAPIWrapper`).

`pull_header` builds the request header (sysFlag bits: commit offset, suspend for long
polling, subscription carried); `read_pull_response` turns the answer into a `PullResult` of
decoded `MessageExt`s, re-checking tags exactly (the broker matches only tag hashes, which
collide) and dropping messages below the requested offset (a broker may return a whole batch).

Pure: bytes and headers in, values out.
"""

from __future__ import annotations

import enum
import zlib
from dataclasses import dataclass
from typing import Final

from pocketmq.client.errors import ProtocolError, error_for_response
from pocketmq.client.message import MessageExt, MessageQueue
from pocketmq.client.pulled import decode_pulled
from pocketmq.common.codes import ResponseCode
from pocketmq.common.constants import PROPERTY_TAGS
from pocketmq.common.stored_message import MessageDecodeError
from pocketmq.common.subscription import SubscriptionData, is_tag_type
from pocketmq.remoting.command import RemotingCommand

FLAG_COMMIT_OFFSET: Final = 0x1
FLAG_SUSPEND: Final = 0x2
FLAG_SUBSCRIPTION: Final = 0x4


class PullStatus(enum.Enum):
    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    NO_MATCHED_MSG = "NO_MATCHED_MSG"
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"


_STATUS_BY_CODE: Final[dict[int, PullStatus]] = {
    ResponseCode.SUCCESS: PullStatus.FOUND,
    ResponseCode.PULL_NOT_FOUND: PullStatus.NO_NEW_MSG,
    ResponseCode.PULL_RETRY_IMMEDIATELY: PullStatus.NO_MATCHED_MSG,
    ResponseCode.PULL_OFFSET_MOVED: PullStatus.OFFSET_ILLEGAL,
}


@dataclass(frozen=True, slots=True)
class PullResult:
    """One pull's outcome.

    Attributes:
        status: See `PullStatus`.
        next_begin_offset: Where the next pull of this queue starts.
        min_offset: The queue's oldest readable offset.
        max_offset: The offset after the queue's newest message.
        messages: What matched the subscription, in queue order.
        suggest_which_broker_id: The replica the broker suggests for the next pull.
    """

    status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: list[MessageExt]
    suggest_which_broker_id: int = 0


def pull_header(
    group: str,
    queue: MessageQueue,
    offset: int,
    subscription: SubscriptionData,
    *,
    max_nums: int,
    commit_offset: int = 0,
    suspend_timeout_ms: int = 0,
) -> dict[str, str]:
    """The PULL_MESSAGE header for one queue.

    Args:
        group: The consumer group.
        queue: The queue.
        offset: The first queue offset wanted.
        subscription: The expression the broker filters with (always sent, so a broker that
            has not seen this consumer's heartbeat yet filters correctly).
        max_nums: At most this many messages.
        commit_offset: When > 0, the broker commits it for the group with the pull (saves an
            UPDATE_CONSUMER_OFFSET request).
        suspend_timeout_ms: When > 0, the broker holds the pull this long waiting for a new
            message (long polling).
    """
    sys_flag = FLAG_SUBSCRIPTION
    if commit_offset > 0:
        sys_flag |= FLAG_COMMIT_OFFSET
    if suspend_timeout_ms > 0:
        sys_flag |= FLAG_SUSPEND
    return {
        "consumerGroup": group,
        "topic": queue.topic,
        "queueId": str(queue.queue_id),
        "queueOffset": str(offset),
        "maxMsgNums": str(max_nums),
        "sysFlag": str(sys_flag),
        "commitOffset": str(max(commit_offset, 0)),
        "suspendTimeoutMillis": str(suspend_timeout_ms),
        "subscription": subscription.sub_string,
        "subVersion": str(subscription.sub_version),
        "expressionType": subscription.expression_type,
    }


def read_pull_response(
    response: RemotingCommand,
    queue: MessageQueue,
    offset: int,
    subscription: SubscriptionData,
    what: str,
) -> PullResult:
    """The result of a pull.

    Raises:
        RocketMQError: the broker refused (no permission, bad subscription, busy ...).
        ProtocolError: the body is not stored messages.
    """
    status = _STATUS_BY_CODE.get(response.code)
    if status is None:
        raise error_for_response(response.code, response.remark, what)
    fields = response.ext_fields
    try:
        next_begin = int(fields.get("nextBeginOffset", offset))
        min_offset = int(fields.get("minOffset", 0))
        max_offset = int(fields.get("maxOffset", 0))
        suggest = int(fields.get("suggestWhichBrokerId", 0))
    except ValueError:
        raise ProtocolError(f"{what}: the answer's offsets are not numbers: {fields}") from None
    messages: list[MessageExt] = []
    if status is PullStatus.FOUND and response.body:
        try:
            pulled = decode_pulled(response.body, queue)
        except MessageDecodeError as exc:
            raise ProtocolError(f"{what}: the broker sent bad messages: {exc}") from None
        except zlib.error as exc:
            raise ProtocolError(
                f"{what}: a message is flagged compressed but is not zlib data: {exc}"
            ) from None
        tags_wanted = (
            subscription.tags_set
            if is_tag_type(subscription.expression_type) and not subscription.takes_all
            else None
        )
        for message in pulled:
            if message.queue_offset < offset:
                continue
            if tags_wanted is not None and message.properties.get(PROPERTY_TAGS) not in tags_wanted:
                continue
            messages.append(message)
    return PullResult(status, next_begin, min_offset, max_offset, messages, suggest)
