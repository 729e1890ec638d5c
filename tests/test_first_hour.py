"""What a newcomer meets in the first hour: a version, a slip of the keyboard answered
with the command meant, an exit code a CI step can fail on, counts in plain words, and
empty answers that say what was read and why nothing was found."""

from __future__ import annotations

from pathlib import Path

import pytest
from cvdiag_cli import run
from logkit import TID_ABORT, TID_OK, aborted, compact, happy, write


@pytest.fixture
def log(tmp_path: Path) -> Path:
    return write(tmp_path / "app.log", [f"CVDIAG {compact(e)}" for e in happy(TID_OK, 0.0) + aborted(TID_ABORT, 1.0)])


def test_version_names_the_installed_cvdiag() -> None:
    r = run("--version")
    assert r.code == 0
    assert r.out.startswith("cvdiag ") and r.out.split()[1][0].isdigit(), r.out


@pytest.mark.parametrize(
    ("typed", "meant"),
    [("tset", "tests"), ("timline", "timeline"), ("diganose", "diagnose"), ("stat", "stats"), ("hist", "history")],
)
def test_a_misspelled_command_names_the_nearest_one(typed: str, meant: str, log: Path) -> None:
    r = run(typed, log)
    assert r.code == 2
    assert r.err == f"cvdiag: {typed!r} is not a command; did you mean {meant!r}?\n"


def test_a_word_far_from_every_command_lists_them() -> None:
    r = run("frobnicate")
    assert r.code == 2
    assert "is not a command; the commands: tests, timeline," in r.err


def test_fail_on_failed_fails_a_ci_step_only_when_a_test_failed(log: Path, tmp_path: Path) -> None:
    plain = run("tests", log)
    failing = run("tests", "--fail-on-failed", log)
    assert (plain.code, failing.code) == (0, 4)
    assert failing.out == plain.out  # the same answer, another exit code
    assert run("tests", "--fail-on-failed", "--format", "github", log).code == 4
    passing = write(tmp_path / "ok.log", [f"CVDIAG {compact(e)}" for e in happy(TID_OK, 0.0)])
    assert run("tests", "--fail-on-failed", passing).code == 0


def test_one_of_a_thing_is_not_plural(tmp_path: Path) -> None:
    one = write(tmp_path / "one.log", [f"CVDIAG {compact(e)}" for e in happy(TID_OK, 0.0)])
    r = run("tests", one)
    assert "1 test, 0 failed" in r.out and "1 tests" not in r.out
    assert "checked 7 envelopes: 0 invalid, 0 malformed lines" in run("validate", one).out
