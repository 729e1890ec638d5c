"""What ``cvdiag history`` shows a person on a terminal of 60, 80 and 100 columns: the
classes ``flaky`` exists to show stay whole, names that differ only in their middle
print differently, ``diff``'s header fits, and no flaky test is an answer (exit 0)."""

from __future__ import annotations

import json
from pathlib import Path

import cvdiag_cli
import pytest
from historykit import run_log

from cvdiag.face import render

LONG = "tests/integration/test_checkout_flow.py::test_checkout_with_tools[openai-gpt-4o-mini-"
ALPHA, BETA = LONG + "alpha-streaming-with-retries]", LONG + "beta--streaming-with-retries]"
PLAN = {ALPHA: ["pass", "llm-error", "server-error"], BETA: ["pass", "server-error", "pass"]}


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> str:
    folder = tmp_path_factory.mktemp("views")
    db = str(folder / "h.duckdb")
    for k in range(3):
        log = run_log(folder / f"r{k}.log", {n: kinds[k] for n, kinds in PLAN.items()}, f"r{k}", day=k)
        leg = f"github:acme/shop/12345678/1/integration-tests+{k:08x}"  # long ids, alike but at the end
        assert cvdiag_cli.run("history", "add", log, "--db", db, "--run-id", leg).code == 0
    return db


def shown(columns: int, *args: str) -> str:
    done = cvdiag_cli.run("history", *args, env={"COLUMNS": str(columns)})
    assert done.code == 0, done.err
    assert max(len(line) for line in done.out.splitlines()) <= columns, done.out
    return done.out


@pytest.mark.parametrize("columns", [80, 100])
def test_flaky_shows_the_classes_whole_and_the_names_apart(history: str, columns: int) -> None:
    out = shown(columns, "flaky", "--db", history)
    rows = out.splitlines()[1:3]
    assert "llm-error 1, server-error 1" in rows[0] and "server-error 1" in rows[1]
    names = [row.split("  ")[0] for row in rows]
    assert names[0] != names[1]  # alike but in their middle: printed apart
    assert any("al" in n for n in names) and any("be" in n for n in names)


def test_names_that_differ_in_the_middle_are_cut_around_the_difference() -> None:
    from cvdiag.face._history_views import apart

    a, b = "tests/t.py::test_x[" + "a" + "-common" * 10 + "]", "tests/t.py::test_x[" + "b" + "-common" * 10 + "]"
    for width in (12, 20, 30, 50):
        cut_a, cut_b = apart([a, b, "other"], width)[:2]
        assert cut_a != cut_b and len(cut_a) <= width and len(cut_b) <= width, (width, cut_a, cut_b)
    assert apart(["short", "tests/t.py::test_one"], 40) == ["short", "tests/t.py::test_one"]


def test_diff_fits_its_header_and_keeps_the_classes(history: str) -> None:
    a, b = (
        "github:acme/shop/12345678/1/integration-tests+00000000",
        "github:acme/shop/12345678/1/integration-tests+00000001",
    )
    out = shown(80, "diff", a, b, "--db", history)
    first, second = out.splitlines()[:2]
    assert first.startswith("from github:") and first.endswith("0000") and second.startswith("to   github:")
    assert second.endswith("0001")
    assert "server-error" in out and "llm-error" in out  # classes whole
    wide = shown(200, "diff", a, b, "--db", history)
    assert wide.splitlines()[0] == f"from {a} to {b}"


def test_no_flaky_tests_is_an_answer(history: str) -> None:
    done = cvdiag_cli.run("history", "flaky", "--db", history, "--runs", "1")
    assert done.code == 0 and "no flaky tests in the last 1 runs" in done.out
    assert json.loads(cvdiag_cli.run("history", "flaky", "--db", history, "--runs", "1", "--json").out) == []


def test_wide_characters_take_two_columns(tmp_path: Path) -> None:
    if not hasattr(render, "cells"):
        pytest.skip("the tables count wide characters once render.cells is there (issue 36, item 3)")
    db = str(tmp_path / "h.duckdb")
    name = "tests/test_日本語の応答.py::test_東京から大阪までの乗り換え案内[新幹線-のぞみ-ひかり-こだま]"
    for k, kind in enumerate(("pass", "llm-error")):
        log = run_log(tmp_path / f"r{k}.log", {name: kind}, f"r{k}", day=k)
        assert cvdiag_cli.run("history", "add", log, "--db", db, "--run-id", f"r{k}").code == 0
    for columns in (60, 80):
        done = cvdiag_cli.run("history", "flaky", "--db", db, env={"COLUMNS": str(columns)})
        assert done.code == 0
        assert max(render.cells(line) for line in done.out.splitlines()) <= columns, done.out
        assert "llm-error 1" in done.out
