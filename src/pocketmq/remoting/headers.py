"""Command header codecs: JSON (serialize type 0) and binary ROCKETMQ (serialize type 1).

JSON follows what fastjson emits for `RemotingCommand` (keys sorted, nulls omitted, body never
in the header) and accepts what real peers send: unknown keys, `remark` absent/null/"",
`extFields` absent, and ext values of any JSON scalar type (the C++ client sends numbers). Every
ext value is coerced to a string the way Java's `String.valueOf` prints it; null values are
dropped; a number keeps its literal text. We always emit ext values as JSON strings, because the
C++ client reads a response field only if it `isString()`.

The binary layout (`RocketMQSerializable`), big-endian:

    code i2 | language i1 | version i2 | opaque i4 | flag i4 |
    remark length i4 + remark | ext length i4 + (key length i2 + key | value length i4 + value)*

A zero-length remark, key or value decodes as null: the remark becomes None and the ext entry is
dropped, so the encoder leaves such entries out.

Decoders raise only `RemoteProtocolError` (with the offending offset or field); encoders raise
only `LocalProtocolError` (a value the format cannot carry). Neither touches the body.
"""

from __future__ import annotations

import json
import struct
from typing import Final, NoReturn

import orjson

from pocketmq.common.codes import LanguageCode, SerializeType
from pocketmq.common.kernels import compiled
from pocketmq.remoting import header_kernel
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.errors import LocalProtocolError, RemoteProtocolError

BINARY_FIXED_BYTES: Final = 21
"""Size of a binary header without remark and ext entries."""

_INT32_MIN: Final = -(1 << 31)
_INT32_MAX: Final = (1 << 31) - 1
_INT16_MIN: Final = -(1 << 15)
_INT16_MAX: Final = (1 << 15) - 1

_BINARY_HEAD: Final = struct.Struct(">hBhiii")  # code .. remark length: 17 bytes
_INT: Final = struct.Struct(">i")
_SHORT: Final = struct.Struct(">h")
_EXT_KEY_BYTES_MAX: Final = _INT16_MAX  # the key length is a signed short

# Java's field default when a JSON header has no `language` (`RemotingCommand.language`).
_LANGUAGE_DEFAULT: Final = LanguageCode.JAVA
_LANGUAGE_BY_NAME: Final = dict(LanguageCode.__members__)
_LANGUAGE_BY_ORDINAL: Final = {member.value: member for member in LanguageCode}
_LANGUAGE_NAME_BY_ORDINAL: Final = {member.value: member.name for member in LanguageCode}


def _reject_constant(name: str) -> NoReturn:
    # NaN and Infinity are not JSON (RFC 8259); no RocketMQ peer sends them.
    raise ValueError(f"non-standard JSON constant {name}")


class _JsonDecimal(str):
    """A JSON number with a fraction or exponent, kept as its literal text ("1.50" stays
    "1.50"): ext coercion needs the text, and error messages still call it a number."""

    __slots__ = ()


_JSON_DECODER: Final = json.JSONDecoder(parse_float=_JsonDecimal, parse_constant=_reject_constant)
_JSON_ENCODER: Final = json.JSONEncoder(
    ensure_ascii=False, check_circular=False, allow_nan=False, separators=(",", ":")
)


# ---------------------------------------------------------------------------------------------
# Dispatch


def encode_header(command: RemotingCommand, serialize_type: SerializeType) -> bytes:
    """Encode the header fields of `command` (not its body).

    Args:
        command: The command to encode.
        serialize_type: JSON or ROCKETMQ.

    Returns:
        The header bytes, ready for `frame.encode_frame` to prefix.

    Raises:
        LocalProtocolError: A field cannot be carried by this serialization.
    """
    if serialize_type == SerializeType.JSON:
        return encode_json_header(command)
    if serialize_type == SerializeType.ROCKETMQ:
        return encode_binary_header(command)
    raise LocalProtocolError(f"unknown serialize type {serialize_type!r}")


def decode_header(data: bytes, serialize_type: int) -> RemotingCommand:
    """Decode header bytes into a command with an empty body.

    Args:
        data: Exactly the header bytes of one frame.
        serialize_type: The high byte of the frame's header-length word.

    Returns:
        The command; the caller attaches the body.

    Raises:
        RemoteProtocolError: Unknown serialize type or malformed header.
    """
    if serialize_type == SerializeType.JSON:
        return decode_json_header(data)
    if serialize_type == SerializeType.ROCKETMQ:
        return decode_binary_header(data)
    raise RemoteProtocolError(f"unknown serialize type {serialize_type} in header-length word")


# ---------------------------------------------------------------------------------------------
# JSON


def _check_int32(name: str, value: int) -> None:
    if not _INT32_MIN <= value <= _INT32_MAX:
        raise LocalProtocolError(f"{name} {value} does not fit a 32-bit int")


def _check_ext_fields(ext_fields: dict[str, str]) -> None:
    for key, value in ext_fields.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise LocalProtocolError(
                f"ext field {key!r}: {value!r} must map str to str; stringify values first"
            )


