"""The HA service's settings, taken from `MessageStoreConfig` (RocketMQ keeps them there)."""

from __future__ import annotations

from dataclasses import dataclass

from pocketmq.store.config import MessageStoreConfig


@dataclass(frozen=True, slots=True)
class HASettings:
    """How replication behaves; times in seconds.

    Attributes:
        sync: A SYNC_MASTER: a put is acknowledged once a slave has its bytes.
        sync_timeout_s: How long a put waits for a slave (`syncFlushTimeout`).
        heartbeat_interval_s: Idle time after which each side sends a heartbeat.
        housekeeping_s: A peer silent this long is dropped (`haHousekeepingInterval`).
        transfer_batch: Most bytes in one frame (`haTransferBatchSize`).
        max_gap_not_in_sync: A slave this far behind does not count for a synchronous put
            (`haMaxGapNotInSync`): the put answers SLAVE_NOT_AVAILABLE at once.
    """

    sync: bool = False
    sync_timeout_s: float = 5.0
    heartbeat_interval_s: float = 5.0
    housekeeping_s: float = 20.0
    transfer_batch: int = 32 * 1024
    max_gap_not_in_sync: int = 256 * 1024 * 1024

    @classmethod
    def from_store_config(cls, config: MessageStoreConfig, *, sync: bool) -> HASettings:
        return cls(
            sync=sync,
            sync_timeout_s=config.sync_flush_timeout_ms / 1000,
            heartbeat_interval_s=config.ha_send_heartbeat_interval_ms / 1000,
            housekeeping_s=config.ha_housekeeping_interval_ms / 1000,
            transfer_batch=config.ha_transfer_batch_size,
            max_gap_not_in_sync=config.ha_max_gap_not_in_sync,
        )
