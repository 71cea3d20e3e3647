"""The ACL 1.0 rules file (`plain_acl.yml`, RocketMQ 4.9.x): model, loader and writer.

A rules file holds `globalWhiteRemoteAddresses`, `accounts` and, once an admin command has
changed it, `dataVersion: [{counter: n, timestamp: ms}]` (a list of one entry, as 4.9.x's
`PlainPermissionManager.updateAclConfigFileVersion` writes it). 4.9.x reads
`conf/plain_acl.yml` and every `*.yml`/`*.yaml` under `conf/acl/`; `load_rules` takes any
number of files and folders and merges them into one `AclRules`.

Invariants: every loaded account has an access key and a secret key longer than 6 characters
(4.9.x refuses shorter ones), an access key appears once across all files (4.9.x keeps the
first and logs; here it is an error, so a typo cannot silently shadow an account), group
resources are stored as `%RETRY%<group>`, and no error message or `repr` holds a secret key.

Pure except `load_file`/`load_rules`, which read files; writing is `AclStore`'s (watcher.py).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Final

import yaml

from pocketmq.acl.addresses import AclConfigError, AddressPattern
from pocketmq.common.topic_names import RETRY_GROUP_TOPIC_PREFIX

DENY: Final = 1
ANY: Final = 2
PUB: Final = 4
SUB: Final = 8
_PERM_BY_NAME: Final = {
    "DENY": DENY,
    "PUB": PUB,
    "SUB": SUB,
    "PUB|SUB": PUB | SUB,
    "SUB|PUB": PUB | SUB,
}
KEY_LENGTH_MIN: Final = 7
"""4.9.x requires accessKey and secretKey longer than 6 (`AclConstants.*_MIN_LENGTH`)."""


def parse_perm(text: object) -> int:
    """Permission bits of `PUB`, `SUB`, `PUB|SUB`, `SUB|PUB`, `DENY`; anything else is DENY."""
    return _PERM_BY_NAME.get(str(text).strip(), DENY) if text is not None else DENY


def perm_name(bits: int) -> str:
    """The file spelling of permission bits (`PUB|SUB` for both, `ANY` for the any-bit)."""
    if bits & DENY:
        return "DENY"
    names = [name for bit, name in ((PUB, "PUB"), (SUB, "SUB"), (ANY, "ANY")) if bits & bit]
    return "|".join(names) or "DENY"


def check_perm(needed: int, owned: int) -> bool:
    """RocketMQ's `Permission.checkPermission`: DENY wins, ANY is met by PUB or SUB."""
    if owned & DENY:
        return False
    if needed & ANY:
        return bool(owned & (PUB | SUB))
    return bool(needed & owned)


def _resource_perms(entries: Sequence[str], *, group: bool, who: str) -> dict[str, int]:
    perms: dict[str, int] = {}
    for entry in entries:
        # Java's StringUtils.split drops empty pieces, so `a==SUB` is `a`, `SUB`.
        pieces = [p for p in str(entry).split("=") if p]
        if len(pieces) != 2:
            kind = "groupPerms" if group else "topicPerms"
            raise AclConfigError(f"{who}: {kind} entry {entry!r} is not name=PERM")
        name = pieces[0].strip()
        perms[RETRY_GROUP_TOPIC_PREFIX + name if group else name] = parse_perm(pieces[1])
    return perms


