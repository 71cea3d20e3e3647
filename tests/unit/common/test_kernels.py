"""The modules written for mypyc (`*_kernel.py`): compiled where the build can, and the same
answers from their compiled and interpreted builds."""

from __future__ import annotations

import ast
import importlib
import os
import shutil
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import given
from hypothesis import strategies as st

import pocketmq
from pocketmq.common import (
    batch,
    batch_kernel,
    constants,
    hash_kernel,
    property_kernel,
    stored_layout,
)
from pocketmq.common.java_hash import KERNEL_COMPILED, pure_index_hash
from pocketmq.common.properties import decode_properties
from pocketmq.remoting import binary_header, header_kernel
from pocketmq.remoting.errors import RemoteProtocolError
from pocketmq.spark import records_kernel
from pocketmq.store import dispatch, dispatch_kernel, index, index_file, index_kernel
from pocketmq.store.index_file import index_key_hash
from tests.unit.common.kernel_source import interpreted

# Every kernel the build compiles (setup.py's `KERNELS`), found the same way.
KERNELS = [
    importlib.import_module(f"pocketmq.{path.parent.name}.{path.stem}")
    for path in sorted(Path(pocketmq.__file__).parent.glob("*/*_kernel.py"))
]
PURE_PYTHON_ENV = "POCKETMQ_PURE_PYTHON"
"""Set at install, it keeps setup.py from compiling the kernels."""
# Segment pieces, so that names match at and off segment starts, repeat and lack values.
PIECES = st.sampled_from(
    ["KEYS", "TAGS", "UNIQ_KEY", "K", "a", "\x01", "\x02", "KEYS\x01", "\x02TAGS\x01", "é"]
)
PROPERTIES = st.lists(PIECES, max_size=14).map("".join)
_PROPERTY_KERNEL = interpreted(property_kernel)


def _compiled(kernel: ModuleType) -> bool:
    return kernel.__file__ is not None and not kernel.__file__.endswith(".py")


@pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: k.__name__)
def test_the_build_compiled_every_kernel_where_it_could(kernel: ModuleType) -> None:
    """`make test` installs with a C compiler at hand: the kernels must run compiled there, or
    a build that silently stopped compiling them would go unnoticed."""
    if os.environ.get(PURE_PYTHON_ENV):
        pytest.skip(f"{PURE_PYTHON_ENV} asks for an interpreted build")
    if not (shutil.which("cc") or shutil.which("gcc")):
        pytest.skip("no C compiler: the kernels stay interpreted")
    assert _compiled(kernel), (
        f"{kernel.__name__} is not compiled ({kernel.__file__}): reinstall the package "
        "(make test, or pip install -e .) so that setup.py compiles it with mypyc"
    )


def test_every_kernel_is_found() -> None:
    assert {k.__name__ for k in KERNELS} >= {
        "pocketmq.common.batch_kernel",
        "pocketmq.common.hash_kernel",
        "pocketmq.common.property_kernel",
        "pocketmq.remoting.header_kernel",
        "pocketmq.spark.records_kernel",
        "pocketmq.store.dispatch_kernel",
        "pocketmq.store.index_kernel",
    }


def test_the_compiled_kernels_are_the_ones_in_use() -> None:
    assert _compiled(hash_kernel) == KERNEL_COMPILED
    expected = hash_kernel.index_hash if KERNEL_COMPILED else pure_index_hash
    assert index_key_hash is expected
    assert _compiled(header_kernel) == binary_header.KERNEL_COMPILED
    expected_reader = (
        binary_header._kernel_then_careful
        if binary_header.KERNEL_COMPILED
        else binary_header._binary_ext_fields
    )
    assert binary_header._EXT_FIELDS is expected_reader
    assert _compiled(index_kernel) == index_file.KERNEL_COMPILED == index.KERNEL_COMPILED
    assert _compiled(dispatch_kernel) == dispatch.KERNEL_COMPILED
    assert _compiled(batch_kernel) == batch.KERNEL_COMPILED
    records = pytest.importorskip("pocketmq.spark.records")  # needs pyarrow
    assert _compiled(records_kernel) == records.KERNEL_COMPILED


@given(PROPERTIES, st.sampled_from(["KEYS", "TAGS", "UNIQ_KEY", "K", "a", "EYS"]))
def test_find_property_is_the_same_in_both_builds(text: str, name: str) -> None:
    expected = decode_properties(text).get(name)
    assert property_kernel.find_property(text, name) == expected
    assert _PROPERTY_KERNEL.find_property(text, name) == expected


