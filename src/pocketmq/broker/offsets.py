"""Consumer offsets (`ConsumerOffsetManager`): where each group is in each queue.

`config/consumerOffset.json` in RocketMQ's shape: `{"offsetTable": {"<topic>@<group>":
{"<queueId>": offset}}}`. Queue ids are written as JSON strings (fastjson writes bare numbers,
which no standard JSON reader takes); both forms load.

Pure: the broker commits on the loop, snapshots periodically (`flushConsumerOffsetInterval`)
and on stop, and saves the snapshot off the loop.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Final

log = logging.getLogger(__name__)

TOPIC_GROUP_SEPARATOR: Final = "@"


class ConsumerOffsetTable:
    """Committed offsets by (topic, group), then queue id."""

    def __init__(self) -> None:
        self._table: dict[tuple[str, str], dict[int, int]] = {}
        self.changed = False
        # Commits taken since the last `replace_all`: on a slave, progress made while the
        # master was away, to hand back to it.
        self._committed_here: set[tuple[str, str, int]] = set()
        self.listener: Callable[[tuple[Any, ...]], None] | None = None
        """Told of each commit and removal (a DLedger leader replicates them)."""

    def load(self, document: Any) -> None:
        if not isinstance(document, dict):
            return
        for key, queues in (document.get("offsetTable") or {}).items():
            topic, sep, group = str(key).rpartition(TOPIC_GROUP_SEPARATOR)
            if not sep or not isinstance(queues, dict):
                log.warning("consumer offsets: skipping malformed entry %r", key)
                continue
            self._table[(topic, group)] = {int(q): int(o) for q, o in queues.items()}

    def snapshot(self) -> dict[str, Any]:
        """The `consumerOffset.json` document, to be saved (clears `changed`)."""
        self.changed = False
        return self.document()

    def document(self) -> dict[str, Any]:
        """The `consumerOffset.json` document (also the GET_ALL_CONSUMER_OFFSET answer)."""
        return {
            "offsetTable": {
                f"{topic}{TOPIC_GROUP_SEPARATOR}{group}": {str(q): o for q, o in sorted(qs.items())}
                for (topic, group), qs in sorted(self._table.items())
            }
        }

    def replace_all(self, document: Any) -> None:
        """Takes a master's whole table in place of this one (a slave's sync)."""
        self._table.clear()
        self._committed_here.clear()
        self.load(document)
        self.changed = True

    def ahead_of(self, document: Any) -> list[tuple[str, str, int, int]]:
        """(group, topic, queue id, offset) of commits taken here that are further than the
        master's `document` says: progress a slave took while its master was away."""
        other = ConsumerOffsetTable()
        other.load(document)
        ahead = []
        for topic, group, queue_id in sorted(self._committed_here):
            mine = self.query(group, topic, queue_id)
            theirs = other.query(group, topic, queue_id)
            if mine is not None and (theirs is None or mine > theirs):
                ahead.append((group, topic, queue_id, mine))
        return ahead

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        """Sets the offset, lower or higher (UPDATE_CONSUMER_OFFSET, resets, a slave's sync)."""
        self._table.setdefault((topic, group), {})[queue_id] = offset
        self._committed_here.add((topic, group, queue_id))
        self.changed = True
        if self.listener is not None:
            self.listener(("commit", group, topic, queue_id, offset))

    def advance(self, group: str, topic: str, queue_id: int, offset: int) -> bool:
        """Commits `offset` unless the committed one is already further; True if it did.

        For the commitOffset a pull carries (FLAG_COMMIT_OFFSET). RocketMQ's
        `ConsumerOffsetManager` takes it even when lower and only logs it, but a pull's value
        is the puller's in-memory progress when it sent the pull: lower than what is committed
        it can only be stale (a pull still in flight from an owner that has since committed
        on giving the queue up, and whose next owner has moved on), and taking it would make
        the next reader redeliver. Moving an offset back stays possible where it is meant:
        UPDATE_CONSUMER_OFFSET (a consumer correcting an offset the queue no longer holds)
        and an administrator's reset both use `commit`.
        """
        known = self.query(group, topic, queue_id)
        if known is not None and offset < known:
            log.debug(
                "pull commit %d of %s@%s/%d is behind the committed %d: kept %d",
                offset,
                topic,
                group,
                queue_id,
                known,
                known,
            )
            return False
        self.commit(group, topic, queue_id, offset)
        return True

    def entries(self) -> list[tuple[tuple[str, str], dict[int, int]]]:
        """Every (topic, group) and its committed offsets by queue (a copy of the keys)."""
        return list(self._table.items())

    def query(self, group: str, topic: str, queue_id: int) -> int | None:
        """The committed offset, or None when the group never committed for that queue."""
        return self._table.get((topic, group), {}).get(queue_id)

    def queues(self, group: str, topic: str) -> dict[int, int]:
        return dict(self._table.get((topic, group), {}))

    def groups_of_topic(self, topic: str) -> set[str]:
        return {group for (t, group) in self._table if t == topic}

    def topics_of_group(self, group: str) -> set[str]:
        return {topic for (topic, g) in self._table if g == group}

    def remove_group(self, group: str) -> None:
        for key in [k for k in self._table if k[1] == group]:
            del self._table[key]
            self.changed = True
        if self.listener is not None:
            self.listener(("remove_group", group))

    def remove_topic(self, topic: str) -> None:
        for key in [k for k in self._table if k[0] == topic]:
            del self._table[key]
            self.changed = True
        if self.listener is not None:
            self.listener(("remove_topic", topic))
