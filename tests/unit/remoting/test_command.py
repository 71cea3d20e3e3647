"""RemotingCommand constructors and flag properties (rocketmq-wire.md section 1.2)."""

from __future__ import annotations

from pocketmq.common.codes import LanguageCode, RequestCode, ResponseCode
from pocketmq.remoting.command import (
    FLAG_ONEWAY,
    FLAG_RESPONSE,
    VERSION_CURRENT,
    RemotingCommand,
)


def test_request_is_neither_response_nor_oneway_by_default() -> None:
    command = RemotingCommand.request(RequestCode.PULL_MESSAGE, {"topic": "T"}, b"body")
    assert (command.flag, command.is_response, command.is_oneway) == (0, False, False)
    assert command.language is LanguageCode.PYTHON
    assert command.version == VERSION_CURRENT
    assert (command.opaque, command.remark) == (0, None)
    assert command.ext_fields == {"topic": "T"}
    assert command.body == b"body"


def test_oneway_request_sets_flag_bit_one() -> None:
    command = RemotingCommand.request(RequestCode.END_TRANSACTION, oneway=True)
    assert command.flag == FLAG_ONEWAY
    assert command.is_oneway
    assert not command.is_response


def test_response_to_echoes_the_opaque_and_sets_flag_bit_zero() -> None:
    request = RemotingCommand(code=RequestCode.SEND_MESSAGE, opaque=1234, flag=0)
    response = RemotingCommand.response_to(
        request, ResponseCode.TOPIC_NOT_EXIST, remark="no route", ext_fields={"a": "b"}
    )
    assert response.opaque == 1234
    assert response.flag == FLAG_RESPONSE
    assert response.is_response
    assert (response.code, response.remark, response.ext_fields) == (17, "no route", {"a": "b"})


def test_constructors_copy_the_callers_ext_mapping() -> None:
    ext = {"k": "v"}
    command = RemotingCommand.request(1, ext)
    ext["k"] = "changed"
    assert command.ext_fields == {"k": "v"}


def test_repr_shows_the_body_size_not_the_body() -> None:
    text = repr(RemotingCommand.request(RequestCode.SEND_MESSAGE, body=b"x" * 10_000))
    assert "body=<10000 bytes>" in text
    assert "xxxx" not in text
    assert "code=10" in text