def _utf8(text: str, what: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise LocalProtocolError(f"{what} is not encodable as UTF-8: {error}") from None


def encode_json_header(command: RemotingCommand) -> bytes:
    """Encode a header as fastjson would: sorted keys, nulls and empty extFields omitted.

    Args:
        command: The command to encode; `ext_fields` must be str -> str.

    Returns:
        UTF-8 JSON bytes.

    Raises:
        LocalProtocolError: An int field outside 32 bits, a non-string ext entry, a remark that
            is neither str nor None, an unknown language, or a string with lone surrogates.
    """
    code = int(command.code)
    version = command.version
    opaque = command.opaque
    flag = command.flag
    language = _LANGUAGE_NAME_BY_ORDINAL.get(command.language)
    remark = command.remark
    ext_fields = command.ext_fields
    # Every request and answer comes here: the checks are one expression, and the values of
    # `ext_fields` are checked by a join (TypeError on a non-string); a failed check is named
    # by `_refuse_json`. orjson refuses keys that are not strings.
    if (
        not (
            _INT32_MIN <= code <= _INT32_MAX
            and _INT32_MIN <= version <= _INT32_MAX
            and _INT32_MIN <= opaque <= _INT32_MAX
            and _INT32_MIN <= flag <= _INT32_MAX
        )
        or language is None
        or (remark is not None and not isinstance(remark, str))
        or not _all_strings(ext_fields)
    ):
        _refuse_json(command)
    # Keys in fastjson's (alphabetical) order; the dict preserves insertion order.
    header: dict[str, object] = {"code": code}
    if ext_fields:
        header["extFields"] = ext_fields
    header["flag"] = flag
    header["language"] = language
    header["opaque"] = opaque
    if remark is not None:
        header["remark"] = remark
    header["serializeTypeCurrentRPC"] = "JSON"
    header["version"] = version
    try:
        # orjson writes what the standard encoder below would (compact, UTF-8 kept, control
        # characters escaped), about 15 times faster: every request and answer pays for it.
        return orjson.dumps(header)
    except orjson.JSONEncodeError:
        _check_ext_fields(ext_fields)  # a key that is not a string
        return _utf8(_JSON_ENCODER.encode(header), "header")  # raises, naming the problem


def _all_strings(ext_fields: dict[str, str]) -> bool:
    try:
        "".join(ext_fields.values())
    except TypeError:
        return False
    return True


def _refuse_json(command: RemotingCommand) -> NoReturn:
    """Raises the error that says which field of `command` JSON cannot carry."""
    _check_int32("code", int(command.code))
    _check_int32("version", command.version)
    _check_int32("opaque", command.opaque)
    _check_int32("flag", command.flag)
    if _LANGUAGE_NAME_BY_ORDINAL.get(command.language) is None:
        raise LocalProtocolError(f"unknown language {command.language!r}")
    remark = command.remark
    if remark is not None and not isinstance(remark, str):
        raise LocalProtocolError(f"remark must be str or None, not {type(remark).__name__}")
    _check_ext_fields(command.ext_fields)
    raise AssertionError(f"no field of {command!r} is refused")


def _json_kind(value: object) -> str:
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, _JsonDecimal):
        return "number"
    if isinstance(value, str):
        return "string"
    if value is None:
        return "null"
    return "number"


def _json_int(header: dict[str, object], key: str) -> int:
    value = header.get(key)
    if value is None:
        return 0  # Java's primitive default; fastjson skips nulls for primitives.
    if type(value) is not int:
        raise RemoteProtocolError(
            f"JSON header field {key!r} is a {_json_kind(value)}, expected an integer"
        )
    if not _INT32_MIN <= value <= _INT32_MAX:
        raise RemoteProtocolError(f"JSON header field {key!r} = {value} does not fit a 32-bit int")
    return value


def _json_language(value: object) -> LanguageCode:
    if value is None:
        return _LANGUAGE_DEFAULT
    if type(value) is str:
        return _LANGUAGE_BY_NAME.get(value, LanguageCode.OTHER)
    if type(value) is int:
        return _LANGUAGE_BY_ORDINAL.get(value, LanguageCode.OTHER)
    raise RemoteProtocolError(
        f"JSON header field 'language' is a {_json_kind(value)}, expected a name or an ordinal"
    )


def _json_scalar_text(value: object, where: str) -> str | None:
    """Java's `String.valueOf` of a decoded JSON scalar; None for JSON null."""
    if isinstance(value, str):
        return str(value)  # strings, and the literal text of a `_JsonDecimal`
    if value is None:
        return None
    if value is True:
        return "true"
    if value is False:
        return "false"
    if type(value) is int:
        return str(value)
    raise RemoteProtocolError(
        f"{where} is a JSON {_json_kind(value)}, expected a string, number or boolean"
    )


def _json_ext_fields(value: object) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise RemoteProtocolError(
            f"JSON header field 'extFields' is a {_json_kind(value)}, expected an object"
        )
    ext_fields: dict[str, str] = {}
    for key, item in value.items():
        if type(item) is str:  # the common case first
            ext_fields[key] = item
            continue
        text = _json_scalar_text(item, f"extFields[{key!r}]")
        if text is not None:
            ext_fields[key] = text
    return ext_fields


