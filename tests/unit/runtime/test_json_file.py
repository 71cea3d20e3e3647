"""JsonFile: round trips, the `.bak` fallback, torn files and power loss at every step of a save."""

from __future__ import annotations

import contextlib
import json
import logging
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pocketmq.runtime.json_file import JsonFile, MetadataError, encode_document
from pocketmq.testing.simulated_disk import PowerLost, SimulatedDisk

OLD: dict[str, Any] = {"offsetTable": {"TopicTest@group": {"0": 12, "1": 7}}, "version": 1}
NEW: dict[str, Any] = {
    "offsetTable": {"TopicTest@group": {"0": 40, "1": 33}, "Topic-é@g": {"0": 1}},
    "version": 2,
}


def file_bytes(data: Any, tmp_path: Path) -> bytes:
    """The exact bytes `save` writes for `data`."""
    scratch = JsonFile(tmp_path / "scratch" / "data.json")
    scratch.save(data)
    return scratch.path.read_bytes()


def test_save_then_load_returns_the_same_document(tmp_path: Path) -> None:
    JsonFile(tmp_path / "topics.json").save(NEW)
    assert JsonFile(tmp_path / "topics.json").load() == NEW


def test_save_writes_indented_utf8_json(tmp_path: Path) -> None:
    file = JsonFile(tmp_path / "consumerOffset.json")
    file.save(NEW)
    text = file.path.read_text(encoding="utf-8")
    assert '\n  "offsetTable": {\n' in text
    assert "Topic-é@g" in text
    assert text.endswith("}\n")


def test_save_accepts_a_str_path_and_creates_the_directory(tmp_path: Path) -> None:
    path = tmp_path / "store" / "config" / "topics.json"
    JsonFile(str(path)).save([1, 2])
    assert json.loads(path.read_bytes()) == [1, 2]


def test_load_returns_none_when_no_file_exists(tmp_path: Path) -> None:
    assert JsonFile(tmp_path / "topics.json").load() is None


def test_save_keeps_the_previous_version_as_bak(tmp_path: Path) -> None:
    file = JsonFile(tmp_path / "topics.json")
    file.save(OLD)
    assert not file.backup_path.exists()
    file.save(NEW)
    assert json.loads(file.path.read_bytes()) == NEW
    assert json.loads(file.backup_path.read_bytes()) == OLD
    assert sorted(p.name for p in tmp_path.iterdir()) == ["topics.json", "topics.json.bak"]


def test_bak_is_a_separate_file_from_the_main_one(tmp_path: Path) -> None:
    file = JsonFile(tmp_path / "topics.json")
    file.save(OLD)
    file.save(NEW)
    file.save({"version": 3})
    assert json.loads(file.backup_path.read_bytes()) == NEW
    assert not os.path.samefile(file.path, file.backup_path)


