"""RemotingConnection: two connections wired back to back, opaques, end of stream, failures.

References are to rocketmq-wire.md section 1.5 (matching by opaque, oneway) and 0.1 (replies in
JSON with serialize byte 0).
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pocketmq.common.codes import RequestCode, ResponseCode, SerializeType
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.connection import (
    OPAQUE_LIMIT,
    ConnectionClosed,
    Event,
    RemotingConnection,
    RequestReceived,
    ResponseReceived,
)
from pocketmq.remoting.errors import LocalProtocolError, RemoteProtocolError
from pocketmq.remoting.frame import encode_frame
from tests.unit.remoting.strategies import chunks_of, split_points, typed_commands


class ConnectionPair:
    """A client and a server connection; bytes one sends are handed to the other."""

    def __init__(self, **server_options: object) -> None:
        self.client = RemotingConnection()
        self.server = RemotingConnection(**server_options)  # type: ignore[arg-type]

    @staticmethod
    def deliver(data: bytes, to: RemotingConnection) -> list[Event]:
        to.receive_data(data)
        return list(to.events())

    def to_server(self, data: bytes) -> list[Event]:
        return self.deliver(data, self.server)

    def to_client(self, data: bytes) -> list[Event]:
        return self.deliver(data, self.client)


def request(code: int = RequestCode.GET_MAX_OFFSET, **ext: str) -> RemotingCommand:
    return RemotingCommand.request(code, ext_fields=ext)


def received_request(events: list[Event]) -> RemotingCommand:
    assert len(events) == 1
    event = events[0]
    assert isinstance(event, RequestReceived)
    return event.command


# -- request / response ------------------------------------------------------------------------


def test_request_and_response_travel_between_two_connections() -> None:
    pair = ConnectionPair()
    sent = request(topic="T", queueId="1")
    served = received_request(pair.to_server(pair.client.send_request(sent)))
    assert served == sent
    assert pair.client.pending_opaques == {sent.opaque}

    reply = RemotingCommand.response_to(served, ResponseCode.SUCCESS, ext_fields={"offset": "42"})
    events = pair.to_client(pair.server.send_response(reply))

    assert events == [ResponseReceived(reply, sent)]
    assert isinstance(events[0], ResponseReceived)
    assert events[0].request is sent
    assert pair.client.pending_opaques == frozenset()


def test_responses_arriving_out_of_order_match_their_requests_by_opaque() -> None:
    pair = ConnectionPair()
    first, second = request(a="1"), request(a="2")
    served = [
        received_request(pair.to_server(pair.client.send_request(command)))
        for command in (first, second)
    ]
    replies = [
        pair.server.send_response(RemotingCommand.response_to(command, ResponseCode.SUCCESS))
        for command in reversed(served)
    ]
    events = pair.to_client(b"".join(replies))
    assert [event.request for event in events if isinstance(event, ResponseReceived)] == [
        second,
        first,
    ]


def test_oneway_request_is_delivered_but_not_remembered() -> None:
    pair = ConnectionPair()
    oneway = RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, oneway=True)
    served = received_request(pair.to_server(pair.client.send_request(oneway)))
    assert served.is_oneway
    assert pair.client.pending_opaques == frozenset()


def test_both_ends_can_send_requests_on_one_connection() -> None:
    """A broker calls its clients back, e.g. NOTIFY_CONSUMER_IDS_CHANGED (section 1.5)."""
    pair = ConnectionPair()
    client_request = request()
    pair.to_server(pair.client.send_request(client_request))
    callback = RemotingCommand.request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, oneway=True)
    served = received_request(pair.to_client(pair.server.send_request(callback)))
    assert served.code == RequestCode.NOTIFY_CONSUMER_IDS_CHANGED
    assert pair.client.pending_opaques == {client_request.opaque}


def test_responses_are_json_with_a_zero_serialize_byte_by_default() -> None:
    """The C++ client reads the header word as a plain length (section 0.1)."""
    server = RemotingConnection()
    incoming = encode_frame(
        RemotingCommand(code=RequestCode.SEND_MESSAGE, opaque=4), SerializeType.ROCKETMQ
    )
    server.receive_data(incoming)
    served = received_request(list(server.events()))
    data = server.send_response(RemotingCommand.response_to(served, ResponseCode.SUCCESS))
    assert data[4] == 0
    assert data[8:9] == b"{"


def test_configured_binary_serialization_is_used_for_every_frame() -> None:
    pair = ConnectionPair(serialize_type=SerializeType.ROCKETMQ)
    pair.client.send_request(request())
    sent = request()
    data = pair.server.send_request(sent)
    assert data[4] == SerializeType.ROCKETMQ
    assert received_request(pair.to_client(data)) == sent


# -- opaques -----------------------------------------------------------------------------------


def test_opaques_count_up_from_zero_per_connection() -> None:
    pair = ConnectionPair()
    opaques = []
    for _ in range(3):
        command = request()
        pair.client.send_request(command)
        opaques.append(command.opaque)
    assert opaques == [0, 1, 2]
    other = request()
    pair.server.send_request(other)
    assert other.opaque == 0


def test_opaques_wrap_at_two_to_the_31_and_stay_non_negative() -> None:
    connection = RemotingConnection(opaque_start=OPAQUE_LIMIT - 2)
    opaques = []
    for _ in range(4):
        command = request()
        connection.send_request(command)
        opaques.append(command.opaque)
    assert opaques == [OPAQUE_LIMIT - 2, OPAQUE_LIMIT - 1, 0, 1]


def test_opaque_assignment_skips_opaques_still_pending_after_a_wrap() -> None:
    connection = RemotingConnection(opaque_start=OPAQUE_LIMIT - 1)
    stuck = [request() for _ in range(3)]
    for command in stuck:
        connection.send_request(command)  # OPAQUE_LIMIT - 1, 0, 1 stay pending
    connection.send_request(oneway := RemotingCommand.request(1, oneway=True))  # 2, not pending
    # Run the counter all the way round: the next candidates are the pending ones.
    connection._next_opaque = OPAQUE_LIMIT - 1
    fresh = request()
    connection.send_request(fresh)
    assert oneway.opaque == 2
    assert fresh.opaque == 2
    assert connection.pending_opaques == {OPAQUE_LIMIT - 1, 0, 1, 2}


def test_opaque_start_outside_the_range_is_refused() -> None:
    with pytest.raises(LocalProtocolError, match="opaque_start"):
        RemotingConnection(opaque_start=OPAQUE_LIMIT)
    with pytest.raises(LocalProtocolError, match="opaque_start"):
        RemotingConnection(opaque_start=-1)


def test_response_for_an_unknown_opaque_is_dropped_and_counted() -> None:
    pair = ConnectionPair()
    stray = RemotingCommand.response_to(RemotingCommand(code=1, opaque=77), ResponseCode.SUCCESS)
    assert pair.to_client(pair.server.send_response(stray)) == []
    assert pair.client.unmatched_responses_dropped == 1


def test_forgotten_request_drops_its_late_response() -> None:
    pair = ConnectionPair()
    sent = request()
    served = received_request(pair.to_server(pair.client.send_request(sent)))
    assert pair.client.forget(sent.opaque) is sent
    assert pair.client.forget(sent.opaque) is None
    late = pair.server.send_response(RemotingCommand.response_to(served, ResponseCode.SUCCESS))
    assert pair.to_client(late) == []
    assert pair.client.unmatched_responses_dropped == 1


# -- misuse ------------------------------------------------------------------------------------


def test_send_request_refuses_a_response_and_send_response_a_request() -> None:
    connection = RemotingConnection()
    response = RemotingCommand.response_to(RemotingCommand(code=1), ResponseCode.SUCCESS)
    with pytest.raises(LocalProtocolError, match="use send_response"):
        connection.send_request(response)
    with pytest.raises(LocalProtocolError, match="use send_request"):
        connection.send_response(request())


def test_response_to_refuses_to_answer_a_response() -> None:
    response = RemotingCommand.response_to(RemotingCommand(code=1), ResponseCode.SUCCESS)
    with pytest.raises(LocalProtocolError, match="not a request"):
        RemotingCommand.response_to(response, ResponseCode.SUCCESS)


def test_unencodable_request_is_not_left_pending() -> None:
    connection = RemotingConnection()
    with pytest.raises(LocalProtocolError, match="must map str to str"):
        connection.send_request(request(queueId=3))  # type: ignore[arg-type]
    assert connection.pending_opaques == frozenset()


def test_frame_larger_than_the_limit_is_refused_before_sending() -> None:
    connection = RemotingConnection(frame_bytes_max=1024)
    with pytest.raises(LocalProtocolError, match="exceeds frame_bytes_max=1024"):
        connection.send_request(RemotingCommand.request(1, body=b"x" * 1024))
    assert connection.pending_opaques == frozenset()


# -- end of stream -----------------------------------------------------------------------------


def test_peer_close_yields_connection_closed_once_after_the_last_frame() -> None:
    pair = ConnectionPair()
    pair.server.receive_data(pair.client.send_request(request()))
    pair.server.receive_data(b"")
    events = list(pair.server.events())
    assert isinstance(events[0], RequestReceived)
    assert events[1:] == [ConnectionClosed()]
    assert list(pair.server.events()) == []
    pair.server.receive_data(b"")  # a second end of stream is harmless
    assert list(pair.server.events()) == []
    assert pair.server.peer_closed


def test_peer_close_in_the_middle_of_a_frame_is_a_remote_protocol_error() -> None:
    connection = RemotingConnection()
    frame = encode_frame(RemotingCommand(code=1, body=b"abc"))
    connection.receive_data(frame[:-1])
    assert list(connection.events()) == []
    connection.receive_data(b"")
    with pytest.raises(RemoteProtocolError, match="middle of a frame"):
        list(connection.events())
    assert connection.failed


def test_data_after_the_peer_closed_is_a_local_protocol_error() -> None:
    connection = RemotingConnection()
    connection.receive_data(b"")
    with pytest.raises(LocalProtocolError, match="after the peer closed"):
        connection.receive_data(b"\x00")


def test_requests_cannot_be_sent_after_the_peer_closed_but_responses_can() -> None:
    connection = RemotingConnection()
    connection.receive_data(encode_frame(RemotingCommand(code=1, opaque=5)))
    connection.receive_data(b"")
    served, closed = list(connection.events())
    assert isinstance(served, RequestReceived)
    assert closed == ConnectionClosed()
    with pytest.raises(LocalProtocolError, match="peer closed"):
        connection.send_request(request())
    assert connection.send_response(
        RemotingCommand.response_to(served.command, ResponseCode.SUCCESS)
    )


# -- failures ----------------------------------------------------------------------------------


def test_connection_is_dead_after_a_remote_protocol_error() -> None:
    connection = RemotingConnection()
    connection.receive_data(struct.pack(">i", -1))
    with pytest.raises(RemoteProtocolError, match="frame length -1"):
        list(connection.events())
    assert connection.failed
    served = RemotingCommand(code=1, opaque=1)
    for call in (
        lambda: connection.receive_data(b"more"),
        lambda: connection.receive_data(b""),
        connection.events,
        lambda: connection.send_request(request()),
        lambda: connection.send_response(RemotingCommand.response_to(served, ResponseCode.SUCCESS)),
    ):
        with pytest.raises(RemoteProtocolError, match="frame length -1"):
            call()


def test_events_before_a_bad_frame_are_delivered_then_the_error_is_raised() -> None:
    connection = RemotingConnection()
    connection.receive_data(encode_frame(RemotingCommand(code=7)) + struct.pack(">i", 1 << 30))
    events = connection.events()
    first = next(events)
    assert isinstance(first, RequestReceived)
    assert first.command.code == 7
    with pytest.raises(RemoteProtocolError, match="exceeds frame_bytes_max"):
        next(events)


@given(st.binary(max_size=300), st.data())
def test_arbitrary_bytes_either_decode_or_raise_remote_protocol_error(
    stream: bytes, data: st.DataObject
) -> None:
    connection = RemotingConnection(frame_bytes_max=1024)
    try:
        for chunk in [*chunks_of(stream, data.draw(split_points(stream))), b""]:
            connection.receive_data(chunk)
            for event in connection.events():
                assert isinstance(event, RequestReceived | ResponseReceived | ConnectionClosed)
    except RemoteProtocolError:
        assert connection.failed


# -- chunking ----------------------------------------------------------------------------------


@given(st.lists(typed_commands(), max_size=6), st.data())
def test_any_chunking_of_the_stream_yields_the_same_events(
    typed: list[tuple[SerializeType, RemotingCommand]], data: st.DataObject
) -> None:
    """Requests and responses (to requests the receiver sent) mixed, cut at arbitrary points."""
    receiver = RemotingConnection()
    expected: list[Event] = []
    stream = b""
    for serialize_type, command in typed:
        if command.is_response:
            sent = request()
            receiver.send_request(sent)
            command.opaque = sent.opaque
            expected.append(ResponseReceived(command, sent))
        else:
            expected.append(RequestReceived(command))
        stream += encode_frame(command, serialize_type)
    expected.append(ConnectionClosed())

    events: list[Event] = []
    for chunk in [*chunks_of(stream, data.draw(split_points(stream))), b""]:
        receiver.receive_data(chunk)
        events += receiver.events()
    assert events == expected
    assert receiver.pending_opaques == frozenset()
