"""The asyncio client API: producers, consumers and admin as coroutines.

    from pocketmq.client.aio import Message, Producer

    async with Producer("app", namesrv="127.0.0.1:9876") as producer:
        await producer.send(Message("orders", b"..."))

`pocketmq.client` offers the same classes as blocking calls.
"""

from pocketmq.client.admin import Admin
from pocketmq.client.consumer.listener import ConsumeResult, Listener
from pocketmq.client.consumer.lite_pull import LitePullConsumer
from pocketmq.client.consumer.push import PushConsumer
from pocketmq.client.consumer.rebalance import (
    AllocateAveragely,
    AllocateAveragelyByCircle,
    AllocateConsistentHash,
    AllocateStrategy,
)
from pocketmq.client.errors import RocketMQError
from pocketmq.client.instance import ClientInstance
from pocketmq.client.message import Message, MessageExt, MessageQueue, SendResult, SendStatus
from pocketmq.client.producer.producer import Producer, QueueSelector, select_by_hash
from pocketmq.client.producer.transaction import (
    LocalTransactionState,
    TransactionListener,
    TransactionProducer,
    TransactionSendResult,
)
from pocketmq.common.consumer_modes import ConsumeFromWhere, MessageModel

__all__ = [
    "Admin",
    "AllocateAveragely",
    "AllocateAveragelyByCircle",
    "AllocateConsistentHash",
    "AllocateStrategy",
    "ClientInstance",
    "ConsumeFromWhere",
    "ConsumeResult",
    "Listener",
    "LitePullConsumer",
    "LocalTransactionState",
    "Message",
    "MessageExt",
    "MessageModel",
    "MessageQueue",
    "Producer",
    "PushConsumer",
    "QueueSelector",
    "RocketMQError",
    "SendResult",
    "SendStatus",
    "TransactionListener",
    "TransactionProducer",
    "TransactionSendResult",
    "select_by_hash",
]