@given(PROPERTIES)
def test_index_properties_reads_tags_keys_and_unique_key(text: str) -> None:
    decoded = decode_properties(text)
    expected = (decoded.get("TAGS"), decoded.get("KEYS", ""), decoded.get("UNIQ_KEY"))
    assert property_kernel.index_properties(text) == expected
    assert _PROPERTY_KERNEL.index_properties(text) == expected


DAMAGE = st.lists(st.tuples(st.integers(0, 300), st.binary(min_size=1, max_size=2)), max_size=2)
"""Bytes to overwrite, by position: lengths that overrun or turn negative, bad UTF-8."""
CUT = st.integers(0, 3)
"""Bytes to cut off the end."""


def _damaged(data: bytes, damage: list[tuple[int, bytes]], cut: int) -> bytes:
    """`data` with bytes overwritten at the given positions and `cut` bytes cut off its end."""
    damaged = bytearray(data)
    for position, replacement in damage:
        if position < len(damaged):
            damaged[position : position + len(replacement)] = replacement
    return bytes(damaged[: max(0, len(damaged) - cut)])


_HEADER_KERNEL = interpreted(header_kernel)
_TEXTS = st.sampled_from(["", "a", "topic", "é", "\x00", "UNIQ_KEY\x01x\x02"]).map(str.encode)
_ENTRY = st.tuples(_TEXTS, _TEXTS).map(
    lambda kv: len(kv[0]).to_bytes(2, "big") + kv[0] + len(kv[1]).to_bytes(4, "big") + kv[1]
)


@given(st.lists(_ENTRY, max_size=5).map(b"".join), DAMAGE, CUT)
def test_the_binary_ext_fields_read_the_same_in_both_builds(
    block: bytes, damage: list[tuple[int, bytes]], cut: int
) -> None:
    """Well-formed blocks, and blocks with bytes overwritten (lengths that overrun or turn
    negative, bad UTF-8) or cut short: the kernel reads what the careful reader reads, and
    gives up (None) exactly where it raises."""
    padded = b"HEAD" + _damaged(block, damage, cut)
    try:
        expected: dict[str, str] | None = binary_header._binary_ext_fields(padded, 4, len(padded))
    except RemoteProtocolError:
        expected = None
    assert header_kernel.binary_ext_fields(padded, 4, len(padded)) == expected
    assert _HEADER_KERNEL.binary_ext_fields(padded, 4, len(padded)) == expected


def test_a_key_length_with_its_top_bit_set_is_negative_in_both_builds() -> None:
    """Java reads the key length as a signed short: 0x8001 is negative, not 32,769 bytes."""
    key_length = 0x8001
    data = key_length.to_bytes(2, "big") + b"k" * key_length + (1).to_bytes(4, "big") + b"v"
    with pytest.raises(RemoteProtocolError, match="negative"):
        binary_header._binary_ext_fields(data, 0, len(data))
    assert header_kernel.binary_ext_fields(data, 0, len(data)) is None
    assert _HEADER_KERNEL.binary_ext_fields(data, 0, len(data)) is None


_BATCH_KERNEL = interpreted(batch_kernel)


def _batch_entry(flag: int, body: bytes, properties: bytes) -> bytes:
    """One entry of a batch body, as producers encode it (MAGICCODE and BODYCRC 0)."""
    return b"".join(
        (
            (22 + len(body) + len(properties)).to_bytes(4, "big"),
            bytes(8),
            flag.to_bytes(4, "big", signed=True),
            len(body).to_bytes(4, "big"),
            body,
            len(properties).to_bytes(2, "big"),
            properties,
        )
    )


_BATCH_ENTRY = st.builds(
    _batch_entry,
    st.integers(-(2**31), 2**31 - 1),
    st.binary(max_size=40),
    PROPERTIES.map(str.encode),
)


