"""ACL 1.0 beside Apache RocketMQ 4.9.7 (the last line with ACL 1.0 that Maven Central serves
here), with the same `plain_acl.yml`: every request code both brokers serve, crossed with who
sends it (no credentials, an unknown access key, a wrong secret, a normal account, an admin
account, an account whitelisted by address but signing wrongly) and with what it names (a
topic and group the account may publish to, may subscribe to, or is denied). Each request is
either refused by ACL (SYSTEM_ERROR with an AclException remark) or not; the two columns must be
equal but for the differences `docs/security.md` lists (`LISTED` below). Then the global
whitelist opens to loopback on both, by rewriting the file, and every request goes through.

ACL 1.0 signatures carry no time, so there is nothing expired or replayed to test here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from pocketmq.client.credentials import SessionCredentials
from pocketmq.common.codes import RequestCode, ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.testing import ServerProcess, start_up_process, wait_until
from tests.conformance.acl_requests import refusals
from tests.conformance.reference import ApacheRocketMQ, ReferenceUnavailable

pytestmark = pytest.mark.conformance

RULES = """\
globalWhiteRemoteAddresses:
  - 10.10.103.*
accounts:
  - accessKey: adminAccount
    secretKey: admin-secret-0
    admin: true
  - accessKey: normalAccount
    secretKey: normal-secret-1
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms:
      - PubTopic=PUB
      - SubTopic=SUB
    groupPerms:
      - SubGroup=SUB
  - accessKey: whiteAccount
    secretKey: white-secret-2
    whiteRemoteAddress: 127.0.0.1
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
"""
OPEN_RULES = RULES.replace("  - 10.10.103.*", "  - 127.0.0.*")

SENDERS: dict[str, SessionCredentials | None] = {
    "nobody": None,
    "stranger": SessionCredentials("strangerAccount", "stranger-secret"),
    "wrong-secret": SessionCredentials("normalAccount", "not-the-secret"),
    "normal": SessionCredentials("normalAccount", "normal-secret-1"),
    "admin": SessionCredentials("adminAccount", "admin-secret-0"),
    "whitelisted": SessionCredentials("whiteAccount", "not-the-secret"),
}
TARGETS = {
    "pub": ("PubTopic", "SubGroup"),
    "sub": ("SubTopic", "SubGroup"),
    "deny": ("DenyTopic", "DenyGroup"),
}

POCKETMQ_STRICTER = "pocketmq checks what RocketMQ 4.9 lets through (docs/security.md)"
LISTED: dict[str, str] = {
    # Batch sends: 4.9 does not check their topic.
    **{
        f"SEND_BATCH_MESSAGE/{who}/{target}": POCKETMQ_STRICTER
        for who in ("normal",)
        for target in ("sub", "deny")
    },
    # The ACL commands are admin-only in pocketmq.
    **{
        f"{code}/normal/{target}": POCKETMQ_STRICTER
        for code in (
            "UPDATE_AND_CREATE_ACL_CONFIG",
            "DELETE_ACL_CONFIG",
            "UPDATE_GLOBAL_WHITE_ADDRS_CONFIG",
        )
        for target in TARGETS
    },
}

LISTED_WHEN_OPEN: dict[str, list[str]] = {}


def refused_by_acl(answer: RemotingCommand) -> bool:
    """RocketMQ 4.9's refusal: SYSTEM_ERROR, the AclException as remark."""
    return answer.code == ResponseCode.SYSTEM_ERROR and "AclException" in (answer.remark or "")


@pytest.fixture(scope="module")
def apache_acl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApacheRocketMQ]:
    work = tmp_path_factory.mktemp("apache-acl")
    try:
        server = ApacheRocketMQ(work, pom="pom-server-4.xml", broker_settings={"aclEnable": "true"})
        (server.home / "conf").mkdir(parents=True, exist_ok=True)
        (server.home / "conf" / "plain_acl.yml").write_text(RULES)
        server.start()
    except ReferenceUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def pocketmq_acl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, Path]]:
    work = tmp_path_factory.mktemp("pocketmq-acl")
    rules = work / "plain_acl.yml"
    rules.write_text(RULES)
    config = work / "broker.properties"
    config.write_text(f"aclEnable=true\naclFilePath={rules}\n")
    server = start_up_process(work / "data", work / "up.log", "-c", str(config))
    yield server, rules
    server.stop()


def broker_of(server: ServerProcess) -> str:
    return server.named_address("broker broker-a")


def test_every_code_is_refused_or_allowed_as_rocketmq_4_9_decides(
    apache_acl: ApacheRocketMQ, pocketmq_acl: tuple[ServerProcess, Path]
) -> None:
    server, rules = pocketmq_acl
    codes = list(RequestCode)
    ours = asyncio.run(refusals(broker_of(server), codes, SENDERS, TARGETS, refused_by_acl))
    reference = asyncio.run(
        refusals(apache_acl.broker_addr, codes, SENDERS, TARGETS, refused_by_acl)
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
    still = [key for key in LISTED if key in both and reference[key] != ours[key]]
    assert len(still) == len(LISTED), "a listed difference is gone: update LISTED"
    # Each kind of sender is refused somewhere and let through somewhere.
    for who in ("normal", "whitelisted", "admin"):
        assert any(not refused for key, refused in ours.items() if f"/{who}/" in key), who
    for who in ("nobody", "stranger", "wrong-secret"):
        assert all(refused for key, refused in ours.items() if f"/{who}/" in key), who

    # Loopback in the global whitelist: nothing is refused, on either side, once re-read.
    rules.write_text(OPEN_RULES)
    (apache_acl.home / "conf" / "plain_acl.yml").write_text(OPEN_RULES)
    probe = [RequestCode.SEND_MESSAGE_V2]
    for broker in (broker_of(server), apache_acl.broker_addr):
        wait_until(
            lambda broker=broker: (
                not any(
                    asyncio.run(
                        refusals(broker, probe, {"nobody": None}, TARGETS, refused_by_acl)
                    ).values()
                )
            ),
            f"{broker} re-reading the rules",
            timeout_s=60,
        )
    opened = {
        name: asyncio.run(refusals(address, codes, {"nobody": None}, TARGETS, refused_by_acl))
        for name, address in (
            ("pocketmq", broker_of(server)),
            ("reference", apache_acl.broker_addr),
        )
    }
    for name, answers in opened.items():
        refused = [key for key, no in answers.items() if no]
        assert refused == LISTED_WHEN_OPEN.get(name, []), (name, refused)
