"""``cvdiag history``: every command on both backends (a DuckDB file and a real
PostgreSQL), through the installed command, asserting the rows a user sees."""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cvdiag_cli
import pgkit
import pytest
from historykit import cli, js, new_db, run_log

from cvdiag.history import record

FLAKY = "tests/test_chat.py::test_flaky"
NEW = "tests/test_chat.py::test_new"
pytest_plugins = ["historyfixtures"]  # the postgres_server and db fixtures

#: Six runs, on three commits (two runs each), a day apart.
PLAN = {
    "tests/test_chat.py::test_hello": ["pass"] * 6,
    FLAKY: ["pass", "llm-error", "pass", "llm-error", "server-error", "pass"],
    "tests/test_chat.py::test_broken": ["server-error"] * 6,
    NEW: ["pass"] * 5 + ["client-disconnect"],
}


def add_plan(db: str, folder: Path) -> None:
    for k in range(6):
        log = run_log(folder / f"run{k}.log", {name: kinds[k] for name, kinds in PLAN.items()}, f"r{k}", day=k)
        done = cli("history", "add", log, "--db", db, "--run-id", f"run-{k}", "--commit", f"c{k // 2}",
                   "--branch", "main")  # fmt: skip
        assert done.code == 0, done.err
        assert f"recorded run run-{k}: 4 tests" in done.out


@pytest.fixture(scope="module")
def plan_histories(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str, str | None], str]:
    """PLAN's history on a backend, filled on first use and shared by the tests that only read it."""
    made: dict[str, str] = {}

    def on(kind: str, server: str | None) -> str:
        if kind not in made:
            folder = tmp_path_factory.mktemp("filled")
            made[kind] = new_db(kind, folder, server)
            add_plan(made[kind], folder)
        return made[kind]

    return on


@pytest.fixture(params=["duckdb", "postgres"])
def filled(request: pytest.FixtureRequest, plan_histories: Callable[[str, str | None], str]) -> str:
    """A history of PLAN on each backend."""
    server = request.getfixturevalue("postgres_server") if request.param == "postgres" else None
    return plan_histories(request.param, server)


def fits_80(text: str) -> None:
    assert text.strip()
    assert max(len(line) for line in text.splitlines()) <= 80, text


# -- add ------------------------------------------------------------------------------


def test_add_records_every_test_with_its_class_and_adding_again_changes_nothing(db: str, tmp_path: Path) -> None:
    log = run_log(tmp_path / "run.log", {FLAKY: "llm-error", NEW: "pass"}, "x")
    first = cli("history", "add", log, "--db", db, "--run-id", "ci-1", "--commit", "abc")
    assert first.code == 0 and "recorded run ci-1: 2 tests, 1 failed" in first.out
    again = cli("history", "add", "--db", db, log, "--run-id", "ci-1")
    assert again.code == 0 and "is in" in again.out and "already: nothing changed" in again.out
    assert [r["tests"] for r in js("history", "runs", "--db", db)] == [2]
    shown = js("history", "show", FLAKY, "--db", db)
    (row,) = shown["runs"]
    assert (row["status"], row["class"], row["commit"], row["test_id"]) == ("fail", "llm-error", "abc", "x-0000")
    assert "429" in row["reason"]


def test_add_keeps_the_numbers_of_each_test(db: str, tmp_path: Path) -> None:
    from cvdiag.history.backend import open_store

    log = run_log(tmp_path / "run.log", {FLAKY: "llm-error", NEW: "pass"}, "x")
    assert cli("history", "add", log, "--db", db).code == 0
    store = open_store(db)
    try:
        rows = store.fetch(
            "SELECT name, status, cls, llm_ms, llm_attempts, tokens, tool_failures, ttfb_ms, slug, duration_ms"
            " FROM results ORDER BY name"
        )
    finally:
        store.close()
    assert rows == [
        (FLAKY, "fail", "llm-error", 480.0, 1, 30, 1, None, "agno", 610.0),
        (NEW, "pass", "ok", 480.0, 1, 30, 0, 520.0, "agno", 620.0),
    ]


