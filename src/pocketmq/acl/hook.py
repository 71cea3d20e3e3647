"""ACL 1.0 in front of a remoting server: the rules files, their watcher, the validator, and
the audit log.

`AclHook.guard` is the server's `RequestGuard`: it runs before the handler of every known
request code and answers a refused request with RocketMQ's response (see `validator`), so the
handler never sees it. Every refusal and every change of the rules is one line on the
`pocketmq.audit` logger: who (access key, peer address), what (request code, rule), never a
secret.

Where the rules live, as RocketMQ 4.9 looks for them: the broker's `aclFilePath` (a file or a
folder of `*.yml`), else `$ROCKETMQ_HOME/conf/plain_acl.yml` plus the files of
`$ROCKETMQ_HOME/conf/acl/`.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from pocketmq.acl.accounts import Account, AclRules
from pocketmq.acl.addresses import AclConfigError
from pocketmq.acl.signing import ACCESS_KEY
from pocketmq.acl.validator import AclValidator
from pocketmq.acl.watcher import AclFileWatcher, AclStore
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.transport import Channel

audit = logging.getLogger("pocketmq.audit")

WATCH_INTERVAL_S = 2.0


def rule_paths(acl_file_path: str) -> tuple[list[Path], Path]:
    """The rules files and folders to load, and the file new accounts go to.

    Raises:
        AclConfigError: no `aclFilePath` and no `$ROCKETMQ_HOME/conf/plain_acl.yml`.
    """
    if acl_file_path:
        path = Path(acl_file_path)
        if not path.exists():
            raise AclConfigError(f"aclFilePath {path} does not exist: create it or fix the key")
        default = path / "plain_acl.yml" if path.is_dir() else path
        return [path], default
    home = os.environ.get("ROCKETMQ_HOME")
    if home:
        default = Path(home) / "conf" / "plain_acl.yml"
        if default.is_file():
            folder = default.parent / "acl"
            return ([default, folder] if folder.is_dir() else [default]), default
    raise AclConfigError(
        "aclEnable=true needs the accounts file: set aclFilePath=/path/to/plain_acl.yml, or "
        "put it at $ROCKETMQ_HOME/conf/plain_acl.yml"
    )


class AclHook:
    """The rules a server enforces, kept current, and its request guard."""

    def __init__(self, acl_file_path: str, *, watch_interval_s: float = WATCH_INTERVAL_S) -> None:
        """Loads the rules.

        Raises:
            AclConfigError: the files cannot be found or do not load (one line, no secret).
        """
        paths, default = rule_paths(acl_file_path)
        self.store = AclStore(paths, default_file=default)
        self.validator = AclValidator(self.store.rules)
        self.watcher = AclFileWatcher(paths, self._reloaded, interval_s=watch_interval_s)
        audit.info("ACL on: %d accounts from %s", len(self.store.rules.accounts), _names(paths))

    def start(self) -> None:
        self.watcher.start()

    async def stop(self) -> None:
        await self.watcher.stop()

    @property
    def rules(self) -> AclRules:
        return self.store.rules

    def _reloaded(self, rules: AclRules) -> None:
        self.store.replace_rules(rules)
        self.validator.rules = rules
        audit.info("ACL rules reloaded: %d accounts", len(rules.accounts))

    def guard(self, request: RemotingCommand, channel: Channel) -> RemotingCommand | None:
        """Refuses `request` with RocketMQ's answer, or lets it through (None)."""
        ip = channel.remote_ip
        refusal = self.validator.check(request.code, request.ext_fields, request.body, ip)
        if refusal is None:
            return None
        audit.warning(
            "refused request code=%d from %s accessKey=%s rule=%s: %s",
            request.code,
            ip,
            request.ext_fields.get(ACCESS_KEY) or "-",
            refusal.rule,
            refusal.remark,
        )
        return RemotingCommand.response_to(request, refusal.code, refusal.remark)

    def allow_inner(self, access_key: str, secret_key: str) -> None:
        """Lets another part of this process (a local proxy) in as an admin account that lives
        in memory only."""
        self.validator.inner_accounts[access_key] = Account(access_key, secret_key, admin=True)

    # -- changes by admin requests ---------------------------------------------------------
    def update_account(self, account: Account, by: str) -> None:
        """Raises AclConfigError or OSError; nothing changes then."""
        self.store.update_account(account)
        self.validator.rules = self.store.rules
        audit.info("ACL account %s created or updated by %s", account.access_key, by)

    def delete_account(self, access_key: str, by: str) -> bool:
        deleted = self.store.delete_account(access_key)
        self.validator.rules = self.store.rules
        if deleted:
            audit.info("ACL account %s deleted by %s", access_key, by)
        return deleted

    def update_global_white(self, addresses: list[str], path: str | None, by: str) -> None:
        """Raises AclConfigError or OSError; nothing changes then."""
        self.store.update_global_white(addresses, path)
        self.validator.rules = self.store.rules
        audit.info("ACL global whitelist set to %s by %s", ",".join(addresses) or "-", by)


def _names(paths: list[Path]) -> str:
    return ", ".join(str(p) for p in paths)
