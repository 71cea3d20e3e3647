"""Keeping ACL rules current: reload on file change (`AclFileWatcher`), change and save
(`AclStore`) for the admin calls updateAclConfig / deleteAclConfig / updateGlobalWhiteAddr.

The watcher polls each watched file's (mtime, size), like 4.9.x's `AclFileWatchService`, which
polls too. A file that fails to load leaves the last good rules in force: a half-written or
mistyped file must never open or close the broker. Each new failure logs one warning (not
one per poll); each good reload logs one info line. Both on logger `pocketmq.acl`.

`AclStore` writes a file as temp file + fsync + `os.replace`, so the watcher (or a crash) sees
either the old or the new file, never a torn one; every change bumps that file's
`dataVersion` (counter + 1, timestamp = now), as 4.9.x does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import tempfile
from collections.abc import Callable, Iterable, Sequence

from pocketmq.acl.accounts import Account, AclFile, AclRules, load_rules, rule_files
from pocketmq.acl.addresses import AclConfigError
from pocketmq.runtime.clock import Clock, SystemClock

log = logging.getLogger("pocketmq.acl")

Snapshot = dict[str, tuple[int, int] | None]


def _describe(rules: AclRules) -> str:
    version = rules.data_version
    shown = "none" if version is None else f"{version.counter}@{version.timestamp}"
    return f"{len(rules.accounts)} accounts, data version {shown}"


class AclFileWatcher:
    """Polls rules files and hands every good reload to `on_change`."""

    def __init__(
        self,
        path: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
        on_change: Callable[[AclRules], None],
        *,
        interval_s: float = 5.0,
    ) -> None:
        """
        Args:
            path: A rules file or folder, or several (4.9.x: `conf/plain_acl.yml`, `conf/acl`).
            on_change: Called with the new rules after each successful reload.
            interval_s: Seconds between polls (4.9.x polls every 5 s).
        """
        if isinstance(path, str | os.PathLike):
            self._paths: tuple[str, ...] = (os.fspath(path),)
        else:
            self._paths = tuple(os.fspath(p) for p in path)
        self._on_change = on_change
        self._interval_s = interval_s
        self._snapshot: Snapshot = self._take_snapshot()
        self._task: asyncio.Task[None] | None = None

    def _take_snapshot(self) -> Snapshot:
        snapshot: Snapshot = {}
        for name in rule_files(self._paths):
            try:
                stat = os.stat(name)
                snapshot[name] = (stat.st_mtime_ns, stat.st_size)
            except OSError:
                snapshot[name] = None
        return snapshot

    def poll_once(self) -> AclRules | None:
        """Reloads if any file changed, appeared or vanished since the last poll.

        Returns:
            The new rules when a reload succeeded, else None (no change, or a broken file).
        """
        snapshot = self._take_snapshot()
        if snapshot == self._snapshot:
            return None
        self._snapshot = snapshot
        try:
            rules = load_rules(*self._paths)
        except AclConfigError as exc:
            log.warning("ACL rules not reloaded, keeping the previous ones: %s", exc)
            return None
        log.info("ACL rules reloaded from %s: %s", ", ".join(self._paths), _describe(rules))
        self._on_change(rules)
        return rules

    def start(self) -> None:
        """Starts polling on the running event loop."""
        assert self._task is None, "AclFileWatcher started twice"
        self._task = asyncio.get_running_loop().create_task(self._run(), name="acl-file-watcher")

    async def stop(self) -> None:
        """Stops polling and waits for the task to end."""
        task, self._task = self._task, None
        if task is None:
            return
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self._interval_s)
            try:
                self.poll_once()
            except Exception:  # task boundary: a bug in on_change must not stop the polling
                log.exception("ACL file watcher: reload failed")


def write_atomically(path: str, text: str) -> None:
    """Replaces `path` with `text` so that readers see the old or the new file, never a mix."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, temp = tempfile.mkstemp(prefix=".acl-", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise


class AclStore:
    """The current rules plus the files they came from; admin changes go through here."""

    def __init__(
        self,
        paths: Iterable[str | os.PathLike[str]],
        *,
        default_file: str | os.PathLike[str] | None = None,
        clock: Clock | None = None,
    ) -> None:
        """
        Args:
            paths: Rules files and folders, loaded at once.
            default_file: Where new accounts and the global whitelist go (4.9.x:
                `conf/plain_acl.yml`); the first loaded file when None.
            clock: Source of `dataVersion` timestamps.

        Raises:
            AclConfigError: The rules do not load.
        """
        self._paths = tuple(os.fspath(p) for p in paths)
        self._clock = clock or SystemClock()
        self.rules = load_rules(*self._paths)
        if default_file is not None:
            self._default_file = os.fspath(default_file)
        elif self.rules.files:
            self._default_file = self.rules.files[0].path
        else:
            raise AclConfigError("no ACL rules file to write new accounts to")

    @property
    def paths(self) -> tuple[str, ...]:
        return self._paths

    def replace_rules(self, rules: AclRules) -> None:
        """Takes rules reloaded by the watcher (an `AclFileWatcher.on_change` target)."""
        self.rules = rules

    def update_account(self, account: Account) -> AclFile:
        """Adds or replaces an account in the file that holds it (new ones: the default file).

        Returns:
            The file as written.

        Raises:
            AclConfigError: The change would break the rules; nothing is written.
            OSError: The file could not be written; the rules in memory are unchanged.
        """
        account.check_perm_spellings()
        where = self.rules.account_files.get(account.access_key, self._default_file)
        return self._save(self._file(where).with_account(account, self._clock.now_ms()))

    def delete_account(self, access_key: str) -> bool:
        """Removes an account. Returns False (and writes nothing) when it does not exist."""
        where = self.rules.account_files.get(access_key)
        if where is None:
            return False
        self._save(self._file(where).without_account(access_key, self._clock.now_ms()))
        return True

    def update_global_white(self, addresses: Iterable[str], path: str | None = None) -> AclFile:
        """Replaces `globalWhiteRemoteAddresses` of `path` (default: the default file)."""
        acl_file = self._file(path or self._default_file)
        return self._save(acl_file.with_global_white(addresses, self._clock.now_ms()))

    def _file(self, path: str) -> AclFile:
        return self.rules.file(path) or AclFile(path)

    def _save(self, changed: AclFile) -> AclFile:
        files = [f for f in self.rules.files if f.path != changed.path]
        position = next((i for i, f in enumerate(self.rules.files) if f.path == changed.path), 0)
        files.insert(position, changed)
        rules = AclRules.from_files(files)  # validate before touching the disk
        write_atomically(changed.path, changed.to_yaml_text())
        self.rules = rules
        log.info("ACL rules saved to %s: %s", changed.path, _describe(rules))
        return changed
