"""Remote-address patterns (RocketMQ 4.9.8 `RemoteAddressStrategyFactory`)."""

from __future__ import annotations

import pytest

from pocketmq.acl.addresses import AclConfigError, AddressPattern


@pytest.mark.parametrize(
    ("pattern", "inside", "outside"),
    [
        ("*", ["1.2.3.4", "::1"], []),
        ("*.*.*.*", ["10.0.0.1"], []),
        ("192.168.0.1", ["192.168.0.1", "::ffff:192.168.0.1"], ["192.168.0.2", "not-an-ip"]),
        ("192.168.0.*", ["192.168.0.0", "192.168.0.255"], ["192.168.1.1"]),
        ("192.168.*.*", ["192.168.7.9"], ["192.169.0.1"]),
        ("10.*.*.*", ["10.200.1.1"], ["11.0.0.1"]),
        ("192.168.1.1-100", ["192.168.1.1", "192.168.1.100"], ["192.168.1.0", "192.168.1.101"]),
        ("192.168.1-5.*", ["192.168.3.77"], ["192.168.6.1"]),
        ("192.168.0.{1,2,3}", ["192.168.0.2"], ["192.168.0.4"]),
        ("192.168.0.1,192.168.0.9", ["192.168.0.9"], ["192.168.0.2"]),
        ("::1", ["::1", "[::1]", "0:0:0:0:0:0:0:1"], ["::2", "127.0.0.1"]),
        ("fe80::12:*", ["fe80::12:0", "fe80::12:ffff"], ["fe80::13:1", "10.0.0.1"]),
        ("fe80::*", ["fe80::1"], ["fe81::1"]),
        ("2::ac5:78:1-200", ["2::ac5:78:1", "2::ac5:78:200"], ["2::ac5:78:201", "2::ac5:79:1"]),
        ("2::ac5:78:1-200:*", ["2::ac5:78:1ff:abcd"], ["2::ac5:78:201:0"]),
        ("1050::5:600:300c:{1,2}", ["1050::5:600:300c:2"], ["1050::5:600:300c:3"]),
    ],
)
def test_pattern_matches_what_it_should(
    pattern: str, inside: list[str], outside: list[str]
) -> None:
    parsed = AddressPattern.parse(pattern)
    for ip in inside:
        assert parsed.matches(ip), ip
    for ip in outside:
        assert not parsed.matches(ip), ip


@pytest.mark.parametrize("blank", [None, "", "  "])
def test_blank_pattern_matches_nothing(blank: str | None) -> None:
    assert not AddressPattern.parse(blank).matches("127.0.0.1")


@pytest.mark.parametrize(
    "pattern",
    [
        "192.168.0",
        "192.168.0.256",
        "192.168.*",
        "192.168.1.100-1",
        "192.168.1.-5",
        "192.168.1-5.7",
        "*.168.1.1",
        "192.168.0.{1,x}",
        "192.168.{1,2}.1",
        "192.168.0.{}",
        "host.example",
        "1:2:*:4::",
        "fe80::12:1-10000",
        "fe80::1:2:3:4:5:6:7:*",
        "10.0.0.1,nope",
    ],
)
def test_bad_pattern_raises_one_line_error(pattern: str) -> None:
    with pytest.raises(AclConfigError) as info:
        AddressPattern.parse(pattern)
    assert "\n" not in str(info.value)
    assert repr(pattern) in str(info.value)
