"""The state machine a DLedger group replicates: the broker's CommitLog (with its ConsumeQueue
and index, dispatched from it) and its metadata tables.

A committed PUT is appended with the leader's store time and host, so every replica holds the
same bytes at the same offsets; a committed META changes the tables (`metadata.py`).

Snapshots: the image holds the metadata tables and the CommitLog's end at the snapshot index,
taken after the CommitLog was flushed to that end. A restart restores the image, cuts the
CommitLog back to that end (what lies beyond it was applied from entries the Raft log still
holds, and is applied again byte for byte), then the node applies the entries after it. Before
any snapshot the image is empty: the CommitLog is cut to its start and rebuilt from the log.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable

from pocketmq.broker.dledger.commands import (
    CommandError,
    Kind,
    decode_meta,
    decode_put,
    kind_of,
)
from pocketmq.broker.replicated_metadata import ReplicatedMetadata
from pocketmq.store.api import NEVER_STORABLE, PutResult
from pocketmq.store.message_store import MessageStore

log = logging.getLogger(__name__)


class DivergenceError(RuntimeError):
    """This replica cannot apply what the group committed (a disk that refuses writes): it
    must stop rather than hold a different CommitLog from the others."""


class CommitLogStateMachine:
    def __init__(
        self,
        store: MessageStore,
        metadata: ReplicatedMetadata,
        origin: Callable[[], tuple[int, int]],
    ) -> None:
        """
        Args:
            store: The broker's loaded store.
            metadata: The replicated tables.
            origin: (this node's id, its current term): META commands it proposed in this term
                are already in its tables.
        """
        self.store = store
        self.metadata = metadata
        self._origin = origin
        self.applied_puts = 0

    def apply(self, index: int, command: bytes) -> PutResult | None:
        try:
            kind = kind_of(command)
            if kind is Kind.PUT:
                return self._apply_put(index, command)
            if kind is Kind.META:
                document = decode_meta(command)
                if tuple(document.pop("origin", ())) != self._origin():
                    self.metadata.apply(document)
        except CommandError as exc:
            log.error("raft entry %d skipped: %s", index, exc)
        return None

    def _apply_put(self, index: int, command: bytes) -> PutResult:
        put = decode_put(command)
        result = self.store.append_replicated(
            put.messages, store_timestamp=put.store_timestamp, store_host=put.store_host
        )
        if result.ok:
            self.applied_puts += 1
        elif result.status not in NEVER_STORABLE:
            # Legality is decided by the bytes alone, the same everywhere; anything else is
            # this replica's disk, and skipping the entry would make its CommitLog differ.
            raise DivergenceError(
                f"raft entry {index} committed by the group could not be stored here: "
                f"{result.status.value} {result.remark}; stop this replica, fix its disk and "
                "start it again (it catches up from the others)"
            )
        return result

    def snapshot(self) -> bytes:
        store = self.store
        store.commit_log.files.flush()
        image = {"commitLogEnd": store.max_phy_offset, "metadata": self.metadata.image()}
        return json.dumps(image, separators=(",", ":")).encode()

    def restore(self, image: bytes) -> None:
        store = self.store
        end = store.min_phy_offset
        if image:
            decoded = json.loads(image)
            end = int(decoded["commitLogEnd"])
            self.metadata.restore(decoded["metadata"])
        have = store.max_phy_offset
        if have > end:
            log.info(
                "CommitLog cut back from %d to %d (the snapshot's end); the Raft log applies "
                "the rest again",
                have,
                end,
            )
            store.truncate(end)
        elif have < end:
            # A leader's snapshot reached a replica that lacks what it covers (the leader
            # compacted while following): appending after it would put every later message at
            # the wrong offset, so this replica stops instead.
            raise DivergenceError(
                f"the CommitLog ends at {have}, before the snapshot's end {end}: this replica "
                "lacks data the group committed; stop it, copy the store of a healthy replica "
                "here and start it again"
            )
