"""The index's per-key loops, interpreted: what `index_kernel` does where the build compiled
nothing, and the reference the tests hold that kernel to, byte for byte.

They take the same parallel lists as the kernel. Slots are read through `struct` (the
kernel's word-by-word reads would be slower interpreted), and keys are hashed by
`java_hash.index_hash` (compiled or interpreted, whichever the build has).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Final

from pocketmq.common.constants import KEY_SEPARATOR
from pocketmq.common.java_hash import index_hash
from pocketmq.runtime.filesystem import Buffer

if TYPE_CHECKING:
    from pocketmq.store.index import IndexedRecord

_SLOT: Final = struct.Struct(">i")
"""A slot of the table: the file's big-endian Java int."""
_JAVA_INT_MAX: Final = (1 << 31) - 1


def collect(
    records: Iterable[IndexedRecord],
    through: int,
    prefix_hash: Callable[[str], int],
    hashes: list[int],
    offsets: list[int],
    times: list[int],
) -> int:
    """`index_kernel.collect`, interpreted."""
    topic: str | None = None
    prefix = 0
    for record in records:
        phys_offset = record.commit_log_offset
        keys = record.keys
        uniq_key = record.uniq_key
        if phys_offset <= through or not (keys or uniq_key):
            continue
        if record.topic != topic:  # a run is mostly of one topic: its prefix hashed once
            topic = record.topic
            prefix = prefix_hash(topic)
        store_ms = record.store_timestamp
        before = len(hashes)
        if uniq_key:
            hashes.append(index_hash(prefix, uniq_key))
        if KEY_SEPARATOR not in keys:
            if keys:
                hashes.append(index_hash(prefix, keys))
        else:
            hashes.extend([index_hash(prefix, key) for key in keys.split(KEY_SEPARATOR) if key])
        added = len(hashes) - before
        if added:  # KEYS of only spaces name no key
            offsets.extend((phys_offset,) * added)
            times.extend((store_ms,) * added)
            through = phys_offset
    return through


def link(
    buf: Buffer,
    table_pos: int,
    slots: int,
    first: int,
    begin_ms: int,
    hashes: list[int],
    offsets: list[int],
    times: list[int],
    start: int,
    count: int,
    fields: list[int],
    links: dict[int, int],
) -> tuple[int, int]:
    """`index_kernel.link`, interpreted, with the slot table at `buf[table_pos:]`."""
    unpack_slot = _SLOT.unpack_from
    add = fields.extend
    number = first
    new_slots = 0
    newest = last_ms = -1
    seconds = 0
    stop = start + count
    for h, offset, stored in zip(
        hashes[start:stop], offsets[start:stop], times[start:stop], strict=True
    ):
        slot = h % slots
        previous = links.get(slot)
        if previous is None:
            previous = unpack_slot(buf, table_pos + slot * _SLOT.size)[0]
            if not 0 < previous < first:
                previous = 0
                new_slots += 1
        if stored != last_ms:  # a run shares its store times
            last_ms = stored
            seconds = min(max((stored - begin_ms) // 1000, 0), _JAVA_INT_MAX)
            newest = max(newest, stored)
        add((h, offset, seconds, previous))
        links[slot] = number
        number += 1
    return new_slots, newest
