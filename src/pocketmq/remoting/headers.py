"""Command header codecs: JSON (serialize type 0, here) and binary ROCKETMQ (serialize type 1,
`binary_header.py`), and the choice between them by the frame's serialize type.

JSON follows what fastjson emits for `RemotingCommand` (keys sorted, nulls omitted, body never
in the header) and accepts what real peers send: unknown keys, `remark` absent/null/"",
`extFields` absent, and ext values of any JSON scalar type (the C++ client sends numbers). Every
ext value is coerced to a string the way Java's `String.valueOf` prints it; null values are
dropped; a number keeps its literal text. We always emit ext values as JSON strings, because the
C++ client reads a response field only if it `isString()`.

Decoders raise only `RemoteProtocolError` (with the offending offset or field); encoders raise
only `LocalProtocolError` (a value the format cannot carry). Neither touches the body. The binary
codec's names are exported here too, so that callers import every codec from one place.
"""

from __future__ import annotations

import json
from typing import Final, NoReturn

import orjson

from pocketmq.common.codes import LanguageCode, SerializeType
from pocketmq.remoting.binary_header import (
    BINARY_FIXED_BYTES,
    decode_binary_header,
    encode_binary_header,
)
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.errors import LocalProtocolError, RemoteProtocolError
from pocketmq.remoting.header_fields import (
    INT32_MAX,
    INT32_MIN,
    LANGUAGE_BY_ORDINAL,
    check_int32,
    utf8,
)

__all__ = [
    "BINARY_FIXED_BYTES",
    "decode_binary_header",
    "decode_header",
    "decode_json_header",
    "encode_binary_header",
    "encode_header",
    "encode_json_header",
]

# Java's field default when a JSON header has no `language` (`RemotingCommand.language`).
_LANGUAGE_DEFAULT: Final = LanguageCode.JAVA
_LANGUAGE_BY_NAME: Final = dict(LanguageCode.__members__)
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


def _check_ext_fields(ext_fields: dict[str, str]) -> None:
    for key, value in ext_fields.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise LocalProtocolError(
                f"ext field {key!r}: {value!r} must map str to str; stringify values first"
            )


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
            INT32_MIN <= code <= INT32_MAX
            and INT32_MIN <= version <= INT32_MAX
            and INT32_MIN <= opaque <= INT32_MAX
            and INT32_MIN <= flag <= INT32_MAX
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
        return utf8(_JSON_ENCODER.encode(header), "header")  # raises, naming the problem


def _all_strings(ext_fields: dict[str, str]) -> bool:
    try:
        "".join(ext_fields.values())
    except TypeError:
        return False
    return True


def _refuse_json(command: RemotingCommand) -> NoReturn:
    """Raises the error that says which field of `command` JSON cannot carry."""
    check_int32("code", int(command.code))
    check_int32("version", command.version)
    check_int32("opaque", command.opaque)
    check_int32("flag", command.flag)
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
    if not INT32_MIN <= value <= INT32_MAX:
        raise RemoteProtocolError(f"JSON header field {key!r} = {value} does not fit a 32-bit int")
    return value


def _json_language(value: object) -> LanguageCode:
    if value is None:
        return _LANGUAGE_DEFAULT
    if type(value) is str:
        return _LANGUAGE_BY_NAME.get(value, LanguageCode.OTHER)
    if type(value) is int:
        return LANGUAGE_BY_ORDINAL.get(value, LanguageCode.OTHER)
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
        and INT32_MIN <= code <= INT32_MAX
        and INT32_MIN <= version <= INT32_MAX
        and INT32_MIN <= opaque <= INT32_MAX
        and INT32_MIN <= flag <= INT32_MAX
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
