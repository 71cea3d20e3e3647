"""ACL 2.0 beside Apache RocketMQ 5.5.0, with the same users and ACLs made on both through the
admin requests (AUTH_CREATE_USER, AUTH_CREATE_ACL, AUTH_UPDATE_USER) by the initial Super user:
every request code both brokers serve, from six senders (none, an unknown user, a wrong
password, a normal user, the Super user, a disabled user) naming a topic and group the normal
user may publish to, may subscribe to, or is denied. Whether authentication or authorization
refuses it (NO_PERMISSION with one of RocketMQ's auth remarks) must be the same on both, but
for the differences listed here and in docs/compatibility.md.

ACL 2.0 signatures carry no time either: nothing expired or replayed to test.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import pytest

from pocketmq.client.admin import AdminClient
from pocketmq.client.credentials import SessionCredentials
from pocketmq.common.codes import RequestCode, ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.testing import ServerProcess, start_up_process
from tests.conformance.acl_requests import refusals
from tests.conformance.reference import ApacheRocketMQ, ReferenceUnavailable

pytestmark = pytest.mark.conformance

ROOT = SessionCredentials("rocketmq", "root-secret-0")
AUTH_SETTINGS = {
    "authenticationEnabled": "true",
    "authorizationEnabled": "true",
    "initAuthenticationUser": json.dumps({"username": "rocketmq", "password": "root-secret-0"}),
    "innerClientAuthenticationCredentials": json.dumps(
        {"accessKey": "rocketmq", "secretKey": "root-secret-0"}
    ),
}
APACHE_PROVIDERS = {
    "authenticationProvider": "org.apache.rocketmq.auth.authentication.provider."
    "DefaultAuthenticationProvider",
    "authenticationMetadataProvider": "org.apache.rocketmq.auth.authentication.provider."
    "LocalAuthenticationMetadataProvider",
    "authorizationProvider": "org.apache.rocketmq.auth.authorization.provider."
    "DefaultAuthorizationProvider",
    "authorizationMetadataProvider": "org.apache.rocketmq.auth.authorization.provider."
    "LocalAuthorizationMetadataProvider",
}
SENDERS: dict[str, SessionCredentials | None] = {
    "nobody": None,
    "stranger": SessionCredentials("strangerUser", "stranger-secret"),
    "wrong-secret": SessionCredentials("normalUser", "not-the-secret"),
    "normal": SessionCredentials("normalUser", "normal-secret-1"),
    "super": ROOT,
    "disabled": SessionCredentials("disabledUser", "disabled-secret-2"),
}
TARGETS = {
    "pub": ("PubTopic", "SubGroup"),
    "sub": ("SubTopic", "SubGroup"),
    "deny": ("DenyTopic", "DenyGroup"),
}
ENTRIES = [
    {"resource": "Topic:PubTopic", "actions": ["Pub"], "decision": "Allow"},
    {"resource": "Topic:SubTopic", "actions": ["Sub"], "decision": "Allow"},
    {"resource": "Group:SubGroup", "actions": ["Sub"], "decision": "Allow"},
    {"resource": "Topic:DenyTopic", "actions": ["Pub", "Sub"], "decision": "Deny"},
]
AUTH_REMARKS = (
    "has no permission to access",
    "username cannot be null",
    "is not found",
    "check signature failed",
    "is disabled",
    "parse authorization context error",
    "Authorization failed",
)
LISTED: dict[str, str] = {}


def refused_by_auth(answer: RemotingCommand) -> bool:
    remark = answer.remark or ""
    return answer.code == ResponseCode.NO_PERMISSION and any(r in remark for r in AUTH_REMARKS)


async def make_users(namesrv: str, broker: str) -> None:
    """The same users and ACL on a broker, made by the Super user."""
    async with AdminClient([namesrv], credentials=ROOT) as admin:
        for name, password in (
            ("normalUser", "normal-secret-1"),
            ("disabledUser", "disabled-secret-2"),
        ):
            await admin.create_user(broker, {"username": name, "password": password})
        await admin.update_user(broker, {"username": "disabledUser", "userStatus": "disable"})
        acl = {"subject": "User:normalUser", "policies": [{"entries": ENTRIES}]}
        await admin.put_acl(broker, acl, create=True)


@pytest.fixture(scope="module")
def apache_auth(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApacheRocketMQ]:
    work = tmp_path_factory.mktemp("apache-auth")
    try:
        server = ApacheRocketMQ(work, broker_settings={**AUTH_SETTINGS, **APACHE_PROVIDERS})
        server.start()
    except ReferenceUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        asyncio.run(make_users(server.namesrv_addr, server.broker_addr))
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def pocketmq_auth(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    work = tmp_path_factory.mktemp("pocketmq-auth")
    config = work / "broker.properties"
    config.write_text("".join(f"{k}={v}\n" for k, v in AUTH_SETTINGS.items()))
    server = start_up_process(work / "data", work / "up.log", "-c", str(config))
    try:
        asyncio.run(make_users(server.address, server.named_address("broker broker-a")))
        yield server
    finally:
        server.stop()


def test_every_code_is_refused_or_allowed_as_rocketmq_5_decides(
    apache_auth: ApacheRocketMQ, pocketmq_auth: ServerProcess
) -> None:
    codes = list(RequestCode)
    broker = pocketmq_auth.named_address("broker broker-a")
    ours = asyncio.run(refusals(broker, codes, SENDERS, TARGETS, refused_by_auth))
    reference = asyncio.run(
        refusals(apache_auth.broker_addr, codes, SENDERS, TARGETS, refused_by_auth)
    )
    both = sorted(set(ours) & set(reference))
    assert len(both) > 300, "far fewer requests compared than before"
    differing = {
        key: (reference[key], ours[key])
        for key in both
        if key not in LISTED and reference[key] != ours[key]
    }
    assert differing == {}, "\n".join(
        f"{k}: reference {v[0]}, ours {v[1]}" for k, v in sorted(differing.items())
    )
    for who in ("nobody", "stranger", "wrong-secret", "disabled"):
        assert all(refused for key, refused in ours.items() if f"/{who}/" in key), who
    # The Super user is refused only where the request cannot be read ("parse authorization
    # context error."): a topic creation without a filter type, a lock without its JSON body.
    refused_super = {key.split("/")[0] for key, no in ours.items() if "/super/" in key and no}
    assert refused_super == {"UPDATE_AND_CREATE_TOPIC", "LOCK_BATCH_MQ", "UNLOCK_BATCH_MQ"}
    assert any(not refused for key, refused in ours.items() if "/normal/" in key)
    assert any(refused for key, refused in ours.items() if "/normal/" in key)
