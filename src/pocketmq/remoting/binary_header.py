"""The binary ROCKETMQ header (serialize type 1, `RocketMQSerializable`), big-endian:

    code i2 | language i1 | version i2 | opaque i4 | flag i4 |
    remark length i4 + remark | ext length i4 + (key length i2 + key | value length i4 + value)*

A zero-length remark, key or value decodes as null: the remark becomes None and the ext entry is
dropped, so the encoder leaves such entries out. RocketMQ's Java clients send every request in
this layout. The decoder raises only `RemoteProtocolError`, the encoder only
`LocalProtocolError`; neither touches the body.
"""

from __future__ import annotations

import struct
from typing import Final, NoReturn

from pocketmq.common.codes import LanguageCode
from pocketmq.common.kernels import compiled
from pocketmq.remoting import header_kernel
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.errors import LocalProtocolError, RemoteProtocolError
from pocketmq.remoting.header_fields import (
    INT16_MAX,
    INT16_MIN,
    LANGUAGE_BY_ORDINAL,
    check_int32,
    utf8,
)

BINARY_FIXED_BYTES: Final = 21
"""Size of a binary header without remark and ext entries."""

_BINARY_HEAD: Final = struct.Struct(">hBhiii")  # code .. remark length: 17 bytes
_INT: Final = struct.Struct(">i")
_SHORT: Final = struct.Struct(">h")
_EXT_KEY_BYTES_MAX: Final = INT16_MAX  # the key length is a signed short


def encode_binary_header(command: RemotingCommand) -> bytes:
    """Encode a header in the binary ROCKETMQ layout.

    Args:
        command: The command to encode.

    Returns:
        The header bytes. Ext entries with an empty key or value are left out (the format
        cannot tell them from null), and an empty remark is written as absent.

    Raises:
        LocalProtocolError: `code` or `version` outside 16 bits (RocketMQ's POP codes such as
            200050 only fit JSON), `opaque` or `flag` outside 32 bits, an unknown language, a
            key longer than 32767 UTF-8 bytes, or a non-string ext entry.
    """
    code = int(command.code)
    if not INT16_MIN <= code <= INT16_MAX:
        raise LocalProtocolError(
            f"code {code} does not fit the 16-bit code field of a ROCKETMQ header; use JSON"
        )
    if not INT16_MIN <= command.version <= INT16_MAX:
        raise LocalProtocolError(
            f"version {command.version} does not fit the 16-bit field of a ROCKETMQ header"
        )
    check_int32("opaque", command.opaque)
    check_int32("flag", command.flag)
    language = LANGUAGE_BY_ORDINAL.get(int(command.language))
    if language is None:
        raise LocalProtocolError(f"unknown language {command.language!r}")
    remark = command.remark
    if remark is not None and not isinstance(remark, str):
        raise LocalProtocolError(f"remark must be str or None, not {type(remark).__name__}")
    remark_bytes = utf8(remark, "remark") if remark else b""

    ext_parts: list[bytes] = []
    append = ext_parts.append
    pack_short = _SHORT.pack
    pack_int = _INT.pack
    for key, value in command.ext_fields.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise LocalProtocolError(
                f"ext field {key!r}: {value!r} must map str to str; stringify values first"
            )
        if not key or not value:
            continue
        try:
            key_bytes = key.encode("utf-8")
            value_bytes = value.encode("utf-8")
        except UnicodeEncodeError as error:
            raise LocalProtocolError(
                f"ext field {key!r} is not encodable as UTF-8: {error}"
            ) from None
        if len(key_bytes) > _EXT_KEY_BYTES_MAX:
            raise LocalProtocolError(
                f"ext key of {len(key_bytes)} bytes exceeds the ROCKETMQ header's "
                f"{_EXT_KEY_BYTES_MAX}-byte key limit"
            )
        append(pack_short(len(key_bytes)) + key_bytes + pack_int(len(value_bytes)) + value_bytes)
    ext_block = b"".join(ext_parts)
    return b"".join(
        (
            _BINARY_HEAD.pack(
                code, language, command.version, command.opaque, command.flag, len(remark_bytes)
            ),
            remark_bytes,
            _INT.pack(len(ext_block)),
            ext_block,
        )
    )


def _binary_text(data: bytes, start: int, length: int, what: str) -> str:
    try:
        return data[start : start + length].decode("utf-8")
    except UnicodeDecodeError as error:
        raise RemoteProtocolError(
            f"binary header {what} at offset {start} is not valid UTF-8: {error}"
        ) from None


def _binary_length(data: bytes, offset: int, end: int, codec: struct.Struct, what: str) -> int:
    """Read a length field at `offset` and check that the field and its bytes end by `end`."""
    if offset + codec.size > end:
        raise RemoteProtocolError(
            f"binary header {what} length at offset {offset} overruns its block ending at {end}"
        )
    length = int(codec.unpack_from(data, offset)[0])
    if length < 0:
        raise RemoteProtocolError(
            f"binary header {what} length at offset {offset} is negative ({length})"
        )
    start = offset + codec.size
    if start + length > end:
        raise RemoteProtocolError(
            f"binary header {what} of {length} bytes at offset {start} overruns its block "
            f"ending at {end}"
        )
    return length


