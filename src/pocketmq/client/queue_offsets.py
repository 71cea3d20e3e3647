"""A queue's bounds on its broker: min and max offset, and the offset of a point in time
(GET_MIN_OFFSET, GET_MAX_OFFSET, SEARCH_OFFSET_BY_TIMESTAMP).

Consumers use them to start where `consume_from_where` says, and `seek` to jump.
"""

from __future__ import annotations

from pocketmq.client.errors import ConnectionFailedError, error_for_response
from pocketmq.client.instance import ClientInstance
from pocketmq.client.message import MessageQueue
from pocketmq.common.codes import RequestCode, ResponseCode


async def _ask(instance: ClientInstance, queue: MessageQueue, code: int, **extra: str) -> int:
    address = instance.routes.any_address(queue.broker_name)
    if address is None:
        await instance.fetch_route(queue.topic)
        address = instance.routes.any_address(queue.broker_name)
    if address is None:
        raise ConnectionFailedError(f"broker {queue.broker_name} has no known address")
    fields = {"topic": queue.topic, "queueId": str(queue.queue_id), **extra}
    response = await instance.invoke(address, code, fields)
    if response.code != ResponseCode.SUCCESS:
        raise error_for_response(response.code, response.remark, f"offset lookup of {queue}")
    return int(response.ext_fields.get("offset", 0))


async def min_offset(instance: ClientInstance, queue: MessageQueue) -> int:
    """The oldest offset still readable in `queue`.

    Raises:
        RocketMQError: the broker cannot be asked or refuses.
    """
    return await _ask(instance, queue, RequestCode.GET_MIN_OFFSET)


async def max_offset(instance: ClientInstance, queue: MessageQueue) -> int:
    """The offset after the newest message of `queue` (0 when empty).

    Raises:
        RocketMQError: the broker cannot be asked or refuses.
    """
    return await _ask(instance, queue, RequestCode.GET_MAX_OFFSET)


async def offset_at(instance: ClientInstance, queue: MessageQueue, timestamp_ms: int) -> int:
    """The first offset of `queue` stored at or after `timestamp_ms`.

    Raises:
        RocketMQError: the broker cannot be asked or refuses.
    """
    return await _ask(
        instance, queue, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, timestamp=str(timestamp_ms)
    )
