"""The admin client: what `mqadmin` asks NameServers and brokers, as asyncio calls.

`AdminClient` (also `pocketmq.client.aio.Admin`) runs on the client's `ClientInstance` for its
connections, NameServer failover and routes, and on the producer's and consumer's wire code for
sends and pulls; it never starts the instance's heartbeats or rebalancing. Every failure is one
`AdminError` (a `RocketMQError`) whose message says what went wrong and what to do next
("topic X does not exist: create it with updateTopic -t X -c DefaultCluster").

Modules: `lookups` (requests, NameServer lookups), `messages` (find, read, send messages),
`client` (topics, brokers, offsets, groups), `values` (what operations return), `decoders`
(pure body readers), `errors`.
"""

from pocketmq.client.admin.client import Admin, AdminClient
from pocketmq.client.admin.errors import AdminError
from pocketmq.client.admin.values import (
    ConsumeProgress,
    FoundMessage,
    PullBatch,
    QueueProgress,
    QueueStats,
    RawPull,
    SubscriptionGroupSettings,
    TopicSettings,
    TopicStats,
)

__all__ = [
    "Admin",
    "AdminClient",
    "AdminError",
    "ConsumeProgress",
    "FoundMessage",
    "PullBatch",
    "QueueProgress",
    "QueueStats",
    "RawPull",
    "SubscriptionGroupSettings",
    "TopicSettings",
    "TopicStats",
]
