"""What consuming pulled messages needs of its push consumer, seen by the concurrent and the
orderly consume services (`ConsumingConsumer`: a protocol, so the services never import the
consumer that owns them), and handing a failed message back to the broker
(CONSUMER_SEND_MSG_BACK).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Protocol

from pocketmq.client.consumer.listener import ListenerCalls
from pocketmq.client.consumer.process_queue import ProcessQueue
from pocketmq.client.errors import RocketMQError
from pocketmq.client.instance import ClientInstance
from pocketmq.client.message import MessageExt, MessageQueue
from pocketmq.common.codes import RequestCode, ResponseCode
from pocketmq.common.consumer_modes import MessageModel

log = logging.getLogger(__name__)


class ConsumingConsumer(Protocol):
    """The push consumer as its consume services use it."""

    group: str
    instance: ClientInstance
    message_model: MessageModel
    consume_slots: asyncio.Semaphore
    """Bounds the listener calls running at once."""
    consume_batch_max_size: int
    max_reconsume_times: int
    local_retry_delay_s: float

    @property
    def listener_calls(self) -> ListenerCalls: ...

    def finished(
        self, queue: MessageQueue, process_queue: ProcessQueue, messages: list[MessageExt]
    ) -> None:
        """Marks messages done and moves the queue's offset (unless the queue moved away)."""
        ...

    async def send_back(self, message: MessageExt, *, delay_level: int = 0) -> bool:
        """Hands a failed message back to its broker; whether the broker took it."""
        ...


async def send_back(
    instance: ClientInstance,
    group: str,
    message: MessageExt,
    *,
    max_reconsume_times: int,
    delay_level: int = 0,
) -> bool:
    """Hands a failed message back to its broker (CONSUMER_SEND_MSG_BACK).

    Args:
        instance: The client instance of the consumer.
        group: The consumer group.
        message: The message.
        max_reconsume_times: Deliveries before the broker moves it to the dead-letter queue.
        delay_level: 0 lets the broker pick a growing delay; -1 sends it straight to
            the dead-letter queue.

    Returns:
        Whether the broker took it.
    """
    address = instance.routes.master_address(message.queue.broker_name)
    if address is None:
        return False
    header = {
        "offset": str(message.commit_log_offset),
        "group": group,
        "delayLevel": str(delay_level),
        "originMsgId": message.msg_id,
        "originTopic": message.topic,
        "unitMode": "false",
        "maxReconsumeTimes": str(max_reconsume_times),
    }
    try:
        response = await instance.invoke(address, RequestCode.CONSUMER_SEND_MSG_BACK, header)
    except RocketMQError as exc:
        log.debug("send-back of %s failed: %s", message.msg_id, exc)
        return False
    if response.code != ResponseCode.SUCCESS:
        log.debug("broker refused send-back of %s: %s", message.msg_id, response.remark)
        return False
    return True
