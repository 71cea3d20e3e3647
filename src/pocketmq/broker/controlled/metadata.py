"""Controller mode's metadata in the CommitLog: the master writes its metadata changes
(`ReplicatedMetadata` documents) as records of the system topic `rmq_sys_pocketmq_metadata`,
so they travel the HA stream with the messages and are acknowledged by the same write rule;
each slave applies them as it dispatches them. A consumer offset committed with
UPDATE_CONSUMER_OFFSET is answered once its record is acknowledged, so a new master has it.

Besides the changes, the master writes its whole tables (an image) when it starts and every
`IMAGE_INTERVAL_S`: a slave that joined late, or started from a master whose oldest CommitLog
files were deleted, holds complete tables once it read one.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Sequence
from typing import Any, Final

from pocketmq.broker.put_path import PutPath
from pocketmq.broker.replicated_metadata import MetadataTables, ReplicatedMetadata
from pocketmq.common.stored_message import HostAddress
from pocketmq.common.topic_names import METADATA_TOPIC
from pocketmq.runtime.event_loop import cancel_and_wait
from pocketmq.store.api import MessageToStore, PutStatus
from pocketmq.store.dispatch import DispatchRequest
from pocketmq.store.message_store import MessageStore

log = logging.getLogger(__name__)

IMAGE_INTERVAL_S: Final = 10.0


class MetadataNotReplicated(OSError):
    """The record was not acknowledged by the copies the write rule asks for."""


class MetadataLog:
    """Writes a master's metadata records; applies them on a slave."""

    def __init__(
        self,
        store: MessageStore,
        put: PutPath,
        tables: MetadataTables,
        *,
        store_host: HostAddress,
        serving: Callable[[], bool],
    ) -> None:
        self.store = store
        self._put = put
        self._store_host = store_host
        self._serving = serving
        self.metadata = ReplicatedMetadata(tables, self._write)
        self._image_task: asyncio.Task[None] | None = None
        self.applied = 0
        store.dispatcher.on_dispatched.append(self._on_dispatched)

    # -- the master ------------------------------------------------------------------------------
    def start(self) -> None:
        self.metadata.start_recording()
        self._image_task = asyncio.get_running_loop().create_task(
            self._images(), name="metadata-images"
        )

    async def stop(self) -> None:
        if self._image_task is not None:
            await cancel_and_wait(self._image_task)
            self._image_task = None
        await self.metadata.stop_recording()

    async def flush(self) -> None:
        """Writes what changed and returns once the record is acknowledged.

        Raises:
            MetadataNotReplicated: it was not (this broker stepped down, a slave is missing).
        """
        await self.metadata.flush()

    async def _images(self) -> None:
        while True:
            try:
                await self._write({"image": self.metadata.image()})
            except MetadataNotReplicated as exc:
                log.debug("metadata image not replicated: %s", exc)
            await asyncio.sleep(IMAGE_INTERVAL_S)

    async def _write(self, document: dict[str, Any]) -> None:
        body = json.dumps(document, separators=(",", ":")).encode()
        record = MessageToStore(
            METADATA_TOPIC,
            body,
            born_timestamp=self.metadata.tables.clock.now_ms(),
            born_host=self._store_host,
        )
        result = (await self._put.put((record,))).result
        if result.status is not PutStatus.PUT_OK:
            raise MetadataNotReplicated(
                f"metadata record not acknowledged: {result.status.value} {result.remark or ''}"
            )

    # -- a slave -----------------------------------------------------------------------------------
    def _on_dispatched(self, run: Sequence[DispatchRequest]) -> None:
        for request in run:
            if request.topic == METADATA_TOPIC and not self._serving():
                self._apply_record(request)

    def _apply_record(self, request: DispatchRequest) -> None:
        stored = self.store.look_message_by_offset(request.commit_log_offset)
        if stored is None:
            return
        try:
            document = json.loads(stored.body)
        except ValueError as exc:
            log.error("a metadata record at offset %d is not JSON (%s); skipped",
                      request.commit_log_offset, exc)  # fmt: skip
            return
        if "image" in document:
            self.metadata.restore(document["image"])
        else:
            self.metadata.apply(document)
        self.applied += 1