def test_the_same_logs_added_twice_without_a_run_id_are_one_run(db: str, tmp_path: Path) -> None:
    log = run_log(tmp_path / "run.log", {FLAKY: "pass"}, "x")
    env = {k: "" for k in ("GITHUB_ACTIONS", "GITLAB_CI", "BUILDKITE", "CIRCLECI", "JENKINS_URL", "CVDIAG_RUN_ID")}
    assert cli("history", "add", log, "--db", db, env=env).code == 0
    assert cli("history", "add", log, "--db", db, env=env).code == 0
    (run,) = js("history", "runs", "--db", db)
    assert run["run_id"].startswith("logs:")


def test_the_run_comes_from_github_actions(db: str, tmp_path: Path) -> None:
    env = {"GITHUB_ACTIONS": "true", "GITHUB_RUN_ID": "777", "GITHUB_RUN_ATTEMPT": "2", "GITHUB_JOB": "e2e",
           "GITHUB_REPOSITORY": "acme/shop", "GITHUB_SHA": "f00d", "GITHUB_REF_NAME": "main",
           "GITHUB_SERVER_URL": "https://github.com"}  # fmt: skip
    log = run_log(tmp_path / "run.log", {FLAKY: "pass"}, "x")
    assert cli("history", "add", log, "--db", db, env=env).code == 0
    (run,) = js("history", "runs", "--db", db)
    assert run == {
        "run_id": "github:acme/shop/777/2/e2e",
        "started_at": "2026-11-21T10:00:00.000Z",
        "commit": "f00d",
        "branch": "main",
        "ci": "github",
        "tests": 1,
        "failed": 0,
        "job_url": "https://github.com/acme/shop/actions/runs/777/attempts/2",
    }


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"GITLAB_CI": "true", "CI_PROJECT_PATH": "g/p", "CI_JOB_ID": "9", "CI_COMMIT_SHA": "s",
          "CI_COMMIT_REF_NAME": "b", "CI_JOB_URL": "https://gitlab.com/g/p/-/jobs/9"},
         ("gitlab:g/p/9", "s", "b", "https://gitlab.com/g/p/-/jobs/9", "gitlab")),
        ({"BUILDKITE": "true", "BUILDKITE_JOB_ID": "j1", "BUILDKITE_COMMIT": "s", "BUILDKITE_BRANCH": "b",
          "BUILDKITE_BUILD_URL": "https://buildkite.com/o/p/builds/3"},
         ("buildkite:j1", "s", "b", "https://buildkite.com/o/p/builds/3#j1", "buildkite")),
        ({"CIRCLECI": "true", "CIRCLE_PROJECT_REPONAME": "p", "CIRCLE_WORKFLOW_JOB_ID": "w1", "CIRCLE_SHA1": "s",
          "CIRCLE_BRANCH": "b", "CIRCLE_BUILD_URL": "https://circleci.com/gh/o/p/5"},
         ("circleci:p/w1", "s", "b", "https://circleci.com/gh/o/p/5", "circleci")),
        ({"JENKINS_URL": "https://ci/", "BUILD_TAG": "jenkins-p-12", "GIT_COMMIT": "s", "BRANCH_NAME": "b",
          "BUILD_URL": "https://ci/job/p/12/"},
         ("jenkins:jenkins-p-12", "s", "b", "https://ci/job/p/12/", "jenkins")),
        ({"CVDIAG_RUN_ID": "mine", "GITLAB_CI": "true", "CI_JOB_ID": "9"}, ("mine", None, None, None, "gitlab")),
        ({}, (None, None, None, None, None)),
    ],
)  # fmt: skip
def test_each_ci_names_its_run(env: dict[str, str], expected: tuple[Any, ...]) -> None:
    info = record.from_ci(env)
    assert (info.run_id, info.commit_sha, info.branch, info.job_url, info.ci) == expected


def test_name_pattern_names_tests_whose_ids_carry_the_run(db: str, tmp_path: Path) -> None:
    import logkit

    for run in ("r1", "r2"):
        lines = [logkit.compact(e) for e in logkit.errored(f"checkout-{run}")]
        (tmp_path / f"{run}.log").write_text("\n".join(lines) + "\n")
        done = cli("history", "add", tmp_path / f"{run}.log", "--db", db, "--run-id", run,
                   "--name-pattern", r"^(.*)-r\d+$")  # fmt: skip
        assert done.code == 0, done.err
    shown = js("history", "show", "checkout", "--db", db)
    assert shown["name"] == "checkout" and [r["test_id"] for r in shown["runs"]] == ["checkout-r2", "checkout-r1"]
    bad = cli("history", "add", tmp_path / "r1.log", "--db", db, "--name-pattern", "(")
    assert bad.code == 2 and "--name-pattern is not a regular expression" in bad.err


