"""END_TRANSACTION (37): a producer commits or rolls back a half message.

As RocketMQ's `EndTransactionProcessor`: the request names the half by CommitLog offset and
half queue offset (`commitLogOffset`, `tranStateTableOffset`) and by producer group; all three
must match the record found there. A commit stores the end message in the real topic, then an
op record; a rollback stores only the op record. The type NOT_TYPE (the producer does not know
yet) and unknown types get no answer: the check-back will ask again. A slave refuses
(SLAVE_NOT_AVAILABLE), and a request that is not from a check-back is refused
(ILLEGAL_OPERATION) once the half has outlived its own CHECK_IMMUNITY_TIME_IN_SECONDS.

Producers send END_TRANSACTION oneway, so the answers mostly go unread; they are what Java's
broker answers all the same, for clients that wait.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from pocketmq.broker.headers import (
    HeaderError,
    optional_bool,
    required_int,
    required_long,
    required_text,
)
from pocketmq.broker.metrics import BrokerMetrics
from pocketmq.broker.put_path import PutPath, PutRefusal
from pocketmq.broker.transaction.half_messages import (
    HALF_TOPIC,
    PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS,
    HalfMessageError,
    end_message,
    immunity_ms,
    op_message,
    producer_group,
)
from pocketmq.common.codes import RequestCode, ResponseCode
from pocketmq.common.constants import (
    PROPERTY_REAL_TOPIC,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
)
from pocketmq.common.stored_message import HostAddress, StoredMessage
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.transport import RequestHandler
from pocketmq.runtime.clock import Clock

log = logging.getLogger(__name__)


class HalfReader(Protocol):
    """What ending a transaction reads of the store (`MessageStore`)."""

    @property
    def store_host(self) -> HostAddress:
        """The broker's address as written into records."""
        ...

    def look_message_by_offset(self, physical_offset: int) -> StoredMessage | None:
        """The record at a CommitLog offset."""
        ...


@dataclass(frozen=True, slots=True)
class EndTransactionHeader:
    """`EndTransactionRequestHeader` as it travels (long field names)."""

    producer_group: str
    tran_state_table_offset: int
    commit_log_offset: int
    commit_or_rollback: int
    from_transaction_check: bool
    msg_id: str
    transaction_id: str | None = None
    topic: str | None = None

    @classmethod
    def decode(cls, fields: Mapping[str, str]) -> EndTransactionHeader:
        """Reads an END_TRANSACTION header.

        Raises:
            HeaderError: `producerGroup`, `tranStateTableOffset`, `commitLogOffset`,
                `commitOrRollback` or `msgId` missing, or a number that does not parse.
        """
        return cls(
            producer_group=required_text(fields, "producerGroup"),
            tran_state_table_offset=required_long(fields, "tranStateTableOffset"),
            commit_log_offset=required_long(fields, "commitLogOffset"),
            commit_or_rollback=required_int(fields, "commitOrRollback"),
            from_transaction_check=bool(optional_bool(fields, "fromTransactionCheck")),
            msg_id=required_text(fields, "msgId"),
            transaction_id=fields.get("transactionId") or None,
            topic=fields.get("topic") or None,
        )


