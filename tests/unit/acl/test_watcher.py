"""Reloading on file change and saving admin changes (4.9.x `AclFileWatchService`, and
`PlainPermissionManager` updateAccessConfig / deleteAccessConfig / updateGlobalWhiteAddrsConfig).
"""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path

import pytest
import yaml

from pocketmq.acl.accounts import Account, AclDataVersion, AclRules
from pocketmq.acl.addresses import AclConfigError
from pocketmq.acl.watcher import AclFileWatcher, AclStore
from pocketmq.runtime.clock import ManualClock
from tests.unit.acl.sample_rules import SAMPLE_YAML

ONE_ACCOUNT = "accounts:\n  - {accessKey: watcher1, secretKey: watchsecret}\n"


def _touch_later(path: Path, text: str) -> None:
    # A later mtime even on coarse-grained file systems: the size changes too, but be sure.
    path.write_text(text)
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 2_000_000_000))


def test_poll_reloads_after_a_change_and_keeps_old_rules_when_broken(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "plain_acl.yml"
    path.write_text(SAMPLE_YAML)
    seen: list[AclRules] = []
    watcher = AclFileWatcher(path, seen.append)
    assert watcher.poll_once() is None  # nothing changed yet

    caplog.set_level(logging.INFO, logger="pocketmq.acl")
    _touch_later(path, ONE_ACCOUNT)
    rules = watcher.poll_once()
    assert rules is not None
    assert set(rules.accounts) == {"watcher1"}
    assert seen == [rules]
    infos = [r for r in caplog.records if r.levelno == logging.INFO]
    assert len(infos) == 1
    assert "1 accounts" in infos[0].getMessage()

    caplog.clear()
    _touch_later(path, "accounts: [\n  - {accessKey: watchsecret")
    assert watcher.poll_once() is None
    assert watcher.poll_once() is None  # same broken file: no second warning
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert str(path) in warnings[0].getMessage()
    assert "\n" not in warnings[0].getMessage()
    assert "watchsecret" not in caplog.text
    assert seen == [rules]  # the last good rules stay


def test_folder_watch_sees_a_new_file(tmp_path: Path) -> None:
    (tmp_path / "a.yml").write_text(SAMPLE_YAML)
    watcher = AclFileWatcher(tmp_path, lambda rules: None)
    (tmp_path / "b.yml").write_text(ONE_ACCOUNT)
    rules = watcher.poll_once()
    assert rules is not None
    assert "watcher1" in rules.accounts


def test_watcher_task_reloads_within_a_deadline(tmp_path: Path) -> None:
    path = tmp_path / "plain_acl.yml"
    path.write_text(SAMPLE_YAML)
    seen: list[AclRules] = []

    async def scenario() -> None:
        reloaded = asyncio.Event()

        def on_change(rules: AclRules) -> None:
            seen.append(rules)
            reloaded.set()

        watcher = AclFileWatcher(path, on_change, interval_s=0.01)
        watcher.start()
        try:
            _touch_later(path, ONE_ACCOUNT)
            await asyncio.wait_for(reloaded.wait(), timeout=5.0)
        finally:
            await watcher.stop()

    asyncio.run(scenario())
    assert seen
    assert set(seen[-1].accounts) == {"watcher1"}


def test_store_updates_deletes_and_bumps_the_data_version(tmp_path: Path) -> None:
    path = tmp_path / "plain_acl.yml"
    path.write_text(SAMPLE_YAML)
    clock = ManualClock(now_ms=1_700_000_000_000)
    store = AclStore([path], clock=clock)

    store.update_account(Account("newuser1", "newsecret1", default_topic_perm="PUB"))
    assert "newuser1" in store.rules.accounts
    raw = yaml.safe_load(path.read_text())
    assert raw["dataVersion"] == [{"counter": 1, "timestamp": 1_700_000_000_000}]
    assert [a["accessKey"] for a in raw["accounts"]] == ["RocketMQ", "rocketmq2", "newuser1"]

    clock.advance(0.005)
    assert store.delete_account("RocketMQ")
    assert not store.delete_account("RocketMQ")
    assert "RocketMQ" not in store.rules.accounts
    store.update_global_white(["10.0.0.*"])
    raw = yaml.safe_load(path.read_text())
    assert raw["globalWhiteRemoteAddresses"] == ["10.0.0.*"]
    assert raw["dataVersion"][0]["counter"] == 3
    assert store.rules.data_version is not None
    assert store.rules.data_version.counter == 3
    assert [p.name for p in tmp_path.iterdir()] == ["plain_acl.yml"]  # no temp file left


def test_store_refuses_a_bad_change_without_writing(tmp_path: Path) -> None:
    path = tmp_path / "plain_acl.yml"
    path.write_text(SAMPLE_YAML)
    store = AclStore([path], clock=ManualClock())
    with pytest.raises(AclConfigError):
        store.update_global_white(["10.1.*"])
    with pytest.raises(AclConfigError, match="is not PUB"):
        store.update_account(Account("newuser1", "newsecret1", topic_perms=("t=READ",)))
    assert path.read_text() == SAMPLE_YAML


def test_store_keeps_an_account_in_its_own_file(tmp_path: Path) -> None:
    default = tmp_path / "plain_acl.yml"
    default.write_text(SAMPLE_YAML)
    folder = tmp_path / "acl"
    folder.mkdir()
    (folder / "team.yml").write_text(ONE_ACCOUNT)
    store = AclStore([default, folder], default_file=default, clock=ManualClock())
    store.update_account(Account("watcher1", "changedsecret", admin=True))
    team = yaml.safe_load((folder / "team.yml").read_text())
    assert team["accounts"][0]["admin"] is True
    assert team["dataVersion"][0]["counter"] == 1
    assert "dataVersion" not in yaml.safe_load(default.read_text())
    assert store.rules.accounts["watcher1"].admin
    assert store.rules.file(str(folder / "team.yml")).data_version == AclDataVersion(
        1, ManualClock().now_ms()
    )
