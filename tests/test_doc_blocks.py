"""Every code block of README.md and docs/*.md that can run is run, so that the docs
state today's truth.

The rule, for anyone who adds a section:

- A fenced block whose language is ``sh``, ``bash``, ``shell`` or ``python`` is code; any
  other (``text``, ``console``, ``json``, ``xml``, none) is a sample of output or data,
  never run.
- Code runs unless the line before it (blank lines allowed between) is
  ``<!-- not run: REASON -->``; the reason is required, and says why (it installs from a
  registry, it starts a server and waits, it is a fragment of an app).
- ``python`` runs in a fresh interpreter after ``import cvdiag`` (the one name every
  example assumes), in an empty folder, with this worktree's cvdiag, CVDIAG off unless
  the block turns it on. A block not run is still compiled (as the body of an ``async
  def``, so that fragments with ``await`` and ``async with`` are checked too).
- ``sh`` runs under ``bash -e`` in a folder holding ``server.log``: a real backend log
  written by ``cvdiag demo`` (four tests: a happy stream, a hang-up, a server error, a
  slow LLM call), with ``cvdiag`` on the ``PATH``. It must exit 0.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest
from cvdiag_cli import run

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
CODE = {"sh": "sh", "bash": "sh", "shell": "sh", "python": "python"}
_FENCE = re.compile(r"^```([A-Za-z]*)[^\n]*\n(.*?)^```[ \t]*$", re.M | re.S)
_NOT_RUN = re.compile(r"<!--\s*not run:\s*(.*?)\s*-->\s*$", re.S)


@dataclass(frozen=True)
class Block:
    path: Path
    line: int
    kind: str
    code: str
    #: Why it is not run; None: it runs.
    not_run: str | None

    @property
    def name(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def blocks() -> list[Block]:
    found = []
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        for m in _FENCE.finditer(text):
            kind = CODE.get(m.group(1).lower())
            if kind is None:
                continue
            before = text[: m.start()].rstrip()
            marker = _NOT_RUN.search(before[before.rfind("\n") + 1 :]) if before else None
            line = text[: m.start()].count("\n") + 1
            found.append(Block(path, line, kind, m.group(2), marker.group(1) if marker else None))
    return found


ALL = blocks()
RUN = [b for b in ALL if b.not_run is None]


def test_the_docs_have_code_and_every_marker_gives_a_reason() -> None:
    assert len(ALL) >= 20, [b.name for b in ALL]
    for b in ALL:
        assert b.not_run is None or len(b.not_run) >= 10, f"{b.name}: say why it is not run"
    for path in DOCS:  # a marker before anything but a code block is a mistake
        text = path.read_text(encoding="utf-8")
        for m in re.finditer(r"^<!--\s*not run:.*?-->\s*\n+(.*)", text, re.M):
            assert re.match(r"```(sh|bash|shell|python)\b", m.group(1)), f"{path.name}: marker before {m.group(1)!r}"


@pytest.mark.parametrize("block", [b for b in ALL if b.kind == "python"], ids=lambda b: b.name)
def test_every_python_block_compiles(block: Block) -> None:
    body = textwrap.indent(block.code, "    ") or "    pass"
    compile(f"async def _block():\n{body}\n", block.name, "exec")


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An empty folder with a real backend log, ``server.log``."""
    where = tmp_path_factory.mktemp("docs")
    r = run("demo", "--log", where / "server.log", cwd=where, timeout=120)
    assert r.code == 0, r.err
    return where


def _env(folder: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CVDIAG_")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["NO_COLOR"] = "1"
    return env


@pytest.mark.parametrize("block", RUN, ids=lambda b: b.name)
def test_every_block_that_can_run_runs(block: Block, folder: Path, tmp_path: Path) -> None:
    if block.kind == "python":
        cmd = [sys.executable, "-c", "import cvdiag\n" + block.code]
        cwd = tmp_path
    else:
        cmd = ["bash", "-e", "-c", block.code]
        cwd = folder
    done = subprocess.run(cmd, cwd=cwd, env=_env(folder), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{block.name} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
