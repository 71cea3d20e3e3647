"""The HA master believes a slave's report only once it has checked it: a report past what the
master holds, or past what it has sent, never acknowledges a SYNC_MASTER put.

The slave here is a bare socket speaking the HA protocol to a real `HAMaster` on loopback; the
master's CommitLog is a fixed run of bytes.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import cast

import pytest

from pocketmq.broker.ha.master import HAMaster
from pocketmq.broker.ha.protocol import TransferDecoder, encode_report
from pocketmq.broker.ha.settings import HASettings
from pocketmq.runtime.clock import ManualClock
from pocketmq.store.message_store import MessageStore

LOG_BYTES = 1000
WAIT_S = 10.0


@dataclass
class FixedCommitLog:
    data: bytes

    def view_from(self, offset: int) -> tuple[memoryview, int] | None:
        return (memoryview(self.data), offset) if 0 <= offset < len(self.data) else None

    def note_read(self, start: int, end: int) -> None:
        pass  # nothing is mapped


@dataclass
class FixedStore:
    """The part of `MessageStore` the HA master reads: a CommitLog of `LOG_BYTES` bytes."""

    commit_log: FixedCommitLog = field(default_factory=lambda: FixedCommitLog(b"m" * LOG_BYTES))
    min_phy_offset: int = 0

    @property
    def max_phy_offset(self) -> int:
        return len(self.commit_log.data)

    def store_timestamp_at(self, offset: int) -> int:
        return 0


@contextlib.asynccontextmanager
async def running_master() -> AsyncIterator[HAMaster]:
    settings = HASettings(sync=True, sync_timeout_s=WAIT_S, heartbeat_interval_s=0.5)
    master = HAMaster(cast(MessageStore, FixedStore()), settings, ManualClock())
    await master.start("127.0.0.1", 0)
    try:
        yield master
    finally:
        await master.stop()


async def wait_until_closed(reader: asyncio.StreamReader) -> None:
    """Reads (and drops) frames until the master closes the connection."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        try:
            data = await asyncio.wait_for(reader.read(64 * 1024), deadline - time.monotonic())
        except ConnectionResetError:
            return
        except TimeoutError:
            break
        if not data:
            return
    raise AssertionError(f"the master kept the connection open for {WAIT_S} s")


async def read_until(reader: asyncio.StreamReader, end: int) -> None:
    """Reads frames until the master has sent the bytes before `end`."""
    decoder = TransferDecoder()
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        data = await asyncio.wait_for(reader.read(64 * 1024), deadline - time.monotonic())
        assert data, "the master closed the connection"
        if any(t.offset + len(t.data) >= end for t in decoder.feed(data)):
            return
    raise AssertionError(f"the master did not send up to offset {end} in {WAIT_S} s")


async def put_waiting_for_a_slave(master: HAMaster, end: int) -> asyncio.Task[bool]:
    """A SYNC_MASTER put's wait for a slave to acknowledge `end`, already waiting."""
    waiter = asyncio.create_task(master.wait_acknowledged(end, WAIT_S))
    await asyncio.sleep(0)
    assert not waiter.done()
    return waiter


async def slave_reports(*offsets: int, read_to: int = -1) -> tuple[bool, int]:
    """A slave connects and reports `offsets`, the first at once, the others after it has read
    the master's frames up to `read_to`. Returns whether a put waiting for the whole log was
    acknowledged when the connection ended, and how many slaves then count for that put."""
    async with running_master() as master:
        waiter = await put_waiting_for_a_slave(master, LOG_BYTES)
        reader, writer = await asyncio.open_connection("127.0.0.1", master.port)
        try:
            writer.write(encode_report(offsets[0]))
            await writer.drain()
            if len(offsets) > 1:
                await read_until(reader, read_to)
                for offset in offsets[1:]:
                    writer.write(encode_report(offset))
                await writer.drain()
            # The positive signal: the master refused a report and dropped the slave.
            await wait_until_closed(reader)
            await asyncio.sleep(0)  # a waiter released by a report would be done now
            acknowledged = waiter.done() and waiter.result()
            return acknowledged, master.replicas_at(LOG_BYTES)
        finally:
            waiter.cancel()
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()


@pytest.mark.parametrize("first_report", [LOG_BYTES + 1, 10 * LOG_BYTES])
def test_a_first_report_past_the_masters_end_does_not_acknowledge_a_put(
    first_report: int,
) -> None:
    acknowledged, replicas = asyncio.run(slave_reports(first_report))
    assert not acknowledged
    assert replicas == 0


def test_a_report_past_what_the_master_sent_does_not_acknowledge_a_put() -> None:
    # An empty slave (offset 0) is sent the whole log, then claims more than that.
    async def scenario() -> tuple[bool, int]:
        return await slave_reports(0, 5 * LOG_BYTES, read_to=LOG_BYTES)

    acknowledged, replicas = asyncio.run(scenario())
    assert not acknowledged
    assert replicas == 0


def test_a_slave_acknowledging_what_it_was_sent_releases_the_put() -> None:
    async def scenario() -> None:
        async with running_master() as master:
            waiter = await put_waiting_for_a_slave(master, LOG_BYTES)
            reader, writer = await asyncio.open_connection("127.0.0.1", master.port)
            try:
                writer.write(encode_report(0))
                await read_until(reader, LOG_BYTES)
                writer.write(encode_report(LOG_BYTES))
                await writer.drain()
                assert await asyncio.wait_for(waiter, WAIT_S)
                assert master.replicas_at(LOG_BYTES) == 1
            finally:
                waiter.cancel()
                writer.close()
                with contextlib.suppress(OSError):
                    await writer.wait_closed()

    asyncio.run(scenario())
