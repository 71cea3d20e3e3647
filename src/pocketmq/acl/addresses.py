"""Remote-address patterns of ACL 1.0 (`RemoteAddressStrategyFactory` in RocketMQ 4.9.x).

A pattern appears in `globalWhiteRemoteAddresses` and in an account's `whiteRemoteAddress`.
The forms RocketMQ accepts, and what each matches:

    *  *.*.*.*  *:*:*:*:*:*:*:*       every address
    10.1.2.3   ::1                    that one address
    10.1.2.3,10.1.2.4                 any of the listed addresses
    10.1.2.{3,4,5}   fe80::{1,2}      the prefix followed by any of the listed last parts
    10.1.2.*   10.1.*.*   10.*.*.*    a wildcard in the first varying octet
    10.1.2.1-100   10.1.1-5.*         an inclusive range in the first varying octet
    fe80::12:*  fe80::12:1-ff  fe80::12:1-ff:*   the IPv6 equivalents (hex groups)
    (blank / absent)                  nothing: the account has no address whitelist

Deliberate differences from 4.9.x, all on patterns RocketMQ would mis-read rather than reject:
after the wildcard or range octet only `*` may follow (RocketMQ silently ignores later octets,
so `10.1.1-5.7` would match `10.1.3.99`), and a range or wildcard in the first octet is refused
(RocketMQ builds a pattern that never matches).

Also holds `AclConfigError`, the one error of a bad ACL configuration, because this is the
lowest module that raises it.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Final, Literal

from pocketmq.common.config import ConfigError

_IPV4_MAX: Final = 255
_IPV6_GROUP_MAX: Final = 0xFFFF
_ANY_FORMS: Final = frozenset({"*", "*.*.*.*", "*:*:*:*:*:*:*:*"})

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class AclConfigError(ConfigError):
    """A bad ACL configuration: the message is one line and never holds a secret key."""

    def __init__(self, message: str) -> None:
        ValueError.__init__(self, message)
        self.key, self.value, self.expected = "acl", "", message


@dataclass(frozen=True, slots=True)
class AddressPattern:
    """One parsed whitelist pattern; build it with `AddressPattern.parse`.

    Attributes:
        text: The pattern as written.
        kind: `any`, `none` (blank pattern), `set` (exact addresses) or `range`.
        addresses: For `set`: the addresses matched.
        prefix: For `range`: the octets / hex groups that must be equal.
        low: For `range`: the smallest value allowed in the part after `prefix`.
        high: For `range`: the largest value allowed there.
        version: For `range`: 4 or 6.
    """

    text: str
    kind: Literal["any", "none", "set", "range"]
    addresses: frozenset[IPAddress] = frozenset()
    prefix: tuple[int, ...] = ()
    low: int = 0
    high: int = 0
    version: int = 4

    @classmethod
    def parse(cls, text: str | None) -> AddressPattern:
        """Parses a pattern the way RocketMQ 4.9.x reads `plain_acl.yml`.

        Args:
            text: The pattern; None or blank gives a pattern that matches nothing.

        Returns:
            The pattern, ready for `matches`.

        Raises:
            AclConfigError: The text is not one of the forms in the module docstring.
        """
        raw = "" if text is None else str(text).strip()
        if not raw:
            return cls(raw, "none")
        if raw in _ANY_FORMS:
            return cls(raw, "any")
        if raw.endswith("}"):
            return cls(raw, "set", addresses=_parse_braces(raw))
        if "," in raw:
            return cls(raw, "set", addresses=frozenset(_parse_ip(p, raw) for p in raw.split(",")))
        if "*" in raw or "-" in raw:
            if ":" in raw:
                return _parse_ipv6_range(raw)
            return _parse_ipv4_range(raw)
        return cls(raw, "set", addresses=frozenset({_parse_ip(raw, raw)}))

    def matches(self, ip: str) -> bool:
        """Whether a peer's address (no port; brackets around IPv6 allowed) fits the pattern.

        An IPv4 peer seen through a dual-stack socket (`::ffff:10.0.0.1`) is compared as IPv4.
        Anything that is not an IP address matches only `*`.
        """
        if self.kind == "any":
            return True
        if self.kind == "none":
            return False
        address = _peer_address(ip)
        if address is None:
            return False
        if self.kind == "set":
            return address in self.addresses
        if address.version != self.version:
            return False
        parts = _parts(address)
        n = len(self.prefix)
        return parts[:n] == self.prefix and self.low <= parts[n] <= self.high


def _peer_address(ip: str) -> IPAddress | None:
    text = ip.strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    try:
        address = ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _parts(address: IPAddress) -> tuple[int, ...]:
    if isinstance(address, ipaddress.IPv4Address):
        return tuple(address.packed)
    packed = address.packed
    return tuple(int.from_bytes(packed[i : i + 2], "big") for i in range(0, 16, 2))


def _parse_ip(text: str, pattern: str) -> IPAddress:
    try:
        return ipaddress.ip_address(text.strip())
    except ValueError:
        raise AclConfigError(
            f"address pattern {pattern!r}: {text.strip()!r} is not an IP"
        ) from None


def _parse_braces(pattern: str) -> frozenset[IPAddress]:
    head, sep, tail = pattern.rpartition("{")
    separator = ":" if ":" in pattern else "."
    if not sep or "}" in tail[:-1] or not head.endswith(separator):
        raise AclConfigError(f"address pattern {pattern!r}: the {{...}} set must be the last part")
    if separator == "." and head.count(".") != 3:
        raise AclConfigError(f"address pattern {pattern!r}: an IPv4 set needs four parts")
    items = [item.strip() for item in tail[:-1].split(",") if item.strip()]
    if not items:
        raise AclConfigError(f"address pattern {pattern!r}: the {{...}} set is empty")
    return frozenset(_parse_ip(head + item, pattern) for item in items)


def _parse_number(text: str, base: int, maximum: int, pattern: str) -> int:
    digits = text.strip()
    try:
        if not digits or digits[0] in "+-" or len(digits) > 4:
            raise ValueError
        value = int(digits, base)
    except ValueError:
        raise AclConfigError(f"address pattern {pattern!r}: {digits!r} is not a number") from None
    if value > maximum:
        raise AclConfigError(f"address pattern {pattern!r}: {digits!r} is out of range")
    return value


def _parse_span(text: str, base: int, maximum: int, pattern: str) -> tuple[int, int]:
    if text.strip() == "*":
        return 0, maximum
    low_text, _, high_text = text.partition("-")
    low = _parse_number(low_text, base, maximum, pattern)
    high = _parse_number(high_text, base, maximum, pattern)
    if low > high:
        raise AclConfigError(f"address pattern {pattern!r}: range {text.strip()!r} is empty")
    return low, high


def _parse_ipv4_range(pattern: str) -> AddressPattern:
    parts = [p.strip() for p in pattern.split(".")]
    if len(parts) != 4:
        raise AclConfigError(f"address pattern {pattern!r}: an IPv4 pattern needs four parts")
    varying = next((i for i, p in enumerate(parts) if p == "*" or "-" in p), None)
    if varying is None or varying == 0:
        raise AclConfigError(f"address pattern {pattern!r}: the first octet must be a number")
    if any(p != "*" for p in parts[varying + 1 :]):
        raise AclConfigError(f"address pattern {pattern!r}: only '*' may follow a range or '*'")
    prefix = tuple(_parse_number(p, 10, _IPV4_MAX, pattern) for p in parts[:varying])
    low, high = _parse_span(parts[varying], 10, _IPV4_MAX, pattern)
    return AddressPattern(pattern, "range", prefix=prefix, low=low, high=high, version=4)


def _parse_ipv6_range(pattern: str) -> AddressPattern:
    # Forms: `P:*` and `P:a-b` vary the 8th group; `P:a-b:*` varies the 7th, the 8th is free.
    range_then_star = pattern.endswith(":*") and "-" in pattern
    text = pattern[:-2] if range_then_star else pattern
    head, sep, span = text.rpartition(":")
    if head.endswith(":"):
        head += ":"  # the span follows '::' directly: keep the '::' in the prefix
    if not sep or not head or "*" in head or "-" in head:
        # RocketMQ's rule: '*' only at the very end, '-' only in the last or next-to-last group.
        raise AclConfigError(f"address pattern {pattern!r}: '*' or '-' in the wrong place")
    groups = _expand_ipv6_prefix(head, 6 if range_then_star else 7, pattern)
    low, high = _parse_span(span, 16, _IPV6_GROUP_MAX, pattern)
    return AddressPattern(pattern, "range", prefix=groups, low=low, high=high, version=6)


def _expand_ipv6_prefix(head: str, groups_max: int, pattern: str) -> tuple[int, ...]:
    # RocketMQ fills '::' so that the prefix has exactly the groups before the varying one;
    # without '::' the prefix is as long as written.
    if "::" in head:
        left_text, _, right_text = head.partition("::")
        left = [g for g in left_text.split(":") if g] if left_text else []
        right = [g for g in right_text.split(":") if g] if right_text else []
        if "::" in right_text or len(left) + len(right) >= groups_max:
            raise AclConfigError(f"address pattern {pattern!r}: bad IPv6 prefix")
        texts = left + ["0"] * (groups_max - len(left) - len(right)) + right
    else:
        texts = head.split(":")
        if len(texts) > groups_max:
            raise AclConfigError(f"address pattern {pattern!r}: bad IPv6 prefix")
    return tuple(_parse_number(g, 16, _IPV6_GROUP_MAX, pattern) for g in texts)
