"""Header codecs: JSON and binary round trips, peers' quirks, and malformed headers.

References are to rocketmq-wire.md (sections 0.1, 1.3, 1.4) and real-clients.md (client A).
"""

from __future__ import annotations

import contextlib
import json
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pocketmq.common.codes import LanguageCode, RequestCode, ResponseCode, SerializeType
from pocketmq.remoting import headers
from pocketmq.remoting.command import FLAG_RESPONSE, RemotingCommand
from pocketmq.remoting.errors import LocalProtocolError, RemoteProtocolError
from pocketmq.remoting.headers import (
    BINARY_FIXED_BYTES,
    decode_binary_header,
    decode_header,
    decode_json_header,
    encode_binary_header,
    encode_header,
    encode_json_header,
)
from tests.unit.remoting.strategies import commands


def without_body(command: RemotingCommand) -> RemotingCommand:
    command.body = b""
    return command


def json_header(**fields: object) -> bytes:
    return json.dumps(fields).encode()


def binary_header(
    *,
    code: int = 10,
    language: int = 1,
    version: int = 63,
    opaque: int = 5,
    flag: int = 0,
    remark: bytes = b"",
    ext: bytes = b"",
) -> bytes:
    return (
        struct.pack(">hBhiii", code, language, version, opaque, flag, len(remark))
        + remark
        + struct.pack(">i", len(ext))
        + ext
    )


def ext_entry(key: bytes, value: bytes) -> bytes:
    return struct.pack(">h", len(key)) + key + struct.pack(">i", len(value)) + value


# -- round trips -------------------------------------------------------------------------------


@given(commands(SerializeType.JSON))
def test_json_header_round_trip_returns_the_same_command(command: RemotingCommand) -> None:
    command = without_body(command)
    assert decode_json_header(encode_json_header(command)) == command


@given(commands(SerializeType.ROCKETMQ))
def test_binary_header_round_trip_returns_the_same_command(command: RemotingCommand) -> None:
    command = without_body(command)
    assert decode_binary_header(encode_binary_header(command)) == command


@given(commands(SerializeType.ROCKETMQ))
def test_dispatch_by_serialize_type_matches_the_specific_codecs(command: RemotingCommand) -> None:
    command = without_body(command)
    for serialize_type in SerializeType:
        assert decode_header(encode_header(command, serialize_type), serialize_type) == command


# -- JSON encoding (section 1.3) ---------------------------------------------------------------


def test_json_header_keys_are_in_fastjson_order_and_ext_values_are_strings() -> None:
    request = RemotingCommand(code=RequestCode.PULL_MESSAGE, opaque=9)
    response = RemotingCommand.response_to(
        request, ResponseCode.SUCCESS, remark="ok", ext_fields={"queueId": "3", "b": "x"}
    )
    encoded = encode_json_header(response)
    assert list(json.loads(encoded)) == sorted(json.loads(encoded))
    assert encoded == (
        b'{"code":0,"extFields":{"queueId":"3","b":"x"},"flag":1,"language":"PYTHON",'
        b'"opaque":9,"remark":"ok","serializeTypeCurrentRPC":"JSON","version":479}'
    )


def test_json_header_omits_null_remark_and_empty_ext_fields() -> None:
    decoded = json.loads(encode_json_header(RemotingCommand(code=3)))
    assert "remark" not in decoded
    assert "extFields" not in decoded


def test_json_header_writes_non_ascii_text_as_utf8() -> None:
    encoded = encode_json_header(RemotingCommand(code=1, remark="主题 \u00e9"))
    assert "主题 é".encode() in encoded


@pytest.mark.parametrize(
    ("command", "message"),
    [
        (RemotingCommand(code=1 << 31), "code"),
        (RemotingCommand(code=1, opaque=-(1 << 31) - 1), "opaque"),
        (RemotingCommand(code=1, flag=1 << 40), "flag"),
        (RemotingCommand(code=1, version=1 << 31), "version"),
        (RemotingCommand(code=1, ext_fields={"queueId": 3}), "str"),  # type: ignore[dict-item]
        (RemotingCommand(code=1, remark="\ud800"), "UTF-8"),
        (RemotingCommand(code=1, language=99), "language"),  # type: ignore[arg-type]
    ],
)
def test_json_encoder_rejects_values_the_format_cannot_carry(
    command: RemotingCommand, message: str
) -> None:
    with pytest.raises(LocalProtocolError, match=message):
        encode_json_header(command)


