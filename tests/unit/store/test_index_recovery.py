"""The index after a power loss: its newest sectors each reached the disk or not.

The index is synced up to some message, then written on; a power loss then keeps each sector
written since either as synced or as written (a disk writes a sector whole). Recovery
(`IndexService.recover`) must keep every key of the synced messages findable, and say from
where re-dispatch rebuilds the rest; after that re-dispatch every key is found again.
"""

from __future__ import annotations

import random
import struct
from dataclasses import dataclass
from pathlib import Path

import pytest

from pocketmq.runtime.clock import ManualClock
from pocketmq.store.index import IndexService, KeyedRecord

TOPIC = "T"
SECTOR = 512
ENTRY = struct.Struct(">iqii")
SYNCED = 30
"""Messages 0..SYNCED-1 were synced; recovery starts from message SYNCED's offset."""
MESSAGES = 60


def phys_of(message: int) -> int:
    return 1000 * (message + 1)


def keys_of(message: int) -> list[str]:
    return [f"k{message}-{n}" for n in range(1 + message % 3)]


def make_index(directory: Path, slots: int = 8, max_index: int = 400) -> IndexService:
    # Few slots make long chains that cross lost entries; more make chains that end in them.
    index = IndexService(
        directory, max_hash_slot_num=slots, max_index_num=max_index, clock=ManualClock()
    )
    index.load()
    return index


def put(index: IndexService, messages: range) -> None:
    index.build_index_many(
        KeyedRecord(TOPIC, " ".join(keys_of(m)), None, phys_of(m), 1_700_000_000_000)
        for m in messages
    )


def found(index: IndexService, message: int) -> bool:
    return all(
        index.query(TOPIC, key, 8, 0, 1 << 62) == [phys_of(message)] for key in keys_of(message)
    )


def assert_synced_kept_and_redispatch_restores(again: IndexService, resume: int) -> None:
    """Recovery kept every key of the synced messages below `resume`, and re-dispatching every
    message (what is indexed already is skipped) makes every key findable."""
    for message in range(SYNCED):
        if phys_of(message) < resume:
            assert found(again, message), f"lost the keys of synced message {message}"
    put(again, range(MESSAGES))
    for message in range(MESSAGES):
        assert found(again, message), f"message {message} not found after re-dispatch"


@dataclass(frozen=True)
class Written:
    """An index file synced after message SYNCED, written on to MESSAGES, then closed."""

    path: Path
    synced: bytes
    written: bytes
    synced_count: int
    count: int
    entries_pos: int

    def with_sector_as_synced(self, sector: int) -> None:
        """Writes the file back as written, but for `sector`, which comes back as synced."""
        image = bytearray(self.written)
        image[sector : sector + SECTOR] = self.synced[sector : sector + SECTOR]
        self.path.write_bytes(bytes(image))


def sync_then_write(directory: Path, slots: int) -> Written:
    index = make_index(directory, slots)
    put(index, range(SYNCED))
    (index_file,) = index.files
    synced_count = index_file.index_count
    synced = index_file.path.read_bytes()
    put(index, range(SYNCED, MESSAGES))
    written = Written(
        index_file.path,
        synced,
        index_file.path.read_bytes(),
        synced_count,
        index_file.index_count,
        index_file.size - 400 * 20,
    )
    index.close()
    return written


def power_loss_image(synced: bytes, written: bytes, rng: random.Random, *, keep: str) -> bytes:
    """Each sector that changed since the sync comes back synced or written: at random, or
    as `keep` says (`"head"`: the header and slots sector written, the rest lost;
    `"alternate"`: every other sector lost; `"one"`: one sector lost, the rest written, so an
    entry that straddles into it comes back whole but for its end)."""
    image = bytearray(written)
    changed = [
        start
        for start in range(0, len(written), SECTOR)
        if synced[start : start + SECTOR] != written[start : start + SECTOR]
    ]
    the_one = rng.choice(changed[1:])
    for start in changed:
        end = start + SECTOR
        if keep == "one":
            lost = start == the_one
        elif keep == "head":
            lost = start > 0
        elif keep == "alternate":
            lost = start // SECTOR % 2 == 1
        else:
            lost = rng.random() < 0.5
        if lost:
            image[start:end] = synced[start:end]
    return bytes(image)


@pytest.mark.parametrize("slots", [8, 64])
@pytest.mark.parametrize("keep", ["head", "alternate", "one", "random"])
@pytest.mark.parametrize("seed", range(25))
def test_synced_keys_survive_and_redispatch_restores_the_rest(
    tmp_path: Path, seed: int, keep: str, slots: int
) -> None:
    w = sync_then_write(tmp_path, slots)
    w.path.write_bytes(power_loss_image(w.synced, w.written, random.Random(seed), keep=keep))

    again = make_index(tmp_path, slots)
    resume = again.recover(phys_of(SYNCED))
    assert resume <= phys_of(SYNCED)
    assert again.max_phy_offset < resume
    assert_synced_kept_and_redispatch_restores(again, resume)


