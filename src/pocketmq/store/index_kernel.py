"""The index's per-key work in dispatch, written to be compiled by mypyc (`setup.py`): the keys
of a run of records hashed, then their entries linked into a file's slot chains.

Compiled, a message with a key and a unique id costs about a third less here than in
`index.py` and `index_file.py`'s interpreted loops, as its hashes, key splits and slot reads
run without a Python frame. Interpreted, the slot reads below (a word at a time, byte-swapped
by arithmetic) would be slower than `struct`, so the index calls these functions only when
compiled (`KERNEL_COMPILED`), and its interpreted loops stay the reference that the tests hold
these to, byte for byte.

The slot table is read and written as native unsigned 32-bit words (`memoryview.cast("I")`);
the file holds big-endian Java ints, so `swap` says whether each word must be byte-swapped.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from mypy_extensions import i64

from pocketmq.common.hash_kernel import index_hash

KEY_SEPARATOR: Final = " "
_JAVA_INT_MAX: Final = 0x7FFFFFFF


def _swapped(word: i64) -> i64:
    """`word` (32 bits) with its bytes in the other order."""
    return (
        ((word & 0xFF) << 24) | ((word & 0xFF00) << 8) | ((word >> 8) & 0xFF00) | (word >> 24)
    ) & 0xFFFFFFFF


def collect(
    records: Any,
    through: int,
    prefix_hash: Callable[[str], int],
    hashes: list[int],
    offsets: list[int],
    times: list[int],
) -> int:
    """Appends the index entries of `records` (dispatch requests: topic, keys, uniq_key,
    commit_log_offset, store_timestamp) past CommitLog offset `through`: its unique id, then
    each of its KEYS (split on spaces, empty pieces skipped), hashed with the unsigned hash of
    its `topic#` from `prefix_hash`.

    Returns:
        The offset of the last record that had an entry, or `through` when none had.
    """
    last: i64 = through
    topic = ""
    seen = False
    prefix: i64 = 0
    for record in records:
        offset: i64 = record.commit_log_offset
        keys: str = record.keys
        uniq_key: str | None = record.uniq_key
        if offset <= last or not (keys or uniq_key):
            continue
        record_topic: str = record.topic
        if not seen or record_topic != topic:  # a run is mostly of one topic
            topic = record_topic
            seen = True
            prefix = prefix_hash(topic)
        stored: i64 = record.store_timestamp
        before = len(hashes)
        if uniq_key:
            hashes.append(index_hash(prefix, uniq_key))
            offsets.append(offset)
            times.append(stored)
        start: i64 = 0
        end: i64 = len(keys)
        while start < end:
            stop: i64 = keys.find(KEY_SEPARATOR, start)
            if stop < 0:
                stop = end
            if stop > start:
                hashes.append(index_hash(prefix, keys[start:stop]))
                offsets.append(offset)
                times.append(stored)
            start = stop + 1
        if len(hashes) > before:  # KEYS of only spaces name no key
            last = offset
    return last


def link(
    words: Any,
    swap: bool,
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
    """Chains `count` entries from `start` of the parallel lists into a file whose next entry
    is number `first`: appends each entry's fields (hash, offset, seconds since `begin_ms`,
    previous entry) to `fields`, and its slot's newest entry to `links` (slot: number).
    Nothing is written to the file; slots already linked to an entry before `first` are read
    from `words`.

    Returns:
        How many slots were empty (or held no entry before `first`), and the newest store time
        among the entries.
    """
    number: i64 = first
    new_slots: i64 = 0
    newest: i64 = -1
    last_ms: i64 = -1
    seconds: i64 = 0
    table: i64 = slots
    for i in range(start, start + count):
        h: i64 = hashes[i]
        slot: i64 = h % table
        linked = links.get(slot)
        if linked is None:
            previous: i64 = words[slot]
            if swap:
                previous = _swapped(previous)
            if not 0 < previous < first:
                previous = 0
                new_slots += 1
        else:
            previous = linked
        stored: i64 = times[i]
        if stored != last_ms:  # a run shares its store times
            last_ms = stored
            seconds = (stored - begin_ms) // 1000
            if seconds < 0:
                seconds = 0
            elif seconds > _JAVA_INT_MAX:
                seconds = _JAVA_INT_MAX
            if stored > newest:
                newest = stored
        fields.append(h)
        fields.append(offsets[i])
        fields.append(seconds)
        fields.append(previous)
        links[slot] = number
        number += 1
    return new_slots, newest


def write_slots(words: Any, swap: bool, links: dict[int, int]) -> None:
    """Points each slot in `links` at its entry."""
    for slot, number in links.items():
        word: i64 = number
        words[slot] = _swapped(word) if swap else word
