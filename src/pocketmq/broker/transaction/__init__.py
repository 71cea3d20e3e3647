"""Transactional messages on the broker: half messages, END_TRANSACTION and the check-back.

`half_messages` holds the conversions and decisions (pure), `handlers` answers
END_TRANSACTION (37), `check_service` asks producers about halves nobody ended
(CHECK_TRANSACTION_STATE, 39). The send path stores a send with TRAN_MSG=true through
`half_messages.to_half`.
"""

from pocketmq.broker.transaction.check_service import (
    CheckRound,
    RoundRobinProducers,
    TransactionCheckService,
)
from pocketmq.broker.transaction.half_messages import (
    CHECK_MAX_TIME_TOPIC,
    HALF_TOPIC,
    OP_TOPIC,
    TRANSACTION_GROUP,
    CheckSettings,
    is_transaction_send,
    to_half,
)
from pocketmq.broker.transaction.handlers import EndTransactionHandler

__all__ = [
    "CHECK_MAX_TIME_TOPIC",
    "HALF_TOPIC",
    "OP_TOPIC",
    "TRANSACTION_GROUP",
    "CheckRound",
    "CheckSettings",
    "EndTransactionHandler",
    "RoundRobinProducers",
    "TransactionCheckService",
    "is_transaction_send",
    "to_half",
]