def test_add_without_tests_records_nothing(db: str, tmp_path: Path) -> None:
    (tmp_path / "empty.log").write_text("just an application log line\n")
    done = cli("history", "add", tmp_path / "empty.log", "--db", db)
    assert done.code == 1 and "no tests found in the inputs; nothing recorded" in done.err


# -- the questions ----------------------------------------------------------------------


def test_runs_lists_the_newest_first_and_fits_80_columns(filled: str) -> None:
    done = cli("history", "runs", "--db", filled)
    assert done.code == 0
    fits_80(done.out)
    lines = done.out.splitlines()
    assert lines[0].split()[:2] == ["run", "started"]
    assert [line.split()[0] for line in lines[1:7]] == [f"run-{k}" for k in range(5, -1, -1)]
    assert "2026-11-26 10:00  c2" in lines[1] and lines[1].split()[-2:] == ["4", "2"]


def test_flaky_names_the_classes_behind_the_failures(filled: str) -> None:
    rows = js("history", "flaky", "--db", filled)
    assert [r["name"] for r in rows] == [FLAKY, NEW]
    flaky, new = rows
    assert flaky == {
        "name": FLAKY,
        "runs": 6,
        "failures": 3,
        "flake_rate": 0.5,
        "classes": {"llm-error": 2, "server-error": 1},
        "same_commit": 3,
        "first_seen": "2026-11-21T10:00:00.000Z",
        "last_seen": "2026-11-26T10:00:00.000Z",
        "last_pass_commit": "c2",
    }
    assert (new["failures"], new["classes"], new["same_commit"], new["last_pass_commit"]) == (
        1, {"client-disconnect": 1}, 1, "c2")  # fmt: skip
    done = cli("history", "flaky", "--db", filled)
    fits_80(done.out)
    assert "llm-error 2, server-error 1" in done.out and "50%" in done.out
    assert "2 flaky tests: both passed and failed in the last 100 runs" in done.out


def test_flaky_looks_at_the_last_n_runs_only(filled: str) -> None:
    rows = js("history", "flaky", "--db", filled, "--runs", "2")  # runs 4 and 5
    assert [(r["name"], r["runs"], r["classes"]) for r in rows] == [
        (FLAKY, 2, {"server-error": 1}), (NEW, 2, {"client-disconnect": 1})]  # fmt: skip
    none = cli("history", "flaky", "--db", filled, "--runs", "1")
    assert none.code == 0 and "no flaky tests in the last 1 runs" in none.out  # an answer: CI steps pass


def test_show_gives_one_row_per_run(filled: str) -> None:
    done = cli("history", "show", "test_flaky", "--db", filled)
    assert done.code == 0
    fits_80(done.out)
    lines = done.out.splitlines()
    assert lines[0] == FLAKY
    body = lines[2:8]
    assert [line.split()[3:5] for line in body] == [
        ["pass", "ok"], ["fail", "server-error"], ["fail", "llm-error"], ["pass", "ok"], ["fail", "llm-error"],
        ["pass", "ok"]]  # fmt: skip
    assert lines[-1] == "6 runs, 3 failed, newest first"
    some = cli("history", "show", "test_", "--db", filled)
    assert some.code == 1 and "matches several tests" in some.err
    none = cli("history", "show", "nope", "--db", filled)
    assert none.code == 1 and "no test named 'nope' in the history" in none.err