def _decode_usual_json(data: bytes) -> RemotingCommand | None:
    """The command, when its header is the usual kind (what every client sends and every
    broker answers): valid JSON, an object whose int fields are ints within 32 bits, a
    language name, a string remark or none, ext fields of strings; None for anything else,
    which `_decode_any_json` reads as it must or names what is wrong."""
    try:
        parsed = orjson.loads(data)  # several times faster than `json`: every request pays
    except orjson.JSONDecodeError:
        return None
    if type(parsed) is not dict:
        return None
    code = parsed.get("code", 0)
    version = parsed.get("version", 0)
    opaque = parsed.get("opaque", 0)
    flag = parsed.get("flag", 0)
    language = parsed.get("language")
    remark = parsed.get("remark")
    ext_fields = parsed.get("extFields")
    # orjson gives floats (huge integers too) where `_decode_any_json` keeps the literal text:
    # those, nulls, booleans and numbers in ext fields all fail these checks (the join raises
    # on anything but strings).
    if not (
        type(code) is int
        and type(version) is int
        and type(opaque) is int
        and type(flag) is int
        and _INT32_MIN <= code <= _INT32_MAX
        and _INT32_MIN <= version <= _INT32_MAX
        and _INT32_MIN <= opaque <= _INT32_MAX
        and _INT32_MIN <= flag <= _INT32_MAX
        and type(language) is str
        and (remark is None or type(remark) is str)
    ):
        return None
    if ext_fields is None:
        ext_fields = {}
    elif type(ext_fields) is not dict or not _all_strings(ext_fields):
        return None
    language_code = _LANGUAGE_BY_NAME.get(language, LanguageCode.OTHER)
    # Positional: a command's fields in their order, at half the cost of keywords.
    return RemotingCommand(code, language_code, version, opaque, flag, remark or None, ext_fields)


def _parse_any_json(data: bytes) -> dict[str, object]:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise RemoteProtocolError(f"JSON header is not valid UTF-8: {error}") from None
    try:
        parsed: object = _JSON_DECODER.decode(text)
    except RecursionError:
        raise RemoteProtocolError("JSON header nests too deeply to parse") from None
    except ValueError as error:  # JSONDecodeError, huge int literals, NaN/Infinity
        raise RemoteProtocolError(f"JSON header does not parse: {error}") from None
    if not isinstance(parsed, dict):
        raise RemoteProtocolError(f"JSON header is a {_json_kind(parsed)}, expected an object")
    return parsed


def decode_json_header(data: bytes) -> RemotingCommand:
    """Decode a JSON header, tolerating what Java, C++ and Go peers send.

    Args:
        data: The header bytes (UTF-8 JSON object; surrounding whitespace is allowed, the C++
            client ends its header with a newline).

    Returns:
        The command with an empty body. Missing int fields are 0 and a missing language is
        JAVA, as Java's field defaults would leave them; unknown language names become OTHER.

    Raises:
        RemoteProtocolError: Not UTF-8, not JSON, not an object, or a field of the wrong type.
    """
    command = _decode_usual_json(data)
    return _decode_any_json(data) if command is None else command


def _decode_any_json(data: bytes) -> RemotingCommand:
    parsed = _parse_any_json(data)
    remark = _json_scalar_text(parsed.get("remark"), "JSON header field 'remark'")
    return RemotingCommand(
        code=_json_int(parsed, "code"),
        language=_json_language(parsed.get("language")),
        version=_json_int(parsed, "version"),
        opaque=_json_int(parsed, "opaque"),
        flag=_json_int(parsed, "flag"),
        remark=remark or None,
        ext_fields=_json_ext_fields(parsed.get("extFields")),
    )


# ---------------------------------------------------------------------------------------------
# Binary (ROCKETMQ)


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
    if not _INT16_MIN <= code <= _INT16_MAX:
        raise LocalProtocolError(
            f"code {code} does not fit the 16-bit code field of a ROCKETMQ header; use JSON"
        )
    if not _INT16_MIN <= command.version <= _INT16_MAX:
        raise LocalProtocolError(
            f"version {command.version} does not fit the 16-bit field of a ROCKETMQ header"
        )
    _check_int32("opaque", command.opaque)
    _check_int32("flag", command.flag)
    language = _LANGUAGE_BY_ORDINAL.get(int(command.language))
    if language is None:
        raise LocalProtocolError(f"unknown language {command.language!r}")
    remark = command.remark
    if remark is not None and not isinstance(remark, str):
        raise LocalProtocolError(f"remark must be str or None, not {type(remark).__name__}")
    remark_bytes = _utf8(remark, "remark") if remark else b""

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
            language = _LANGUAGE_BY_ORDINAL.get(language_byte, LanguageCode.OTHER)
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
        language=_LANGUAGE_BY_ORDINAL.get(language_byte, LanguageCode.OTHER),
        version=version,
        opaque=opaque,
        flag=flag,
        remark=remark or None,
        ext_fields=_EXT_FIELDS(data, ext_start, ext_end),
    )