def test_load_falls_back_to_bak_when_main_is_corrupt(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    file = JsonFile(tmp_path / "topics.json")
    file.save(OLD)
    file.save(NEW)
    file.path.write_bytes(b'{"offsetTable": {"Topic')
    with caplog.at_level(logging.WARNING, logger="pocketmq.runtime.json_file"):
        assert JsonFile(file.path).load() == OLD
    [record] = caplog.records
    assert record.levelno == logging.WARNING
    assert str(file.path) in record.getMessage()
    assert str(file.backup_path) in record.getMessage()
    assert "not valid JSON" in record.getMessage()


@pytest.mark.parametrize("content", [b"", b"   \n", b"\xff\xfe{}", b"null-ish"])
def test_load_treats_empty_or_undecodable_main_as_corrupt(tmp_path: Path, content: bytes) -> None:
    file = JsonFile(tmp_path / "topics.json")
    file.backup_path.write_bytes(json.dumps(OLD).encode())
    file.path.write_bytes(content)
    assert file.load() == OLD


def test_load_falls_back_to_bak_when_main_is_missing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    file = JsonFile(tmp_path / "topics.json")
    file.backup_path.write_bytes(json.dumps(OLD).encode())
    with caplog.at_level(logging.WARNING, logger="pocketmq.runtime.json_file"):
        assert file.load() == OLD
    assert "missing" in caplog.text
    assert str(file.backup_path) in caplog.text


def test_load_falls_back_to_bak_when_main_is_unreadable(tmp_path: Path) -> None:
    file = JsonFile(tmp_path / "topics.json")
    file.path.mkdir()  # reading a directory fails with an OSError on every platform
    file.backup_path.write_bytes(json.dumps(OLD).encode())
    assert file.load() == OLD


def test_load_ignores_a_leftover_torn_tmp(tmp_path: Path) -> None:
    file = JsonFile(tmp_path / "topics.json")
    file.save(OLD)
    file.temp_path.write_bytes(file_bytes(NEW, tmp_path)[:10])
    assert JsonFile(file.path).load() == OLD


def test_save_overwrites_a_leftover_tmp(tmp_path: Path) -> None:
    file = JsonFile(tmp_path / "topics.json")
    file.temp_path.write_bytes(b"x" * 10_000)
    file.save(NEW)
    assert JsonFile(file.path).load() == NEW
    assert not file.temp_path.exists()


def test_load_raises_when_main_and_bak_are_both_corrupt(tmp_path: Path) -> None:
    file = JsonFile(tmp_path / "topics.json")
    file.path.write_bytes(b"{")
    file.backup_path.write_bytes(b"[1,")
    with pytest.raises(MetadataError) as caught:
        file.load()
    message = str(caught.value)
    assert str(file.path) in message
    assert str(file.backup_path) in message
    assert "restore" in message
    assert "delete" in message


def test_load_raises_when_main_is_corrupt_and_bak_missing(tmp_path: Path) -> None:
    file = JsonFile(tmp_path / "topics.json")
    file.path.write_bytes(b'{"a": ')
    with pytest.raises(MetadataError, match="missing"):
        file.load()


def test_load_raises_when_main_is_missing_and_bak_corrupt(tmp_path: Path) -> None:
    file = JsonFile(tmp_path / "topics.json")
    file.backup_path.write_bytes(b"{]")
    with pytest.raises(MetadataError, match="not valid JSON"):
        file.load()


def test_torn_main_file_loads_old_or_new_never_garbage(tmp_path: Path) -> None:
    """A filesystem that tore the main file at any byte: load gives a whole version."""
    new_content = file_bytes(NEW, tmp_path)
    file = JsonFile(tmp_path / "topics.json")
    file.save(OLD)
    file.save(OLD)  # `.bak` holds the old version too
    for length in range(len(new_content) + 1):
        file.path.write_bytes(new_content[:length])
        loaded = JsonFile(file.path).load()
        assert loaded in (OLD, NEW), length
        assert (loaded == NEW) == (length >= len(new_content) - 1), length  # "\n" is optional


def test_torn_main_file_without_bak_loads_new_or_raises(tmp_path: Path) -> None:
    new_content = file_bytes(NEW, tmp_path)
    file = JsonFile(tmp_path / "topics.json")
    for length in range(1, len(new_content) + 1):
        file.path.write_bytes(new_content[:length])
        try:
            loaded = JsonFile(file.path).load()
        except MetadataError:
            continue
        assert loaded == NEW, length


def test_torn_bak_does_not_matter_while_main_is_good(tmp_path: Path) -> None:
    old_content = file_bytes(OLD, tmp_path)
    file = JsonFile(tmp_path / "topics.json")
    file.save(NEW)
    for length in range(len(old_content) + 1):
        file.backup_path.write_bytes(old_content[:length])
        assert JsonFile(file.path).load() == NEW


@pytest.mark.parametrize("saves_before", [0, 1, 2])
@pytest.mark.parametrize("seed", range(6))
def test_power_loss_at_any_call_of_save_leaves_old_or_new(saves_before: int, seed: int) -> None:
    """Power goes at every call of a save in turn, on a disk that keeps only what was synced
    (torn pages, a random prefix of unsynced directory changes): the file reads back as the
    version before the save or the new one, and as the new one once the save returned."""
    versions = [{"version": n, "pad": "x" * 5000} for n in range(saves_before)]
    old = versions[-1] if versions else None
    completed = False
    for step in range(1, 60):
        disk = SimulatedDisk(seed * 1000 + step)
        file = JsonFile(Path("/store/config/consumerOffset.json"), disk)
        for version in versions:
            file.save(version)
        disk.lose_power_at(step)
        try:
            file.save(NEW)
            completed = True
        except PowerLost:
            pass
        disk.power_loss()
        disk.reboot()
        loaded = JsonFile(file.path, disk).load()
        if completed:
            assert loaded == NEW, step
            break
        assert loaded in (old, NEW), step
    assert completed


def test_power_loss_before_the_directory_sync_may_lose_only_the_new_version() -> None:
    """A mutant that skips the directory sync after the rename is caught: the save returned,
    yet a power loss brings the old version back."""
    for seed in range(40):
        disk = SimulatedDisk(seed)
        file = JsonFile(Path("/store/config/topics.json"), disk)
        file.save(OLD)
        real_sync = disk.sync_directory
        disk.sync_directory = lambda path: None  # type: ignore[method-assign]
        file.save(NEW)
        disk.sync_directory = real_sync  # type: ignore[method-assign]
        disk.power_loss()
        disk.reboot()
        if JsonFile(file.path, disk).load() != NEW:
            return
    pytest.fail("no seed lost the unsynced rename: the simulated disk is too kind")


def test_save_after_falling_back_keeps_the_good_bak(tmp_path: Path) -> None:
    file = JsonFile(tmp_path / "topics.json")
    file.save(OLD)
    file.save(OLD)
    file.path.write_bytes(b"{torn")
    reopened = JsonFile(file.path)
    assert reopened.load() == OLD
    reopened.save(NEW)
    assert json.loads(file.backup_path.read_bytes()) == OLD
    assert json.loads(file.path.read_bytes()) == NEW


def test_save_copies_aside_when_hard_links_are_unsupported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_links(source: object, target: object) -> None:
        raise PermissionError(1, "Operation not permitted")

    file = JsonFile(tmp_path / "topics.json")
    file.save(OLD)
    monkeypatch.setattr(os, "link", no_links)
    file.save(NEW)
    assert json.loads(file.path.read_bytes()) == NEW
    assert json.loads(file.backup_path.read_bytes()) == OLD


@pytest.mark.parametrize("data", [3, "text", None, True])
def test_save_refuses_a_scalar_document(tmp_path: Path, data: object) -> None:
    file = JsonFile(tmp_path / "topics.json")
    with pytest.raises(TypeError, match="object or array"):
        file.save(data)
    assert not tmp_path.joinpath("topics.json").exists()


def test_save_of_unencodable_data_leaves_files_untouched(tmp_path: Path) -> None:
    file = JsonFile(tmp_path / "topics.json")
    file.save(OLD)
    with pytest.raises(TypeError):
        file.save({"when": object()})
    assert file.load() == OLD
    assert sorted(p.name for p in tmp_path.iterdir()) == ["topics.json"]


_JSON_LEAVES = st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.text(max_size=8)
_JSON_DOCUMENTS = st.recursive(
    _JSON_LEAVES,
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.text(max_size=6) | st.integers(-5, 5), children, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(max_size=6), _JSON_DOCUMENTS, max_size=4))
def test_saved_bytes_are_the_standard_encoders(data: dict[str, Any]) -> None:
    """orjson writes the file; a file written by the standard encoder before reads the same
    (metadata documents hold no floats)."""
    assert encode_document(data) == (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode()


class _Name(str):
    pass


@pytest.mark.parametrize(
    "data",
    [{"big": 2**70}, {_Name("key"): _Name("value")}, {"list": [(1, 2)], "é": "\u2028"}],
)
def test_what_orjson_would_write_otherwise_goes_to_the_standard_encoder(
    data: dict[str, Any],
) -> None:
    assert encode_document(data) == (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode()


@pytest.mark.parametrize("seed", range(4))
def test_a_power_loss_in_the_save_after_a_power_loss_leaves_old_or_new(seed: int) -> None:
    """A power loss in the middle of a rename may keep the new name and the old one alike
    (the simulated disk keeps a random prefix of a directory's unsynced changes), so that the
    main file and `.tmp` are one file: the next save must not write through that name."""
    lost = {"version": "lost", "pad": "x" * 5000}
    for first in range(1, 25):
        for second in range(1, 25):
            disk = SimulatedDisk(seed * 1000 + first * 25 + second)
            file = JsonFile(Path("/store/config/topics.json"), disk)
            file.save(OLD)
            disk.lose_power_at(first)
            with contextlib.suppress(PowerLost):
                file.save(lost)
            disk.power_loss()
            disk.reboot()
            file = JsonFile(file.path, disk)
            before = file.load()
            disk.lose_power_at(second)
            with contextlib.suppress(PowerLost):
                file.save(NEW)
            disk.power_loss()
            disk.reboot()
            assert JsonFile(file.path, disk).load() in (before, NEW), (first, second)