def test_classes_over_time_by_day_and_week(filled: str) -> None:
    by_day = js("history", "classes", "--db", filled)
    assert by_day[:3] == [
        {"period": "2026-11-21", "class": "server-error", "failures": 1, "results": 4},
        {"period": "2026-11-22", "class": "llm-error", "failures": 1, "results": 4},
        {"period": "2026-11-22", "class": "server-error", "failures": 1, "results": 4},
    ]
    by_week = js("history", "classes", "--db", filled, "--by", "week")
    assert by_week == [  # Sat 21 and Sun 22 are the week of Mon 16; 23 to 26 the next
        {"period": "2026-11-16", "class": "server-error", "failures": 2, "results": 8},
        {"period": "2026-11-16", "class": "llm-error", "failures": 1, "results": 8},
        {"period": "2026-11-23", "class": "server-error", "failures": 5, "results": 16},
        {"period": "2026-11-23", "class": "client-disconnect", "failures": 1, "results": 16},
        {"period": "2026-11-23", "class": "llm-error", "failures": 1, "results": 16},
    ]
    since = js("history", "classes", "--db", filled, "--since", "2026-11-26")
    assert since == [
        {"period": "2026-11-26", "class": "client-disconnect", "failures": 1, "results": 4},
        {"period": "2026-11-26", "class": "server-error", "failures": 1, "results": 4},
    ]
    fits_80(cli("history", "classes", "--db", filled, "--by", "week").out)


def test_diff_says_what_changed_between_two_runs(filled: str) -> None:
    doc = js("history", "diff", "run-4", "latest", "--db", filled)
    assert doc == {
        "a": "run-4",
        "b": "run-5",
        "new_failures": [{"name": NEW, "class": "client-disconnect", "before": "pass"}],
        "fixed": [{"name": FLAKY, "class_before": "server-error"}],
        "changed_class": [],
        "slower": [],
    }
    changed = js("history", "diff", "run-3", "run-4", "--db", filled)
    assert changed["changed_class"] == [{"name": FLAKY, "class_before": "llm-error", "class": "server-error"}]
    done = cli("history", "diff", "latest~1", "latest", "--db", filled)
    fits_80(done.out)
    assert "new failures: 1" in done.out and "fixed: 1" in done.out and "changed class: 0" in done.out
    bad = cli("history", "diff", "run-", "run-5", "--db", filled)
    assert bad.code == 1 and "matches several runs" in bad.err


def test_diff_finds_tests_that_got_slower(db: str, tmp_path: Path) -> None:
    for k, stretch in enumerate((0.0, 2.0)):
        log = run_log(tmp_path / f"{k}.log", {FLAKY: "pass", NEW: "server-error"}, f"r{k}", day=k, scale_s=stretch)
        assert cli("history", "add", log, "--db", db, "--run-id", f"r{k}").code == 0
    doc = js("history", "diff", "r0", "r1", "--db", db)
    assert doc["slower"] == [  # a failure is compared with a failure
        {"name": FLAKY, "before_ms": 620.0, "after_ms": 2000.0},
        {"name": NEW, "before_ms": 60.0, "after_ms": 2000.0},
    ]
    assert js("history", "diff", "r0", "r1", "--db", db, "--slower", "40")["slower"] == []
    done = cli("history", "diff", "r0", "r1", "--db", db)
    assert "slower: 2" in done.out and "620 ms" in done.out and "2.0 s" in done.out


def test_both_backends_give_the_same_answers(
    plan_histories: Callable[[str, str | None], str], postgres_server: str
) -> None:
    questions = [("runs",), ("flaky",), ("show", FLAKY), ("classes", "--by", "week"), ("diff", "run-0", "run-5")]
    answers = []
    for url in (plan_histories("duckdb", None), plan_histories("postgres", postgres_server)):
        answers.append([])
        for q in questions:  # in this process: the other tests run the installed command
            code, out, err = cvdiag_cli.run_in_process(["history", *q, "--db", url, "--json"])
            assert code == 0, err
            answers[-1].append(json.loads(out))
    assert answers[0] == answers[1]
    assert len(answers[0][0]) == 6 and answers[0][1]  # six runs, and a flaky test: not two empty answers


# -- bad input and broken databases ------------------------------------------------------