def test_json_encoder_writes_strings_of_str_subclasses_as_strings() -> None:
    """A remark or ext value of a str subclass (an enum's member, say) passes the encoder's
    checks as a str does, and is written as its text."""

    class Text(str):
        pass

    command = RemotingCommand(code=1, remark=Text("why"), ext_fields={"k": Text("v")})
    decoded = json.loads(encode_json_header(command))
    assert (decoded["remark"], decoded["extFields"]) == ("why", {"k": "v"})


# -- JSON decoding: what real peers send (sections 0.1, 1.3) -----------------------------------


def test_json_decoder_coerces_numeric_and_boolean_ext_values_like_string_value_of() -> None:
    header = (
        b'{"code":11,"extFields":{"queueId":3,"maxMsgNums":32,"big":12345678901234567890,'
        b'"neg":-1,"ratio":1.50,"exp":1e3,"on":true,"off":false,"gone":null,"s":"x"}}'
    )
    ext_fields = decode_json_header(header).ext_fields
    assert all(type(value) is str for value in ext_fields.values())
    assert ext_fields == {
        "queueId": "3",
        "maxMsgNums": "32",
        "big": "12345678901234567890",
        "neg": "-1",
        "ratio": "1.50",
        "exp": "1e3",
        "on": "true",
        "off": "false",
        "s": "x",
    }


@pytest.mark.parametrize("remark", [b"", b',"remark":null', b',"remark":""'])
def test_json_decoder_reads_absent_null_and_empty_remark_as_none(remark: bytes) -> None:
    assert decode_json_header(b'{"code":0' + remark + b"}").remark is None


def test_json_decoder_keeps_empty_credential_ext_fields() -> None:
    """Client A sends AccessKey/Signature empty without credentials (real-clients.md)."""
    header = b'{"code":34,"extFields":{"AccessKey":"","OnsChannel":"ALIYUN","Signature":""}}'
    ext_fields = decode_json_header(header).ext_fields
    assert all(type(value) is str for value in ext_fields.values())
    assert ext_fields == {
        "AccessKey": "",
        "OnsChannel": "ALIYUN",
        "Signature": "",
    }


def test_json_decoder_ignores_unknown_keys_and_fills_java_defaults() -> None:
    command = decode_json_header(b'{"serializeTypeCurrentRPC":"JSON","future":[1,{"a":2}]}')
    assert command == RemotingCommand(code=0, language=LanguageCode.JAVA, version=0)


@pytest.mark.parametrize(
    ("language", "expected"),
    [
        ('"CPP"', LanguageCode.CPP),
        ('"NODE_JS"', LanguageCode.NODE_JS),
        ('"COBOL"', LanguageCode.OTHER),
        ('"cpp"', LanguageCode.OTHER),
        ("1", LanguageCode.CPP),
        ("13", LanguageCode.NODE_JS),
        ("99", LanguageCode.OTHER),
        ("-1", LanguageCode.OTHER),
        ("null", LanguageCode.JAVA),
    ],
)
def test_json_decoder_reads_language_by_name_or_ordinal(
    language: str, expected: LanguageCode
) -> None:
    header = f'{{"code":0,"language":{language}}}'.encode()
    assert decode_json_header(header).language is expected


def test_json_decoder_accepts_a_null_ext_map_and_surrounding_whitespace() -> None:
    command = decode_json_header(b' \n{"code":17,"extFields":null}\n')
    assert command.code == 17
    assert command.ext_fields == {}


def test_json_decoder_reads_a_captured_style_cpp_send_request() -> None:
    """Client A's SEND_MESSAGE: jsoncpp FastWriter output (sorted keys, trailing newline), mixed
    ext types, `remark` "", `language` "CPP", version 63 (real-clients.md, client A)."""
    header = (
        b'{"code":10,"extFields":{"AccessKey":"","OnsChannel":"ALIYUN",'
        b'"Signature":"Kx8cLQ0sZy1l0w3hT4qXe5n1kDk=","batch":"0",'
        b'"bornTimestamp":"1700000000123","defaultTopic":"TBW102","defaultTopicQueueNums":4,'
        b'"flag":0,"producerGroup":"PG","properties":"UNIQ_KEY\\u00010A0B0C0D\\u0002'
        b'WAIT\\u0001true\\u0002TAGS\\u0001TagA\\u0002","queueId":2,"reconsumeTimes":"0",'
        b'"sysFlag":0,"topic":"TopicTest","unitMode":"0"},"flag":0,"language":"CPP",'
        b'"opaque":7,"remark":"","version":63}\n'
    )
    command = decode_json_header(header)
    assert command.code == RequestCode.SEND_MESSAGE
    assert command.language is LanguageCode.CPP
    assert (command.version, command.opaque, command.flag, command.remark) == (63, 7, 0, None)
    assert not command.is_response
    assert command.ext_fields["queueId"] == "2"
    assert command.ext_fields["defaultTopicQueueNums"] == "4"
    assert command.ext_fields["sysFlag"] == "0"
    assert command.ext_fields["properties"] == (
        "UNIQ_KEY\x010A0B0C0D\x02WAIT\x01true\x02TAGS\x01TagA\x02"
    )
    assert command.ext_fields["AccessKey"] == ""


