"""What only a group's master runs: delayed delivery, the timer store, the transaction
check-back and POP's checkpoints and revive. A slave gets their results by replication.

A fixed master starts them once; a DLedger replica starts them on becoming master and stops
them when it steps down (they resume from the positions replicated to every replica).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from pocketmq.broker.delay_delivery import DelayDelivery
from pocketmq.broker.pop.service import PopService
from pocketmq.broker.transaction.check_service import TransactionCheckService
from pocketmq.store.timer import TimerHandover, TimerMessageStore

log = logging.getLogger(__name__)


class MasterServices:
    def __init__(
        self,
        delay_delivery: DelayDelivery,
        timer_store: TimerMessageStore | None,
        transaction_checks: Callable[[], TransactionCheckService],
        pop: PopService | None = None,
    ) -> None:
        self.delay_delivery = delay_delivery
        self.pop = pop
        self.timer_store = timer_store
        self.timer_handover: Callable[[], TimerHandover | None] | None = None
        """In a replicated group: where the last master's timer store was; the timer store
        takes over from there instead of from its own files."""
        self._make_checks = transaction_checks
        self.transaction_checks: TransactionCheckService | None = None
        self.running = False
        self._timer_loaded = True
        """The timer store is loaded before the first start; a stop closes its files."""

    async def start(self) -> None:
        if self.running:
            return
        self.running = True
        self.delay_delivery.start()
        if self.timer_store is not None:
            handover = self.timer_handover() if self.timer_handover is not None else None
            if handover is not None:
                await asyncio.to_thread(self.timer_store.take_over, handover)
            elif not self._timer_loaded:
                await asyncio.to_thread(self.timer_store.load)
            self._timer_loaded = True
            self.timer_store.start()
        self.transaction_checks = self._make_checks()
        self.transaction_checks.start()
        if self.pop is not None:
            await self.pop.start()

    async def close(self) -> None:
        """The broker stops: stops what runs, saves the delay offsets, closes the timer
        store's files."""
        await self.stop()
        await self.delay_delivery.persist()
        if self.timer_store is not None and self._timer_loaded:
            await self.timer_store.stop()
            self._timer_loaded = False

    async def stop(self) -> None:
        if not self.running:
            return
        self.running = False
        await self.delay_delivery.stop()
        if self.timer_store is not None:
            await self.timer_store.stop()
            self._timer_loaded = False
        if self.transaction_checks is not None:
            await self.transaction_checks.stop()
            self.transaction_checks = None
        if self.pop is not None:
            await self.pop.stop()
