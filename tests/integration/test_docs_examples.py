"""Every example of the README and the user docs runs, as written, against a real cluster.

An example is a fenced ```python or ```sh block. One that cannot run in the suite says so on the
line above it, `<!-- not run: why -->`, or names the test that runs it, `<!-- run by PATH ... -->`;
every other one runs here:

- docs/producing.md and docs/consuming.md: each Python block in its own interpreter, as a user
  would run it, reading the NameServer address from NAMESRV_ADDR;
- README.md: top to bottom, in the order a reader meets the blocks, against one `pocketmq up` on
  free ports. The only change made to a block is the NameServer address (127.0.0.1:9876 becomes
  the real one); a shell block runs line by line in bash, with `pocketmq` on the PATH.

Every block must exit 0 within its time limit.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from pocketmq.testing import start_up_process
from pocketmq.testing.cluster import InProcessCluster

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
PAGES = ("producing.md", "consuming.md")
"""The docs pages whose Python blocks each run on their own against a cluster."""
EXAMPLE_TIMEOUT_S = 60
COMMAND_TIMEOUT_S = 30
README_NAMESRV = "127.0.0.1:9876"
RUNNABLE = ("python", "sh")
ServerLog = Callable[[], str]
_MARKER = re.compile(r"<!--\s*(not run|run by)\b:?\s*(.*?)\s*-->")


@dataclass(frozen=True)
class Block:
    page: str
    number: int
    language: str
    code: str
    marker: str | None
    """The `not run` / `run by` comment above the block, if any."""

    @property
    def name(self) -> str:
        return f"{self.page}#{self.number}"


def blocks_of(path: Path) -> list[Block]:
    """The ```python and ```sh blocks of a markdown page, numbered from 1 in page order."""
    found: list[Block] = []
    lines = path.read_text("utf-8").splitlines()
    previous = ""
    index = 0
    while index < len(lines):
        line = lines[index]
        index += 1
        if not line.startswith("```"):
            if line.strip():
                previous = line.strip()
            continue
        language = line[3:].strip()
        body: list[str] = []
        while index < len(lines) and not lines[index].startswith("```"):
            body.append(lines[index])
            index += 1
        index += 1  # the closing fence
        if language in RUNNABLE:
            marker = previous if _MARKER.fullmatch(previous) else None
            code = "\n".join(body) + "\n"
            found.append(Block(path.name, len(found) + 1, language, code, marker))
        previous = ""
    return found


def _doc_examples() -> list[Block]:
    return [b for page in PAGES for b in blocks_of(DOCS / page) if b.marker is None]


EXAMPLES = _doc_examples()


def test_the_docs_have_examples() -> None:
    assert {block.page for block in EXAMPLES} == set(PAGES)


def test_every_example_runs_or_says_why() -> None:
    pages = [README, *sorted(DOCS.glob("*.md"))]
    unrun = []
    for page in pages:
        for block in blocks_of(page):
            if block.marker is None:
                runs = page == README or (page.name in PAGES and block.language == "python")
                if not runs:
                    unrun.append(block.name)
                continue
            match = _MARKER.fullmatch(block.marker)
            assert match is not None
            kind, reason = match.groups()
            assert reason, f"{block.name}: say why it is not run"
            if kind == "run by":
                test_file = ROOT / reason.split()[0].rstrip(":")
                assert test_file.is_file(), f"{block.name}: {test_file} does not exist"
                assert page.name in test_file.read_text("utf-8"), (
                    f"{block.name}: {test_file.name} does not read {page.name}"
                )
    assert not unrun, f"blocks no test runs (mark them <!-- not run: why -->): {unrun}"


@pytest.mark.parametrize("block", EXAMPLES, ids=[block.name for block in EXAMPLES])
def test_docs_example_runs(
    block: Block, pocketmq_cluster: InProcessCluster, tmp_path: Path
) -> None:
    environment = {**os.environ, "NAMESRV_ADDR": pocketmq_cluster.namesrv_addr}
    environment["HOME"] = str(tmp_path)  # broadcasting offsets and the like stay in the test
    completed = subprocess.run(
        [sys.executable, "-c", block.code],
        env=environment,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=EXAMPLE_TIMEOUT_S,
        check=False,
    )
    assert completed.returncode == 0, _failure(block.name, completed)


def test_the_readme_walkthrough_runs_top_to_bottom(tmp_path: Path) -> None:
    """The README's blocks in reading order, against the cluster its Master/Slave part starts
    (`pocketmq up --slaves 1 --sync`), on free ports."""
    walkthrough = [block for block in blocks_of(README) if block.marker is None]
    assert any(block.language == "sh" for block in walkthrough)
    assert any(block.language == "python" for block in walkthrough)
    work = tmp_path / "reader"
    work.mkdir()
    server = start_up_process(tmp_path / "data", tmp_path / "up.log", "--slaves", "1", "--sync")
    try:
        environment = {**os.environ, "HOME": str(work)}
        environment["PATH"] = str(Path(sys.executable).parent) + os.pathsep + environment["PATH"]
        for block in walkthrough:
            code = block.code.replace(README_NAMESRV, server.address)
            if block.language == "python":
                _run_python(block.name, code, work, environment, server.log)
            else:
                _run_shell(block.name, code, work, environment, server.log)
    finally:
        server.stop()


def _run_python(
    name: str, code: str, cwd: Path, environment: dict[str, str], log: ServerLog
) -> None:
    completed = subprocess.run(
        [sys.executable, "-c", code],
        env=environment,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=EXAMPLE_TIMEOUT_S,
        check=False,
    )
    assert completed.returncode == 0, _failure(name, completed, log)


def _run_shell(
    name: str, code: str, cwd: Path, environment: dict[str, str], log: ServerLog
) -> None:
    commands = [line for line in code.splitlines() if line.strip() and not line.startswith("#")]
    for command in commands:
        completed = subprocess.run(
            ["bash", "-c", command],
            env=environment,
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT_S,
            check=False,
        )
        assert completed.returncode == 0, _failure(f"{name}: {command}", completed, log)


def _failure(
    name: str, completed: subprocess.CompletedProcess[str], log: ServerLog | None = None
) -> str:
    server = f"\n--- server log\n{log()}" if log is not None else ""
    return f"{name} failed:\n--- stdout\n{completed.stdout}\n--- stderr\n{completed.stderr}{server}"
