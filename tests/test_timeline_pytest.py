"""One timeline: a failed test's pytest report shows the very rows ``cvdiag timeline`` shows.

A real pytest session in a process of its own runs a real Starlette app (the middleware,
an agent scope, a failing LLM call) whose emitter also writes the server's log; the
report merges its in-process envelopes with that log, and ``cvdiag timeline ID LOG`` reads
the log alone. Both draw one model (``read.timeline``) with one renderer
(``face.render.timeline_table``), so their tables are equal, row for row.
"""

from __future__ import annotations

import re

import pytest
from cvdiag_cli import run
from test_pytest_plugin import INNER_APP

pytest_plugins = ["pytester"]

_TEST = """
import time

from starlette.testclient import TestClient
from inner_app import app


def test_the_agent_answers():
    with TestClient(app) as client:
        assert client.get("/echo").status_code == 200
        time.sleep(1.2)  # a silence the timeline shows as a row of its own
        assert client.get("/broken").status_code == 200
"""

_HEADER = re.compile(r"^\s*t\s+layer\s+boundary\s+outcome\s+duration\s+details$")


def _table(lines: list[str]) -> list[str]:
    """The timeline table in ``lines``: its header and every row after it."""
    start = next(i for i, line in enumerate(lines) if _HEADER.match(line))
    rows = []
    for line in lines[start:]:
        if not line.strip() or line.startswith(("note:", "=", "-", "FAILED")):
            break
        rows.append(line)
    return rows


def test_the_pytest_report_shows_the_rows_cvdiag_timeline_shows(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = pytester.path / "server.log"
    monkeypatch.setenv("CVDIAG_FILE", str(log))  # the app's emitter writes the server's log too
    monkeypatch.setenv("COLUMNS", "200")  # pytest's width, which the section is drawn at
    pytester.makepyfile(inner_app=INNER_APP, test_support=_TEST)
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-p", "no:randomly", f"--cvdiag-log={log}", "-q"
    )  # fmt: skip
    result.assert_outcomes(failed=1)
    out = result.stdout.lines
    (test_id,) = [line.removeprefix("test id: ") for line in out if line.startswith("test id: ")]
    header = next(line for line in out if line.startswith("timeline ("))
    reported = _table(out)

    shown = run("timeline", test_id, log, env={"NO_COLOR": "1", "COLUMNS": "200"})
    assert shown.code == 0, shown.err
    timeline = _table(shown.out.splitlines())

    assert reported == timeline
    # What the rows hold: every envelope once (in-process and the log's copy are one),
    # in time order, the silence between the two requests, the failed call marked.
    events = [row.split() for row in timeline[1:] if row.lstrip().startswith("+")]
    assert header == f"timeline ({len(events)} events from in-process, {log}):"
    assert events[0][:4] == ["+0.000", "s", "backend", "backend.request.ingress"]
    assert [e[3] for e in events].count("backend.request.ingress") == 2
    assert any(row.split()[:4] == ["···", "no", "event", "for"] for row in timeline)
    (failed,) = [e for e in events if e[3] == "backend.llm.call.response"]
    assert failed[4] == "err" and "error_class=ConnectionError" in failed
    assert events[-1][3] == "backend.response.complete"
    offsets = [float(e[0]) for e in events]
    assert offsets == sorted(offsets) and offsets[-1] >= 1.2
