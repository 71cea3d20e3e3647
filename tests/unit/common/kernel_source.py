"""The kernels' sources run by the interpreter, beside the modules as imported (compiled where
the build could), so that tests hold both builds to the same answers."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType


def interpreted(kernel: ModuleType) -> ModuleType:
    """A fresh module run from `kernel`'s `.py` source, whether or not the build compiled it."""
    assert kernel.__file__ is not None
    name = kernel.__name__.rpartition(".")[2]
    source = Path(kernel.__file__).with_name(f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"{name}_interpreted", source)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
