"""Where a consumer keeps its progress (`OffsetStore`): on the broker for clustering consumers
(`RemoteBrokerOffsetStore`), in a local file for broadcasting ones (`LocalFileOffsetStore`).

Both hold the latest offset per queue in memory (`update`) and write it out in rounds
(`persist`, every few seconds and at shutdown), so consuming never waits for a commit. An
offset is "the next message to consume": everything below it is done.

`offset_store_for` picks the store a message model uses.

The local file is RocketMQ's `offsets.json` shape (`{"offsetTable": {"<queue json>": n}}`),
written atomically (temporary file, fsync, rename) so a crash leaves the old or the new file.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Protocol

from pocketmq.client.errors import RocketMQError, error_for_response
from pocketmq.client.instance import ClientInstance
from pocketmq.client.message import MessageQueue
from pocketmq.common.codes import RequestCode, ResponseCode
from pocketmq.common.consumer_modes import MessageModel

log = logging.getLogger(__name__)


class OffsetStore(Protocol):
    """A consumer group's offsets, per queue."""

    async def read(self, queue: MessageQueue, *, zero_if_not_found: bool = True) -> int:
        """The stored offset of `queue`, or -1 when there is none.

        With `zero_if_not_found`, a broker answers 0 instead of "none" for a young queue
        still in memory (RocketMQ's rule that lets a new group read a new topic from its
        start); consume-from-timestamp turns it off to start exactly where it was asked.
        """
        ...

    def update(self, queue: MessageQueue, offset: int, *, increase_only: bool = True) -> None:
        """Records progress in memory."""
        ...

    def current(self, queue: MessageQueue) -> int:
        """The offset held in memory (-1 when none)."""
        ...

    async def persist(self, queues: Iterable[MessageQueue]) -> None:
        """Writes the offsets of `queues` out; failures are logged, not raised."""
        ...

    def forget(self, queue: MessageQueue) -> None:
        """Drops `queue` from memory (after a rebalance moved it away)."""
        ...


class _MemoryTable:
    def __init__(self) -> None:
        self.offsets: dict[MessageQueue, int] = {}

    def update(self, queue: MessageQueue, offset: int, *, increase_only: bool = True) -> None:
        if increase_only and offset < self.offsets.get(queue, -1):
            return
        self.offsets[queue] = offset

    def current(self, queue: MessageQueue) -> int:
        return self.offsets.get(queue, -1)

    def forget(self, queue: MessageQueue) -> None:
        self.offsets.pop(queue, None)