def test_entries_that_reach_into_a_zeroed_sector_are_dropped_and_indexed_again(
    tmp_path: Path,
) -> None:
    """A sector of entries reads as zeros, even below the offset recovery was given: no entry
    touching it is kept, nor the last message before it (its other keys may be in it), and
    re-dispatch from the offset returned finds every key again."""
    index = make_index(tmp_path)
    put(index, range(MESSAGES))
    (index_file,) = index.files
    path = index_file.path
    entries_pos = index_file.size - 400 * 20
    middle = entries_pos + index_file.index_count * 20 // 2
    index.close()
    image = bytearray(path.read_bytes())
    start = middle - middle % SECTOR
    image[start : start + SECTOR] = bytes(SECTOR)
    path.write_bytes(bytes(image))

    again = make_index(tmp_path)
    resume = again.recover(phys_of(MESSAGES))
    assert phys_of(0) < resume < phys_of(MESSAGES // 2)
    assert again.max_phy_offset < resume
    put(again, range(MESSAGES))
    for message in range(MESSAGES):
        assert found(again, message), f"message {message} not found after re-dispatch"


def test_an_entry_whose_end_was_lost_does_not_end_its_chain(tmp_path: Path) -> None:
    """An entry written after the sync straddles two sectors, and only the second is lost: it
    reads whole but for its link, which reads 0. Walking its slot back through it would end
    the chain there and lose the synced keys behind it; recovery must see the entry is not
    sound and find the slot's newest synced entry itself."""
    slots = 32  # with these keys, one such entry exists (the test says so if not)
    w = sync_then_write(tmp_path, slots)
    synced_count, count, base = w.synced_count, w.count, w.entries_pos
    entries = [ENTRY.unpack_from(w.written, base + n * 20) for n in range(count)]
    slot_of = [h % slots for h, _, _, _ in entries]

    def cut(n: int) -> int | None:
        """The sector entry n reaches into, if it straddles one, else None."""
        start = base + n * 20
        boundary = (start // SECTOR + 1) * SECTOR
        return boundary if boundary < start + 20 else None

    def fits(n: int) -> bool:
        sector = cut(n)
        if sector is None or entries[n][3] == 0:
            return False
        newer_same_slot = [m for m in range(n + 1, count) if slot_of[m] == slot_of[n]]
        in_lost = [m for m in newer_same_slot if base + m * 20 < sector + SECTOR]
        synced_same_slot = [m for m in range(1, synced_count) if slot_of[m] == slot_of[n]]
        return not in_lost and bool(synced_same_slot)

    victim = next((n for n in range(synced_count, count) if fits(n)), None)
    assert victim is not None, "no entry fits the case: change the keys or the slot count"
    sector = cut(victim)
    assert sector is not None
    w.with_sector_as_synced(sector)

    again = make_index(tmp_path, slots)
    resume = again.recover(phys_of(SYNCED))
    for message in range(SYNCED):
        if phys_of(message) < resume:
            assert found(again, message), f"lost the keys of synced message {message}"


def test_a_sector_synced_half_full_loses_the_entries_after_the_sync(tmp_path: Path) -> None:
    """The sector where the synced entries end was synced half full and comes back so, while
    the header, the slots and the later sectors were written: entries after the sync read as
    zeros there, in a sector that is not all zeros. Their slots point past what recovery
    keeps and must be walked back even so; with many slots, few of them are the slots of the
    entries that still read whole."""
    slots = 4096
    w = sync_then_write(tmp_path, slots)
    boundary = w.entries_pos + w.synced_count * 20
    sector = boundary - boundary % SECTOR
    assert sector > w.entries_pos, "the sync must end past the first sector of entries"
    assert boundary % SECTOR, "the sync must end inside a sector of entries"
    w.with_sector_as_synced(sector)

    again = make_index(tmp_path, slots)
    resume = again.recover(phys_of(SYNCED))
    (recovered,) = again.files
    table = struct.unpack_from(f">{slots}i", recovered._buffer, 40)
    past = [(slot, head) for slot, head in enumerate(table) if head >= recovered.index_count]
    assert not past, f"slots still point past the {recovered.index_count} entries kept: {past}"
    assert_synced_kept_and_redispatch_restores(again, resume)


@pytest.mark.parametrize("keep", ["head", "alternate", "one", "random"])
@pytest.mark.parametrize("seed", range(10))
def test_a_file_filled_since_its_sync_loses_its_last_sector(
    tmp_path: Path, seed: int, keep: str
) -> None:
    """The index is synced, then written on until the file is full and the index rolls over,
    and the power goes before the next flush. A file's size is no multiple of a sector, so
    its last sector is partial; when that sector was lost, the entry reaching into it kept
    its first bytes and lost its link, and recovery took it for whole (it compared the short
    sector with a full one of zeros): a slot then pointed at it and its chain ended there,
    losing older keys (seed 6, "one": message 4). The power-loss rounds
    (`max_index_num=4000`) hit it now and then as "index lost"."""
    index = make_index(tmp_path, max_index=100)
    put(index, range(SYNCED))
    (older,) = index.files
    synced = older.path.read_bytes()
    put(index, range(SYNCED, MESSAGES))
    assert len(index.files) == 2, "the index must have rolled over"
    written = older.path.read_bytes()
    index.close()
    older.path.write_bytes(power_loss_image(synced, written, random.Random(seed), keep=keep))

    again = make_index(tmp_path, max_index=100)
    resume = again.recover(phys_of(SYNCED))
    assert resume <= phys_of(SYNCED)
    assert_synced_kept_and_redispatch_restores(again, resume)