class EndTransactionHandler:
    """Answers END_TRANSACTION; register `routes()` on the broker's server."""

    def __init__(
        self,
        store: HalfReader,
        put_path: PutPath,
        clock: Clock,
        *,
        transaction_timeout_ms: int,
        is_slave: Callable[[], bool] = lambda: False,
    ) -> None:
        """Wires the handler.

        Args:
            store: Where halves are read.
            put_path: Where end messages and op records are stored.
            clock: Wall time, for the immunity check.
            transaction_timeout_ms: `transactionTimeOut`, the floor of an immunity time.
            is_slave: Whether the broker is a slave now (slaves refuse).
        """
        self._store = store
        self._put_path = put_path
        self.metrics: BrokerMetrics | None = None
        self._clock = clock
        self._timeout_ms = transaction_timeout_ms
        self._is_slave = is_slave

    def routes(self) -> dict[int, RequestHandler]:
        """The request codes this handler answers."""
        return {RequestCode.END_TRANSACTION: self.handle}

    async def handle(self, request: RemotingCommand, channel: object) -> RemotingCommand | None:
        """Commits or rolls back the half the request names.

        Returns:
            SUCCESS once the end message (commit) and the op record are stored; SYSTEM_ERROR
            when the half is not found or does not match the request; ILLEGAL_OPERATION (see
            the module docstring); SLAVE_NOT_AVAILABLE on a slave; a store failure's code. None
            (no answer) for NOT_TYPE and unknown types.
        """
        if self._is_slave():
            log.warning("END_TRANSACTION refused: this broker is a slave")
            return RemotingCommand.response_to(request, ResponseCode.SLAVE_NOT_AVAILABLE)
        try:
            header = EndTransactionHeader.decode(request.ext_fields)
        except HeaderError as exc:
            return RemotingCommand.response_to(request, ResponseCode.SYSTEM_ERROR, str(exc))
        peer = getattr(channel, "remote_address", "?")
        kind = header.commit_or_rollback
        if kind not in (TRANSACTION_COMMIT_TYPE, TRANSACTION_ROLLBACK_TYPE):
            if kind == TRANSACTION_NOT_TYPE:
                log.info(
                    "producer %s (group %s) does not know the state of %s yet%s%s",
                    peer,
                    header.producer_group,
                    header.msg_id,
                    " (check-back)" if header.from_transaction_check else "",
                    f": {request.remark}" if request.remark else "",
                )
            return None
        if header.from_transaction_check or kind == TRANSACTION_ROLLBACK_TYPE:
            log.info(
                "producer %s (group %s) %s %s%s",
                peer,
                header.producer_group,
                "commits" if kind == TRANSACTION_COMMIT_TYPE else "rolls back",
                header.msg_id,
                " after a check-back" if header.from_transaction_check else "",
            )
        half = self._store.look_message_by_offset(header.commit_log_offset)
        if half is None:
            return self._answer(
                request, ResponseCode.SYSTEM_ERROR, "Find prepared transaction message failed"
            )
        if self._outlived_immunity(header, half):
            log.warning(
                "END_TRANSACTION for %s refused: past its check immunity time; the check-back "
                "decides",
                header.msg_id,
            )
            return self._answer(
                request,
                ResponseCode.ILLEGAL_OPERATION,
                "the half message outlived its CHECK_IMMUNITY_TIME_IN_SECONDS; wait for the "
                "check-back",
            )
        mismatch = _mismatch(half, header)
        if mismatch is not None:
            return self._answer(request, ResponseCode.SYSTEM_ERROR, mismatch)
        try:
            if kind == TRANSACTION_COMMIT_TYPE:
                try:
                    message = end_message(half)
                except HalfMessageError as exc:
                    return self._answer(request, ResponseCode.SYSTEM_ERROR, str(exc))
                put = await self._put_path.put([message])
                if not put.stored:
                    return self._answer(request, *self._put_path.failure_answer(put.result))
            await self._delete_half(half)
        except PutRefusal as exc:  # a commit whose timer the wheel does not take
            return self._answer(request, exc.code, exc.remark)
        if self.metrics is not None:
            topic = half.properties.get(PROPERTY_REAL_TOPIC, half.topic)
            self.metrics.transaction_ended(topic, committed=kind == TRANSACTION_COMMIT_TYPE)
        return self._answer(request, ResponseCode.SUCCESS, None)

    def _outlived_immunity(self, header: EndTransactionHeader, half: StoredMessage) -> bool:
        """`rejectCommitOrRollback`: only a check-back may end a half past its own immunity."""
        if header.from_transaction_check:
            return False
        text = half.properties.get(PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS)
        if not text:
            return False
        age_ms = self._clock.now_ms() - half.born_timestamp
        return age_ms > immunity_ms(text, self._timeout_ms)

    async def _delete_half(self, half: StoredMessage) -> None:
        """Writes the op record; if it fails the check-back asks the producer again."""
        op = op_message(
            half.queue_id, half.queue_offset, self._store.store_host, self._clock.now_ms()
        )
        put = await self._put_path.put([op])
        if not put.stored:
            log.error(
                "writing the op record of half %d (%s) failed: %s %s; it will be checked back",
                half.queue_offset,
                half.properties.get(PROPERTY_REAL_TOPIC),
                put.result.status.value,
                put.result.remark,
            )

    @staticmethod
    def _answer(
        request: RemotingCommand, code: ResponseCode, remark: str | None
    ) -> RemotingCommand:
        return RemotingCommand.response_to(request, code, remark)


def _mismatch(half: StoredMessage, header: EndTransactionHeader) -> str | None:
    """What in the request does not match the record (`checkPrepareMessage`), or None."""
    if half.topic != HALF_TOPIC:
        return f"The message at commit log offset {half.physical_offset} is not a half message"
    if producer_group(half) != header.producer_group:
        return "The producer group wrong"
    if half.queue_offset != header.tran_state_table_offset:
        return "The transaction state table offset wrong"
    if half.physical_offset != header.commit_log_offset:
        return "The commit log offset wrong"
    return None