def test_json_response_for_the_cpp_client_has_only_string_ext_values() -> None:
    """Client A reads a response field only if it `isString()` (rocketmq-wire.md 0.1)."""
    request = RemotingCommand(code=RequestCode.SEND_MESSAGE, opaque=7)
    response = RemotingCommand.response_to(
        request, ResponseCode.SUCCESS, ext_fields={"queueId": "2", "queueOffset": "0"}
    )
    decoded = json.loads(encode_json_header(response))
    assert all(isinstance(value, str) for value in decoded["extFields"].values())
    assert decoded["flag"] & FLAG_RESPONSE
    assert decoded["opaque"] == 7


# -- JSON decoding: malformed headers ----------------------------------------------------------


@pytest.mark.parametrize(
    ("header", "message"),
    [
        (b"", "does not parse"),
        (b"{", "does not parse"),
        (b'{"code":1}}', "does not parse"),
        (b"{'code':1}", "does not parse"),
        (b'{"code":NaN}', "does not parse"),
        (b'{"code":Infinity}', "does not parse"),
        (b'{"code":1' + b"1" * 5000 + b"}", "does not parse"),
        (b"\xff\xfe{}", "UTF-8"),
        (b'{"remark":"\xc3("}', "UTF-8"),
        (b"[" * 100_000 + b"]" * 100_000, "nests too deeply|does not parse"),
        (b"[]", "array, expected an object"),
        (b'"header"', "string, expected an object"),
        (b"42", "number, expected an object"),
        (b"null", "null, expected an object"),
        (b"true", "boolean, expected an object"),
        (b'{"code":"10"}', "'code' is a string"),
        (b'{"code":10.0}', "'code' is a number, expected an integer"),
        (b'{"code":1e2}', "'code' is a number, expected an integer"),
        (b'{"code":true}', "'code' is a boolean"),
        (b'{"opaque":2147483648}', "'opaque' = 2147483648 does not fit"),
        (b'{"flag":-2147483649}', "'flag' = -2147483649 does not fit"),
        (b'{"version":[1]}', "'version' is a array"),
        (b'{"language":{"name":"JAVA"}}', "'language' is a object"),
        (b'{"language":true}', "'language' is a boolean"),
        (b'{"language":1.0}', "'language' is a number"),
        (b'{"remark":{"a":1}}', "'remark' is a JSON object"),
        (b'{"extFields":[]}', "'extFields' is a array"),
        (b'{"extFields":"a=b"}', "'extFields' is a string"),
        (b'{"extFields":{"k":{"nested":1}}}', r"extFields\['k'\] is a JSON object"),
        (b'{"extFields":{"k":[1]}}', r"extFields\['k'\] is a JSON array"),
    ],
)
def test_json_decoder_rejects_malformed_headers(header: bytes, message: str) -> None:
    with pytest.raises(RemoteProtocolError, match=message):
        decode_json_header(header)


@given(st.binary(max_size=200))
def test_json_decoder_raises_only_remote_protocol_error_on_arbitrary_bytes(data: bytes) -> None:
    with contextlib.suppress(RemoteProtocolError):
        decode_json_header(data)


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
        lambda children: (
            st.lists(children, max_size=4)
            | st.dictionaries(st.text(max_size=8), children, max_size=4)
        ),
        max_leaves=12,
    ),
    st.sampled_from(["code", "language", "remark", "extFields", "opaque", "other"]),
)
def test_json_decoder_raises_only_remote_protocol_error_on_arbitrary_json(
    value: object, key: str
) -> None:
    for document in (value, {key: value}, {"extFields": {"k": value}}):
        try:
            command = decode_json_header(json.dumps(document).encode())
        except RemoteProtocolError:
            continue
        assert all(isinstance(item, str) for item in command.ext_fields.values())


