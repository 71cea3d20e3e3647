"""The proxy's clients: each one's settings as its Telemetry stream last sent them, the stream's
outbox (for commands the proxy starts: transaction recovery), and the transactions the proxy
must be able to end for them."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Final

from pocketmq.proxy.grpc_v2 import definition_pb2 as v2
from pocketmq.proxy.grpc_v2 import service_pb2 as rpc

TRANSACTION_DATA_TTL_S: Final = 30.0
"""`transactionDataExpireMillis`: how long a sent half can be ended through the proxy."""


@dataclass(eq=False)
class Session:
    client_id: str
    settings: v2.Settings | None = None
    outbox: asyncio.Queue[rpc.TelemetryCommand] = field(default_factory=asyncio.Queue)
    streams: int = 0

    @property
    def client_type(self) -> int:
        return (
            self.settings.client_type if self.settings is not None else v2.CLIENT_TYPE_UNSPECIFIED
        )

    @property
    def topics(self) -> list[str]:
        if self.settings is None or not self.settings.HasField("publishing"):
            return []
        return [topic.name for topic in self.settings.publishing.topics]

    @property
    def group(self) -> str | None:
        if self.settings is None or not self.settings.HasField("subscription"):
            return None
        return self.settings.subscription.group.name


@dataclass(frozen=True, slots=True)
class TransactionData:
    """Where a half message is, so that END_TRANSACTION can name it."""

    broker_address: str
    queue_offset: int
    commit_log_offset: int
    message_id: str
    expires: float


class Sessions:
    def __init__(self) -> None:
        self._sessions: dict[str, Session] = {}
        self._transactions: dict[tuple[str, str], TransactionData] = {}

    def get(self, client_id: str) -> Session | None:
        return self._sessions.get(client_id)

    def open(self, client_id: str) -> Session:
        session = self._sessions.get(client_id)
        if session is None:
            session = self._sessions[client_id] = Session(client_id)
        return session

    def close(self, client_id: str) -> Session | None:
        return self._sessions.pop(client_id, None)

    def producers_of(self, topic: str) -> list[Session]:
        return [s for s in self._sessions.values() if topic in s.topics and s.streams > 0]

    def topics_in_use(self) -> set[str]:
        return {topic for s in self._sessions.values() for topic in s.topics}

    def remember_transaction(
        self,
        topic: str,
        transaction_id: str,
        *,
        broker_address: str,
        queue_offset: int,
        commit_log_offset: int,
        message_id: str,
    ) -> None:
        now = time.monotonic()
        self._transactions = {k: d for k, d in self._transactions.items() if d.expires > now}
        self._transactions[(topic, transaction_id)] = TransactionData(
            broker_address,
            queue_offset,
            commit_log_offset,
            message_id,
            now + TRANSACTION_DATA_TTL_S,
        )

    def transaction(self, topic: str, transaction_id: str) -> TransactionData | None:
        data = self._transactions.pop((topic, transaction_id), None)
        if data is None or data.expires < time.monotonic():
            return None
        return data
