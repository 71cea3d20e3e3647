"""ACL 2.0 users: RocketMQ's `UserInfo` shape and `AuthenticationMetadataManagerImpl` rules."""

import json

import pytest

from pocketmq.acl.users import (
    AuthError,
    User,
    UserStatus,
    UserType,
    initial_users,
    new_user,
    updated_user,
)


def test_user_info_round_trips_in_fastjson_shape():
    text = '{"password":"secret1","userStatus":"enable","userType":"Super","username":"alice"}'
    user = User.from_info(json.loads(text))
    assert user == User("alice", "secret1", UserType.SUPER, UserStatus.ENABLE)
    assert json.dumps(user.to_info(), separators=(",", ":")) == text


def test_user_info_names_are_read_in_any_case_and_unknown_ones_are_absent():
    user = User.from_info({"username": "a", "userType": "super", "userStatus": "DISABLE"})
    assert (user.user_type, user.user_status) == (UserType.SUPER, UserStatus.DISABLE)
    assert User.from_info({"username": "a", "userType": "Root"}).user_type is None
    assert "userType" not in User("a").to_info()


def test_header_username_wins_over_body():
    assert User.from_info({"username": "body"}, username="header").username == "header"


def test_create_needs_username_and_password_and_defaults_type_and_status():
    with pytest.raises(AuthError, match="username can not be blank"):
        new_user(User(" ", "pw"))
    with pytest.raises(AuthError, match="password can not be blank"):
        new_user(User("bob", ""))
    assert new_user(User("bob", "x")) == User("bob", "x", UserType.NORMAL, UserStatus.ENABLE)


def test_update_keeps_what_is_absent_or_blank():
    old = User("bob", "old", UserType.NORMAL, UserStatus.ENABLE)
    assert updated_user(old, User("bob", " ", None, UserStatus.DISABLE)) == User(
        "bob", "old", UserType.NORMAL, UserStatus.DISABLE
    )
    assert updated_user(old, User("bob", "new", UserType.SUPER)).password == "new"


def test_password_not_in_repr():
    assert "s3cret" not in repr(User("a", "s3cret"))


def test_initial_users_are_super():
    users = initial_users(
        '{"username":"root","password":"pw"}', '{"accessKey":"inner","secretKey":"k"}'
    )
    assert [(u.username, u.user_type) for u in users] == [
        ("root", UserType.SUPER),
        ("inner", UserType.SUPER),
    ]
    assert initial_users(None, "") == []
