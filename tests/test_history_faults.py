"""The history under the faults CI meets (issue 35): long names, secrets in every form a
PostgreSQL location takes, parallel legs of one job, a damaged DuckDB file, a run that
could not be written, a folder where the file should be, a run past the tests' limit.
Both backends where the fault is not one backend's own, through the installed command."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import cvdiag_cli
import pytest
from historykit import cli, js, run_log
from pytestkit import INNER

from cvdiag.history import record
from cvdiag.read.sources import resolve_sources

pytest_plugins = ["historyfixtures"]  # the postgres_server and db fixtures

STABLE, FLIPS = "pass", "server-error"


# -- 1. long names stay apart -----------------------------------------------------------


def test_long_names_that_share_their_start_stay_apart_and_alike_from_run_to_run(db: str, tmp_path: Path) -> None:
    """Two parametrized node ids alike in their first 600 characters: a flaky one and a
    stable one, over two runs. Cut at 512, each keeps a digest of the whole id."""
    shared = "tests/test_matrix.py::test_case[" + "x" * 600
    flaky, stable = shared + "-flaky]", shared + "-stable]"
    for k, flaky_kind in enumerate((STABLE, FLIPS)):
        log = run_log(tmp_path / f"r{k}.log", {flaky: flaky_kind, stable: STABLE}, f"r{k}", day=k)
        assert cli("history", "add", log, "--db", db, "--run-id", f"run-{k}").code == 0
    (found,) = js("history", "flaky", "--db", db)
    assert (found["runs"], found["failures"]) == (2, 1)  # the stable one is not merged in
    assert len(found["name"]) == 512 and found["name"].startswith(shared[:400])
    names = {r["name"] for r in js("history", "diff", "run-0", "run-1", "--db", db)["new_failures"]}
    assert names == {found["name"]}
    shown = js("history", "show", found["name"], "--db", db)
    assert [r["status"] for r in shown["runs"]] == ["fail", "pass"]  # one test, named alike in both runs


# -- 3. parallel legs of one CI job -------------------------------------------------------

GITHUB = {"GITHUB_ACTIONS": "true", "GITHUB_RUN_ID": "777", "GITHUB_RUN_ATTEMPT": "1", "GITHUB_JOB": "e2e",
          "GITHUB_REPOSITORY": "acme/shop", "GITHUB_SHA": "f00d", "GITHUB_REF_NAME": "main"}  # fmt: skip
NO_CI = {k: "" for k in ("GITHUB_ACTIONS", "GITLAB_CI", "BUILDKITE", "CIRCLECI", "JENKINS_URL", "CVDIAG_RUN_ID",
                         "CVDIAG_RUN_PART")}  # fmt: skip


def test_the_legs_of_a_matrix_are_runs_of_their_own_and_none_is_dropped(db: str, tmp_path: Path) -> None:
    """Three legs under one GitHub Actions run id (nothing in the environment tells them
    apart): three runs; a leg added again is the same run."""
    logs = [run_log(tmp_path / f"leg{k}.log", {f"tests/t.py::test_{k}": "pass", "tests/t.py::test_all": kind},
                    f"leg{k}") for k, kind in enumerate((STABLE, FLIPS, STABLE))]  # fmt: skip
    for log in logs:
        done = cli("history", "add", log, "--db", db, env={**NO_CI, **GITHUB})
        assert done.code == 0 and "recorded run github:acme/shop/777/1/e2e" in done.out, done.out + done.err
    again = cli("history", "add", logs[1], "--db", db, env={**NO_CI, **GITHUB})
    assert again.code == 0 and "already: nothing changed" in again.out
    runs = sorted(r["run_id"] for r in js("history", "runs", "--db", db))
    assert len(runs) == 3 and runs[0] == "github:acme/shop/777/1/e2e"
    assert all(re.fullmatch(r"github:acme/shop/777/1/e2e\+[0-9a-f]{8}", r) for r in runs[1:]), runs
    shown = js("history", "show", "tests/t.py::test_all", "--db", db)
    assert sorted(r["status"] for r in shown["runs"]) == ["fail", "pass", "pass"]


@pytest.mark.parametrize(
    ("env", "run_id"),
    [
        ({**GITHUB, "CVDIAG_RUN_PART": "py3.12"}, "github:acme/shop/777/1/e2e/py3.12"),
        ({"CIRCLECI": "true", "CIRCLE_PROJECT_REPONAME": "p", "CIRCLE_WORKFLOW_JOB_ID": "w1", "CIRCLE_NODE_INDEX": "2",
          "CIRCLE_NODE_TOTAL": "4"}, "circleci:p/w1/node-2"),
        ({"CIRCLECI": "true", "CIRCLE_PROJECT_REPONAME": "p", "CIRCLE_WORKFLOW_JOB_ID": "w1", "CIRCLE_NODE_INDEX": "0",
          "CIRCLE_NODE_TOTAL": "1"}, "circleci:p/w1"),
        ({"JENKINS_URL": "https://ci/", "BUILD_TAG": "jenkins-p-12", "STAGE_NAME": "tests (linux)"},
         "jenkins:jenkins-p-12/tests (linux)"),
        ({"CVDIAG_RUN_ID": "nightly", "CVDIAG_RUN_PART": "3"}, "nightly/3"),
    ],
)  # fmt: skip
def test_a_leg_the_ci_names_is_in_the_run_id(env: dict[str, str], run_id: str) -> None:
    assert record.from_ci(env).run_id == run_id


def test_two_pytest_sessions_of_one_job_are_two_runs(tmp_path: Path) -> None:
    db = str(tmp_path / "h.duckdb")
    for k in range(2):
        done = _session(tmp_path, f"--cvdiag-history={db}", env={**NO_CI, **GITHUB, "FLIP": str(k)})
        assert "cvdiag history: recorded run github:acme/shop/777/1/e2e" in done.stdout, done.stdout + done.stderr
    assert sorted((r["tests"], r["failed"]) for r in js("history", "runs", "--db", db)) == [(2, 1), (2, 2)]


# -- 4. a damaged DuckDB file ------------------------------------------------------------


def _damage(path: Path) -> None:
    with open(path, "r+b") as fh:  # past the three headers: the first block's checksum fails
        fh.seek(12288 + 64)
        fh.write(os.urandom(4096))


def test_a_damaged_duckdb_file_is_said_damaged_with_what_to_do(tmp_path: Path) -> None:
    path = tmp_path / "h.duckdb"
    log = run_log(tmp_path / "run.log", {"tests/t.py::test_a": STABLE}, "x")
    assert cli("history", "add", log, "--db", path, "--run-id", "a").code == 0
    _damage(path)
    for args in (("runs",), ("add", log, "--run-id", "b")):
        done = cli("history", *args, "--db", path)
        assert done.code == 1 and len(done.err.strip().splitlines()) == 1, done.err
        assert f"{path} is damaged" in done.err and f"mv {path} {path}.damaged" in done.err
        assert "in use" not in done.err
    path.rename(tmp_path / "h.duckdb.damaged")  # as told: the next add starts a new history with the kept run
    done = cli("history", "add", log, "--db", path, "--run-id", "c")
    assert done.code == 0 and "recorded run b, kept from an earlier try" in done.out, done.out + done.err
    assert sorted(r["run_id"] for r in js("history", "runs", "--db", path)) == ["b", "c"]


def test_a_file_that_is_not_duckdb_is_said_so(tmp_path: Path) -> None:
    path = tmp_path / "server.log"
    path.write_text("not a database\n" * 1000)
    done = cli("history", "runs", "--db", path)
    assert done.code == 1 and "is not a DuckDB history file" in done.err and "in use" not in done.err


# -- 5. a run that could not be written is kept -------------------------------------------


def test_a_run_the_lock_wait_ran_out_on_is_kept_and_recorded_by_the_next_add(tmp_path: Path) -> None:
    """Piped in (the logs are gone after): kept beside the history, said where, and
    recorded by the next ``history add``."""
    import duckdb

    path = tmp_path / "h.duckdb"
    first = run_log(tmp_path / "first.log", {"tests/t.py::test_a": STABLE}, "first")
    assert cli("history", "add", first, "--db", path, "--run-id", "first").code == 0
    piped = run_log(tmp_path / "piped.log", {"tests/t.py::test_a": FLIPS}, "piped").read_bytes()
    holder = duckdb.connect(str(path))  # another process's turn that lasts
    try:
        done = cvdiag_cli.run("history", "add", "-", "--db", path, "--run-id", "piped", stdin=piped,
                              env={"CVDIAG_HISTORY_LOCK_WAIT_S": "0.3"})  # fmt: skip
    finally:
        holder.close()
    assert done.code == 1 and len(done.err.strip().splitlines()) == 1
    kept = list((tmp_path / "h.duckdb.pending").iterdir())
    assert len(kept) == 1 and "is in use by another process" in done.err
    assert f"run piped is kept in {kept[0]}" in done.err and "the next `cvdiag history add`" in done.err
    later = run_log(tmp_path / "later.log", {"tests/t.py::test_a": STABLE}, "later", day=1)
    done = cli("history", "add", later, "--db", path, "--run-id", "later")
    assert done.code == 0, done.err
    assert done.out.splitlines()[0] == f"recorded run piped, kept from an earlier try, in {path}"
    assert sorted(r["run_id"] for r in js("history", "runs", "--db", path)) == ["first", "later", "piped"]
    assert not (tmp_path / "h.duckdb.pending").exists()  # nothing waits any more


def test_a_run_a_server_refused_is_kept_and_recorded_once_the_password_is_right(
    postgres_server: str, tmp_path: Path
) -> None:
    import pgkit
    from historykit import new_db

    db = new_db("postgres", tmp_path, postgres_server)
    if pgkit.PASSWORD not in db:
        pytest.skip("the server's URL carries no password to get wrong")
    wrong = db.replace(pgkit.PASSWORD, "not-the-pw-x7")
    log = run_log(tmp_path / "run.log", {"tests/t.py::test_a": FLIPS}, "x")
    done = cvdiag_cli.run("history", "add", log, "--db", wrong, "--run-id", "refused", cwd=tmp_path)
    assert done.code == 1 and "password authentication failed" in done.err and "run refused is kept in" in done.err
    assert "not-the-pw-x7" not in done.err and len(done.err.strip().splitlines()) == 1
    (folder,) = (tmp_path / ".cvdiag").iterdir()  # named by the URL without its password
    assert folder.name.startswith("postgres-") and folder.name.endswith(".pending")
    done = cvdiag_cli.run("history", "add", "--kept", "--db", db, cwd=tmp_path)
    assert done.code == 0 and "recorded run refused, kept from an earlier try" in done.out, done.out + done.err
    assert [r["run_id"] for r in js("history", "runs", "--db", db)] == ["refused"]


def test_kept_runs_are_recorded_by_add_without_logs(db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from cvdiag.history import record as rec
    from cvdiag.history import recording

    monkeypatch.chdir(tmp_path)
    results, _ = rec.tests_of(resolve_sources([str(run_log(tmp_path / "k.log", {"tests/t.py::test_a": FLIPS}, "k"))]),
                              "")  # fmt: skip
    run, results = rec.make_run(rec.RunInfo(run_id="kept-1"), results)
    assert recording.keep(db, run, results)
    done = cvdiag_cli.run("history", "add", "--kept", "--db", db, cwd=tmp_path)
    assert done.code == 0 and "recorded run kept-1, kept from an earlier try" in done.out, done.out + done.err
    assert [r["run_id"] for r in js("history", "runs", "--db", db)] == ["kept-1"]
    none = cvdiag_cli.run("history", "add", "--kept", "--db", db, cwd=tmp_path)
    assert none.code == 0 and "no runs are kept for this history" in none.out


def test_a_kept_run_that_cannot_be_read_is_set_aside_and_blocks_nothing(tmp_path: Path) -> None:
    db = tmp_path / "h.duckdb"
    kept = tmp_path / "h.duckdb.pending"
    kept.mkdir()
    (kept / "0123456789abcdef0123.run.json").write_bytes(b'{"run": {"run_id": "cut sho')
    log = run_log(tmp_path / "run.log", {"tests/t.py::test_a": STABLE}, "x")
    done = cli("history", "add", log, "--db", db, "--run-id", "now")
    assert done.code == 0 and "recorded run now: 1 tests" in done.out, done.out + done.err
    assert "a kept run could not be read" in done.out and ".run.json.unreadable" in done.out
    assert [p.name for p in kept.iterdir()] == ["0123456789abcdef0123.run.json.unreadable"]
    assert "could not be read" not in cli("history", "add", log, "--db", db, "--run-id", "then").out  # said once


def test_a_pytest_session_that_could_not_write_keeps_its_run_for_the_next(tmp_path: Path) -> None:
    import duckdb

    db = tmp_path / "h.duckdb"
    duckdb.connect(str(db)).close()
    holder = duckdb.connect(str(db))
    try:
        first = _session(tmp_path, f"--cvdiag-history={db}", env={**NO_CI, "CVDIAG_HISTORY_LOCK_WAIT_S": "0.3"})
    finally:
        holder.close()
    assert first.returncode == 1  # the suite's own failure, nothing more
    assert "cvdiag history: could not record this session:" in first.stdout and "is kept in" in first.stdout
    second = _session(tmp_path, f"--cvdiag-history={db}", env=NO_CI)
    assert "kept from before" in second.stdout and "cvdiag history: recorded run pytest:" in second.stdout
    assert len(js("history", "runs", "--db", db)) == 2


def test_a_killed_writer_leaves_nothing_in_tmpdir_and_the_next_removes_its_scratch(tmp_path: Path) -> None:
    """A pytest session killed mid-test: its spool was beside the history, not in
    TMPDIR, and the next session removes it."""
    import signal

    tmp, db = tmp_path / "tmp", tmp_path / "hist" / "h.duckdb"
    tmp.mkdir()
    (tmp_path / "test_wait.py").write_text(
        "import os, time\n\ndef test_waits():\n"
        f"    open({str(tmp_path / 'running')!r}, 'w').close()\n    time.sleep(60)\n"
    )
    env = {**os.environ, **NO_CI, "TMPDIR": str(tmp)}
    env = {k: v for k, v in env.items() if not k.startswith("PYTEST_")}
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "-q", *INNER, f"--cvdiag-history={db}", "test_wait.py"],
                            cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        for _ in range(600):
            if (tmp_path / "running").exists():
                break
            time.sleep(0.1)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(timeout=60)
    assert [p.name for p in tmp.iterdir() if "cvdiag" in p.name] == []
    assert [p.name for p in db.parent.iterdir()] and all(".session-" in p.name for p in db.parent.iterdir())
    (tmp_path / "test_wait.py").unlink()
    log = run_log(tmp_path / "run.log", {"tests/t.py::test_a": STABLE}, "x")
    assert cli("history", "add", log, "--db", db, env={"TMPDIR": str(tmp)}).code == 0
    assert sorted(p.name for p in db.parent.iterdir()) == ["h.duckdb"]  # the staged CSV is gone too
    assert [p.name for p in tmp.iterdir() if "cvdiag" in p.name] == []


def test_only_scratch_files_of_gone_writers_are_removed(tmp_path: Path) -> None:
    from cvdiag.history import places

    db = str(tmp_path / "h.duckdb")
    mine = places.scratch(db, "session")
    os.makedirs(mine)
    names = {
        "dead": ".h.duckdb.staged-{host}-999999.csv",  # this machine, no such process
        "other-old": ".h.duckdb.session-0badf00d-7",  # another machine's, two days old
        "other-new": ".h.duckdb.session-0badf00d-8",  # another machine's, fresh: may be running
        "users": ".h.duckdb.bak-2024",  # not ours
    }
    host = os.path.basename(mine).split("-")[-2]
    for key, name in names.items():
        path = tmp_path / name.format(host=host)
        path.write_text("")
        if key != "other-new":
            os.utime(path, (time.time() - 2 * 86400,) * 2)
    places.sweep(db)
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == sorted([os.path.basename(mine), names["other-new"], names["users"]])


# -- 6. a folder at the history path -------------------------------------------------------


def test_a_folder_given_as_the_history_never_fails_the_session(tmp_path: Path) -> None:
    folder = tmp_path / "histories"
    folder.mkdir()
    done = _session(tmp_path, f"--cvdiag-history={folder}", env=NO_CI)
    assert done.returncode == 1, done.stdout + done.stderr  # the suite's one failing test: it ran
    assert "1 failed, 1 passed" in done.stdout
    (line,) = [s for s in done.stdout.splitlines() if s.startswith("cvdiag history:")]
    assert f"{folder} is a folder, not a history file" in line and str(folder / "history.duckdb") in line
    assert "--cvdiag-history=DB" not in done.stdout + done.stderr
    assert list(folder.iterdir()) == []  # nothing kept or left inside
    said = cli("history", "runs", "--db", folder)
    assert said.code == 1 and "is a folder, not a history file" in said.err


def test_a_history_under_a_file_never_fails_the_session(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("")
    done = _session(tmp_path, f"--cvdiag-history={tmp_path / 'afile' / 'h.duckdb'}", env=NO_CI)
    assert done.returncode == 1 and "1 failed, 1 passed" in done.stdout, done.stdout + done.stderr
    (line,) = [s for s in done.stdout.splitlines() if s.startswith("cvdiag history:")]
    assert "could not record this session" in line and f"{tmp_path / 'afile'} is a file" in line


def test_a_password_is_masked_in_the_pytest_summary(tmp_path: Path) -> None:
    bad = f"postgresql:///db?host={tmp_path}/no-socket&port=1&password=topsecret-q9&sslpassword=other-q8"
    done = _session(tmp_path, f"--cvdiag-history={bad}", env=NO_CI)
    assert "cvdiag history: could not record this session: cannot use the history at" in done.stdout
    assert "topsecret-q9" not in done.stdout + done.stderr and "other-q8" not in done.stdout + done.stderr
    assert "password=***" in done.stdout and "sslpassword=***" in done.stdout


# -- 7. more tests than one pass reads -------------------------------------------------------


def test_a_run_past_the_tests_limit_is_refused_whole(db: str, tmp_path: Path) -> None:
    """Past ``CVDIAG_MAX_TESTS`` (100,000; 5 here) a run would be stored cut short: refused plainly."""
    log = run_log(tmp_path / "big.log", {f"tests/t.py::test_{i}": STABLE for i in range(8)}, "big")
    done = cli("history", "add", log, "--db", db, "--run-id", "big", env={"CVDIAG_MAX_TESTS": "5"})
    assert done.code == 1 and "more than 5 test ids" in done.err and "nothing was recorded" in done.err
    assert "CVDIAG_MAX_TESTS" in done.err and len(done.err.strip().splitlines()) == 1
    assert cli("history", "runs", "--db", db).code == 1  # no run at all
    assert cli("history", "add", log, "--db", db, "--run-id", "big").code == 0  # under the limit: whole
    assert [r["tests"] for r in js("history", "runs", "--db", db)] == [8]


def test_a_pytest_session_past_the_tests_limit_records_every_test_and_says_so(tmp_path: Path) -> None:
    db = tmp_path / "h.duckdb"
    (tmp_path / "test_many.py").write_text(
        "import cvdiag, pytest\n\n@pytest.mark.parametrize('i', range(4))\ndef test_emits(i):\n"
        "    cvdiag.emit('backend.llm.call.start', {'provider': 'openai', 'model': 'm'})\n"
    )
    full = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", *INNER, f"--cvdiag-history={db}", "test_many.py"],
                          cwd=tmp_path, env={**full, **NO_CI, "CVDIAG_MAX_TESTS": "2"}, capture_output=True, text=True,
                          timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "(4 tests, 0 failed)" in done.stdout
    assert "more than 2 test ids in the logs: the tests past them are recorded with pytest's outcome" in done.stdout
    assert [r["tests"] for r in js("history", "runs", "--db", db)] == [4]


# -- pytest sessions -------------------------------------------------------------------------

SUITE = """
import os


def test_flips():
    assert os.environ.get("FLIP") != "1"


def test_fails():
    assert False, "always"
"""


def _session(folder: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    (folder / "test_legs.py").write_text(SUITE)
    full = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    full.update(env or {})
    return subprocess.run([sys.executable, "-m", "pytest", "-q", *INNER, *args, "test_legs.py"], cwd=folder,
                          env=full, capture_output=True, text=True, timeout=300)  # fmt: skip
