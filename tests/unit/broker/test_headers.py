"""Request headers read as Java's `decodeCommandCustomHeader` reads them, and the one place a
`HeaderError` becomes a response."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from pocketmq.broker.admin_handlers import AdminHandlers
from pocketmq.broker.headers import (
    HeaderError,
    answers_header_errors,
    parse_java_int,
    required_int,
    required_long,
)
from pocketmq.broker.offsets import ConsumerOffsetTable
from pocketmq.common.codes import RequestCode, ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.runtime.clock import ManualClock
from pocketmq.store.message_store import MessageStore
from tests.unit.broker.pull_support import open_store, topic_table


@pytest.mark.parametrize(
    ("text", "number"),
    [("0", 0), ("-12", -12), ("+7", 7), (" 1", None), ("1_0", None), ("٣", None), ("", None)],
)
def test_java_int_text_is_only_ascii_digits_with_a_sign(text: str, number: int | None) -> None:
    assert parse_java_int(text) == number


def test_parse_java_int_of_an_absent_field_is_none() -> None:
    assert parse_java_int(None) is None


def test_int_fields_say_which_field_and_why() -> None:
    with pytest.raises(HeaderError, match=r"^the custom field <queueId> is null$"):
        required_int({}, "queueId")
    with pytest.raises(HeaderError, match=r"^the custom field <queueId> is not a number: ' 1'$"):
        required_int({"queueId": " 1"}, "queueId")
    with pytest.raises(HeaderError, match=r"^the custom field <queueId> "):
        required_int({"queueId": str(1 << 31)}, "queueId")
    assert required_long({"offset": str(1 << 40)}, "offset") == 1 << 40


class _Handlers:
    @answers_header_errors()
    async def system_error(self, request: RemotingCommand, channel: object) -> RemotingCommand:
        required_int(request.ext_fields, "queueId")
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS)

    @answers_header_errors(ResponseCode.INVALID_PARAMETER)
    async def invalid_parameter(self, request: RemotingCommand) -> RemotingCommand:
        required_int(request.ext_fields, "queueId")
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS)


def test_a_header_error_is_answered_with_the_handlers_code_and_the_errors_text() -> None:
    handlers = _Handlers()
    request = RemotingCommand.request(RequestCode.GET_MAX_OFFSET, {"queueId": "x"})
    response = asyncio.run(handlers.system_error(request, None))
    assert response.code == ResponseCode.SYSTEM_ERROR
    assert response.remark == "the custom field <queueId> is not a number: 'x'"
    assert response.opaque == request.opaque
    response = asyncio.run(handlers.invalid_parameter(request))
    assert response.code == ResponseCode.INVALID_PARAMETER
    good = RemotingCommand.request(RequestCode.GET_MAX_OFFSET, {"queueId": "1"})
    assert asyncio.run(handlers.system_error(good, None)).code == ResponseCode.SUCCESS


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MessageStore]:
    opened = open_store(tmp_path / "store")
    yield opened
    opened.close()


async def _registered(names: list[str]) -> None:
    pass


def _admin(store: MessageStore) -> AdminHandlers:
    return AdminHandlers(
        store, topic_table(), ConsumerOffsetTable(), ManualClock(), lambda: None, _registered, dict
    )


@pytest.mark.parametrize(
    ("ext", "remark"),
    [
        ({}, "the custom field <topic> is null"),
        ({"topic": "T", "readQueueNums": "x"}, "invalid literal for int() with base 10: 'x'"),
        ({"topic": "T", "topicFilterType": "NONE"}, "'NONE' is not a valid TopicFilterType"),
        ({"topic": "T", "readQueueNums": "0"}, "read queue count 0 is not in 1..65536"),
    ],
)
def test_create_topic_answers_a_bad_header_invalid_parameter(
    store: MessageStore, ext: dict[str, str], remark: str
) -> None:
    request = RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, ext)
    response = asyncio.run(_admin(store).update_topic(request, None))  # type: ignore[arg-type]
    assert (response.code, response.remark) == (ResponseCode.INVALID_PARAMETER, remark)


def test_query_message_answers_a_bad_number_invalid_parameter(store: MessageStore) -> None:
    ext = {"topic": "T", "key": "k", "maxNum": "many"}
    request = RemotingCommand.request(RequestCode.QUERY_MESSAGE, ext)
    response = asyncio.run(_admin(store).query_message(request, None))  # type: ignore[arg-type]
    assert response.code == ResponseCode.INVALID_PARAMETER
    assert response.remark == "invalid literal for int() with base 10: 'many'"
