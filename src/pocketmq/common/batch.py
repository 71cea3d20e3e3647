"""The batch body of a send request: several messages of one topic and queue, back to back.

Layout per entry (big-endian; `MessageDecoder.encodeMessage` in apache/rocketmq,
`BatchMessage::encode` in rocketmq-client-cpp):

    TOTALSIZE i4 | MAGICCODE i4 (0) | BODYCRC i4 (0) | FLAG i4 | BODYLEN i4 + BODY |
    PROPLEN i2 + PROPERTIES

TOTALSIZE is `20 + BODYLEN + 2 + PROPLEN`. The batch's topic, queue, sysFlag, born time and
born host come from the request header; each entry brings only its flag, body and properties
(its own UNIQ_KEY among them). MAGICCODE and BODYCRC are ignored on decode, as the Java broker
ignores them; the store computes the real body CRC.

This module is pure. Bytes from the network never pass unchecked: an entry whose lengths do not
add up, overrun the body, or whose properties are not UTF-8 raises `BatchError`, and nothing
partial is returned.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import Final, NamedTuple

from pocketmq.common import batch_kernel
from pocketmq.common.constants import MAX_PROPERTIES_LENGTH
from pocketmq.common.kernels import compiled

_HEAD: Final = struct.Struct(">iiiii")  # TOTALSIZE, MAGICCODE, BODYCRC, FLAG, BODYLEN
_PROPERTIES_LENGTH: Final = struct.Struct(">h")
HEAD_BYTES: Final = _HEAD.size
"""An entry's head: TOTALSIZE, MAGICCODE, BODYCRC, FLAG and BODYLEN, 4 bytes each."""
PROPERTIES_LENGTH_BYTES: Final = _PROPERTIES_LENGTH.size
ENTRY_OVERHEAD_BYTES: Final = HEAD_BYTES + PROPERTIES_LENGTH_BYTES
"""Bytes of an entry that are not body or properties: 22."""


class BatchError(ValueError):
    """A batch body that is truncated, inconsistent or otherwise not a batch."""


class BatchEntry(NamedTuple):
    """One message of a batch: what the entry itself carries."""

    flag: int
    body: bytes
    properties: str


BatchSpan = tuple[int, int, int, str]
"""Where one entry of a batch body sits: its flag, its body's start and end in the batch body,
and its properties text."""


KERNEL_COMPILED: Final = compiled(batch_kernel)


def scan_batch_body(body: bytes) -> list[BatchSpan]:
    """Checks a batch body and says where its entries are, without copying their bodies.

    Args:
        body: The request body of a batch send.

    Returns:
        One `(flag, body start, body end, properties)` per entry, in order. Never empty.

    Raises:
        BatchError: the body is empty, an entry is truncated, its TOTALSIZE disagrees with its
            field lengths, a length is negative, or its properties are not UTF-8. The caller
            answers the send with MESSAGE_ILLEGAL and stores nothing.
    """
    if KERNEL_COMPILED:
        spans = batch_kernel.scan_batch_body(body)
        if spans is not None:
            return spans
    return _scan_carefully(body)  # interpreted, or to word what is wrong


def _scan_carefully(body: bytes) -> list[BatchSpan]:
    """`scan_batch_body` interpreted: each entry's head in one `struct` call (the kernel's loop
    interpreted would be slower), and a `BatchError` that says what is wrong."""
    if not body:
        raise BatchError("the batch body is empty")
    spans: list[BatchSpan] = []
    add = spans.append
    unpack_head = _HEAD.unpack_from
    pos = 0
    end = len(body)
    # Every pass consumes at least ENTRY_OVERHEAD_BYTES, so the loop ends.
    while pos < end:
        if end - pos < ENTRY_OVERHEAD_BYTES:
            raise BatchError(
                f"entry {len(spans)} at byte {pos} is truncated: {end - pos} bytes left, "
                f"an entry needs at least {ENTRY_OVERHEAD_BYTES}"
            )
        total_size, _magic, _crc, flag, body_len = unpack_head(body, pos)
        if body_len < 0:
            raise BatchError(f"entry {len(spans)} at byte {pos}: body length {body_len} < 0")
        body_pos = pos + _HEAD.size
        properties_len_pos = body_pos + body_len
        if properties_len_pos + _PROPERTIES_LENGTH.size > end:
            raise BatchError(
                f"entry {len(spans)} at byte {pos}: body of {body_len} bytes overruns the "
                f"batch ({end - body_pos} bytes left)"
            )
        properties_len = (body[properties_len_pos] << 8) | body[properties_len_pos + 1]
        if properties_len > 0x7FFF:  # a Java short: the high bit is its sign
            raise BatchError(
                f"entry {len(spans)} at byte {pos}: properties length "
                f"{properties_len - 0x10000} < 0"
            )
        properties_pos = properties_len_pos + _PROPERTIES_LENGTH.size
        entry_end = properties_pos + properties_len
        if entry_end > end:
            raise BatchError(
                f"entry {len(spans)} at byte {pos}: properties of {properties_len} bytes "
                f"overrun the batch ({end - properties_pos} bytes left)"
            )
        if total_size != entry_end - pos:
            raise BatchError(
                f"entry {len(spans)} at byte {pos}: TOTALSIZE is {total_size}, its fields "
                f"take {entry_end - pos} bytes"
            )
        try:
            properties = body[properties_pos:entry_end].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise BatchError(f"entry {len(spans)} at byte {pos}: properties are not UTF-8") from exc
        add((flag, body_pos, properties_len_pos, properties))
        pos = entry_end
    return spans


def decode_batch_body(body: bytes) -> list[BatchEntry]:
    """Splits a batch body into its entries, each body copied out (`scan_batch_body` says
    where they are without copying).

    Raises:
        BatchError: as `scan_batch_body`.
    """
    return [
        BatchEntry(flag, body[start:stop], properties)
        for flag, start, stop, properties in scan_batch_body(body)
    ]


def encode_batch_body(entries: Iterable[tuple[int, bytes, str]]) -> bytes:
    """Encodes entries as a batch body, as Java and C++ producers do.

    Args:
        entries: `(flag, body, properties)` per message; `properties` is an encoded properties
            string (`pocketmq.common.properties.encode_properties`).

    Returns:
        The request body for a batch send.

    Raises:
        BatchError: no entries, or an entry's properties exceed 32767 bytes.
    """
    parts: list[bytes] = []
    add = parts.append
    pack_head = _HEAD.pack
    for flag, body, properties in entries:
        encoded = properties.encode("utf-8")
        if len(encoded) > MAX_PROPERTIES_LENGTH:
            raise BatchError(
                f"entry {len(parts) // 3}: properties are {len(encoded)} bytes, the limit is "
                f"{MAX_PROPERTIES_LENGTH}"
            )
        # Three parts an entry and one join: the body is copied once, into the result.
        add(pack_head(ENTRY_OVERHEAD_BYTES + len(body) + len(encoded), 0, 0, flag, len(body)))
        add(body)
        add(len(encoded).to_bytes(2, "big") + encoded)
    if not parts:
        raise BatchError("a batch needs at least one entry")
    return b"".join(parts)
