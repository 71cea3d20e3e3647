"""The master's side of replication: a server on the HA port that streams CommitLog bytes to
each connected slave from the offset it reports, and counts what slaves acknowledged.

A SYNC_MASTER put waits until some slave reports an offset at or past the put's end (RocketMQ's
`GroupTransferService`), at most `syncFlushTimeout`; with no slave connected, or the best one
further behind than `haMaxGapNotInSync`, it does not wait and answers SLAVE_NOT_AVAILABLE. The
bytes stay stored either way: the status tells the producer what was not achieved.

In controller mode (`controlled`) each slave first says who it is and gets the master's
epochs (see `protocol`), and a `WriteRule` decides which copies a put waits for.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from pocketmq.broker.ha.epochs import EpochFile
from pocketmq.broker.ha.protocol import (
    HELLO_SIZE,
    HAProtocolError,
    ReportDecoder,
    decode_hello,
    encode_epochs,
    encode_transfer_header,
)
from pocketmq.broker.ha.settings import HASettings
from pocketmq.remoting.tls import Listener
from pocketmq.runtime.clock import Clock
from pocketmq.runtime.event_loop import cancel_and_wait, resolve_after
from pocketmq.store.api import PutResult, PutStatus
from pocketmq.store.message_store import MessageStore

log = logging.getLogger(__name__)

_READ_CHUNK = 64 * 1024
NO_LONGER_MASTER = "this broker is no longer master: send again"


@dataclass(eq=False)
class SlaveConnection:
    """One connected slave, as the master sees it."""

    address: str
    connected_ms: int
    ack_offset: int = -1
    """The slave's last reported CommitLog max offset; -1 before its first report."""
    transfer_from: int = -1
    """Where the master started streaming (the first report, once checked)."""
    next_offset: int = -1
    """The end of what the master has written to the slave."""
    last_report_ms: int = 0
    bytes_sent: int = 0
    broker_id: int | None = None
    """The slave's broker id (controller mode: from its handshake)."""
    caught_up_ms: int = 0
    """When the slave last had everything the master had at its previous report."""
    head_at_last_report: int = 0
    wakeup: asyncio.Event = field(default_factory=asyncio.Event)
    reported: asyncio.Event = field(default_factory=asyncio.Event)


class WriteRule(Protocol):
    """Controller mode's rule of which slaves a put waits for (`broker/controlled`)."""

    def refusal(self) -> str | None:
        """Why no put may be acknowledged now (fenced, too few replicas in sync), or None."""

    def acked_through(self, connections: set[SlaveConnection], head: int) -> int:
        """The CommitLog offset up to which every put is acknowledged by the copies needed."""

    def reported(self, connection: SlaveConnection) -> None:
        """A slave reported its offset (it may join the in-sync set)."""