class RemoteOffsetStore(_MemoryTable):
    """Offsets committed to the queue's broker (clustering consumers)."""

    def __init__(self, instance: ClientInstance, group: str) -> None:
        super().__init__()
        self._instance = instance
        self._group = group
        self._persisted: dict[MessageQueue, int] = {}
        # One round at a time: a periodic round that read an offset before a queue was given
        # up must not land its older commit after the hand-off's (which would move the group
        # back once the next owner started).
        self._persisting = asyncio.Lock()

    async def read(self, queue: MessageQueue, *, zero_if_not_found: bool = True) -> int:
        """The group's committed offset on the broker, or -1 when it has none.

        Raises:
            RocketMQError: the broker cannot be asked or refuses.
        """
        address = self._instance.routes.any_address(queue.broker_name)
        if address is None:
            await self._instance.fetch_route(queue.topic)
            address = self._instance.routes.any_address(queue.broker_name)
        if address is None:
            raise RocketMQError(f"broker {queue.broker_name} of {queue} has no known address")
        response = await self._instance.invoke(
            address,
            RequestCode.QUERY_CONSUMER_OFFSET,
            {
                "consumerGroup": self._group,
                "topic": queue.topic,
                "queueId": str(queue.queue_id),
                "setZeroIfNotFound": "true" if zero_if_not_found else "false",
            },
        )
        if response.code == ResponseCode.QUERY_NOT_FOUND:
            return -1
        if response.code != ResponseCode.SUCCESS:
            raise error_for_response(response.code, response.remark, f"offset query of {queue}")
        offset = int(response.ext_fields.get("offset", -1))
        self.update(queue, offset)
        self._persisted[queue] = offset
        return offset

    async def persist(self, queues: Iterable[MessageQueue]) -> None:
        async with self._persisting:
            for queue in list(queues):
                await self._persist_one(queue)

    async def _persist_one(self, queue: MessageQueue) -> None:
        offset = self.offsets.get(queue)
        if offset is None or offset < 0 or self._persisted.get(queue) == offset:
            return
        # As RocketMQ: to the master, or to a slave while the master is away (the slave
        # keeps the progress for readers that start meanwhile). Only the master's copy
        # counts as persisted: it is committed again until the master is back to take it.
        master = self._instance.routes.master_address(queue.broker_name)
        address = master or self._instance.routes.any_address(queue.broker_name)
        if address is None:
            return
        try:
            response = await self._instance.invoke(
                address,
                RequestCode.UPDATE_CONSUMER_OFFSET,
                {
                    "consumerGroup": self._group,
                    "topic": queue.topic,
                    "queueId": str(queue.queue_id),
                    "commitOffset": str(offset),
                },
            )
        except RocketMQError as exc:
            log.warning("cannot commit offset %d of %s: %s", offset, queue, exc)
            return
        if response.code == ResponseCode.SUCCESS:
            if address == master:
                self._persisted[queue] = offset
        else:
            log.warning(
                "broker refused offset %d of %s: %s %s",
                offset,
                queue,
                response.code,
                response.remark,
            )

    def forget(self, queue: MessageQueue) -> None:
        super().forget(queue)
        self._persisted.pop(queue, None)


class LocalOffsetStore(_MemoryTable):
    """Offsets in `<directory>/<client id>/<group>/offsets.json` (broadcasting consumers)."""

    def __init__(self, directory: Path, client_id: str, group: str) -> None:
        super().__init__()
        self.path = directory / client_id.replace(":", "_") / group / "offsets.json"
        self._loaded = False

    def _load(self) -> None:
        self._loaded = True
        for path in (self.path, self.path.with_suffix(".json.bak")):
            try:
                document = json.loads(path.read_text("utf-8"))
            except FileNotFoundError:
                continue
            except (OSError, ValueError) as exc:
                log.warning("offset file %s is unreadable (%s): trying its backup", path, exc)
                continue
            for key, offset in (document.get("offsetTable") or {}).items():
                try:
                    item = json.loads(key)
                    queue = MessageQueue(item["topic"], item["brokerName"], int(item["queueId"]))
                except (ValueError, KeyError, TypeError):
                    continue
                self.offsets[queue] = int(offset)
            return

    async def read(self, queue: MessageQueue, *, zero_if_not_found: bool = True) -> int:
        del zero_if_not_found  # a local file has no young-queue rule
        if not self._loaded:
            self._load()
        return self.offsets.get(queue, -1)

    async def persist(self, queues: Iterable[MessageQueue]) -> None:
        del queues  # the file always holds every queue
        if not self._loaded:
            self._load()
        table = {
            json.dumps(
                {"brokerName": q.broker_name, "queueId": q.queue_id, "topic": q.topic},
                separators=(",", ":"),
            ): offset
            for q, offset in sorted(self.offsets.items())
        }
        text = json.dumps({"offsetTable": table}, indent=2)
        try:
            await asyncio.to_thread(_write_atomically, self.path, text)
        except OSError as exc:
            log.warning("cannot write offsets to %s: %s", self.path, exc)


def _write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        os.replace(path, path.with_suffix(".json.bak"))
    temporary = path.with_suffix(".json.tmp")
    with open(temporary, "w", encoding="utf-8") as file:
        file.write(text)
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, path)


def offset_store_for(
    instance: ClientInstance, group: str, message_model: MessageModel, directory: Path
) -> OffsetStore:
    """The broker for clustering groups, a local file under `directory` for broadcasting."""
    if message_model is MessageModel.CLUSTERING:
        return RemoteOffsetStore(instance, group)
    return LocalOffsetStore(directory, instance.client_id, group)
