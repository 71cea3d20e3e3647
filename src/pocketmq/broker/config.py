"""The broker's settings under RocketMQ's `BrokerConfig` / `NettyServerConfig` key names.

Storage settings live in `pocketmq.store.config.MessageStoreConfig`; a `broker.properties` file
is applied to both (`apply_properties` returns what neither knew).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from pocketmq.common.config import key


class BrokerRole(enum.Enum):
    """`brokerRole`: fixed roles of the Master/Slave deployment mode."""

    ASYNC_MASTER = "ASYNC_MASTER"
    SYNC_MASTER = "SYNC_MASTER"
    SLAVE = "SLAVE"


@dataclass
class BrokerConfig:
    """Settings of one broker; defaults are RocketMQ's."""

    broker_cluster_name: str = key("brokerClusterName", "DefaultCluster")
    broker_name: str = key("brokerName", "broker-a")
    # -1 as in RocketMQ's controller-mode files: the controller assigns the id.
    broker_id: int = key("brokerId", 0, minimum=-1)
    broker_role: BrokerRole = key("brokerRole", BrokerRole.ASYNC_MASTER)
    namesrv_addr: str = key("namesrvAddr", "")
    listen_port: int = key("listenPort", 10911)
    # Where the broker listens; `broker_ip1` is what clients are told to connect to.
    bind_address: str = key("bindAddress", "0.0.0.0")
    broker_ip1: str = key("brokerIP1", "")
    broker_ip2: str = key("brokerIP2", "")
    broker_permission: int = key("brokerPermission", 6, minimum=0, maximum=7)
    auto_create_topic_enable: bool = key("autoCreateTopicEnable", True)
    auto_create_subscription_group: bool = key("autoCreateSubscriptionGroup", True)
    default_topic_queue_nums: int = key("defaultTopicQueueNums", 8, minimum=1)
    cluster_topic_enable: bool = key("clusterTopicEnable", True)
    broker_topic_enable: bool = key("brokerTopicEnable", True)
    region_id: str = key("regionId", "DefaultRegion")
    trace_on: bool = key("traceOn", True)
    trace_topic_enable: bool = key("traceTopicEnable", False)
    msg_trace_topic_name: str = key("msgTraceTopicName", "RMQ_SYS_TRACE_TOPIC")
    long_polling_enable: bool = key("longPollingEnable", True)
    short_polling_time_mills: int = key("shortPollingTimeMills", 1000)
    register_name_server_period_ms: int = key("registerNameServerPeriod", 30_000)
    register_broker_timeout_ms: int = key("registerBrokerTimeoutMills", 24_000)
    flush_consumer_offset_interval_ms: int = key("flushConsumerOffsetInterval", 5000)
    channel_expired_timeout_ms: int = key("channelExpiredTimeout", 120_000)
    server_channel_max_idle_time_seconds: int = key("serverChannelMaxIdleTimeSeconds", 120)
    slave_read_enable: bool = key("slaveReadEnable", False)
    enable_property_filter: bool = key("enablePropertyFilter", False)
    acl_enable: bool = key("aclEnable", False)
    acl_file_path: str = key("aclFilePath", "")
    """ACL 1.0 accounts: a `plain_acl.yml` or a folder of them; empty looks in
    `$ROCKETMQ_HOME/conf/` as RocketMQ 4.9 does."""
    authentication_enabled: bool = key("authenticationEnabled", False)
    authorization_enabled: bool = key("authorizationEnabled", False)
    authentication_whitelist: str = key("authenticationWhitelist", "")
    authorization_whitelist: str = key("authorizationWhitelist", "")
    init_authentication_user: str = key("initAuthenticationUser", "")
    """ACL 2.0 (RocketMQ 5.3's `AuthConfig`): `{"username": ..., "password": ...}`, a Super
    user made at start when it does not exist."""
    migrate_auth_from_v1_enabled: bool = key("migrateAuthFromV1Enabled", False)
    inner_credentials: str = key("innerClientAuthenticationCredentials", "")
    """`{"accessKey": ..., "secretKey": ...}`: the account this broker signs its own requests
    with (a slave's metadata sync from its master, when the master checks ACL)."""
    # Transactions: a half younger than the timeout is not checked back; the check-back runs
    # every interval and discards a half after `transactionCheckMax` checks.
    reject_transaction_message: bool = key("rejectTransactionMessage", False)
    transaction_timeout_ms: int = key("transactionTimeOut", 6_000)
    transaction_check_max: int = key("transactionCheckMax", 15)
    transaction_check_interval_ms: int = key("transactionCheckInterval", 30_000)
    # DLedger mode: the CommitLog replicated by Raft across the group's replicas (`dledger/`).
    enable_dleger_commit_log: bool = key("enableDLegerCommitLog", False)
    dleger_group: str = key("dLegerGroup", "")
    dleger_peers: str = key("dLegerPeers", "")
    dleger_self_id: str = key("dLegerSelfId", "")
    preferred_leader_id: str = key("preferredLeaderId", "")
    dleger_heartbeat_interval_ms: int = key("dLegerHeartBeatIntervalMs", 100, minimum=10)
    dleger_election_timeout_ms: int = key("dLegerElectionTimeoutMs", 800, minimum=50)
    dleger_snapshot_every_entries: int = key("dLegerSnapshotEveryEntries", 10_000, minimum=1)
    # Controller mode: the controllers choose the master (`broker/controlled/`).
    enable_controller_mode: bool = key("enableControllerMode", False)
    controller_addr: str = key("controllerAddr", "")
    sync_broker_metadata_period_ms: int = key("syncBrokerMetadataPeriod", 5_000, minimum=10)
    check_sync_state_set_period_ms: int = key("checkSyncStateSetPeriod", 5_000, minimum=10)
    sync_controller_metadata_period_ms: int = key(
        "syncControllerMetadataPeriod", 10_000, minimum=10
    )
    controller_heartbeat_timeout_ms: int = key(
        "controllerHeartBeatTimeoutMills", 10_000, minimum=10
    )
    broker_heartbeat_interval_ms: int = key("brokerHeartbeatInterval", 1_000, minimum=10)
    broker_election_priority: int = key("brokerElectionPriority", 2**31 - 1, "brokerElectPriority")
    recall_message_enable: bool = key("recallMessageEnable", False)
    # POP consumption (`broker/pop/`): the revive log's queues and the retry topics' names.
    revive_queue_num: int = key("reviveQueueNum", 8, minimum=1)
    enable_retry_topic_v2: bool = key("enableRetryTopicV2", False)
    allow_recall_when_broker_not_writeable: bool = key("allowRecallWhenBrokerNotWriteable", True)

    def controller_addresses(self) -> list[str]:
        """`controllerAddr` split on `;`, blanks dropped."""
        return [a.strip() for a in self.controller_addr.split(";") if a.strip()]

    def namesrv_addresses(self) -> list[str]:
        """`namesrvAddr` split on `;` (RocketMQ's separator), blanks dropped."""
        return [a.strip() for a in self.namesrv_addr.split(";") if a.strip()]