def test_hostile_names_and_ids_are_stored_capped_and_shown_as_text(db: str, tmp_path: Path) -> None:
    import logkit

    hostile = "tests/t.py::test_x[\x1b[31m'); DROP TABLE runs; --\"]" + "A" * 3_000_000
    envs = [logkit.envelope("id-'; DELETE FROM results; --", "probe.start", 0, metadata={"url": hostile})]
    envs += logkit.errored("id-'; DELETE FROM results; --", 0.01)
    (tmp_path / "h.log").write_text("\n".join(logkit.compact(e) for e in envs) + "\n")
    assert cli("history", "add", tmp_path / "h.log", "--db", db, "--run-id", "r'1\x07").code == 0
    (row,) = js("history", "runs", "--db", db)
    assert row["run_id"] == "r'1\x07"
    shown = js("history", "show", "DROP TABLE", "--db", db)
    assert len(shown["name"]) == 512 and shown["name"].startswith("tests/t.py::test_x[\x1b[31m');")
    assert shown["runs"][0]["test_id"] == "id-'; DELETE FROM results; --"
    done = cli("history", "show", "DROP TABLE", "--db", db)
    assert "\x1b" not in done.out and "\\x1b[31m" in done.out
    fits_80(done.out)


def _set_version(db: str, version: int) -> None:
    if db.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(db, autocommit=True) as conn:
            conn.execute("INSERT INTO schema_version VALUES (%s)", [version])
    else:
        import duckdb

        with duckdb.connect(db) as con:
            con.execute("INSERT INTO schema_version VALUES (?)", [version])


def test_a_history_of_a_newer_schema_is_refused_and_left_alone(db: str, tmp_path: Path) -> None:
    log = run_log(tmp_path / "run.log", {FLAKY: "pass"}, "x")
    assert cli("history", "add", log, "--db", db, "--run-id", "a").code == 0
    _set_version(db, 99)
    for args in (("add", log, "--run-id", "b"), ("runs",), ("flaky",)):
        done = cli("history", *args, "--db", db)
        assert done.code == 1
        assert len(done.err.strip().splitlines()) == 1
        assert "holds history schema 99, newer than this cvdiag's 1: upgrade cvdiag" in done.err
    _set_version(db, 1)  # max() is 99 still: nothing was changed or added meanwhile
    from cvdiag.history.backend import open_store

    with pytest.raises(Exception, match="newer"):
        open_store(db)


def test_reading_a_history_that_is_not_there_says_so(tmp_path: Path) -> None:
    done = cli("history", "flaky", "--db", tmp_path / "none.duckdb")
    assert done.code == 1 and "no history at" in done.err and "cvdiag history add" in done.err
    assert not (tmp_path / "none.duckdb").exists()


def test_a_locked_duckdb_file_is_one_line_and_nothing_written(tmp_path: Path) -> None:
    import duckdb

    path = tmp_path / "h.duckdb"
    log = run_log(tmp_path / "run.log", {FLAKY: "pass"}, "x")
    assert cli("history", "add", log, "--db", path, "--run-id", "a").code == 0
    holder = duckdb.connect(str(path))  # this process holds the file
    try:
        done = cli("history", "add", log, "--db", path, "--run-id", "b", env={"CVDIAG_HISTORY_LOCK_WAIT_S": "0.3"})
    finally:
        holder.close()
    assert done.code == 1 and len(done.err.strip().splitlines()) == 1
    assert "is in use by another process" in done.err
    assert [r["run_id"] for r in js("history", "runs", "--db", path)] == ["a"]


def test_a_server_that_is_down_or_refuses_the_password_is_one_line_without_the_password(
    postgres_server: str, tmp_path: Path
) -> None:
    wrong = postgres_server.replace(pgkit.PASSWORD, "not-the-pw-xyz") if pgkit.PASSWORD in postgres_server else None
    down = f"postgresql://postgres:hunter2-secret@/postgres?host={tmp_path}&port=1"
    for url, says in ((down, "No such file or directory"), (wrong, "password authentication failed")):
        if url is None:
            continue
        done = cli("history", "runs", "--db", url)
        assert done.code == 1, done.err
        assert len(done.err.strip().splitlines()) == 1 and says in done.err
        assert "hunter2-secret" not in done.err + done.out and "not-the-pw-xyz" not in done.err + done.out
        assert "postgres:***@" in done.err


