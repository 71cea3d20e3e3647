"""Every Python example of the user docs runs, as written, against a real cluster.

Examples read the NameServer address from NAMESRV_ADDR; each runs in its own interpreter, as
a user would run it, and must exit 0 within its time limit.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pocketmq.testing.cluster import InProcessCluster

DOCS = Path(__file__).resolve().parents[2] / "docs"
PAGES = ("producing.md", "consuming.md")
EXAMPLE_TIMEOUT_S = 60
_BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)


def _examples() -> list[tuple[str, str]]:
    found = []
    for page in PAGES:
        blocks = _BLOCK.findall((DOCS / page).read_text("utf-8"))
        found.extend((f"{page}#{i + 1}", code) for i, code in enumerate(blocks))
    return found


EXAMPLES = _examples()


def test_the_docs_have_examples() -> None:
    pages = {name.split("#")[0] for name, _ in EXAMPLES}
    assert pages == set(PAGES)


@pytest.mark.parametrize(("name", "code"), EXAMPLES, ids=[name for name, _ in EXAMPLES])
def test_docs_example_runs(
    name: str, code: str, pocketmq_cluster: InProcessCluster, tmp_path: Path
) -> None:
    environment = {**os.environ, "NAMESRV_ADDR": pocketmq_cluster.namesrv_addr}
    environment["HOME"] = str(tmp_path)  # broadcasting offsets and the like stay in the test
    completed = subprocess.run(
        [sys.executable, "-c", code],
        env=environment,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=EXAMPLE_TIMEOUT_S,
        check=False,
    )
    assert completed.returncode == 0, (
        f"{name} failed:\n--- stdout\n{completed.stdout}\n--- stderr\n{completed.stderr}"
    )
