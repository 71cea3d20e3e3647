"""What a client presents to a secured cluster: ACL credentials and TLS.

`SessionCredentials` signs every request as RocketMQ's `AclClientRPCHook` does (the AccessKey,
an optional SecurityToken, and a Signature over the other fields and the body); the secret
never leaves the process and never appears in a repr. `client_tls` turns the `tls` option of
producers, consumers and admin into an SSL context.
"""

from __future__ import annotations

import dataclasses
import json
import ssl
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from pocketmq.acl.signing import signature
from pocketmq.common.config import ConfigError
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.tls import TlsConfig

ACCESS_KEY = "AccessKey"
SECURITY_TOKEN = "SecurityToken"
SIGNATURE = "Signature"


@dataclass(frozen=True, slots=True)
class SessionCredentials:
    """An ACL account: `access_key` and `secret_key` (and a `security_token` for STS)."""

    access_key: str
    secret_key: str = field(repr=False)
    security_token: str = ""

    def sign(self, request: RemotingCommand) -> None:
        fields = request.ext_fields
        fields.pop(SIGNATURE, None)
        fields[ACCESS_KEY] = self.access_key
        if self.security_token:
            fields[SECURITY_TOKEN] = self.security_token
        fields[SIGNATURE] = signature(fields, request.body, self.secret_key)


def client_tls(tls: bool | ssl.SSLContext | TlsConfig | None) -> ssl.SSLContext | None:
    """The SSL context of a client's connections.

    Args:
        tls: True for TLS without checking the server's certificate (RocketMQ's clients'
            default), a `TlsConfig` for its `tls.client.*` keys, a ready context, or
            False/None for plaintext (the process's `tls.enable` then decides).
    """
    if isinstance(tls, ssl.SSLContext):
        return tls
    if isinstance(tls, TlsConfig):
        return dataclasses.replace(tls, client_enable=True).client_context()
    if tls:
        return TlsConfig(client_enable=True).client_context()
    return None


def tools_yml_credentials(path: Path) -> SessionCredentials | None:
    """The `accessKey` / `secretKey` of mqadmin's `tools.yml`; None when there is no file.

    Raises:
        ValueError: the file is not YAML or lacks one of the two keys (one line, no secret).
    """
    try:
        document = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, yaml.YAMLError) as exc:
        raise ValueError(f"{path}: cannot read it as YAML ({type(exc).__name__})") from None
    if not isinstance(document, dict):
        raise ValueError(f"{path}: expected accessKey: and secretKey: lines")
    access_key, secret_key = document.get("accessKey"), document.get("secretKey")
    if not access_key or not secret_key:
        raise ValueError(f"{path}: needs both accessKey and secretKey")
    return SessionCredentials(str(access_key), str(secret_key))


def inner_credentials(
    text: str, key: str = "innerClientAuthenticationCredentials"
) -> SessionCredentials | None:
    """The account of RocketMQ 5's `innerClientAuthenticationCredentials` key, `{"accessKey":
    "...", "secretKey": "..."}`: what a server signs its own requests to other servers with.
    None when `text` is empty.

    Raises:
        ConfigError: not such a JSON object (the message never holds the value).
    """
    if not text:
        return None
    try:
        document = json.loads(text)
        return SessionCredentials(str(document["accessKey"]), str(document["secretKey"]))
    except (ValueError, KeyError, TypeError):
        raise ConfigError(
            key, "(hidden)", 'a JSON object {"accessKey": "...", "secretKey": "..."}'
        ) from None
