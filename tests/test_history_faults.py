"""The history under the faults CI meets (issue 35): long names, secrets in every form a
PostgreSQL location takes, parallel legs of one job, a damaged DuckDB file, a run that
could not be written, a folder where the file should be, a run past the tests' limit.
Both backends where the fault is not one backend's own, through the installed command."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import cvdiag_cli
from historykit import run_log

pytest_plugins = ["historyfixtures"]  # the postgres_server and db fixtures

STABLE, FLIPS = "pass", "server-error"


def cli(*args: Any, env: dict[str, str] | None = None) -> cvdiag_cli.Result:
    return cvdiag_cli.run(*args, env={"COLUMNS": "80", **(env or {})})


def js(*args: Any) -> Any:
    done = cli(*args, "--json")
    assert done.code == 0, done.err
    return json.loads(done.out)


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