@dataclass(frozen=True, slots=True)
class Account:
    """One entry of `accounts` (RocketMQ's `PlainAccessConfig`), kept as written.

    The text fields round-trip to the file; `white_pattern` and `resource_perms` are derived.
    `resource_perms` maps a topic, or `%RETRY%<group>`, to its permission bits.
    """

    access_key: str
    secret_key: str = field(repr=False)
    white_remote_address: str | None = None
    admin: bool = False
    default_topic_perm: str | None = None
    default_group_perm: str | None = None
    topic_perms: tuple[str, ...] = ()
    group_perms: tuple[str, ...] = ()
    white_pattern: AddressPattern = field(init=False, repr=False, compare=False)
    resource_perms: Mapping[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        who = f"account {self.access_key!r}"
        if len(self.access_key) < KEY_LENGTH_MIN:
            raise AclConfigError(f"{who}: accessKey must be longer than {KEY_LENGTH_MIN - 1}")
        if len(self.secret_key) < KEY_LENGTH_MIN:
            raise AclConfigError(f"{who}: secretKey must be longer than {KEY_LENGTH_MIN - 1}")
        try:
            pattern = AddressPattern.parse(self.white_remote_address)
        except AclConfigError as exc:
            raise AclConfigError(f"{who}: whiteRemoteAddress: {exc}") from None
        perms = _resource_perms(self.group_perms, group=True, who=who)
        perms.update(_resource_perms(self.topic_perms, group=False, who=who))
        object.__setattr__(self, "white_pattern", pattern)
        object.__setattr__(self, "resource_perms", MappingProxyType(perms))

    @property
    def default_topic_bits(self) -> int:
        return parse_perm(self.default_topic_perm)

    @property
    def default_group_bits(self) -> int:
        return parse_perm(self.default_group_perm)

    @property
    def has_resource_perms(self) -> bool:
        """4.9.x lets an admin with no topicPerms/groupPerms at all pass every resource."""
        return bool(self.topic_perms or self.group_perms)

    def check_perm_spellings(self) -> None:
        """What 4.9.x checks on updateAclConfig (not on load): every listed perm is spelled
        `PUB`, `SUB`, `PUB|SUB`, `SUB|PUB` or `DENY`.

        Raises:
            AclConfigError: A perm is misspelled (it would silently mean DENY).
        """
        for entry in (*self.topic_perms, *self.group_perms):
            perm = entry.rpartition("=")[2].strip()
            if perm not in _PERM_BY_NAME:
                raise AclConfigError(
                    f"account {self.access_key!r}: {entry!r} is not PUB, SUB, PUB|SUB or DENY"
                )

    def to_yaml(self) -> dict[str, object]:
        """The account as a `plain_acl.yml` mapping (absent fields are left out)."""
        out: dict[str, object] = {"accessKey": self.access_key, "secretKey": self.secret_key}
        if self.white_remote_address is not None:
            out["whiteRemoteAddress"] = self.white_remote_address
        out["admin"] = self.admin
        if self.default_topic_perm is not None:
            out["defaultTopicPerm"] = self.default_topic_perm
        if self.default_group_perm is not None:
            out["defaultGroupPerm"] = self.default_group_perm
        if self.topic_perms:
            out["topicPerms"] = list(self.topic_perms)
        if self.group_perms:
            out["groupPerms"] = list(self.group_perms)
        return out


@dataclass(frozen=True, slots=True)
class AclDataVersion:
    """4.9.x's per-file `DataVersion`: a counter and the time of the last change."""

    counter: int = 0
    timestamp: int = 0

    def bumped(self, now_ms: int) -> AclDataVersion:
        """The version after one more change (`DataVersion.nextVersion`)."""
        return AclDataVersion(self.counter + 1, now_ms)


@dataclass(frozen=True, slots=True)
class AclFile:
    """One rules file. `extra` keeps top-level keys this model does not know, for writing back."""

    path: str
    global_white_remote_addresses: tuple[str, ...] = ()
    accounts: tuple[Account, ...] = ()
    data_version: AclDataVersion | None = None
    extra: Mapping[str, object] = field(default_factory=dict, compare=False)

    def with_account(self, account: Account, now_ms: int) -> AclFile:
        """This file with `account` added, or replacing the one with its access key."""
        kept = [a for a in self.accounts if a.access_key != account.access_key]
        return self._changed(now_ms, accounts=(*kept, account))

    def without_account(self, access_key: str, now_ms: int) -> AclFile:
        """This file without the account of `access_key` (unchanged version if absent)."""
        kept = tuple(a for a in self.accounts if a.access_key != access_key)
        return self if len(kept) == len(self.accounts) else self._changed(now_ms, accounts=kept)

    def with_global_white(self, addresses: Iterable[str], now_ms: int) -> AclFile:
        """This file with `globalWhiteRemoteAddresses` replaced.

        Raises:
            AclConfigError: One address is not a valid pattern.
        """
        listed = tuple(str(a) for a in addresses)
        for text in listed:
            AddressPattern.parse(text)
        return self._changed(now_ms, global_white_remote_addresses=listed)

    def _changed(self, now_ms: int, **changes: object) -> AclFile:
        version = (self.data_version or AclDataVersion()).bumped(now_ms)
        return replace(self, data_version=version, **changes)  # type: ignore[arg-type]

    def to_yaml_text(self) -> str:
        """The file's text, in the layout RocketMQ writes (`dataVersion` as a 1-entry list)."""
        data: dict[str, object] = dict(self.extra)
        data["globalWhiteRemoteAddresses"] = list(self.global_white_remote_addresses)
        data["accounts"] = [a.to_yaml() for a in self.accounts]
        if self.data_version is not None:
            version = self.data_version
            data["dataVersion"] = [{"counter": version.counter, "timestamp": version.timestamp}]
        return yaml.safe_dump(data, sort_keys=False, default_flow_style=False, allow_unicode=True)


@dataclass(frozen=True, slots=True)
class AclRules:
    """Every loaded file merged: what the validator consults."""

    files: tuple[AclFile, ...] = ()
    accounts: Mapping[str, Account] = field(default_factory=dict)
    account_files: Mapping[str, str] = field(default_factory=dict)
    global_white: tuple[AddressPattern, ...] = ()

    @classmethod
    def from_files(cls, files: Sequence[AclFile]) -> AclRules:
        """Merges files; an access key defined twice is an error naming both files.

        Raises:
            AclConfigError: Duplicate access key or bad global whitelist pattern.
        """
        accounts: dict[str, Account] = {}
        where: dict[str, str] = {}
        white: list[AddressPattern] = []
        for acl_file in files:
            for text in acl_file.global_white_remote_addresses:
                try:
                    white.append(AddressPattern.parse(text))
                except AclConfigError as exc:
                    raise AclConfigError(
                        f"{acl_file.path}: globalWhiteRemoteAddresses: {exc}"
                    ) from None
            for account in acl_file.accounts:
                key = account.access_key
                if key in where:
                    raise AclConfigError(
                        f"{acl_file.path}: accessKey {key!r} is already defined in {where[key]}"
                    )
                accounts[key] = account
                where[key] = acl_file.path
        return cls(tuple(files), MappingProxyType(accounts), MappingProxyType(where), tuple(white))

    def file(self, path: str) -> AclFile | None:
        return next((f for f in self.files if f.path == path), None)

    @property
    def data_version(self) -> AclDataVersion | None:
        """The first file's version (4.9.x reports the default file's)."""
        return self.files[0].data_version if self.files else None


def _text(value: object, what: str, path: str) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"  # as Java would print a YAML boolean
    if isinstance(value, str | int | float):
        return str(value)
    raise AclConfigError(f"{path}: {what} is not a scalar")


def _texts(value: object, what: str, path: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise AclConfigError(f"{path}: {what} is not a list")
    return tuple(_text(v, what, path) for v in value if v is not None)


def _account(raw: object, index: int, path: str) -> Account:
    if not isinstance(raw, dict):
        raise AclConfigError(f"{path}: accounts[{index}] is not a mapping")
    access_key = raw.get("accessKey")
    if access_key is None or raw.get("secretKey") is None:
        raise AclConfigError(f"{path}: accounts[{index}] needs both accessKey and secretKey")
    admin = raw.get("admin", False)
    if isinstance(admin, str) and admin.strip().lower() in ("true", "false"):
        admin = admin.strip().lower() == "true"
    if admin is None:
        admin = False
    if not isinstance(admin, bool):
        raise AclConfigError(f"{path}: accounts[{index}].admin is not true or false")
    white = raw.get("whiteRemoteAddress")
    optional = {k: raw.get(k) for k in ("defaultTopicPerm", "defaultGroupPerm")}
    try:
        return Account(
            access_key=_text(access_key, "accessKey", path),
            secret_key=_text(raw["secretKey"], f"accounts[{index}].secretKey", path),
            white_remote_address=None
            if white is None
            else _text(white, "whiteRemoteAddress", path),
            admin=admin,
            default_topic_perm=None
            if optional["defaultTopicPerm"] is None
            else _text(optional["defaultTopicPerm"], "defaultTopicPerm", path),
            default_group_perm=None
            if optional["defaultGroupPerm"] is None
            else _text(optional["defaultGroupPerm"], "defaultGroupPerm", path),
            topic_perms=_texts(raw.get("topicPerms"), "topicPerms", path),
            group_perms=_texts(raw.get("groupPerms"), "groupPerms", path),
        )
    except AclConfigError as exc:
        raise AclConfigError(f"{path}: {exc}") from None


def _data_version(raw: object, path: str) -> AclDataVersion | None:
    if raw is None:
        return None
    first = raw[0] if isinstance(raw, list) and raw else raw
    if not isinstance(first, dict):
        raise AclConfigError(f"{path}: dataVersion is not [{{counter, timestamp}}]")
    try:
        return AclDataVersion(int(first.get("counter", 0)), int(first.get("timestamp", 0)))
    except (TypeError, ValueError):
        raise AclConfigError(f"{path}: dataVersion counter/timestamp are not integers") from None


def parse_file(text: str, path: str) -> AclFile:
    """Parses a rules file's text; `path` only names it in errors and in the result.

    Raises:
        AclConfigError: Not YAML, not the expected shape, or a bad account or pattern.
    """
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark is not None else ""
        raise AclConfigError(f"{path}: not valid YAML{at}") from None
    if data is None:
        return AclFile(path)  # 4.9.x skips an empty file
    if not isinstance(data, dict):
        raise AclConfigError(f"{path}: the top level is not a mapping")
    white = _texts(data.get("globalWhiteRemoteAddresses"), "globalWhiteRemoteAddresses", path)
    raw_accounts = data.get("accounts") or []
    if not isinstance(raw_accounts, list):
        raise AclConfigError(f"{path}: accounts is not a list")
    accounts = tuple(_account(raw, i, path) for i, raw in enumerate(raw_accounts))
    seen: set[str] = set()
    for account in accounts:
        if account.access_key in seen:
            raise AclConfigError(f"{path}: accessKey {account.access_key!r} is defined twice")
        seen.add(account.access_key)
    known = {"globalWhiteRemoteAddresses", "accounts", "dataVersion"}
    extra = {str(k): v for k, v in data.items() if k not in known}
    version = _data_version(data.get("dataVersion"), path)
    return AclFile(path, white, accounts, version, MappingProxyType(extra))


def load_file(path: str | os.PathLike[str]) -> AclFile:
    """Reads and parses one rules file.

    Raises:
        AclConfigError: Unreadable, or anything `parse_file` refuses.
    """
    name = os.fspath(path)
    try:
        text = Path(name).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
        raise AclConfigError(f"{name}: cannot read: {reason}") from None
    return parse_file(text, name)


def rule_files(paths: Iterable[str | os.PathLike[str]]) -> list[str]:
    """The files `load_rules` reads: each file as given, each folder's `*.yml`/`*.yaml` (sorted,
    subfolders included, as 4.9.x's `getAllAclFiles`), each once."""
    found: list[str] = []
    for path in paths:
        name = os.fspath(path)
        if os.path.isdir(name):
            for root, dirs, files in os.walk(name):
                dirs.sort()
                found.extend(
                    os.path.join(root, f) for f in sorted(files) if f.endswith((".yml", ".yaml"))
                )
        else:
            found.append(name)
    return list(dict.fromkeys(found))


def load_rules(*paths: str | os.PathLike[str]) -> AclRules:
    """Loads and merges rules files and folders (e.g. `conf/plain_acl.yml`, `conf/acl`).

    Raises:
        AclConfigError: One line naming the file and the problem.
    """
    return AclRules.from_files([load_file(name) for name in rule_files(paths)])
