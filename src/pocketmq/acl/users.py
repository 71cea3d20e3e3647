"""ACL 2.0 users (RocketMQ 5.3+ `auth` module): the model, its checks and its JSON shapes.

A user is a username, a password (the secret its requests are signed with), a type (`Super`
passes every authorization check, `Normal` is checked against its ACL) and a status (`disable`
fails authentication). RocketMQ checks little: a username must not be blank, and a created
user needs a non-blank password; there is no name pattern and no password length rule
(`AuthenticationMetadataManagerImpl.validate`). Type and status names are read
case-insensitively; an unknown name reads as absent (`UserType.getByName`).

The admin wire shape is `UserInfo` (`remoting/.../protocol/body/UserInfo.java`): keys
`username`, `password`, `userType`, `userStatus`, absent when null, written in fastjson's
alphabetical order. What the broker stores on disk is not modelled here.

Pure: no I/O. No error message or `repr` holds a password.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Final


class AuthError(ValueError):
    """An ACL 2.0 request or document RocketMQ refuses; the text is RocketMQ's remark."""


class UserType(StrEnum):
    """`UserType`: the value is the wire name."""

    SUPER = "Super"
    NORMAL = "Normal"

    @property
    def code(self) -> int:
        return 1 if self is UserType.SUPER else 2


class UserStatus(StrEnum):
    """`UserStatus`: the value is the wire name (lower case, unlike the other ACL enums)."""

    ENABLE = "enable"
    DISABLE = "disable"

    @property
    def code(self) -> int:
        return 1 if self is UserStatus.ENABLE else 2


def user_type_named(name: object) -> UserType | None:
    """The type spelled `name` in any case, or None (RocketMQ ignores unknown names)."""
    return next((t for t in UserType if isinstance(name, str) and t.lower() == name.lower()), None)


def user_status_named(name: object) -> UserStatus | None:
    """The status spelled `name` in any case, or None."""
    return next((s for s in UserStatus if isinstance(name, str) and s == name.lower()), None)


SUBJECT_PREFIX: Final = "User:"
"""A user's subject key is `User:<username>` (`Subject.getSubjectKey`)."""


@dataclass(frozen=True, slots=True)
class User:
    """One user; `None` fields are what an update leaves unchanged."""

    username: str
    password: str | None = field(default=None, repr=False)
    user_type: UserType | None = None
    user_status: UserStatus | None = None

    @property
    def subject(self) -> str:
        return SUBJECT_PREFIX + self.username

    @property
    def is_super(self) -> bool:
        return self.user_type is UserType.SUPER

    @property
    def is_disabled(self) -> bool:
        return self.user_status is UserStatus.DISABLE

    def to_info(self) -> dict[str, str]:
        """The `UserInfo` JSON object (keys sorted, absent fields left out)."""
        info = {
            "password": self.password,
            "userStatus": None if self.user_status is None else str(self.user_status),
            "userType": None if self.user_type is None else str(self.user_type),
            "username": self.username,
        }
        return {key: value for key, value in info.items() if value is not None}

    @classmethod
    def from_info(cls, info: Mapping[str, object], username: str | None = None) -> User:
        """A user from a `UserInfo` object; `username` (the request header's) wins over the
        body's, as the broker's admin handlers do."""
        name = username if username is not None else info.get("username")
        password = info.get("password")
        return cls(
            username="" if name is None else str(name),
            password=None if password is None else str(password),
            user_type=user_type_named(info.get("userType")),
            user_status=user_status_named(info.get("userStatus")),
        )


def _blank(text: str | None) -> bool:
    return text is None or not text.strip()


def validate_user(user: User, *, creating: bool) -> None:
    """RocketMQ's checks before creating or updating a user.

    Raises:
        AuthError: Blank username, or (when creating) blank password.
    """
    if _blank(user.username):
        raise AuthError("username can not be blank")
    if creating and _blank(user.password):
        raise AuthError("password can not be blank")


def new_user(user: User) -> User:
    """The user as createUser stores it: validated, type defaulting to Normal, status to enable.

    Raises:
        AuthError: See `validate_user`.
    """
    validate_user(user, creating=True)
    return replace(
        user,
        user_type=user.user_type or UserType.NORMAL,
        user_status=user.user_status or UserStatus.ENABLE,
    )


def updated_user(old: User, change: User) -> User:
    """`old` after updateUser: a non-blank password, a type and a status replace the old ones;
    absent ones keep them.

    Raises:
        AuthError: See `validate_user`.
    """
    validate_user(change, creating=False)
    return replace(
        old,
        password=old.password if _blank(change.password) else change.password,
        user_type=change.user_type or old.user_type,
        user_status=change.user_status or old.user_status,
    )


def initial_users(
    init_authentication_user: str | None, inner_client_credentials: str | None
) -> list[User]:
    """The Super users a broker creates at start when they do not exist yet.

    Args:
        init_authentication_user: `AuthConfig.initAuthenticationUser`, a `User` JSON object
            (`{"username": ..., "password": ...}`); its type is forced to Super.
        inner_client_credentials: `AuthConfig.innerClientAuthenticationCredentials`, a
            `SessionCredentials` JSON object (`{"accessKey": ..., "secretKey": ...}`).

    Raises:
        AuthError: Not JSON objects, or a user RocketMQ would refuse to create.
    """
    users: list[User] = []
    for text, name_key, secret_key in (
        (init_authentication_user, "username", "password"),
        (inner_client_credentials, "accessKey", "secretKey"),
    ):
        if _blank(text):
            continue
        try:
            data = json.loads(text or "")
        except ValueError:
            data = None
        if not isinstance(data, dict):
            raise AuthError(f"{name_key}/{secret_key} settings are not a JSON object")
        name, secret = data.get(name_key), data.get(secret_key)
        user = User(
            "" if name is None else str(name),
            None if secret is None else str(secret),
            UserType.SUPER,
        )
        users.append(new_user(user))
    return users
