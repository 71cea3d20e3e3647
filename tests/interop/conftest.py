"""The C++ client's fixtures (see `cpp_harness`): its Python, and the drivers a test starts."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.interop.cpp_harness import drivers, ensure_cpp_client


@pytest.fixture(scope="session")
def cpp_python() -> Path:
    return ensure_cpp_client()


@pytest.fixture
def cpp(cpp_python: Path, tmp_path: Path) -> Iterator[Any]:
    """Starts drivers: `cpp("cpp_produce.py", [args])`; all are killed at the end."""
    with drivers(cpp_python, tmp_path / "cpp") as start:
        yield start
