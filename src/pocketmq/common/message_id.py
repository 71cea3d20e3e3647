"""Message ids: the broker's `offsetMsgId` (store host + CommitLog offset).

`offsetMsgId` = upper-case hex of store ip (4 or 16 bytes), port (int) and physical offset
(long): 32 characters for IPv4, 56 for IPv6 (`MessageDecoder.createMessageId`).
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Sequence
from functools import lru_cache
from typing import Final

from pocketmq.common.stored_message import HostAddress, pack_host


class MessageIdError(ValueError):
    """A string that is not an offset message id."""


def create_offset_msg_id(store_host: HostAddress, physical_offset: int) -> str:
    """The offset message id of the record stored at `physical_offset` by `store_host`."""
    return (pack_host(store_host) + struct.pack(">q", physical_offset)).hex().upper()


def offset_msg_ids(store_host: HostAddress, physical_offsets: Sequence[int]) -> str:
    """The comma-joined offset message ids of a put's records (a send answer's `msgId`): the
    host part is encoded once."""
    count = len(physical_offsets)
    if count < _BULK_IDS:
        host = _host_hex(store_host)
        # A CommitLog offset is never negative, so 16 hex digits are its big-endian long.
        return ",".join([f"{host}{offset:016X}" for offset in physical_offsets])
    # A batch's ids in a few calls whatever its size: the packed ids side by side, their
    # offsets laid in byte by byte (a strided copy), hex-encoded with a comma between ids.
    packed_host = pack_host(store_host)
    width = len(packed_host) + 8
    ids = bytearray(packed_host + bytes(8)) * count
    offsets = struct.pack(f">{count}q", *physical_offsets)
    for byte in range(8):
        ids[len(packed_host) + byte :: width] = offsets[byte::8]
    return ids.hex(",", width).upper()


_BULK_IDS: Final = 16
"""From this many records, a batch's ids are encoded in bulk (below, one by one is cheaper)."""


@lru_cache(maxsize=64)
def _host_hex(store_host: HostAddress) -> str:
    # A broker answers every send with its own host: encoded once, not once a send.
    return pack_host(store_host).hex().upper()


def decode_offset_msg_id(msg_id: str) -> tuple[HostAddress, int]:
    """Splits an offset message id into (store host, physical offset).

    Raises:
        MessageIdError: not 32 or 56 hex characters.
    """
    if len(msg_id) not in (32, 56):
        raise MessageIdError(f"offset message id must be 32 or 56 hex chars, got {len(msg_id)}")
    try:
        raw = bytes.fromhex(msg_id)
    except ValueError as exc:
        raise MessageIdError(f"offset message id is not hex: {msg_id!r}") from exc
    if len(raw) * 2 != len(msg_id):  # bytes.fromhex skips whitespace
        raise MessageIdError(f"offset message id is not hex: {msg_id!r}")
    ip_len = 4 if len(raw) == 16 else 16
    family = socket.AF_INET if ip_len == 4 else socket.AF_INET6
    ip = socket.inet_ntop(family, raw[:ip_len])
    port, offset = struct.unpack_from(">iq", raw, ip_len)
    return (ip, port), offset
