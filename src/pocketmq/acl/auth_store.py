"""Where a broker keeps its ACL 2.0 users and ACLs: one JSON file in its store's config folder
(`auth.json`), rewritten whole and atomically on every change, read at start.

RocketMQ keeps them per broker too (a RocksDB under the store), and its admin commands reach
every broker of a cluster (`-c`), masters and slaves alike, so a slave that becomes master
already holds them; pocketmq's commands do the same.

The file holds the users with their passwords: it is written with owner-only permissions.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable
from pathlib import Path

from pocketmq.acl.policies import Acl, PolicyType, Resource, acl_from_info
from pocketmq.acl.users import SUBJECT_PREFIX, AuthError, User, new_user, updated_user
from pocketmq.acl.watcher import write_atomically

log = logging.getLogger("pocketmq.acl")


class AuthStore:
    """The users and ACLs of one broker."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        """Loads `path` when it exists.

        Raises:
            AuthError: the file is not what this class writes (one line, no password).
        """
        self.path = Path(path)
        self.users: dict[str, User] = {}
        self.acls: dict[str, Acl] = {}
        if self.path.exists():
            self._load()

    def _load(self) -> None:
        try:
            document = json.loads(self.path.read_text("utf-8"))
            users = [User.from_info(info) for info in document.get("users", [])]
            acls = [acl_from_info(info) for info in document.get("acls", [])]
        except (OSError, ValueError, AttributeError, AuthError) as exc:
            raise AuthError(f"{self.path}: not a readable users and ACLs file ({exc})") from None
        self.users = {user.username: user for user in users}
        self.acls = {acl.subject: acl for acl in acls}

    def _save(self) -> None:
        document = {
            "users": [user.to_info() for user in self.users.values()],
            "acls": [acl.to_info() for acl in self.acls.values()],
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(str(self.path), json.dumps(document, indent=1, sort_keys=True))
        os.chmod(self.path, 0o600)

    # -- users ---------------------------------------------------------------------------------
    def create_user(self, user: User) -> None:
        """Raises AuthError (RocketMQ's remarks) when it exists or is invalid."""
        if user.username in self.users:
            raise AuthError("The user is existed")
        self.users[user.username] = new_user(user)
        self._save()

    def ensure_users(self, users: Iterable[User]) -> list[str]:
        """Creates those that do not exist (the start's initial users); returns their names."""
        created = [user.username for user in users if user.username not in self.users]
        for user in users:
            if user.username in created:
                self.users[user.username] = new_user(user)
        if created:
            self._save()
        return created

    def update_user(self, change: User) -> None:
        old = self.users.get(change.username)
        if old is None:
            raise AuthError("The user is not exist")
        self.users[change.username] = updated_user(old, change)
        self._save()

    def delete_user(self, username: str) -> None:
        """Removes the user and its ACL; nothing when it does not exist."""
        removed = self.users.pop(username, None)
        acl = self.acls.pop(SUBJECT_PREFIX + username, None)
        if removed is not None or acl is not None:
            self._save()

    def list_users(self, name_filter: str | None) -> list[User]:
        return [u for u in self.users.values() if not name_filter or name_filter in u.username]

    # -- ACLs ----------------------------------------------------------------------------------
    def put_acl(self, acl: Acl) -> None:
        """createAcl and updateAcl alike: merges `acl`'s policies into the subject's ACL.

        Raises:
            AuthError: the subject's user does not exist.
        """
        username = acl.subject[len(SUBJECT_PREFIX) :]
        if username not in self.users:
            raise AuthError(f"The subject of {acl.subject} is not exist.")
        old = self.acls.get(acl.subject)
        self.acls[acl.subject] = acl if old is None else old.updated(acl.policies)
        self._save()

    def delete_acl(
        self, subject: str, policy_type: PolicyType | None, resource: str | None
    ) -> None:
        """Removes one resource's entries, or (without `resource`) the whole ACL.

        Raises:
            AuthError: no such subject or ACL (RocketMQ's remarks).
        """
        if subject[len(SUBJECT_PREFIX) :] not in self.users:
            raise AuthError("The subject is not exist.")
        acl = self.acls.get(subject)
        if acl is None:
            raise AuthError("The acl is not exist.")
        if resource:
            parsed = Resource.parse(resource)
            if parsed is None:
                raise AuthError(f"The resource {resource} is not valid.")
            remaining = acl.without_entry(parsed, policy_type)
        else:
            remaining = None
        if remaining is None:
            del self.acls[subject]
        else:
            self.acls[subject] = remaining
        self._save()

    def list_acls(self, subject_filter: str | None, resource_filter: str | None) -> list[Acl]:
        def shown(acl: Acl) -> bool:
            if subject_filter and subject_filter not in acl.subject:
                return False
            if not resource_filter:
                return True
            return any(
                resource_filter in entry.resource.key
                for policy in acl.policies
                for entry in policy.entries
            )

        return [acl for acl in self.acls.values() if shown(acl)]
