"""Every screen fits its terminal: each command at 60, 80 and 120 columns (``COLUMNS``,
piped, and a pseudo-terminal), no line wider than the terminal (a wide CJK character
counts two), and no word of a verdict lost to a cut."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from cvdiag_cli import on_a_terminal, run
from logkit import aborted, compact, errored, happy, tool_failure, write

from cvdiag.face.render import cells

WIDTHS = (60, 80, 120)
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
#: A backend error whose message is Japanese: each character takes two columns.
CJK_MESSAGE = "天気予報サービスに接続できません"
# Ids minted in different milliseconds, as a real run's are: a unique prefix of each is
# short. (Ids that differ only in their last character are shown whole, however narrow
# the terminal: test_cli_tables pins that.)
TID_OK = "0190a9c0-1a2b-7c3d-8e4f-5a6b7c8d9e01"
TID_ABORT = "0190a9c1-2b3c-7c3d-8e4f-5a6b7c8d9e02"
TID_ERROR = "0190a9c2-3c4d-7c3d-8e4f-5a6b7c8d9e03"
TID_TOOL = "0190a9c3-4d5e-7c3d-8e4f-5a6b7c8d9e05"
TID_CJK = "0190a9c4-5e6f-7c3d-8e4f-5a6b7c8d9e0c"


@pytest.fixture(scope="module")
def log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cjk = errored(TID_CJK, 6.0)
    cjk[-1]["metadata"]["message_scrubbed"] = CJK_MESSAGE
    events = happy(TID_OK, 0.0) + aborted(TID_ABORT, 1.0) + errored(TID_ERROR, 2.0) + tool_failure(TID_TOOL, 4.0) + cjk
    events.sort(key=lambda e: e["ts"])
    return write(tmp_path_factory.mktemp("fit") / "app.log", [f"CVDIAG {compact(e)}" for e in events])


def _commands(log: Path) -> list[list[str]]:
    return [
        ["tests", str(log)],
        ["tests", "--failed", str(log)],
        ["timeline", TID_TOOL, str(log)],
        ["timeline", TID_CJK, str(log)],
        ["timeline", TID_ABORT, str(log)],
        ["diagnose", TID_TOOL, str(log)],
        ["diagnose", TID_CJK, str(log)],
        ["diagnose", "--all", str(log)],
        ["compare", TID_OK, TID_ABORT, str(log)],
        ["stats", str(log)],
        ["validate", str(log)],
        ["--help"],
        ["tests", "--help"],
    ]


def _reasons(log: Path) -> dict[str, str]:
    r = run("diagnose", "--all", "--json", log)
    return {v["test_id"]: v["reason"] for v in json.loads(r.out)}


def _too_wide(text: str, width: int) -> list[str]:
    return [line for line in ANSI.sub("", text).splitlines() if cells(line) > width]


@pytest.mark.parametrize("width", WIDTHS)
def test_every_command_fits_the_terminal_piped(log: Path, width: int) -> None:
    for argv in _commands(log):
        r = run(*argv, env={"COLUMNS": str(width)})
        assert r.code in (0, 1), (argv, r.err)
        assert not _too_wide(r.out, width), (argv, _too_wide(r.out, width), r.out)
        assert not _too_wide(r.err, width), (argv, r.err)


@pytest.mark.parametrize("width", WIDTHS)
def test_every_command_fits_a_real_terminal(log: Path, width: int) -> None:
    """On a pseudo-terminal (rich draws the tables, in colour) the same holds."""
    for argv in _commands(log)[:9]:
        env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
        code, out = on_a_terminal(*argv, env={**env, "COLUMNS": str(width), "TERM": "xterm-256color"})
        text = out.decode("utf-8", "replace")
        assert code in (0, 1), (argv, text)
        assert not _too_wide(text, width), (argv, _too_wide(text, width), text)


def _words(text: str) -> list[str]:
    return ANSI.sub("", text).split()


@pytest.mark.parametrize("width", WIDTHS)
def test_no_word_of_a_verdict_is_lost(log: Path, width: int) -> None:
    """A reason is wrapped, never cut: every word of it is on the screen, in order."""
    reasons = _reasons(log)
    assert CJK_MESSAGE in reasons[TID_CJK]
    # Wrapped lines joined again (a word longer than its column is broken inside): the
    # reason is whole, in order, on each screen that shows it.
    shown = run("diagnose", "--all", log, env={"COLUMNS": str(width)}).out
    for tid, reason in reasons.items():
        assert _solid(reason) in _solid(shown), (tid, shown)
    for tid in (TID_TOOL, TID_CJK, TID_ABORT):
        one = run("diagnose", tid, log, env={"COLUMNS": str(width)}).out
        assert _solid(reasons[tid]) in _solid(one), one
        timeline = run("timeline", tid, log, env={"COLUMNS": str(width)}).out
        assert _solid(reasons[tid]) in _solid(timeline), timeline


def _solid(text: str) -> str:
    return "".join(_words(text))


def test_a_wide_character_takes_two_columns() -> None:
    from cvdiag.face.render import cut, pad, wrap

    assert cells("天気") == 4 and cells("abc") == 3 and cells("é") == 1
    assert cells(cut(CJK_MESSAGE, 9)) <= 9 and cut(CJK_MESSAGE, 9).endswith("…")
    assert cells(pad("天気", 6)) == 6
    assert all(cells(line) <= 7 for line in wrap(CJK_MESSAGE + " ok", 7))
    assert "".join(wrap(CJK_MESSAGE, 7)) == CJK_MESSAGE


@pytest.mark.parametrize("width", WIDTHS)
def test_the_demo_fits_the_terminal(width: int, tmp_path: Path) -> None:
    pytest.importorskip("uvicorn")
    # a short path: a word wider than the terminal (a long temp path) cannot fit anywhere
    r = run("demo", "--log", "backend.log", env={"COLUMNS": str(width)}, cwd=tmp_path, timeout=120)
    assert r.code == 0, r.err
    assert not _too_wide(r.out, width), _too_wide(r.out, width)
    assert "client-disconnect" in r.out
