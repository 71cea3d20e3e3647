"""The HA stream's frames and reports: any split of the bytes decodes the same; bad frames
are refused."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pocketmq.broker.ha.protocol import (
    HAProtocolError,
    ReportDecoder,
    Transfer,
    TransferDecoder,
    encode_report,
    encode_transfer_header,
)

frames = st.lists(
    st.tuples(st.integers(0, 1 << 50), st.binary(max_size=300)), min_size=1, max_size=8
)


def _split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    return [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]


@given(frames, st.lists(st.integers(0, 10_000), max_size=10))
def test_frames_decode_the_same_however_the_bytes_arrive(
    sent: list[tuple[int, bytes]], cuts: list[int]
) -> None:
    wire = b"".join(encode_transfer_header(o, len(d)) + d for o, d in sent)
    decoder = TransferDecoder()
    got = [t for chunk in _split(wire, cuts) for t in decoder.feed(chunk)]
    assert got == [Transfer(o, d) for o, d in sent]


@given(st.lists(st.integers(0, 1 << 62), min_size=1, max_size=8), st.lists(st.integers(0, 500)))
def test_the_last_whole_report_wins(offsets: list[int], cuts: list[int]) -> None:
    wire = b"".join(encode_report(o) for o in offsets)
    decoder = ReportDecoder()
    seen = [r for chunk in _split(wire, cuts) if (r := decoder.feed(chunk)) is not None]
    assert seen[-1] == offsets[-1]
    assert set(seen) <= set(offsets)


def test_a_heartbeat_is_a_frame_without_data() -> None:
    assert list(TransferDecoder().feed(encode_transfer_header(4096, 0))) == [Transfer(4096, b"")]


@pytest.mark.parametrize(
    "header",
    [encode_transfer_header(-1, 0), encode_transfer_header(0, -5), b"\0" * 8 + b"\x7f" * 4],
)
def test_impossible_frames_are_refused(header: bytes) -> None:
    with pytest.raises(HAProtocolError):
        list(TransferDecoder().feed(header))


def test_a_negative_report_is_refused() -> None:
    with pytest.raises(HAProtocolError):
        ReportDecoder().feed(encode_report(-3))
