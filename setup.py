"""pocketmq's build: setuptools, plus the proxy's gRPC stubs generated from the protos it
ships (`src/pocketmq/proxy/protos`, apache/rocketmq-apis), for wheels and editable installs
alike. The stubs are not kept in the repository.

Where it can, the build also compiles the small kernels written for mypyc (`KERNELS`). Each is
an optional extension: without a C compiler, or with `POCKETMQ_PURE_PYTHON` set, the install
goes on and the package runs the same code interpreted."""

from __future__ import annotations

import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).parent
PROTOS = HERE / "src" / "pocketmq" / "proxy" / "protos"
STUBS = HERE / "src" / "pocketmq" / "proxy" / "grpc_v2"
PROTO_PACKAGE = "apache/rocketmq/v2"


def generate_stubs() -> None:
    """Runs protoc (grpcio-tools) over the protos into `pocketmq.proxy.grpc_v2`, with the
    generated imports pointed at that package."""
    import grpc_tools
    from grpc_tools import protoc

    well_known = Path(grpc_tools.__file__).parent / "_proto"
    sources = sorted(str(p) for p in (PROTOS / PROTO_PACKAGE).glob("*.proto"))
    with tempfile.TemporaryDirectory() as out:
        code = protoc.main(
            [
                "grpc_tools.protoc",
                f"-I{PROTOS}",
                f"-I{well_known}",
                f"--python_out={out}",
                f"--pyi_out={out}",
                f"--grpc_python_out={out}",
                *sources,
            ]
        )
        if code != 0:
            raise SystemExit(f"protoc failed ({code}) on {sources}")
        STUBS.mkdir(exist_ok=True)
        for generated in sorted((Path(out) / PROTO_PACKAGE).iterdir()):
            text = re.sub(
                r"^from apache\.rocketmq\.v2 import",
                "from pocketmq.proxy.grpc_v2 import",
                generated.read_text(),
                flags=re.MULTILINE,
            )
            (STUBS / generated.name).write_text(text)
    (STUBS / "__init__.py").write_text(
        '"""gRPC stubs of apache.rocketmq.v2, generated at build time (see setup.py)."""\n'
    )


class BuildWithStubs(build_py):
    def run(self) -> None:
        generate_stubs()
        super().run()


# Modules named `*_kernel.py` are written for mypyc (each says how in its docstring). The paths
# are relative to this file, as mypyc names each module after its path under `src`.
KERNELS = sorted(str(p.relative_to(HERE)) for p in HERE.glob("src/pocketmq/*/*_kernel.py"))


def compiled_kernels() -> list[Any]:
    """The kernels as optional C extensions, or none when mypyc is missing, fails, or is not
    wanted; the package then runs them interpreted (a test says so where a compiler exists)."""
    if os.environ.get("POCKETMQ_PURE_PYTHON"):
        return []
    try:
        from mypyc.build import mypycify
    except ImportError:
        sys.stderr.write("pocketmq: mypyc is not installed; the kernels stay interpreted\n")
        return []
    try:
        # Each kernel is checked on its own: the build's environment lacks the package's other
        # dependencies, which the kernels' packages import for type checking.
        extensions = mypycify(
            ["--follow-imports=skip", "--ignore-missing-imports", *KERNELS], opt_level="3"
        )
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - any failure leaves them interpreted
        sys.stderr.write(f"pocketmq: mypyc failed ({exc!r}); the kernels stay interpreted\n")
        return []
    for extension in extensions:
        # A failed compile (no C compiler) leaves the interpreted module in place.
        extension.optional = True
    return list(extensions)


setup(cmdclass={"build_py": BuildWithStubs}, ext_modules=compiled_kernels())
