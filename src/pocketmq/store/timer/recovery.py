"""Rebuilding the timer wheel from the timer log, and walking one slot's chain (blocking).

After an unclean stop the wheel may point past the log's end or miss its last entries, so it is
rebuilt rather than trusted: `rebuild_wheel` starts from an empty wheel and links, in log order,
every entry whose slot is not delivered yet. Each entry's `prev_pos` is rewritten when it is not
the slot's previous entry, so every chain is exactly its slot's entries in log order and no
pointer dangles. An entry beyond the wheel's reach (the geometry shrank) becomes a roll entry in
the farthest slot. The scan also yields the highest timer-topic queue offset in the log, which
is where enqueuing resumes.

`collect_chain` reads a due slot's chain (newest first, through `prev_pos`) into an array of
positions in log order, and the delete markers in it; it stops at the first entry that does not
belong to the slot, so a damaged chain costs the rest of that chain, never a wrong delivery.
"""

from __future__ import annotations

import logging
from array import array
from dataclasses import dataclass, field, replace

from pocketmq.store.timer.log import ENTRY_SIZE, FLAG_ROLL, TimerLog
from pocketmq.store.timer.wheel import NO_POSITION, Slot, TimerWheel

log = logging.getLogger(__name__)


@dataclass(slots=True)
class RebuildResult:
    """What `rebuild_wheel` found and did.

    Attributes:
        entries: Valid entries in the log.
        linked: Entries linked into the wheel (not delivered yet).
        pending: Linked entries that are timers, not delete markers.
        relinked: Entries whose `prev_pos` (or slot, for re-rolled ones) was rewritten.
        rerolled: Entries moved to the farthest slot because they lie beyond the wheel.
        max_queue_offset: The highest timer-topic queue offset in the log, -1 without entries.
    """

    entries: int = 0
    linked: int = 0
    pending: int = 0
    relinked: int = 0
    rerolled: int = 0
    max_queue_offset: int = -1


def rebuild_wheel(timer_log: TimerLog, wheel: TimerWheel, read_time_ms: int) -> RebuildResult:
    """Links every undelivered entry of the log into `wheel`, which must be empty.

    Args:
        timer_log: The log, already cut at its last valid entry (`TimerLog.recover_end`).
        wheel: An empty wheel (`TimerWheel.recreate`).
        read_time_ms: The first slot not yet delivered; entries of earlier slots are done.
    """
    result = RebuildResult()
    span_ms = wheel.max_span_ms()
    last_slot_ms = read_time_ms + span_ms - wheel.precision_ms
    for position, entry in timer_log.scan(timer_log.min_position):
        result.entries += 1
        result.max_queue_offset = max(result.max_queue_offset, entry.queue_offset)
        if entry.is_immediate or entry.time_ms < read_time_ms:
            continue
        fixed = entry
        if entry.time_ms - read_time_ms >= span_ms:
            fixed = replace(fixed, time_ms=last_slot_ms, flags=fixed.flags | FLAG_ROLL)
            result.rerolled += 1
        slot = wheel.get(fixed.time_ms)
        if fixed.prev_pos != slot.last_pos:
            fixed = replace(fixed, prev_pos=slot.last_pos)
        if fixed != entry:
            timer_log.rewrite(position, fixed)
            result.relinked += 1
        wheel.link(slot, position, delete_marker=fixed.is_delete and not fixed.is_roll)
        result.linked += 1
        if not fixed.is_delete:
            result.pending += 1
    return result


@dataclass(slots=True)
class SlotChain:
    """A due slot's entries in log order, and its delete markers.

    Attributes:
        positions: Log positions of the slot's entries, oldest first.
        deletes: Key hash -> CommitLog offsets of the delete markers with that hash.
    """

    positions: array[int] = field(default_factory=lambda: array("q"))
    deletes: dict[int, list[int]] = field(default_factory=dict)


def collect_chain(timer_log: TimerLog, slot: Slot) -> SlotChain:
    """Reads the chain of `slot` from its newest entry back to its first.

    Stops early (with a warning) at an entry that is unreadable, belongs to another slot, or
    points forward: the entries collected so far are still right.
    """
    chain = SlotChain()
    position = slot.last_pos
    # A chain cannot hold more entries than the log: a bound even if pointers were damaged.
    limit = (timer_log.end_position - timer_log.min_position) // ENTRY_SIZE + 1
    while position != NO_POSITION and len(chain.positions) < limit:
        entry = timer_log.read(position)
        if entry is None or entry.time_ms != slot.time_ms:
            log.warning(
                "timer slot %d: entry at log position %d is %s; the chain ends there",
                slot.time_ms,
                position,
                "unreadable" if entry is None else f"of slot {entry.time_ms}",
            )
            break
        chain.positions.append(position)
        if entry.is_delete and not entry.is_roll:
            chain.deletes.setdefault(entry.key_hash, []).append(entry.commit_offset)
        if entry.prev_pos >= position:
            log.warning(
                "timer slot %d: entry at %d points forward to %d; the chain ends there",
                slot.time_ms,
                position,
                entry.prev_pos,
            )
            break
        position = entry.prev_pos
    chain.positions.reverse()
    return chain
