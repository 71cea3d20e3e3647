"""Hypothesis strategies for remoting commands, shared by the remoting tests.

Commands come out canonical (remark None or non-empty; for the binary layout, ext keys and
values non-empty and ints within 16 bits where the layout has shorts), so a codec round trip
must return them exactly.
"""

from __future__ import annotations

from itertools import pairwise

from hypothesis import strategies as st

from pocketmq.common.codes import LanguageCode, SerializeType
from pocketmq.remoting.command import RemotingCommand

INT16 = st.integers(-(1 << 15), (1 << 15) - 1)
INT32 = st.integers(-(1 << 31), (1 << 31) - 1)

# JSON and UTF-8 must carry any text, control characters and astral planes included.
TEXT = st.text(max_size=24)
NON_EMPTY_TEXT = st.text(min_size=1, max_size=24)


@st.composite
def commands(draw: st.DrawFn, serialize_type: SerializeType) -> RemotingCommand:
    """A canonical command that `serialize_type` can carry exactly."""
    binary = serialize_type == SerializeType.ROCKETMQ
    short_or_int = INT16 if binary else INT32
    ext_text = NON_EMPTY_TEXT if binary else TEXT
    return RemotingCommand(
        code=draw(short_or_int),
        language=draw(st.sampled_from(LanguageCode)),
        version=draw(short_or_int),
        opaque=draw(INT32),
        flag=draw(INT32),
        remark=draw(st.none() | NON_EMPTY_TEXT),
        ext_fields=draw(st.dictionaries(ext_text, ext_text, max_size=6)),
        body=draw(st.binary(max_size=64)),
    )


SERIALIZE_TYPES = st.sampled_from(SerializeType)


@st.composite
def typed_commands(draw: st.DrawFn) -> tuple[SerializeType, RemotingCommand]:
    """A serialize type and a command it can carry."""
    serialize_type = draw(SERIALIZE_TYPES)
    return serialize_type, draw(commands(serialize_type))


def split_points(data: bytes) -> st.SearchStrategy[list[int]]:
    """Sorted cut positions inside `data`, for feeding it in arbitrary chunks."""
    return st.lists(st.integers(0, len(data)), max_size=12).map(sorted)


def chunks_of(data: bytes, cuts: list[int]) -> list[bytes]:
    """`data` cut at `cuts`; empty pieces are dropped (b"" means end of stream)."""
    edges = [0, *cuts, len(data)]
    pieces = [data[start:end] for start, end in pairwise(edges)]
    return [piece for piece in pieces if piece]
