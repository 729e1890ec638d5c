"""What a newcomer meets in the first hour: a version, a slip of the keyboard answered
with the command meant, an exit code a CI step can fail on, counts in plain words, and
empty answers that say what was read and why nothing was found."""

from __future__ import annotations

import os
import subprocess
import sys
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


# -- empty answers ----------------------------------------------------------------------


def test_a_log_without_cvdiag_lines_says_what_was_read_and_the_likely_cause(tmp_path: Path) -> None:
    path = write(tmp_path / "plain.log", ["INFO:     Started server process", "INFO:     Uvicorn running"])
    for cmd, found in (("tests", "no tests found"), ("stats", "no envelopes found"), ("diagnose", "no tests found")):
        r = run(cmd, *(["--all"] if cmd == "diagnose" else []), path)
        assert (r.code, r.out) == (1, f"{found}\n"), cmd
        assert r.err == (
            "cvdiag: read 1 file, 2 lines, 59 bytes, no CVDIAG line among them. Is CVDIAG_ENABLED=1 set in"
            " the server's environment, and is this the server's log (its stdout, or the CVDIAG_FILE it writes)?\n"
        ), cmd


def test_an_empty_file_a_binary_file_and_an_empty_folder_each_say_so(tmp_path: Path) -> None:
    (tmp_path / "empty.log").write_bytes(b"")
    assert "read 1 file, 0 lines, 0 bytes: empty." in run("tests", tmp_path / "empty.log").err
    (tmp_path / "core").write_bytes(b"\x7fELF\x00\x00\x01" * 200)
    assert "core is not text (it holds NUL bytes): is this the server's log?" in run("tests", tmp_path / "core").err
    (tmp_path / "nothing").mkdir()
    assert "read no file: the folder is empty" in run("tests", tmp_path / "nothing").err
    r = run("tests", "-", stdin=b"hello\n")
    assert "read stdin, 1 line, 6 bytes, no CVDIAG line among them" in r.err


def test_only_malformed_cvdiag_lines_are_named_as_such(tmp_path: Path) -> None:
    path = write(tmp_path / "cut.log", ['CVDIAG {"schema_version":1,"test_id":"a', "CVDIAG {oops}"])
    r = run("tests", path)
    assert r.code == 1
    assert "2 CVDIAG lines, every one malformed (first at" in r.err


def test_an_unclear_master_switch_is_a_warning_not_silence() -> None:
    code = "import cvdiag.write.config as c; print(c.get_settings().enabled)"
    env = {"CVDIAG_ENABLED": "maybe", "PATH": "/usr/bin:/bin", "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert done.stdout == "False\n"
    assert "CVDIAG_ENABLED='maybe' is neither on (1, true, yes, on) nor off (0, false, no, off); cvdiag is off" in (
        done.stderr
    )
    env["CVDIAG_ENABLED"] = "0"
    quiet = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert quiet.stderr == ""


# -- what a row is ----------------------------------------------------------------------


def test_tests_names_the_pytest_node_id_and_counts_requests_without_an_id(tmp_path: Path) -> None:
    from logkit import envelope

    probe = envelope(TID_OK, "probe.start", -0.01, metadata={"url": "tests/test_chat.py::test_hello", "viewport": None})
    probe["layer"] = "probe"
    health = happy("0190a9c0-ffff-7c3d-8e4f-5a6b7c8d9e99", 5.0)
    health[0]["metadata"]["inbound_test_id_adopted"] = False  # the server minted it
    events = [probe, *happy(TID_OK, 0.0), *aborted(TID_ABORT, 1.0), *health]
    path = write(tmp_path / "app.log", [f"CVDIAG {compact(e)}" for e in events])
    r = run("tests", path, env={"COLUMNS": "160"})
    assert r.code == 0, r.err
    header, first = r.out.splitlines()[:2]
    assert header.split()[:4] == ["test_id", "pytest", "node", "id"]
    assert first.split()[:2] == [TID_OK, "tests/test_chat.py::test_hello"]
    assert "1 request came without an x-test-id (health checks, probes?): the server minted its id" in r.out


# -- the default tier ---------------------------------------------------------------------


def _default_tier(test_id: str, start: float) -> list[dict]:
    """What the default tier writes of a happy request that called the LLM and a tool."""
    return [e for e in happy(test_id, start) if e["boundary"] in DEFAULT_BOUNDARIES]


DEFAULT_BOUNDARIES = {"backend.agent.enter", "backend.agent.exit", "backend.response.complete"}
TIER_NOTE = "LLM calls, tool calls and first bytes that went well are left out. CVDIAG_TIER=verbose on the server"


def test_a_default_tier_log_says_what_the_tier_left_out_and_how_to_see_it(tmp_path: Path) -> None:
    path = write(tmp_path / "app.log", [f"CVDIAG {compact(e)}" for e in _default_tier(TID_OK, 0.0)])
    assert len(_default_tier(TID_OK, 0.0)) == 3
    tests = run("tests", path, env={"COLUMNS": "400"})
    assert "every test was recorded at the default tier" in tests.out and TIER_NOTE in tests.out
    timeline = run("timeline", TID_OK, path, env={"COLUMNS": "400"})
    assert "note: recorded at the default tier" in timeline.out and TIER_NOTE in timeline.out
    report = run("report", path, "-o", tmp_path / "r.html")
    assert report.code == 0, report.err
    assert TIER_NOTE in (tmp_path / "r.html").read_text()


def test_a_verbose_log_has_no_tier_note_and_a_mixed_one_counts(tmp_path: Path) -> None:
    verbose = write(tmp_path / "v.log", [f"CVDIAG {compact(e)}" for e in happy(TID_OK, 0.0)])
    assert "default tier" not in run("tests", verbose).out + run("timeline", TID_OK, verbose).out
    mixed = happy(TID_OK, 0.0) + _default_tier(TID_ABORT, 2.0)
    both = write(tmp_path / "m.log", [f"CVDIAG {compact(e)}" for e in mixed])
    assert "1 test of them was recorded at the default tier" in " ".join(run("tests", both).out.split())
