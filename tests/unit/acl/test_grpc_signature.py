"""The 5.x clients' `authorization` header as the proxy reads it: the access key, and a
signature over `x-mq-date-time` compared without regard to case (Python and Java send lower
case, the Node.js client upper case)."""

from __future__ import annotations

import hashlib
import hmac

import pytest

from pocketmq.proxy.auth import signed_by

DATE = "20261127T101500Z"


def header(access_key: str, secret: str, *, upper: bool = False, scope: str = "") -> str:
    digest = hmac.new(secret.encode(), DATE.encode(), hashlib.sha1).hexdigest()
    digest = digest.upper() if upper else digest
    return (
        f"MQv2-HMAC-SHA1 Credential={access_key}{scope}, SignedHeaders=x-mq-date-time, "
        f"Signature={digest}"
    )


@pytest.mark.parametrize("upper", [False, True])
def test_the_right_secret_verifies_in_either_case(upper: bool) -> None:
    access_key, verified = signed_by(header("clientAK", "client-secret", upper=upper), DATE)
    assert access_key == "clientAK"
    assert verified("client-secret")
    assert not verified("another-secret")


def test_a_credential_scope_after_the_key_is_not_part_of_it() -> None:
    access_key, verified = signed_by(header("clientAK", "client-secret", scope="/cn/ons"), DATE)
    assert access_key == "clientAK"
    assert verified("client-secret")


def test_another_date_or_a_garbled_header_does_not_verify() -> None:
    _, verified = signed_by(header("clientAK", "client-secret"), "20261127T101501Z")
    assert not verified("client-secret")
    access_key, garbled = signed_by("Basic dXNlcjpwYXNz", DATE)
    assert access_key == ""
    assert not garbled("client-secret")


def test_empty_credentials_name_no_account() -> None:
    access_key, _ = signed_by(header("", ""), DATE)
    assert access_key == ""
