"""The pocketmq client: producers, consumers and admin for RocketMQ-protocol clusters.

Blocking calls, for scripts and threads:

    from pocketmq.client import Message, Producer

    with Producer("app", namesrv="127.0.0.1:9876") as producer:
        result = producer.send(Message("orders", b"..."))

The same classes as coroutines are in `pocketmq.client.aio`; both share one implementation
(the blocking ones run it on a background event loop thread).
"""

from pocketmq.client.blocking.admin import Admin
from pocketmq.client.blocking.lite_pull_consumer import LitePullConsumer
from pocketmq.client.blocking.loop import BackgroundLoop
from pocketmq.client.blocking.producer import Producer
from pocketmq.client.blocking.push_consumer import PushConsumer
from pocketmq.client.blocking.transaction_producer import TransactionProducer
from pocketmq.client.consumer.listener import ConsumeResult
from pocketmq.client.consumer.rebalance import (
    AllocateAveragely,
    AllocateAveragelyByCircle,
    AllocateConsistentHash,
    AllocateStrategy,
)
from pocketmq.client.errors import (
    BrokerBusyError,
    ClientConfigError,
    ConnectionFailedError,
    MessageError,
    PermissionDeniedError,
    RequestTimeoutError,
    RocketMQError,
    TopicNotFoundError,
)
from pocketmq.client.message import Message, MessageExt, MessageQueue, SendResult, SendStatus
from pocketmq.client.producer.producer import select_by_hash
from pocketmq.client.producer.transaction import (
    LocalTransactionState,
    TransactionListener,
    TransactionSendResult,
)
from pocketmq.common.consumer_modes import ConsumeFromWhere, MessageModel

__all__ = [
    "Admin",
    "AllocateAveragely",
    "AllocateAveragelyByCircle",
    "AllocateConsistentHash",
    "AllocateStrategy",
    "BackgroundLoop",
    "BrokerBusyError",
    "ClientConfigError",
    "ConnectionFailedError",
    "ConsumeFromWhere",
    "ConsumeResult",
    "LitePullConsumer",
    "LocalTransactionState",
    "Message",
    "MessageError",
    "MessageExt",
    "MessageModel",
    "MessageQueue",
    "PermissionDeniedError",
    "Producer",
    "PushConsumer",
    "RequestTimeoutError",
    "RocketMQError",
    "SendResult",
    "SendStatus",
    "TopicNotFoundError",
    "TransactionListener",
    "TransactionProducer",
    "TransactionSendResult",
    "select_by_hash",
]
