"""A broker's ACL 2.0 from its config: ACL 1.0 and 2.0 both on is refused at start with one
line, the initial Super user is made once, and ACL 1.0 accounts migrate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pocketmq.acl.addresses import AclConfigError
from pocketmq.broker.auth_setup import auth_hook
from pocketmq.broker.config import BrokerConfig
from pocketmq.store.config import MessageStoreConfig

ROOT = json.dumps({"username": "rocketmq", "password": "root-secret-0"})


def test_acl_1_and_acl_2_on_one_broker_is_refused(tmp_path: Path) -> None:
    config = BrokerConfig(acl_enable=True, authentication_enabled=True)
    store = MessageStoreConfig(store_path_root_dir=str(tmp_path))
    with pytest.raises(AclConfigError, match="exclude each other"):
        auth_hook(config, store)


def test_the_initial_super_user_is_made_once_and_kept(tmp_path: Path) -> None:
    config = BrokerConfig(authentication_enabled=True, init_authentication_user=ROOT)
    store = MessageStoreConfig(store_path_root_dir=str(tmp_path))
    hook = auth_hook(config, store)
    user = hook.user_of("rocketmq")
    assert user is not None
    assert user.is_super
    assert (tmp_path / "config" / "auth.json").stat().st_mode & 0o777 == 0o600
    again = auth_hook(config, store)
    assert list(again.store.users) == ["rocketmq"]


def test_acl_1_accounts_migrate_when_asked(tmp_path: Path) -> None:
    rules = tmp_path / "plain_acl.yml"
    rules.write_text("accounts:\n  - accessKey: legacyApp\n    secretKey: legacy-secret\n")
    config = BrokerConfig(
        authorization_enabled=True, migrate_auth_from_v1_enabled=True, acl_file_path=str(rules)
    )
    hook = auth_hook(config, MessageStoreConfig(store_path_root_dir=str(tmp_path / "store")))
    assert hook.user_of("legacyApp") is not None