class HAMaster:
    """Streams the CommitLog to slaves; the store's `Replication` on a master."""

    def __init__(
        self,
        store: MessageStore,
        settings: HASettings,
        clock: Clock,
        *,
        epochs: EpochFile | None = None,
        rule: WriteRule | None = None,
    ) -> None:
        self.store = store
        self.settings = settings
        self.clock = clock
        self.epochs = epochs
        self.rule = rule
        self.on_disconnect: list[Callable[[SlaveConnection], None]] = []
        self.stopped = False
        """No longer this broker's replication (it stepped down, or it stops): a put that
        reaches it now is not acknowledged."""
        self.connections: set[SlaveConnection] = set()
        self.port = 0
        self._server: Listener | None = None
        self._handlers: set[asyncio.Task[None]] = set()
        self._waiters: list[tuple[int, int, asyncio.Future[bool]]] = []
        self._sequence = itertools.count()

    # -- life cycle ------------------------------------------------------------------------
    async def start(self, host: str, port: int) -> int:
        """Listens on `host:port` (0 picks a free port); returns the port."""
        self._server = Listener.for_process(self.accept)
        self.port = await self._server.start(host, port)
        log.info("HA service listening on %s:%d (tls %s)", host, self.port, self._server.mode.value)
        return self.port

    async def stop(self) -> None:
        self.stopped = True
        if self._server is not None:
            self._server.close()
        for task in list(self._handlers):
            await cancel_and_wait(task)
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None
        for _, _, future in self._waiters:
            if not future.done():
                future.set_result(False)  # answered as not replicated, not left hanging
        self._waiters.clear()

    # -- Replication -----------------------------------------------------------------------
    def notify_appended(self) -> None:
        for connection in self.connections:
            connection.wakeup.set()

    async def settle(self, result: PutResult) -> None:
        end = result.end_offset
        result.replicas = 1 + self.replicas_at(end)
        if self.rule is not None:
            await self._settle_by_rule(result, self.rule)
            return
        if not self.settings.sync or result.replicas > 1:
            return
        if not self.slave_ok(end):
            result.status = PutStatus.SLAVE_NOT_AVAILABLE
            return
        if await self.wait_acknowledged(end, self.settings.sync_timeout_s):
            result.replicas = 1 + self.replicas_at(end)
        else:
            result.status = PutStatus.FLUSH_SLAVE_TIMEOUT

    async def _settle_by_rule(self, result: PutResult, rule: WriteRule) -> None:
        end = result.end_offset
        refusal = self._refusal(rule)
        if refusal is None:
            if not await self.wait_acknowledged(end, self.settings.sync_timeout_s):
                result.status = PutStatus.FLUSH_SLAVE_TIMEOUT
                if self.stopped:
                    result.remark = NO_LONGER_MASTER
                return
            refusal = self._refusal(rule)  # fenced while it waited: not acknowledged after all
        if refusal is not None:
            result.status = PutStatus.SLAVE_NOT_AVAILABLE
            result.remark = refusal
            return
        result.replicas = 1 + self.replicas_at(end)

    def _refusal(self, rule: WriteRule) -> str | None:
        return NO_LONGER_MASTER if self.stopped else rule.refusal()

    def acked_through(self) -> int:
        """Up to where puts are acknowledged: by the rule, else by the best slave."""
        if self.rule is not None:
            return self.rule.acked_through(self.connections, self.store.max_phy_offset)
        return self.max_ack_offset

    def recheck(self) -> None:
        """The rule's set changed: waiting puts may be acknowledged now."""
        self._acknowledged()

    def replicas_at(self, offset: int) -> int:
        """How many slaves acknowledged everything before `offset`."""
        return sum(1 for c in self.connections if c.ack_offset >= offset)

    @property
    def max_ack_offset(self) -> int:
        return max((c.ack_offset for c in self.connections), default=-1)

    def slave_ok(self, end_offset: int) -> bool:
        """Whether a synchronous put may wait for a slave (`HAService.isSlaveOK`)."""
        best = self.max_ack_offset
        return best >= 0 and end_offset - best < self.settings.max_gap_not_in_sync

    async def wait_acknowledged(self, offset: int, timeout_s: float) -> bool:
        """Waits until a slave acknowledged `offset` (the rule's copies in controller mode);
        False after `timeout_s`, or when the service stops first."""
        if self.acked_through() >= offset:
            return True
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiters, (offset, next(self._sequence), future))
        expiry = resolve_after(timeout_s, future, False)  # every replicated put waits here
        try:
            return await future
        finally:
            expiry.cancel()

    def _acknowledged(self) -> None:
        best = self.acked_through()
        waiters = self._waiters
        while waiters and waiters[0][0] <= best:
            _, _, future = heapq.heappop(waiters)
            if not future.done():
                future.set_result(True)

    # -- connections -----------------------------------------------------------------------
    async def accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Serves one slave's connection until it or the service ends (called by this
        service's own listener, or by the listener of a broker that owns its HA port)."""
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        peer = writer.get_extra_info("peername")
        address = f"{peer[0]}:{peer[1]}" if peer else "?"
        connection = SlaveConnection(address, self.clock.now_ms())
        if self.epochs is not None:
            try:
                await self._handshake(connection, reader, writer)
            except (OSError, TimeoutError, asyncio.IncompleteReadError, HAProtocolError) as exc:
                log.warning("HA handshake with %s failed: %s", address, exc)
                writer.close()
                self._handlers.discard(task)
                return
            except asyncio.CancelledError:
                # Dropped mid-handshake (a new epoch, or the service stops): the slave must see
                # the close now, not wait out its read timeout.
                writer.close()
                self._handlers.discard(task)
                return
        self.connections.add(connection)
        log.info("slave %s connected to the HA service", address)
        reports = asyncio.create_task(self._read_reports(connection, reader))
        transfer = asyncio.create_task(self._transfer(connection, writer))
        reason = "closed"
        try:
            done, _ = await asyncio.wait({reports, transfer}, return_when=asyncio.FIRST_COMPLETED)
            for finished in done:
                error = finished.exception()
                if error is not None:
                    reason = str(error) or type(error).__name__
        except asyncio.CancelledError:
            # The service stops. Not re-raised: asyncio's stream server would log a cancelled
            # connection callback as an error.
            reason = "the HA service stopped"
        finally:
            for task in (reports, transfer):
                # A task that already failed holds its error: it was read above.
                with contextlib.suppress(Exception):
                    await cancel_and_wait(task)
            self.connections.discard(connection)
            for listener in self.on_disconnect:
                listener(connection)
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
            self._handlers.discard(task)
            log.info(
                "slave %s left the HA service at offset %d: %s",
                address,
                connection.ack_offset,
                reason,
            )

    async def _handshake(
        self,
        connection: SlaveConnection,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        """Controller mode: the slave names itself; the master sends its epochs, which the
        slave cuts its log back by before its first report."""
        assert self.epochs is not None
        async with asyncio.timeout(self.settings.housekeeping_s):
            connection.broker_id = decode_hello(await reader.readexactly(HELLO_SIZE))
        entries = [(e.epoch, e.start_offset) for e in self.epochs.entries]
        writer.write(encode_epochs(entries, self.store.max_phy_offset))
        await writer.drain()
        log.info("slave %s is broker %d; sent epochs %s", connection.address,
                 connection.broker_id, entries)  # fmt: skip

    def drop_connections(self) -> None:
        """Closes every slave connection (a new epoch: each must handshake again)."""
        for task in list(self._handlers):
            task.cancel()

    async def _read_reports(
        self, connection: SlaveConnection, reader: asyncio.StreamReader
    ) -> None:
        decoder = ReportDecoder()
        while True:
            try:
                data = await asyncio.wait_for(
                    reader.read(_READ_CHUNK), self.settings.housekeeping_s
                )
            except TimeoutError:
                raise ConnectionError(
                    f"no report for {self.settings.housekeeping_s:.0f} s"
                ) from None
            if not data:
                raise ConnectionError("the slave closed the connection")
            offset = decoder.feed(data)
            if offset is None:
                continue
            self._check_report(connection, offset)
            connection.ack_offset = offset
            now = connection.last_report_ms = self.clock.now_ms()
            if offset >= connection.head_at_last_report:
                connection.caught_up_ms = now
            connection.head_at_last_report = self.store.max_phy_offset
            connection.reported.set()
            if self.rule is not None:
                self.rule.reported(connection)
            self._acknowledged()

    def _check_report(self, connection: SlaveConnection, offset: int) -> None:
        """Refuses a report the master cannot believe, before it counts as acknowledged.

        The first report is where the slave's CommitLog ends: streaming starts there, so it
        must lie within the master's CommitLog (0, an empty slave, starts at its beginning).
        A later report cannot acknowledge bytes the master has not sent.

        Raises:
            HAProtocolError: the slave must not follow this master; the connection is closed.
        """
        store = self.store
        if connection.transfer_from >= 0:
            if offset > connection.next_offset:
                raise HAProtocolError(
                    f"the slave reports offset {offset}, past {connection.next_offset}, the "
                    "end of what this master has sent it"
                )
            return
        start = offset
        if start == 0:
            start = store.min_phy_offset  # an empty slave starts where the master's log does
        elif start < store.min_phy_offset:
            raise HAProtocolError(
                f"the slave is at offset {start} but this master's CommitLog now starts at "
                f"{store.min_phy_offset}: empty the slave's store and start it again"
            )
        elif start > store.max_phy_offset:
            raise HAProtocolError(
                f"the slave is at offset {start}, past this master's end {store.max_phy_offset}"
                ": it holds data the master does not; it must not follow this master"
            )
        connection.transfer_from = connection.next_offset = start

    async def _transfer(self, connection: SlaveConnection, writer: asyncio.StreamWriter) -> None:
        await connection.reported.wait()  # its first report, checked: where to start
        store = self.store
        start = connection.transfer_from
        log.info("streaming CommitLog to slave %s from offset %d", connection.address, start)
        batch = self.settings.transfer_batch
        while True:
            offset = connection.next_offset
            if offset < store.max_phy_offset:
                data = self._read(offset, batch)
                # Counted before the write: the slave may report these bytes while the drain
                # still waits.
                connection.next_offset = offset + len(data)
                connection.bytes_sent += len(data)
                writer.write(encode_transfer_header(offset, len(data)))
                writer.write(data)
                await writer.drain()
                continue
            connection.wakeup.clear()
            if offset < store.max_phy_offset:
                continue
            try:
                await asyncio.wait_for(connection.wakeup.wait(), self.settings.heartbeat_interval_s)
            except TimeoutError:
                writer.write(encode_transfer_header(offset, 0))
                await writer.drain()

    def _read(self, offset: int, limit: int) -> bytes:
        """Up to `limit` written bytes at `offset`, never past the end of its file."""
        found = self.store.commit_log.view_from(offset)
        if found is None:
            raise HAProtocolError(f"offset {offset} is not in this master's CommitLog")
        view, position = found
        try:
            data = bytes(view[position : position + limit])
        finally:
            view.release()
        self.store.commit_log.note_read(offset, offset + len(data))
        return data

    # -- status ------------------------------------------------------------------------------
    def _lag_ms(self, ack_offset: int, head: int, now_ms: int) -> int:
        """How long the oldest message the slave lacks has been stored; 0 when it has all."""
        if ack_offset < 0:
            return -1
        if ack_offset >= head:
            return 0
        stored = self.store.store_timestamp_at(ack_offset)
        return max(0, now_ms - stored) if stored > 0 else -1

    def runtime_info(self) -> dict[str, Any]:
        """The master's part of `HARuntimeInfo` (GET_BROKER_HA_STATUS)."""
        now = self.clock.now_ms()
        head = self.store.max_phy_offset
        return {
            "master": True,
            "masterCommitLogMaxOffset": head,
            "inSyncSlaveNums": sum(
                1
                for c in self.connections
                if c.ack_offset >= 0 and head - c.ack_offset < self.settings.max_gap_not_in_sync
            ),
            "haConnectionInfo": [
                {
                    "addr": c.address,
                    "slaveAckOffset": c.ack_offset,
                    "diff": head - c.ack_offset if c.ack_offset >= 0 else head,
                    "inSync": c.ack_offset >= 0
                    and head - c.ack_offset < self.settings.max_gap_not_in_sync,
                    "lagMs": self._lag_ms(c.ack_offset, head, now),
                    "transferFromWhere": c.transfer_from,
                    "transferredBytes": c.bytes_sent,
                    "lastReportAgoMs": now - c.last_report_ms if c.last_report_ms else -1,
                    "connectedMs": c.connected_ms,
                }
                for c in sorted(self.connections, key=lambda c: c.address)
            ],
        }
