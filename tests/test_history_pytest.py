"""``pytest --cvdiag-history``: a real pytest session (alone and with pytest-xdist
workers) recorded as one run, on both backends."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import cvdiag_cli
from pytestkit import INNER

pytest_plugins = ["historyfixtures"]  # the postgres_server and db fixtures

SUITE = """
import os
import pytest
import cvdiag


def test_pass():
    pass


def test_flips():
    assert os.environ.get("FLIP") != "1", "failed this time"


def test_rate_limited():
    cvdiag.emit("backend.llm.call.start", {"provider": "openai", "model": "m"})
    cvdiag.emit("backend.llm.call.response", {"provider": "openai", "model": "m", "http_status": 429,
                "error_class": "RateLimitError", "latency_ms": 12}, outcome="err", duration_ms=12)
    pytest.fail("the provider said 429")


@pytest.mark.parametrize("i", range(3))
def test_many(i):
    pass


def test_skipped():
    pytest.skip("not today")
"""


def session(folder: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    (folder / "test_suite.py").write_text(SUITE)
    ours = ("GITHUB_ACTIONS", "GITLAB_CI", "BUILDKITE", "CIRCLECI", "JENKINS_URL", "CVDIAG_RUN_ID")
    full = {k: v for k, v in os.environ.items() if k not in ours and not k.startswith("PYTEST_")}  # an xdist worker's
    full.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", *INNER, *args, "test_suite.py"],
        cwd=folder, env=full, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def history(*args: str) -> object:
    done = cvdiag_cli.run("history", *args, "--json")
    assert done.code == 0, done.err
    return json.loads(done.out)


def test_a_session_is_one_run_with_every_test_named_by_its_node_id(db: str, tmp_path: Path) -> None:
    """One session alone and one with two pytest-xdist workers (on PostgreSQL the other
    way round, so that each records into a new history): the same tests, the same names."""
    alone, xdist = [], ["-n", "2"]
    first_workers, second_workers = (xdist, alone) if db.startswith("postgresql://") else (alone, xdist)
    first = session(tmp_path, f"--cvdiag-history={db}", *first_workers)
    assert "cvdiag history: recorded run pytest:" in first.stdout, first.stdout + first.stderr
    assert "(7 tests, 1 failed)" in first.stdout
    second = session(tmp_path, f"--cvdiag-history={db}", *second_workers, env={"FLIP": "1"})
    assert "(7 tests, 2 failed)" in second.stdout, second.stdout + second.stderr
    assert "bringing up nodes" in (first.stdout + second.stdout)  # one of them ran under xdist
    runs = history("runs", "--db", db)
    assert [(r["tests"], r["failed"]) for r in runs] == [(7, 2), (7, 1)]  # one run per session, not per worker
    shown = history("show", "test_suite.py::test_rate_limited", "--db", db)
    assert [(r["status"], r["class"]) for r in shown["runs"]] == [("fail", "llm-error")] * 2
    assert "429" in shown["runs"][0]["reason"]
    (flaky,) = history("flaky", "--db", db)
    assert (flaky["name"], flaky["runs"], flaky["failures"]) == ("test_suite.py::test_flips", 2, 1)
    skipped = history("show", "test_suite.py::test_skipped", "--db", db)
    assert [r["status"] for r in skipped["runs"]] == ["skip", "skip"]


def test_a_test_path_taken_for_the_database_is_a_usage_error(tmp_path: Path) -> None:
    done = session(tmp_path, "--cvdiag-history", ".")
    assert done.returncode == 4
    assert "--cvdiag-history took '.' as its database: write --cvdiag-history=DB" in done.stderr


def test_a_history_that_cannot_be_written_does_not_fail_the_session(tmp_path: Path) -> None:
    bad = "postgresql://u:topsecret@/db?host=/nonexistent-socket-dir&port=1"
    done = session(tmp_path, f"--cvdiag-history={bad}", env={"FLIP": ""})
    assert done.returncode == 1  # test_rate_limited fails; nothing else changed the outcome
    assert "cvdiag history: could not record this session: cannot use the history at" in done.stdout
    assert "topsecret" not in done.stdout + done.stderr
