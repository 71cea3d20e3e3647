"""Moving a consumer group's offsets to a time: mqadmin's `resetOffsetByTime`,
`resetOffsetByTimeOld` and `skipAccumulatedMessage`.

`reset_by_time` asks each broker of the topic to reset (INVOKE_BROKER_TO_RESET_OFFSET, 222):
the broker commits the offsets at the time and tells the group's online consumers, which read
from there at once. A broker that answers CONSUMER_NOT_ONLINE (RocketMQ 4, whose brokers reset
only through online consumers) gets the old way instead, as mqadmin does: `reset_by_time_old`
commits each queue's offset at the time with UPDATE_CONSUMER_OFFSET, from the group's progress
(`resetOffsetByTimestampOld`). A timestamp of -1 means the end of each queue (skip everything
accumulated).
"""

from __future__ import annotations

from dataclasses import dataclass

from pocketmq.client.admin.client import AdminClient
from pocketmq.client.admin.errors import AdminError, check
from pocketmq.client.consumer.offset_reset import OffsetResetError, decode_reset_offsets
from pocketmq.client.message import MessageQueue
from pocketmq.common.codes import LanguageCode, RequestCode, ResponseCode
from pocketmq.common.route import MASTER_ID
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.errors import RemotingError


@dataclass(frozen=True, slots=True)
class RollbackStats:
    """One queue of an old-way reset (`RollbackStats`)."""

    queue: MessageQueue
    broker_offset: int
    consumer_offset: int
    timestamp_offset: int
    rollback_offset: int


class ConsumerNotOnline(AdminError):
    """A broker that resets only through online consumers found none (CONSUMER_NOT_ONLINE)."""


async def reset_by_time(
    admin: AdminClient,
    group: str,
    topic: str,
    timestamp_ms: int,
    *,
    force: bool = True,
    cpp: bool = False,
) -> dict[MessageQueue, int]:
    """Resets `group`'s offsets of `topic` on every broker of it; returns the new offsets.

    Raises:
        ConsumerNotOnline: a broker needs an online consumer for it (use `reset_by_time_old`).
        AdminError: no route, unknown group or topic, or a broker failed.
    """
    route = await admin.topic_route(topic)
    offsets: dict[MessageQueue, int] = {}
    fields = {
        "topic": topic,
        "group": group,
        "timestamp": str(timestamp_ms),
        "isForce": "true" if force else "false",
        "offset": "-1",
    }
    for data in sorted(route.broker_datas, key=lambda d: d.broker_name):
        address = data.broker_addrs.get(MASTER_ID) or next(iter(data.broker_addrs.values()), None)
        if address is None:
            continue
        response = await _ask(admin, address, fields, cpp=cpp)
        if response.code == ResponseCode.CONSUMER_NOT_ONLINE:
            raise ConsumerNotOnline(response.remark or "consumer not online", response.code)
        check(response, "offset reset", f"broker {address}")
        if not response.body:
            continue
        try:
            offsets.update(decode_reset_offsets(response.body))
        except OffsetResetError as exc:
            raise AdminError(f"broker {address} sent a bad reset answer: {exc}") from None
    return offsets


async def _ask(
    admin: AdminClient, address: str, fields: dict[str, str], *, cpp: bool
) -> RemotingCommand:
    request = RemotingCommand.request(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, fields)
    if cpp:
        # The broker then tells consumers in the C++ client's body form.
        request.language = LanguageCode.CPP
    try:
        return await admin.instance.remoting.invoke(
            address, request, admin.instance.request_timeout_s
        )
    except (RemotingError, OSError) as exc:
        raise AdminError(f"cannot reset offsets on broker {address}: {exc}") from None


async def reset_by_time_old(
    admin: AdminClient, group: str, topic: str, timestamp_ms: int, *, force: bool = True
) -> list[RollbackStats]:
    """Commits each queue's offset at `timestamp_ms` (-1: its end) for `group`, from the
    group's progress; without `force`, only where that moves the offset back or keeps it.

    Raises:
        AdminError: the group has no progress in `topic`, or a broker failed.
    """
    progress = await admin.consume_progress(group, topic)
    route = await admin.topic_route(topic)
    addresses = {
        d.broker_name: d.broker_addrs[MASTER_ID]
        for d in route.broker_datas
        if MASTER_ID in d.broker_addrs
    }
    stats = []
    for row in progress.queues:
        queue = row.queue
        address = addresses.get(queue.broker_name)
        if queue.topic != topic or address is None:
            continue
        if timestamp_ms == -1:
            at = await admin.max_offset(address, topic, queue.queue_id)
        else:
            at = await admin.offset_at(address, topic, queue.queue_id, timestamp_ms)
        rollback = row.consumer_offset
        if force or at <= row.consumer_offset:
            rollback = at
            await admin.update_consumer_offset(address, group, topic, queue.queue_id, at)
        stats.append(RollbackStats(queue, row.broker_offset, row.consumer_offset, at, rollback))
    return stats
