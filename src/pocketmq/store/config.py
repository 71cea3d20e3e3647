"""The storage engine's settings, under RocketMQ's `MessageStoreConfig` key names.

Each field carries its RocketMQ property key in `metadata["key"]` (and old spellings in
`metadata["aliases"]`), so an existing `broker.properties` file configures the store as is.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from pocketmq.common.config import key
from pocketmq.common.constants import (
    COMMITLOG_FILE_SIZE_DEFAULT,
    CONSUME_QUEUE_FILE_UNITS_DEFAULT,
    CONSUME_QUEUE_UNIT_SIZE,
    MAX_MESSAGE_SIZE_DEFAULT,
)


class FlushDiskType(enum.Enum):
    """When an appended message counts as stored (`flushDiskType`)."""

    ASYNC_FLUSH = "ASYNC_FLUSH"
    SYNC_FLUSH = "SYNC_FLUSH"


@dataclass
class MessageStoreConfig:
    """Settings of one message store; defaults are RocketMQ's."""

    store_path_root_dir: str = key("storePathRootDir", "store")
    # Empty: `<storePathRootDir>/commitlog`, where RocketMQ's sample files point it too.
    store_path_commit_log: str = key("storePathCommitLog", "")
    mapped_file_size_commit_log: int = key(
        "mappedFileSizeCommitLog", COMMITLOG_FILE_SIZE_DEFAULT, "mapedFileSizeCommitLog"
    )
    mapped_file_size_consume_queue: int = key(
        "mappedFileSizeConsumeQueue",
        CONSUME_QUEUE_FILE_UNITS_DEFAULT * CONSUME_QUEUE_UNIT_SIZE,
        "mapedFileSizeConsumeQueue",
    )
    flush_disk_type: FlushDiskType = key("flushDiskType", FlushDiskType.ASYNC_FLUSH)
    flush_interval_commit_log_ms: int = key("flushIntervalCommitLog", 500)
    flush_interval_consume_queue_ms: int = key("flushIntervalConsumeQueue", 1000)
    sync_flush_timeout_ms: int = key("syncFlushTimeout", 5000)
    message_delay_level: str = key(
        "messageDelayLevel", "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
    )
    max_message_size: int = key("maxMessageSize", MAX_MESSAGE_SIZE_DEFAULT)
    file_reserved_time_hours: float = key("fileReservedTime", 72)
    delete_when: str = key("deleteWhen", "04")
    disk_max_used_space_ratio: int = key("diskMaxUsedSpaceRatio", 75)
    clean_resource_interval_ms: int = key("cleanResourceInterval", 10000)
    max_hash_slot_num: int = key("maxHashSlotNum", 5_000_000)
    max_index_num: int = key("maxIndexNum", 20_000_000)
    message_index_enable: bool = key("messageIndexEnable", True)
    warm_mapped_file_enable: bool = key("warmMapedFileEnable", False)
    # pocketmq's: the CommitLog pages kept mapped behind its durable end (`release_pages`).
    commit_log_resident_window: int = key("commitLogResidentWindow", 32 * 1024 * 1024, minimum=0)
    # A pull reading further behind the head than this share of memory is pointed at a slave.
    access_message_in_memory_max_ratio: int = key("accessMessageInMemoryMaxRatio", 40)
    # What one pull carries at most, whatever the client asks (bulk readers such as the Spark
    # connector read faster with more per pull).
    max_transfer_count_on_message_in_memory: int = key("maxTransferCountOnMessageInMemory", 32)
    max_transfer_bytes_on_message_in_memory: int = key(
        "maxTransferBytesOnMessageInMemory", 256 * 1024
    )
    # Master/Slave replication (`broker/ha`). haListenPort -1: listenPort + 1.
    ha_listen_port: int = key("haListenPort", -1)
    ha_master_address: str = key("haMasterAddress", "")
    ha_send_heartbeat_interval_ms: int = key("haSendHeartbeatInterval", 5000)
    ha_housekeeping_interval_ms: int = key("haHousekeepingInterval", 20_000)
    ha_transfer_batch_size: int = key("haTransferBatchSize", 32 * 1024)
    ha_max_gap_not_in_sync: int = key("haMaxGapNotInSync", 256 * 1024 * 1024)
    # Controller mode's write rule (`broker/controlled`): which copies a put waits for.
    all_ack_in_sync_state_set: bool = key("allAckInSyncStateSet", False)
    in_sync_replicas: int = key("inSyncReplicas", 1, minimum=1)
    min_in_sync_replicas: int = key("minInSyncReplicas", 1, minimum=1)
    enable_auto_in_sync_replicas: bool = key("enableAutoInSyncReplicas", False)
    ha_max_time_slave_not_catchup_ms: int = key("haMaxTimeSlaveNotCatchup", 15_000, minimum=1)
    # pocketmq's: a slave this close to the acknowledged end is held for (SEMI_SYNC), at most
    # this long under QoS AVAILABILITY.
    ha_semi_sync_gap: int = key("haSemiSyncGapBytes", 4 * 1024 * 1024, minimum=0)
    ha_semi_sync_hold_ms: int = key("haSemiSyncHoldMs", 1_000, minimum=0)
    store_path_epoch_file: str = key("storePathEpochFile", "")
    # Timer messages (`TimerMessageStore`): any delivery time up to timerMaxDelaySec ahead.
    timer_wheel_enable: bool = key("timerWheelEnable", True)
    timer_precision_ms: int = key("timerPrecisionMs", 1000)
    timer_max_delay_sec: int = key("timerMaxDelaySec", 3 * 24 * 3600)
    timer_flush_interval_ms: int = key("timerFlushIntervalMs", 1000)
    mapped_file_size_timer_log: int = key("mappedFileSizeTimerLog", 100 * 1024 * 1024)