@given(st.lists(_BATCH_ENTRY, max_size=4).map(b"".join), DAMAGE, CUT)
def test_a_batch_body_reads_the_same_in_both_builds(
    body: bytes, damage: list[tuple[int, bytes]], cut: int
) -> None:
    """Well-formed batch bodies, and bodies with bytes overwritten (lengths that disagree,
    overrun or turn negative, bad UTF-8) or cut short: the kernel finds the entries the careful
    reader finds, and gives up (None) exactly where it raises."""
    damaged = _damaged(body, damage, cut)
    try:
        expected: list[batch.BatchSpan] | None = batch._scan_carefully(damaged)
    except batch.BatchError:
        expected = None
    assert batch_kernel.scan_batch_body(damaged) == expected
    assert _BATCH_KERNEL.scan_batch_body(damaged) == expected
    if expected is None:
        with pytest.raises(batch.BatchError):
            batch.scan_batch_body(damaged)
    else:
        assert batch.scan_batch_body(damaged) == expected


def _split_the_old_way(
    text: str,
) -> tuple[list[tuple[str, str]], str | None, str | None, str | None]:
    """The reference: each well-formed segment by split and partition."""
    user, found = [], {}
    for segment in text.split("\x02"):
        name, sep, value = segment.partition("\x01")
        if sep and name and value:
            if name in SYSTEM_PROPERTIES:
                found[name] = value
            else:
                user.append((name, value))
    return user, found.get("KEYS"), found.get("TAGS"), found.get("UNIQ_KEY")


_RECORDS_KERNEL = interpreted(records_kernel)
SYSTEM_PROPERTIES = frozenset({"KEYS", "TAGS", "UNIQ_KEY", "WAIT"})
"""Names kept out of the Spark user map (a part of `spark.rows.SYSTEM_PROPERTIES`)."""


@given(PROPERTIES)
def test_the_spark_columns_split_properties_as_java_reads_them(text: str) -> None:
    for module in (records_kernel, _RECORDS_KERNEL):
        columns = module.Columns()
        unique = columns.add_properties(text, SYSTEM_PROPERTIES)
        user, keys, tags, expected_unique = _split_the_old_way(text)
        assert list(zip(columns.map_keys, columns.map_values, strict=True)) == user
        assert columns.map_offsets == [0, len(user)]
        assert (columns.keys, columns.tags, unique) == ([keys], [tags], expected_unique)


@pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: k.__name__)
def test_a_kernel_imports_nothing_of_the_package(kernel: ModuleType) -> None:
    """mypyc checks each kernel alone in the build's environment, without the package's other
    dependencies: a kernel that imported the package would compile against `Any` there. The
    other kernels are compiled with it, so a kernel may call them natively."""
    assert kernel.__file__ is not None
    source = Path(kernel.__file__).with_name(kernel.__name__.rpartition(".")[2] + ".py")
    allowed = {"__future__", "typing", "collections.abc", "mypy_extensions"}
    allowed |= {k.__name__ for k in KERNELS if k is not kernel}
    for node in ast.walk(ast.parse(source.read_text())):
        if isinstance(node, ast.Import):
            assert {alias.name for alias in node.names} <= allowed, ast.unparse(node)
        elif isinstance(node, ast.ImportFrom):
            assert node.module in allowed, ast.unparse(node)


def test_the_kernels_constants_are_the_packages() -> None:
    """Kernels repeat the constants they need (they import nothing of the package)."""
    assert property_kernel.NAME_VALUE_SEPARATOR == constants.NAME_VALUE_SEPARATOR
    assert property_kernel.PROPERTY_SEPARATOR == constants.PROPERTY_SEPARATOR
    assert property_kernel.PROPERTY_KEYS == constants.PROPERTY_KEYS
    assert property_kernel.PROPERTY_TAGS == constants.PROPERTY_TAGS
    assert (
        property_kernel.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
        == constants.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
    )
    assert records_kernel.MAGIC_V1 & 0xFFFFFFFF == constants.MESSAGE_MAGIC_CODE_V1
    assert records_kernel.OTHER_LAYOUT == (
        constants.COMPRESSED_FLAG | constants.BORNHOST_V6_FLAG | constants.STOREHOSTADDRESS_V6_FLAG
    )
    assert stored_layout.FIXED_V4.size == records_kernel.FIXED_SIZE
    assert index_kernel.KEY_SEPARATOR == constants.KEY_SEPARATOR
    assert batch_kernel.ENTRY_OVERHEAD_BYTES == batch.ENTRY_OVERHEAD_BYTES
    assert dispatch_kernel.MAGIC_V1 & 0xFFFFFFFF == constants.MESSAGE_MAGIC_CODE_V1
    assert dispatch_kernel.V6_FLAGS == stored_layout.V6_FLAGS
    assert stored_layout.FIXED_V4.size == dispatch_kernel.FIXED_SIZE
