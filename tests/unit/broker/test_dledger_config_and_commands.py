"""DLedger settings read as RocketMQ's broker.conf writes them, with one clear line for each
mistake; Raft entries that decode to exactly what was encoded, and damage refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from pocketmq.broker.config import BrokerConfig
from pocketmq.broker.dledger.commands import (
    BARRIER,
    CommandError,
    Kind,
    decode_meta,
    decode_put,
    encode_meta,
    encode_put,
    kind_of,
)
from pocketmq.broker.dledger.settings import DLedgerConfigError, DLedgerSettings
from pocketmq.common.config import apply_properties, parse_properties
from pocketmq.store.api import MessageToStore

PEERS = "n0-127.0.0.1:40911;n1-127.0.0.1:40912;n2-127.0.0.1:40913"


def settings_of(text: str) -> DLedgerSettings:
    config = BrokerConfig()
    apply_properties(config, parse_properties(text))
    return DLedgerSettings.from_config(config)


def test_rocketmq_keys_make_a_group_of_three() -> None:
    settings = settings_of(
        f"brokerName=RaftNode00\nenableDLegerCommitLog=true\ndLegerGroup=RaftNode00\n"
        f"dLegerPeers={PEERS}\ndLegerSelfId=n1\npreferredLeaderId=n2\n"
    )
    assert settings.group == "RaftNode00"
    assert settings.peers["n2"] == "127.0.0.1:40913"
    assert settings.raft_id("n0") == 1
    assert settings.name_of(3) == "n2"
    assert settings.follower_broker_id == 2  # RocketMQ: the peer number plus one
    assert settings.preferred_leader == "n2"
    node = settings.node_settings(Path("store"), fsync=True)
    assert node.node_id == 2
    assert node.peers == {1: "127.0.0.1:40911", 2: "127.0.0.1:40912", 3: "127.0.0.1:40913"}
    assert node.compact_behind_followers


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("dLegerSelfId=n0\n", "needs dLegerPeers"),
        (f"dLegerPeers={PEERS}\ndLegerSelfId=n7\n", "dLegerSelfId='n7' is not one of"),
        ("dLegerPeers=n0-127.0.0.1\ndLegerSelfId=n0\n", "is not <id>-<host>:<port>"),
        ("dLegerPeers=n0-h:1;n0-h:2\ndLegerSelfId=n0\n", "names n0 twice"),
        (f"dLegerPeers={PEERS}\ndLegerSelfId=n0\npreferredLeaderId=x\n", "preferredLeaderId"),
        (
            f"dLegerPeers={PEERS}\ndLegerSelfId=n0\ndLegerElectionTimeoutMs=100\n",
            "at least three heartbeats",
        ),
    ],
)
def test_a_broken_setting_is_one_line_naming_the_key(text: str, message: str) -> None:
    with pytest.raises(DLedgerConfigError, match=message):
        settings_of(text)


def test_a_put_entry_decodes_to_the_messages_the_leader_staged() -> None:
    messages = [
        MessageToStore(
            topic="Orders",
            body=bytes(range(256)) * 4,
            properties="KEYS\x01a b\x02UNIQ_KEY\x01X\x02",
            queue_id=3,
            flag=7,
            sys_flag=4,
            born_timestamp=1_700_000_000_123,
            born_host=("::1", 51234),
            reconsume_times=2,
            prepared_transaction_offset=99,
        ),
        MessageToStore(topic="Orders", body=b"", queue_id=3, born_host=("10.0.0.1", 1)),
    ]
    command = encode_put(messages, 1_700_000_000_999, ("127.0.0.1", 10911))
    assert kind_of(command) is Kind.PUT
    decoded = decode_put(command)
    assert decoded.store_timestamp == 1_700_000_000_999
    assert decoded.store_host == ("127.0.0.1", 10911)
    assert decoded.messages == messages


def test_damaged_or_unknown_entries_are_refused_not_misread() -> None:
    command = encode_put([MessageToStore(topic="T", body=b"abc")], 1, ("127.0.0.1", 1))
    with pytest.raises(CommandError):
        decode_put(command[:-1])
    with pytest.raises(CommandError):
        decode_put(command + b"x")
    with pytest.raises(CommandError):
        kind_of(b"\x09rest")
    with pytest.raises(CommandError):
        decode_meta(bytes([Kind.META]) + b"[1, 2]")
    assert kind_of(b"") is None  # a new leader's empty entry
    assert kind_of(BARRIER) is Kind.BARRIER
    assert decode_meta(encode_meta({"offsets": [["g", "t", 0, 5]]})) == {
        "offsets": [["g", "t", 0, 5]]
    }
