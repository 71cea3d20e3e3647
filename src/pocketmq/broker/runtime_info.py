"""GET_BROKER_RUNTIME_INFO's table: what a running broker reports about itself
(`fetchBrokerRuntimeInfo`), every value a string as RocketMQ's `KVTable` holds them."""

from __future__ import annotations

from pocketmq.broker.config import BrokerConfig
from pocketmq.broker.delay_delivery import DelayDelivery
from pocketmq.store.message_store import MessageStore
from pocketmq.store.timer import TimerMessageStore


def runtime_table(
    config: BrokerConfig,
    store: MessageStore,
    *,
    started_ms: int,
    topic_count: int,
    client_connections: int,
    pulled_messages: int,
    delay_delivery: DelayDelivery | None,
    timer_store: TimerMessageStore | None,
    role: str | None = None,
) -> dict[str, str]:
    """`role` replaces `brokerRole` where it changes at run time (a DLedger replica)."""
    return {
        "brokerVersionDesc": "pocketmq",
        "brokerRole": role or config.broker_role.value,
        "bootTimestamp": str(started_ms),
        "commitLogMinOffset": str(store.min_phy_offset),
        "commitLogMaxOffset": str(store.max_phy_offset),
        "dispatchBehindBytes": str(store.max_phy_offset - store.dispatcher.reput_offset),
        "topicCount": str(topic_count),
        "clientConnections": str(client_connections),
        "pulledMessageCount": str(pulled_messages),
        **(delay_delivery.runtime_stats() if delay_delivery else {}),
        **(timer_store.runtime_stats() if timer_store else {}),
    }
