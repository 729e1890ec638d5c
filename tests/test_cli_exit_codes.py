"""Exit codes a script can rely on: 0 found, 1 nothing found or invalid input, 2 usage,
3 internal error. A bug is made to happen for real: a ``sitecustomize`` on
``PYTHONPATH`` makes a read-side function raise inside the installed command."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from cvdiag_cli import run
from logkit import TID_ABORT, TID_OK, aborted, compact, happy, write

#: What the broken read side raises: its message quotes log content, escape and all.
MESSAGE = "boom \x1b[31m"


@pytest.fixture
def log(tmp_path: Path) -> Path:
    return write(tmp_path / "app.log", [f"CVDIAG {compact(e)}" for e in [*happy(), *aborted()]])


@pytest.fixture
def broken(tmp_path: Path) -> dict[str, str]:
    """The environment of a ``cvdiag`` whose ``correlate.scan_tests`` raises a bug."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        "import cvdiag.read.correlate as correlate\n\n"
        "def scan_tests(*args, **kwargs):\n"
        f"    raise RuntimeError({MESSAGE!r})\n\n"
        "correlate.scan_tests = scan_tests\n"
    )
    path = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p)
    return {"PYTHONPATH": path}


def test_found_exits_0_with_its_rows(log: Path) -> None:
    r = run("tests", "--json", log)
    assert (r.code, r.err) == (0, "")
    assert {row["test_id"]: row["status"] for row in json.loads(r.out)} == {TID_OK: "ok", TID_ABORT: "fail"}


def test_nothing_found_exits_1_and_says_so(log: Path) -> None:
    r = run("grep", "--test-id", "ffffffff", log)
    assert (r.code, r.out, r.err) == (1, "", "")
    r = run("timeline", TID_OK[:-2] + "99", log)
    assert (r.code, r.out) == (1, "")
    assert r.err == f"cvdiag: no test id '{TID_OK[:-2]}99' in the inputs; closest: {TID_ABORT}, {TID_OK}\n"


def test_a_usage_error_exits_2_with_the_usage(log: Path) -> None:
    r = run("timeline", " ", log)
    assert (r.code, r.out, r.err) == (2, "", "cvdiag: TEST_ID is empty\n")
    r = run("tests", "--format", "yaml", log)
    assert (r.code, r.out) == (2, "")
    assert "argument --format: invalid choice: 'yaml'" in r.err


def test_an_internal_error_exits_3_with_one_plain_line(log: Path, broken: dict[str, str]) -> None:
    r = run("tests", log, env={**broken, "CVDIAG_TRACEBACK": ""}, internal_error=True)
    assert (r.code, r.out) == (3, "")
    assert r.err == ("cvdiag: internal error: RuntimeError: boom \\x1b[31m (set CVDIAG_TRACEBACK=1 for details)\n")


def test_an_internal_error_shows_its_traceback_under_cvdiag_traceback(log: Path, broken: dict[str, str]) -> None:
    r = run("tests", log, env={**broken, "CVDIAG_TRACEBACK": "1"}, internal_error=True)
    assert (r.code, r.out) == (3, "")
    lines = r.err.splitlines()
    assert lines[0] == "Traceback (most recent call last):"
    assert any('sitecustomize.py", line 4, in scan_tests' in line for line in lines), r.err
    assert lines[-2:] == ["RuntimeError: boom \\x1b[31m", "cvdiag: internal error: RuntimeError: boom \\x1b[31m"]
    assert "\x1b" not in r.err


def test_the_test_helper_fails_a_test_whose_command_crashed(log: Path, broken: dict[str, str]) -> None:
    with pytest.raises(AssertionError, match=r"cvdiag crashed \(exit 3\)"):
        run("tests", log, env=broken)
    r = run("grep", "--test-id", TID_OK, log, env=broken)  # the crash was scan_tests, nothing else
    assert [json.loads(line)["boundary"] for line in r.out.splitlines()] == [e["boundary"] for e in happy()]
