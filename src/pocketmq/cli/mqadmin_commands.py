"""The names of Apache RocketMQ's `mqadmin` sub-commands (`org.apache.rocketmq.tools.command`).

`pocketmq admin` uses them to tell an operator that a command they know from mqadmin is not
implemented here yet, rather than listing every command as if they had made a typo. The list
covers RocketMQ 4.9 and 5.x (`MQAdminStartup.initCommand`); it is data, not a promise.
"""

from __future__ import annotations

from typing import Final

MQADMIN_COMMANDS: Final = frozenset(
    {
        # topics
        "updateTopic",
        "deleteTopic",
        "updateTopicPerm",
        "updateTopicList",
        "updateStaticTopic",
        "remappingStaticTopic",
        "updateOrderConf",
        "allocateMQ",
        "topicList",
        "topicRoute",
        "topicStatus",
        "topicClusterList",
        "cleanUnusedTopic",
        "statsAll",
        # subscription groups and consumers
        "updateSubGroup",
        "updateSubGroupList",
        "deleteSubGroup",
        "setConsumeMode",
        "consumerConnection",
        "consumerProgress",
        "consumerStatus",
        "brokerConsumeStats",
        "cloneGroupOffset",
        "resetOffsetByTime",
        "resetOffsetByTimeOld",
        "skipAccumulatedMessage",
        "getConsumerConfig",
        "startMonitoring",
        "checkMsgSendRT",
        # producers and messages
        "producer",
        "producerConnection",
        "sendMsgStatus",
        "sendMessage",
        "consumeMessage",
        "queryMsgById",
        "queryMsgByKey",
        "queryMsgByUniqueKey",
        "queryMsgByOffset",
        "queryMsgTraceById",
        "printMsg",
        "printMsgByQueue",
        "queryCq",
        "dumpCompactionLog",
        # brokers and clusters
        "clusterList",
        "clusterRT",
        "brokerStatus",
        "updateBrokerConfig",
        "getBrokerConfig",
        "wipeWritePerm",
        "addWritePerm",
        "cleanExpiredCQ",
        "deleteExpiredCommitLog",
        "resetMasterFlushOffset",
        "setCommitLogReadAheadMode",
        "addBroker",
        "removeBroker",
        "cleanBrokerMetadata",
        "getBrokerEpoch",
        "haStatus",
        "getSyncStateSet",
        "checkRocksdbCqWriteProgress",
        "rocksDBConfigToJson",
        "removeColdDataFlowCtrGroupConfig",
        "updateColdDataFlowCtrGroupConfig",
        "getColdDataFlowCtrInfo",
        # NameServers and KV config
        "getNamesrvConfig",
        "updateNamesrvConfig",
        "updateKvConfig",
        "deleteKvConfig",
        # controllers
        "getControllerMetaData",
        "getControllerConfig",
        "updateControllerConfig",
        "electMaster",
        # ACL 1.0 and 2.0, users
        "updateAclConfig",
        "deleteAclConfig",
        "clusterAclConfigVersion",
        "updateGlobalWhiteAddr",
        "getAclConfig",
        "getUser",
        "createUser",
        "updateUser",
        "deleteUser",
        "listUser",
        "copyUser",
        "getAcl",
        "createAcl",
        "updateAcl",
        "deleteAcl",
        "listAcl",
        "copyAcl",
        # export and metrics
        "exportMetadata",
        "exportConfigs",
        "exportMetrics",
    }
)
"""Every mqadmin sub-command name, as typed on the command line."""