@pytest.mark.parametrize(("module", "extra"), [("duckdb", "history"), ("psycopg", "postgres")])
def test_a_missing_extra_is_named(module: str, extra: str, tmp_path: Path) -> None:
    blocker = tmp_path / "block"
    blocker.mkdir()
    (blocker / f"{module}.py").write_text("raise ImportError('not installed')\n")
    url = str(tmp_path / "h.duckdb") if module == "duckdb" else "postgresql://u:pw@/db?host=/nonexistent"
    path = os.pathsep.join([str(blocker), os.environ.get("PYTHONPATH", "")])
    done = cli("history", "runs", "--db", url, env={"PYTHONPATH": path})
    assert done.code == 2
    assert done.err.strip() == f"cvdiag: the {'DuckDB' if module == 'duckdb' else 'PostgreSQL'} history needs the " \
        f"{extra} extra: pip install 'cvdiag[{extra}]'"  # fmt: skip


def test_cvdiag_itself_installs_no_database() -> None:
    import tomllib

    project = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())["project"]
    assert not [d for d in project["dependencies"] if re.match(r"(duckdb|psycopg)", d)]
    extras = project["optional-dependencies"]
    assert extras["history"] == ["duckdb>=1.1"] and extras["postgres"] == ["psycopg[binary]>=3.1"]
    assert {"duckdb>=1.1", "psycopg[binary]>=3.1", "pytest-xdist>=3.5"} <= set(extras["dev"])


# -- many writers, and a writer cut off ------------------------------------------------


def test_eight_processes_adding_at_once_lose_nothing_and_double_nothing(db: str, tmp_path: Path) -> None:
    """Eight real processes: each adds its own run, and all add one shared run."""
    import subprocess

    shared = run_log(tmp_path / "shared.log", {FLAKY: "pass", NEW: "llm-error"}, "shared")
    logs = [run_log(tmp_path / f"own{k}.log", {FLAKY: "pass", NEW: "pass"}, f"own{k}") for k in range(8)]
    script = (
        "import sys\nfrom cvdiag.face.cli import main\n"
        "codes = [main(['history', 'add', sys.argv[1], '--db', sys.argv[3], '--run-id', 'own-' + sys.argv[4]]),"
        " main(['history', 'add', sys.argv[2], '--db', sys.argv[3], '--run-id', 'shared'])]\n"
        "sys.exit(max(codes))\n"
    )
    env = {**os.environ, "CVDIAG_HISTORY_LOCK_WAIT_S": "120"}
    procs = [
        subprocess.Popen([sys.executable, "-c", script, str(log), str(shared), db, str(k)], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for k, log in enumerate(logs)
    ]  # fmt: skip
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0] * 8, [o[1] for o in outs]
    said = b"".join(o[0] for o in outs).decode()
    assert said.count("recorded run shared:") == 1 and said.count("run shared is in") == 7
    runs = js("history", "runs", "--db", db)
    assert sorted(r["run_id"] for r in runs) == sorted(["shared", *(f"own-{k}" for k in range(8))])
    assert _results_per_run(db) == {"shared": 2, **{f"own-{k}": 2 for k in range(8)}}


def _results_per_run(db: str) -> dict[str, int]:
    from cvdiag.history.backend import open_store

    store = open_store(db)
    try:
        return dict(store.fetch("SELECT run_id, count(*) FROM results GROUP BY run_id"))
    finally:
        store.close()


def test_a_writer_killed_half_way_leaves_a_valid_history(db: str, tmp_path: Path) -> None:
    """SIGKILL at any moment of a big add: the run is there whole or not at all."""
    import signal
    import subprocess
    import time

    names = {f"tests/test_big.py::test_{i}": "pass" for i in range(3000)}
    log = run_log(tmp_path / "big.log", names, "big")
    small = run_log(tmp_path / "small.log", {FLAKY: "pass"}, "small")
    assert cli("history", "add", small, "--db", db, "--run-id", "before").code == 0
    for delay in (0.5, 1.5, 3.0):
        proc = subprocess.Popen([*cvdiag_cli.command(), "history", "add", str(log), "--db", db, "--run-id", "big"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        runs = {r["run_id"]: r["tests"] for r in js("history", "runs", "--db", db)}
        assert runs in ({"before": 1}, {"before": 1, "big": 3000})
        assert _results_per_run(db) == runs  # every row of a run, or none
        if "big" in runs:
            break
    assert cli("history", "add", log, "--db", db, "--run-id", "big").code == 0
    assert {r["run_id"]: r["tests"] for r in js("history", "runs", "--db", db)} == {"before": 1, "big": 3000}