def _binary_ext_entry_error(data: bytes, position: int, end: int) -> NoReturn:
    """Re-read the ext entry at `position` field by field and raise with the exact fault."""
    key_length = _binary_length(data, position, end, _SHORT, "ext key")
    position += _SHORT.size
    _binary_text(data, position, key_length, "ext key")
    position += key_length
    value_length = _binary_length(data, position, end, _INT, "ext value")
    position += _INT.size
    _binary_text(data, position, value_length, "ext value")
    raise AssertionError(f"ext entry before offset {position + value_length} is valid")


def _binary_ext_fields(data: bytes, start: int, end: int) -> dict[str, str]:
    # The hot path of binary decoding: checks are folded into as few comparisons as possible,
    # and any failure is re-read by `_binary_ext_entry_error` for a precise message.
    ext_fields: dict[str, str] = {}
    unpack_short = _SHORT.unpack_from
    unpack_int = _INT.unpack_from
    position = start
    # Each entry advances by at least 6 bytes, so the loop ends.
    while position < end:
        if position + 2 > end:
            _binary_ext_entry_error(data, position, end)
        key_start = position + 2
        key_end = key_start + unpack_short(data, position)[0]
        if key_end < key_start or key_end + 4 > end:
            _binary_ext_entry_error(data, position, end)
        value_start = key_end + 4
        value_end = value_start + unpack_int(data, key_end)[0]
        if value_end < value_start or value_end > end:
            _binary_ext_entry_error(data, position, end)
        # A zero-length key or value decodes as null, and a null entry is dropped.
        if key_end > key_start and value_end > value_start:
            try:
                key = data[key_start:key_end].decode("utf-8")
                ext_fields[key] = data[value_start:value_end].decode("utf-8")
            except UnicodeDecodeError:
                _binary_ext_entry_error(data, position, end)
        position = value_end
    return ext_fields


KERNEL_COMPILED: Final = compiled(header_kernel)
"""Whether `header_kernel` was compiled; interpreted, its byte reads are slower than `struct`."""


def _kernel_then_careful(data: bytes, start: int, end: int) -> dict[str, str]:
    # The kernel gives up on a malformed entry, and the careful reader words the error.
    fields = header_kernel.binary_ext_fields(data, start, end)
    return _binary_ext_fields(data, start, end) if fields is None else fields


_EXT_FIELDS: Final = _kernel_then_careful if KERNEL_COMPILED else _binary_ext_fields


def decode_binary_header(data: bytes) -> RemotingCommand:
    """Decode a binary ROCKETMQ header.

    Args:
        data: Exactly the header bytes of one frame.

    Returns:
        The command with an empty body; an unknown language byte becomes OTHER.

    Raises:
        RemoteProtocolError: Shorter than 21 bytes, a negative length, a remark or ext block
            that overruns the header, bytes left over after the ext block, or invalid UTF-8.
    """
    size = len(data)
    if size >= BINARY_FIXED_BYTES:
        code, language_byte, version, opaque, flag, remark_length = _BINARY_HEAD.unpack_from(
            data, 0
        )
        # The usual header, a request's: no remark, and an ext block that ends the header.
        ext_length = _INT.unpack_from(data, _BINARY_HEAD.size)[0]
        if remark_length == 0 and BINARY_FIXED_BYTES + ext_length == size:
            fields = _EXT_FIELDS(data, BINARY_FIXED_BYTES, size)
            # Positional: a command's fields in their order, at half the cost of keywords.
            language = LANGUAGE_BY_ORDINAL.get(language_byte, LanguageCode.OTHER)
            return RemotingCommand(code, language, version, opaque, flag, None, fields)
    return _decode_binary_carefully(data)


def _decode_binary_carefully(data: bytes) -> RemotingCommand:
    size = len(data)
    if size < BINARY_FIXED_BYTES:
        raise RemoteProtocolError(
            f"binary header of {size} bytes is shorter than its {BINARY_FIXED_BYTES}-byte "
            "fixed part"
        )
    code, language_byte, version, opaque, flag, _ = _BINARY_HEAD.unpack_from(data, 0)
    # The ext length field follows the remark, so the remark must leave 4 bytes for it.
    remark_length = _binary_length(data, 13, size - _INT.size, _INT, "remark")
    remark_start = _BINARY_HEAD.size
    remark = _binary_text(data, remark_start, remark_length, "remark") if remark_length else None
    ext_offset = remark_start + remark_length
    ext_length = _binary_length(data, ext_offset, size, _INT, "ext block")
    ext_start = ext_offset + _INT.size
    ext_end = ext_start + ext_length
    if ext_end != size:
        raise RemoteProtocolError(
            f"binary header has {size - ext_end} bytes after its ext block (header is "
            f"{size} bytes, ext block ends at {ext_end})"
        )
    return RemotingCommand(
        code=code,
        language=LANGUAGE_BY_ORDINAL.get(language_byte, LanguageCode.OTHER),
        version=version,
        opaque=opaque,
        flag=flag,
        remark=remark or None,
        ext_fields=_EXT_FIELDS(data, ext_start, ext_end),
    )
