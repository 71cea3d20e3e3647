"""A broker's ACL 2.0 from its config: the settings, the users and ACLs file, the initial Super
users, and the one-time migration of ACL 1.0 accounts (`migrateAuthFromV1Enabled`, as RocketMQ's
`AuthMigrator`: each account of the `plain_acl.yml` that has no user of its name becomes a user
and an ACL)."""

from __future__ import annotations

import logging
from pathlib import Path

from pocketmq.acl.accounts import load_rules
from pocketmq.acl.addresses import AclConfigError
from pocketmq.acl.auth_hook import AuthHook, AuthSettings
from pocketmq.acl.hook import rule_paths
from pocketmq.acl.migration import migrate
from pocketmq.acl.users import AuthError
from pocketmq.broker.config import BrokerConfig
from pocketmq.store.config import MessageStoreConfig

audit = logging.getLogger("pocketmq.audit")

AUTH_FILE = Path("config") / "auth.json"


def auth_hook(config: BrokerConfig, store_config: MessageStoreConfig) -> AuthHook:
    """The broker's ACL 2.0 users, ACLs and checks (off unless the config turns them on).

    Raises:
        AclConfigError: ACL 1.0 and 2.0 both on, an unreadable users file, bad initial users,
            or ACL 1.0 files to migrate that do not load (one line, no secret).
    """
    checking = config.authentication_enabled or config.authorization_enabled
    if config.acl_enable and checking:
        raise AclConfigError(
            "aclEnable (ACL 1.0) and authenticationEnabled/authorizationEnabled (ACL 2.0) "
            "exclude each other: turn one off (migrateAuthFromV1Enabled=true carries the "
            "ACL 1.0 accounts over)"
        )
    settings = AuthSettings(
        authentication=config.authentication_enabled,
        authorization=config.authorization_enabled,
        cluster_name=config.broker_cluster_name,
        authentication_whitelist=config.authentication_whitelist,
        authorization_whitelist=config.authorization_whitelist,
        init_user=config.init_authentication_user,
        inner_credentials=config.inner_credentials if checking else "",
    )
    try:
        hook = AuthHook(settings, Path(store_config.store_path_root_dir) / AUTH_FILE)
        if config.migrate_auth_from_v1_enabled:
            migrate_v1(hook, config.acl_file_path)
    except AuthError as exc:
        raise AclConfigError(f"ACL 2.0: {exc}") from None
    return hook


def migrate_v1(hook: AuthHook, acl_file_path: str) -> int:
    """Creates users and ACLs for the ACL 1.0 accounts that have no user yet; returns how
    many."""
    paths, _ = rule_paths(acl_file_path)
    accounts = migrate(load_rules(*paths), existing_users=hook.store.users)
    for user, acl in accounts:
        hook.store.create_user(user)
        if acl is not None:
            hook.store.put_acl(acl)
    if accounts:
        audit.info(
            "ACL 1.0 accounts migrated to ACL 2.0: %s", ", ".join(u.username for u, _ in accounts)
        )
    return len(accounts)
