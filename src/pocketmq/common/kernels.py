"""Whether a kernel (`*_kernel.py`, compiled by mypyc when a compiler is present) was compiled.

A module that owns a kernel takes it only when compiled: where its loop interpreted would be
slower than the module's own interpreted code, the interpreted build keeps that code.
"""

from __future__ import annotations

from importlib.machinery import ExtensionFileLoader
from types import ModuleType


def compiled(kernel: ModuleType) -> bool:
    """Whether `kernel` was loaded from its compiled extension rather than from its source."""
    return isinstance(getattr(kernel, "__loader__", None), ExtensionFileLoader)
