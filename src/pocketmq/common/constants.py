"""RocketMQ's constants that cross the wire or land on disk: magic codes, flags, property keys.

Values follow apache/rocketmq (`MessageSysFlag`, `PermName`, `MessageConst`, `MessageDecoder`);
they are facts of the format, so they must never change.
"""

from __future__ import annotations

from typing import Final

# CommitLog record magic codes (`MessageDecoder`): V1 has a 1-byte topic length, V2 a 2-byte one.
MESSAGE_MAGIC_CODE_V1: Final = 0xDAA320A7
MESSAGE_MAGIC_CODE_V2: Final = 0xDAA320AB
# The end-of-file filler written when a record does not fit in what is left of a mapped file.
BLANK_MAGIC_CODE: Final = 0xCBD43194
END_FILE_MIN_BLANK_LENGTH: Final = 8

# Message sysFlag bits (`MessageSysFlag`).
COMPRESSED_FLAG: Final = 0x1
MULTI_TAGS_FLAG: Final = 0x2
TRANSACTION_NOT_TYPE: Final = 0x0
TRANSACTION_PREPARED_TYPE: Final = 0x4
TRANSACTION_COMMIT_TYPE: Final = 0x8
TRANSACTION_ROLLBACK_TYPE: Final = 0xC
TRANSACTION_TYPE_MASK: Final = 0xC
BORNHOST_V6_FLAG: Final = 0x10
STOREHOSTADDRESS_V6_FLAG: Final = 0x20
NEED_UNWRAP_FLAG: Final = 0x40
INNER_BATCH_FLAG: Final = 0x80
COMPRESSION_TYPE_MASK: Final = 0x700

# Topic permissions (`PermName`).
PERM_INHERIT: Final = 1
PERM_WRITE: Final = 2
PERM_READ: Final = 4
PERM_PRIORITY: Final = 8

# Properties string separators (`MessageDecoder`).
NAME_VALUE_SEPARATOR: Final = "\x01"
PROPERTY_SEPARATOR: Final = "\x02"
KEY_SEPARATOR: Final = " "

# Property keys (`MessageConst`).
PROPERTY_KEYS: Final = "KEYS"
PROPERTY_TAGS: Final = "TAGS"
PROPERTY_WAIT_STORE_MSG_OK: Final = "WAIT"
PROPERTY_DELAY_TIME_LEVEL: Final = "DELAY"
PROPERTY_RETRY_TOPIC: Final = "RETRY_TOPIC"
PROPERTY_REAL_TOPIC: Final = "REAL_TOPIC"
PROPERTY_REAL_QUEUE_ID: Final = "REAL_QID"
PROPERTY_TRANSACTION_PREPARED: Final = "TRAN_MSG"
PROPERTY_PRODUCER_GROUP: Final = "PGROUP"
PROPERTY_MIN_OFFSET: Final = "MIN_OFFSET"
PROPERTY_MAX_OFFSET: Final = "MAX_OFFSET"
PROPERTY_RECONSUME_TIME: Final = "RECONSUME_TIME"
PROPERTY_MSG_REGION: Final = "MSG_REGION"
PROPERTY_TRACE_SWITCH: Final = "TRACE_ON"
PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: Final = "UNIQ_KEY"
PROPERTY_MAX_RECONSUME_TIMES: Final = "MAX_RECONSUME_TIMES"
PROPERTY_CONSUME_START_TIMESTAMP: Final = "CONSUME_START_TIME"
PROPERTY_TRANSACTION_ID: Final = "__transactionId__"
PROPERTY_TRANSACTION_CHECK_TIMES: Final = "TRANSACTION_CHECK_TIMES"
PROPERTY_SHARDING_KEY: Final = "__SHARDINGKEY"
PROPERTY_TIMER_DELIVER_MS: Final = "TIMER_DELIVER_MS"
PROPERTY_TIMER_DELAY_SEC: Final = "TIMER_DELAY_SEC"
PROPERTY_TIMER_DELAY_MS: Final = "TIMER_DELAY_MS"
PROPERTY_CRC32: Final = "__CRC32#"

# Limits (`MessageStoreConfig`, `CommitLog`).
MAX_MESSAGE_SIZE_DEFAULT: Final = 4 * 1024 * 1024
MAX_PROPERTIES_LENGTH: Final = 32767
MAX_TOPIC_LENGTH_V1: Final = 127
MAX_TOPIC_LENGTH: Final = 32767

# Store geometry defaults (`MessageStoreConfig`).
COMMITLOG_FILE_SIZE_DEFAULT: Final = 1024 * 1024 * 1024
CONSUME_QUEUE_UNIT_SIZE: Final = 20
CONSUME_QUEUE_FILE_UNITS_DEFAULT: Final = 300_000
