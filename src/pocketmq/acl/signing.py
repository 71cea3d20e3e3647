"""Request signatures of RocketMQ's remoting ACL (`AclClientRPCHook`, `AclSigner`).

A signed request carries ext fields `AccessKey`, optionally `SecurityToken`, and `Signature` =
Base64(HMAC-SHA1(secretKey, content)), where content is the values (never the keys) of every
other ext field, in Java `TreeMap` order of their keys, concatenated, then the body bytes.

Java orders `String`s by UTF-16 code units; Python orders `str` by code points. They differ only
when a key holds characters above U+FFFF next to ones in U+E000-U+FFFF, and sorting by the
UTF-16-BE encoding gives Java's order in every case.

On verification the RocketMQ 4.9.8 broker (`PlainAccessValidator.parse`) leaves out, besides
`Signature`, the ext field `_UNIQUE_KEY_QUERY` (query message by unique key) whatever the
client's version; `verify` does the same unless told otherwise. 5.x leaves it out only for
clients of version 4.9.3 or older.

Pure functions: no I/O, no clock.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Mapping
from typing import Final

ACCESS_KEY: Final = "AccessKey"
SIGNATURE: Final = "Signature"
SECURITY_TOKEN: Final = "SecurityToken"
UNIQUE_KEY_QUERY: Final = "_UNIQUE_KEY_QUERY"
"""MixAll.UNIQUE_MSG_QUERY_FLAG: set by QUERY_MESSAGE when the key is a message id."""


_LEFT_OUT: Final = frozenset({SIGNATURE})
_LEFT_OUT_4_9: Final = frozenset({SIGNATURE, UNIQUE_KEY_QUERY})


def _java_string_order(key: str) -> bytes:
    return key.encode("utf-16-be", errors="surrogatepass")


def _sorted_keys(ext_fields: Mapping[str, str], left_out: frozenset[str]) -> list[str]:
    keys = [k for k in ext_fields if k not in left_out]
    # Python orders str by code point, Java by UTF-16 unit: the same for every key without
    # characters beyond U+FFFF, which is every key a client sends; check rather than assume.
    if all(k.isascii() for k in keys):
        keys.sort()
    else:
        keys.sort(key=_java_string_order)
    return keys


def _text(ext_fields: Mapping[str, str], left_out: frozenset[str]) -> bytes:
    # Java's getBytes(UTF-8) writes '?' for a lone surrogate; errors="replace" does the same.
    keys = _sorted_keys(ext_fields, left_out)
    return "".join([ext_fields[k] for k in keys]).encode("utf-8", errors="replace")


def signed_content(
    ext_fields: Mapping[str, str],
    body: bytes | None,
    *,
    left_out: frozenset[str] = _LEFT_OUT,
) -> bytes:
    """The bytes a signature covers: sorted ext values, then the body.

    Args:
        ext_fields: The request's ext fields, as received or about to be sent.
        body: The request body, or None.
        left_out: Keys whose values are not signed; `Signature` at least.

    Returns:
        The content to feed to HMAC-SHA1.
    """
    text = _text(ext_fields, left_out)
    return text + body if body else text


def signature(ext_fields: Mapping[str, str], body: bytes | None, secret_key: str) -> str:
    """The `Signature` a client puts on a request (every ext field but `Signature` is signed).

    Args:
        ext_fields: All ext fields of the request, `AccessKey` (and `SecurityToken`) included.
        body: The request body, or None.
        secret_key: The account's secret key.

    Returns:
        Base64 of HMAC-SHA1(secret_key, content), as RocketMQ's `AclSigner` computes it.
    """
    return _sign(_text(ext_fields, _LEFT_OUT), body, secret_key)


def verify(
    ext_fields: Mapping[str, str],
    body: bytes | None,
    secret_key: str,
    *,
    unique_key_query_signed: bool = False,
) -> bool:
    """Whether the request's `Signature` ext field is right for `secret_key`.

    Args:
        ext_fields: The ext fields as received, `Signature` included.
        body: The request body, or None.
        secret_key: The secret of the account named by the request's `AccessKey`.
        unique_key_query_signed: False (RocketMQ 4.9.8) leaves `_UNIQUE_KEY_QUERY` out of the
            content; True signs it like any other field (5.x for clients newer than 4.9.3).

    Returns:
        True when the signature matches; the comparison takes the same time either way.
    """
    claimed = ext_fields.get(SIGNATURE)
    if claimed is None:
        return False
    left_out = _LEFT_OUT if unique_key_query_signed else _LEFT_OUT_4_9
    expected = _sign(_text(ext_fields, left_out), body, secret_key)
    return hmac.compare_digest(expected.encode("ascii"), claimed.encode("utf-8", "replace"))


def _sign(text: bytes, body: bytes | None, secret_key: str) -> str:
    mac = hmac.new(secret_key.encode("utf-8"), text, hashlib.sha1)
    if body:
        mac.update(body)  # not text + body: that would copy the body once more
    return base64.b64encode(mac.digest()).decode("ascii")
