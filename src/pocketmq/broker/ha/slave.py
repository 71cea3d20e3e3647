"""The slave's side of replication: follows the master's HA port, appends each frame to its own
CommitLog at exactly the master's offset (its ConsumeQueue and index follow by dispatch), and
reports its max offset after every append and as a heartbeat.

The master's HA address comes from `haMasterAddress`, else from the NameServer's answer to the
slave's registration (in controller mode: from the master the controller names). A lost
connection, or a frame that does not continue the local log, drops the connection; the slave
connects again and resumes from its own max offset.

In controller mode the slave first names itself and reads the master's epochs; it refuses a
master of an older epoch than the controller announced, and cuts its own CommitLog back to the
last point both agree on before it reports where it stands.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from pocketmq.broker.ha.epochs import EpochEntry, EpochFile, consistent_point
from pocketmq.broker.ha.protocol import (
    EPOCH_ENTRY_SIZE,
    EPOCHS_HEADER_SIZE,
    HAProtocolError,
    TransferDecoder,
    decode_epoch_entries,
    decode_epochs_header,
    encode_hello,
    encode_report,
)
from pocketmq.broker.ha.settings import HASettings
from pocketmq.remoting import tls
from pocketmq.remoting.dial import dial
from pocketmq.runtime.clock import Clock
from pocketmq.runtime.event_loop import cancel_and_wait
from pocketmq.store.message_store import MessageStore

log = logging.getLogger(__name__)

_READ_CHUNK = 256 * 1024
_CONNECT_TIMEOUT_S = 3.0
_RETRY_S = 1.0


class HASlave:
    """Keeps this store a byte-for-byte copy of the master's CommitLog."""

    def __init__(
        self,
        store: MessageStore,
        settings: HASettings,
        master_ha_address: Callable[[], Awaitable[str | None]],
        clock: Clock,
        *,
        epochs: EpochFile | None = None,
        broker_id: int = 0,
        master_epoch: Callable[[], int] = lambda: 0,
    ) -> None:
        self.store = store
        self.epochs = epochs
        self.broker_id = broker_id
        self._master_epoch = master_epoch
        self.truncations: list[tuple[int, int]] = []
        """(from, to) of each cut this slave made to follow a master."""
        self.settings = settings
        self._master_ha_address = master_ha_address
        self.clock = clock
        self.master_address: str | None = None
        self.connected = False
        self.bytes_received = 0
        self.last_read_ms = 0
        self.last_write_ms = 0
        self.master_offset_seen = -1
        self._task: asyncio.Task[None] | None = None
        self._warned: str | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="ha-slave")

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_and_wait(self._task)
            self._task = None

    async def _run(self) -> None:
        while True:
            address = await self._master_ha_address()
            if not address:
                await asyncio.sleep(_RETRY_S)
                continue
            try:
                await self._follow(address)
            except (OSError, EOFError, HAProtocolError, ValueError, TimeoutError) as exc:
                # EOFError: the master closed in the middle of the handshake.
                message = f"{address}: {exc or type(exc).__name__}"
                # One warning per distinct problem, not one per retry while the master is down.
                if message != self._warned:
                    log.warning("replication from master %s; retrying", message)
                    self._warned = message
            finally:
                self.connected = False
            await asyncio.sleep(_RETRY_S)

    async def _follow(self, address: str) -> None:
        host, _, port = address.rpartition(":")
        reader, writer = await asyncio.wait_for(
            dial(host, int(port), ssl_context=tls.client_context()), _CONNECT_TIMEOUT_S
        )
        try:
            self.master_address = address
            self.connected = True
            self._warned = None
            if self.epochs is not None:
                await self._handshake(reader, writer, self.epochs)
            log.info(
                "following master %s from CommitLog offset %d", address, self.store.max_phy_offset
            )
            await self._report(writer)
            decoder = TransferDecoder()
            while True:
                try:
                    data = await asyncio.wait_for(
                        reader.read(_READ_CHUNK), self.settings.housekeeping_s
                    )
                except TimeoutError:
                    raise ConnectionError(
                        f"nothing from the master for {self.settings.housekeeping_s:.0f} s"
                    ) from None
                if not data:
                    raise ConnectionError("the master closed the connection")
                self.last_read_ms = self.clock.now_ms()
                appended = False
                for transfer in decoder.feed(data):
                    self.master_offset_seen = transfer.offset + len(transfer.data)
                    if not transfer.data:
                        continue
                    expected = self.store.max_phy_offset
                    if transfer.offset != expected:
                        raise HAProtocolError(
                            f"the master sent offset {transfer.offset}, this slave's CommitLog "
                            f"ends at {expected}"
                        )
                    self.store.append_raw(transfer.offset, transfer.data)
                    self.bytes_received += len(transfer.data)
                    appended = True
                idle_ms = self.clock.now_ms() - self.last_write_ms
                if appended or idle_ms >= self.settings.heartbeat_interval_s * 1000:
                    await self._report(writer)
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    async def _handshake(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, epochs: EpochFile
    ) -> None:
        """Names this slave, reads the master's epochs, and cuts the local CommitLog back to
        where the two agree.

        Raises:
            HAProtocolError: the master is older than the controller's, or the two logs share
                no epoch (this store must be emptied to follow it).
        """
        writer.write(encode_hello(self.broker_id))
        await writer.drain()
        async with asyncio.timeout(self.settings.housekeeping_s):
            count, master_max = decode_epochs_header(await reader.readexactly(EPOCHS_HEADER_SIZE))
            raw = await reader.readexactly(count * EPOCH_ENTRY_SIZE)
        theirs = [EpochEntry(e, s) for e, s in decode_epoch_entries(raw)]
        expected = self._master_epoch()
        master_epoch = theirs[-1].epoch if theirs else 0
        if master_epoch < expected:
            raise HAProtocolError(
                f"the master is in epoch {master_epoch}, older than epoch {expected} the "
                "controller announced: it is no longer master"
            )
        store = self.store
        mine = epochs.entries
        here = store.max_phy_offset
        if not mine:
            if here > 0:
                raise HAProtocolError(
                    f"this store holds {here} bytes of CommitLog but no epochs: it was not written "
                    "in controller mode; empty storePathRootDir to join this group"
                )
            point = 0
        else:
            found = consistent_point(mine, here, theirs, master_max)
            if found is None:
                raise HAProtocolError(
                    f"this replica's epochs {mine} share none with the master's {theirs}; empty "
                    "storePathRootDir to join this group"
                )
            point = found
        if point < here:
            log.warning(
                "cutting the CommitLog back from %d to %d, the last point it shares with the "
                "master (epochs %s here, %s there): the bytes after it were never acknowledged",
                here, point, mine, theirs,
            )  # fmt: skip
            store.truncate(point)
            self.truncations.append((here, point))
        epochs.adopt(theirs, point)

    async def _report(self, writer: asyncio.StreamWriter) -> None:
        writer.write(encode_report(self.store.max_phy_offset))
        await writer.drain()
        self.last_write_ms = self.clock.now_ms()

    def runtime_info(self) -> dict[str, Any]:
        """The slave's part of `HARuntimeInfo` (`haClientRuntimeInfo`)."""
        return {
            "master": False,
            "haClientRuntimeInfo": {
                "masterAddr": self.master_address or "",
                "connected": self.connected,
                "maxOffset": self.store.max_phy_offset,
                "masterOffsetSeen": self.master_offset_seen,
                "transferredBytes": self.bytes_received,
                "lastReadTimestamp": self.last_read_ms,
                "lastWriteTimestamp": self.last_write_ms,
            },
        }