def decoded_by_the_standard_library(data: bytes) -> RemotingCommand | str:
    """What `decode_json_header` gives when its orjson parse is not used (or the error)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(headers, "_decode_usual_json", lambda _data: None)
        try:
            return decode_json_header(data)
        except RemoteProtocolError as error:
            return f"error: {error}"


def decoded(data: bytes) -> RemotingCommand | str:
    try:
        return decode_json_header(data)
    except RemoteProtocolError as error:
        return f"error: {error}"


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=1 << 62, max_value=1 << 70)
    | st.floats()
    | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)
JSON_KEYS = st.sampled_from(
    ["code", "language", "remark", "extFields", "opaque", "flag", "version", "x"]
)
USUAL_HEADER = {"code": 310, "language": "JAVA", "version": 479, "opaque": 7, "flag": 0}
"""Every field the fast path checks, well formed: a test changes one of them."""


@given(JSON_VALUES, JSON_KEYS)
def test_json_decoder_reads_any_json_as_the_standard_library_would(value: object, key: str) -> None:
    """The orjson fast path gives the same command or the same error as `json` alone."""
    documents = (
        value,
        {key: value},
        {"extFields": {"k": value}, "code": 310},
        {**USUAL_HEADER, key: value},
        {**USUAL_HEADER, "extFields": {"k": value}},
    )
    for document in documents:
        data = json.dumps(document).encode()
        assert decoded(data) == decoded_by_the_standard_library(data)


@given(st.binary(max_size=120))
def test_json_decoder_reads_any_bytes_as_the_standard_library_would(data: bytes) -> None:
    assert decoded(data) == decoded_by_the_standard_library(data)


@pytest.mark.parametrize(
    "data",
    [
        b'{"code":310,"extFields":{"a":1.50,"b":"x"}}',
        b'{"code":310,"remark":2e3}',
        b'{"code":99999999999999999999999}',
        b'{"code":1,"code":2}',
        b'\xef\xbb\xbf{"code":1}',
        b'{"code":1,"remark":"\\ud800"}',
        b' {"code":1,"extFields":{"k":"v"}}\n',
        b'{"code":1,"language":"JAVA","opaque":2147483648}',
        b'{"code":-2147483649,"language":"JAVA"}',
        b'{"code":1,"language":"JAVA","version":true}',
        b'{"code":1,"language":"JAVA","flag":null}',
    ],
)
def test_json_decoder_edge_cases_match_the_standard_library(data: bytes) -> None:
    assert decoded(data) == decoded_by_the_standard_library(data)


@given(commands(SerializeType.JSON))
def test_json_encoder_writes_the_bytes_the_standard_library_writes(
    command: RemotingCommand,
) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(headers.orjson, "dumps", _refuse)
        expected = encode_json_header(command)
    assert encode_json_header(command) == expected


def _refuse(_value: object) -> bytes:
    raise headers.orjson.JSONEncodeError("use the standard library")


# -- binary layout (section 1.4) ---------------------------------------------------------------


def test_binary_header_matches_the_documented_layout() -> None:
    command = RemotingCommand(
        code=RequestCode.PULL_MESSAGE,
        language=LanguageCode.JAVA,
        version=479,
        opaque=0x01020304,
        flag=1,
        remark="hi",
        ext_fields={"q": "3"},
    )
    assert encode_binary_header(command) == (
        b"\x00\x0b"  # code 11
        b"\x00"  # JAVA
        b"\x01\xdf"  # version 479
        b"\x01\x02\x03\x04"  # opaque
        b"\x00\x00\x00\x01"  # flag
        b"\x00\x00\x00\x02hi"  # remark
        b"\x00\x00\x00\x08"  # ext block length
        b"\x00\x01q\x00\x00\x00\x013"
    )


def test_binary_header_without_remark_and_ext_is_the_fixed_part() -> None:
    encoded = encode_binary_header(RemotingCommand(code=1, remark=""))
    assert len(encoded) == BINARY_FIXED_BYTES
    assert decode_binary_header(encoded).remark is None


def test_binary_codec_drops_empty_ext_keys_and_values() -> None:
    """A zero-length string decodes as null and null entries are dropped (section 1.4)."""
    command = RemotingCommand(code=1, ext_fields={"a": "", "": "b", "c": "d"})
    assert decode_binary_header(encode_binary_header(command)).ext_fields == {"c": "d"}
    decoded = decode_binary_header(
        binary_header(ext=ext_entry(b"a", b"") + ext_entry(b"", b"b") + ext_entry(b"c", b"d"))
    )
    assert decoded.ext_fields == {"c": "d"}


def test_binary_decoder_maps_an_unknown_language_byte_to_other() -> None:
    assert decode_binary_header(binary_header(language=200)).language is LanguageCode.OTHER


def test_binary_decoder_reads_negative_shorts_and_ints() -> None:
    decoded = decode_binary_header(binary_header(code=-1006, version=-1, opaque=-7, flag=-1))
    assert (decoded.code, decoded.version, decoded.opaque, decoded.flag) == (-1006, -1, -7, -1)


@pytest.mark.parametrize(
    ("command", "message"),
    [
        (RemotingCommand(code=RequestCode.POP_MESSAGE), "16-bit code field"),
        (RemotingCommand(code=-(1 << 15) - 1), "16-bit code field"),
        (RemotingCommand(code=1, version=1 << 15), "version"),
        (RemotingCommand(code=1, opaque=1 << 31), "opaque"),
        (RemotingCommand(code=1, flag=-(1 << 31) - 1), "flag"),
        (RemotingCommand(code=1, ext_fields={"k" * 32768: "v"}), "key limit"),
        (RemotingCommand(code=1, ext_fields={"k": 1}), "str"),  # type: ignore[dict-item]
        (RemotingCommand(code=1, ext_fields={"k": "\udc00"}), "UTF-8"),
        (RemotingCommand(code=1, language=14), "language"),  # type: ignore[arg-type]
    ],
)
def test_binary_encoder_rejects_values_the_layout_cannot_carry(
    command: RemotingCommand, message: str
) -> None:
    with pytest.raises(LocalProtocolError, match=message):
        encode_binary_header(command)


@pytest.mark.parametrize(
    ("header", "message"),
    [
        (b"", "shorter than its 21-byte fixed part"),
        (binary_header()[:20], "shorter than its 21-byte fixed part"),
        (binary_header(remark=b"abc")[:-2], "remark of 3 bytes at offset 17 overruns"),
        (
            struct.pack(">hBhiii", 1, 0, 0, 0, 0, -1) + b"\x00" * 4,
            "remark length at offset 13 is negative",
        ),
        (binary_header()[:-4] + struct.pack(">i", 9), "ext block of 9 bytes"),
        (binary_header()[:-4] + struct.pack(">i", -3), "ext block length at offset 17 is neg"),
        (binary_header(ext=b"\x00"), "ext key length at offset 21 overruns"),
        (binary_header(ext=b"\x00\x05ab"), "ext key of 5 bytes"),
        (binary_header(ext=b"\xff\xffab"), "ext key length at offset 21 is negative"),
        (binary_header(ext=b"\x00\x01a\x00\x00"), "ext value length at offset 24 overruns"),
        (binary_header(ext=b"\x00\x01a\x00\x00\x00\x09xy"), "ext value of 9 bytes"),
        (binary_header(ext=b"\x00\x01a\x80\x00\x00\x00"), "ext value length at offset 24 is neg"),
        (binary_header() + b"\x00", "1 bytes after its ext block"),
        (binary_header(remark=b"\xff"), "remark at offset 17 is not valid UTF-8"),
        (binary_header(ext=ext_entry(b"\xc3", b"v")), "ext key at offset 23 is not valid"),
        (binary_header(ext=ext_entry(b"k", b"\xed\xa0\x80")), "ext value at offset 28 is not"),
    ],
)
def test_binary_decoder_rejects_overruns_and_bad_text(header: bytes, message: str) -> None:
    with pytest.raises(RemoteProtocolError, match=message):
        decode_binary_header(header)


@given(st.binary(max_size=200))
def test_binary_decoder_raises_only_remote_protocol_error_on_arbitrary_bytes(data: bytes) -> None:
    with contextlib.suppress(RemoteProtocolError):
        decode_binary_header(data)


@given(
    commands(SerializeType.ROCKETMQ),
    st.data(),
)
def test_binary_decoder_raises_only_remote_protocol_error_on_corrupted_headers(
    command: RemotingCommand, data: st.DataObject
) -> None:
    encoded = bytearray(encode_binary_header(command))
    position = data.draw(st.integers(0, len(encoded) - 1))
    encoded[position] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(encoded)))
    with contextlib.suppress(RemoteProtocolError):
        decode_binary_header(bytes(encoded[:cut]))


def test_decode_header_rejects_an_unknown_serialize_type() -> None:
    with pytest.raises(RemoteProtocolError, match="unknown serialize type 2"):
        decode_header(b"{}", 2)
