"""Tool calls and agent-level classes where a user sees them: ``cvdiag tests``,
``diagnose``, ``timeline``, ``compare``, the CI formats and the pytest failure report,
each through the real command on a real file."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from cvdiag_cli import run
from logkit import TID_OK, TID_TOOL, TID_TOOL_OK, TOOL_EXCERPT, compact, envelope, happy, tool_failure, write
from pytestkit import INNER

pytest_plugins = ["pytester"]

REASON = (
    f"Tool forecast (mcp, server weather) failed (protocol): '{TOOL_EXCERPT}'; 1 of 2 tool calls failed; "
    "the response still completed with HTTP 200."
)


@pytest.fixture(scope="module")
def log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    envs = [*happy(), *tool_failure(), *tool_failure(TID_TOOL_OK, 6.0, failed=False)]
    return write(tmp_path_factory.mktemp("tools") / "app.log", [f"CVDIAG {compact(e)}" for e in envs])


def test_tests_names_the_tool_error_of_a_test_whose_http_was_healthy(log: Path) -> None:
    result = run("tests", log, env={"NO_COLOR": "1"})
    assert result.code == 0, result.err
    rows = {line.split()[0]: line.split() for line in result.out.splitlines() if line.startswith("0190")}
    assert rows[TID_TOOL][-1] == "tool-error" and rows[TID_TOOL][-3] == "complete"
    assert rows[TID_TOOL_OK][-1] == "ok" and rows[TID_OK][-1] == "ok"
    as_json = {r["test_id"]: r for r in json.loads(run("tests", log, "--json").out)}
    assert as_json[TID_TOOL]["class"] == "tool-error"


def test_diagnose_says_which_tool_failed_where_and_why(log: Path) -> None:
    result = run("diagnose", TID_TOOL, log, env={"NO_COLOR": "1"})
    assert result.code == 0, result.err
    assert result.out.splitlines()[1:] == ["verdict: tool-error (confidence 0.90)", f"  {REASON}"]
    verdict = json.loads(run("diagnose", TID_TOOL, log, "--json").out)[0]
    assert verdict["evidence"]["tool_calls"] == {"started": 2, "answered": 2, "failed": 1}
    assert verdict["evidence"]["tool_error"]["excerpt"] == TOOL_EXCERPT


def test_timeline_lists_the_tool_calls_failed_first_and_marks_their_rows(log: Path) -> None:
    out = run("timeline", TID_TOOL, log, env={"NO_COLOR": "1", "COLUMNS": "200"}).out
    lines = out.splitlines()
    at = lines.index("tool calls: 2 tool calls, 1 failed: forecast (protocol)")
    assert lines[at + 1].split() == ["tool", "source", "server", "outcome", "duration", "error"]
    assert lines[at + 2].split() == ["forecast", "mcp", "weather", "err", "240", "ms", "protocol:", "'Unknown", "city:",
                                     "Atlantis'"]  # fmt: skip
    assert lines[at + 3].split() == ["clock", "wire", "ok", "20", "ms"]
    row = next(line for line in lines if "backend.tool.call.response" in line and " err " in line)
    assert row.rstrip().endswith(f"forecast (mcp, server weather) protocol: '{TOOL_EXCERPT}'")
    doc = json.loads(run("timeline", TID_TOOL, log, "--json").out)
    assert [c["tool"] for c in doc["tool_calls"]] == ["clock", "forecast"]  # in the order they ended
    assert doc["tool_calls"][1] == {
        "tool": "forecast", "source": "mcp", "server": "weather", "outcome": "err", "duration_ms": 240,
        "error_kind": "protocol", "error_excerpt": TOOL_EXCERPT, "handed_back": False,
    }  # fmt: skip


def test_a_timeline_without_tool_calls_has_no_tool_table(log: Path) -> None:
    out = run("timeline", TID_OK, log, env={"NO_COLOR": "1"}).out
    assert "tool calls" not in out


def test_compare_pairs_each_tool_with_itself_and_finds_the_failed_call(log: Path) -> None:
    result = run("compare", TID_TOOL_OK, TID_TOOL, log, env={"NO_COLOR": "1", "COLUMNS": "220"})
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert lines[0].endswith("ok  960 ms  2 tool calls")
    assert lines[1].endswith("tool-error  960 ms  2 tool calls, 1 failed: forecast (protocol)")
    assert lines[2] == "first divergence: B: backend.tool.call.response forecast err (protocol) where A had ok"
    doc = json.loads(run("compare", TID_TOOL_OK, TID_TOOL, log, "--json").out)
    assert doc["first_divergence"]["boundary"] == "backend.tool.call.response forecast"
    assert [c["outcome"] for c in doc["b"]["tool_calls"]] == ["ok", "err"]
    assert doc["b"]["diagnosis"]["class"] == "tool-error"


def test_junit_and_github_name_the_class_the_tool_and_its_excerpt(log: Path) -> None:
    github = run("tests", log, "--format", "github").out.splitlines()
    assert github == [f"::error title=tool-error::{REASON} (test {TID_TOOL})"]
    root = ET.fromstring(run("tests", log, "--format", "junit").out)
    case = next(c for c in root.iter("testcase") if c.get("name") == TID_TOOL)
    failure = case.find("failure")
    assert failure.get("type") == "tool-error" and failure.get("message") == REASON
    assert f"tool: forecast (mcp, server weather) protocol: '{TOOL_EXCERPT}'" in failure.text
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    assert props["cvdiag_tool_error"] == f"forecast (mcp, server weather) protocol: '{TOOL_EXCERPT}'"


def _failure_report(pytester: pytest.Pytester, log: Path, test_id: str) -> str:
    """The failure report of a failing test run under ``test_id``, the server's log ``log``."""
    pytester.makepyfile(
        f"""
        import pytest
        from cvdiag.pytest_plugin.plugin import add_log

        @pytest.fixture(autouse=True)
        def server_log(request):
            add_log(request.config, {str(log)!r})

        def test_answer_names_the_weather(cvdiag_test_id, monkeypatch):
            # the server's log carries this test under the id the harness gave it
            assert False, "the answer never named the weather"
        """
    )
    # Give the test the id of the logged run: the plugin reads the log by the test's own id
    # (in a process of its own, so that the patch cannot leak into this session).
    pytester.makeconftest(
        f"""
        import cvdiag.pytest_plugin.plugin as plugin
        plugin.new_test_id = lambda: {test_id!r}
        """
    )
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("COLUMNS", "200")  # the section is drawn at pytest's width: whole lines here
        result = pytester.runpytest_subprocess(*INNER, "-q")
    result.assert_outcomes(failed=1)
    return result.stdout.str()


def test_the_pytest_failure_report_lists_the_tool_calls(pytester: pytest.Pytester, log: Path) -> None:
    out = _failure_report(pytester, log, TID_TOOL)
    assert f"diagnosis: tool-error (0.90) {REASON}" in out
    assert "tool calls: 2 tool calls, 1 failed: forecast (protocol)" in out
    lines = out.splitlines()
    at = lines.index("tool calls: 2 tool calls, 1 failed: forecast (protocol)")  # the table ``timeline`` draws
    assert lines[at + 1].split() == ["tool", "source", "server", "outcome", "duration", "error"]
    assert lines[at + 2].split() == ["forecast", "mcp", "weather", "err", "240", "ms", "protocol:", "'Unknown", "city:",
                                     "Atlantis'"]  # fmt: skip
    assert lines[at + 3].split() == ["clock", "wire", "ok", "20", "ms"]


# -- one MCP call seen twice: on its MCP traffic and on the wire's hand-back to the model ------

TID_TWICE = "0190a9c0-1a2b-7c3d-8e4f-5a6b7c8d9e17"
HANDED_BACK = "An error occurred while running the tool. Please try again."
MCP_RAISED = "Error executing tool lookup_order: The order service is down"


def _tool_call(at: float, ms: int, source: str, kind: str, excerpt: str, server: str | None = None) -> list[dict]:
    call = {"tool_name": "lookup_order", "call_id": f"call_{source}", "source": source, "server": server}
    return [
        envelope(TID_TWICE, "backend.tool.call.start", at, metadata=call | {"args_chars": 18, "args_hash": "3f2a9c10"}),
        envelope(TID_TWICE, "backend.tool.call.response", at + ms / 1000, outcome="err", duration_ms=ms,
                 metadata=call | {"result_chars": 0, "error_kind": kind, "error_excerpt": excerpt}),
    ]  # fmt: skip


@pytest.fixture(scope="module")
def twice_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The model asks for lookup_order at 8.5, its MCP call fails inside (8.6-8.9), the
    framework hands the error back at 9.4: one call, on two lines."""
    wire = _tool_call(8.5, 900, "wire", "reported", HANDED_BACK)
    mcp = _tool_call(8.6, 300, "mcp", "protocol", MCP_RAISED, server="orders")
    envs = [*happy(), *tool_failure(TID_TOOL_OK, 6.0, failed=False), wire[0], *mcp, wire[1]]
    return write(tmp_path_factory.mktemp("twice") / "app.log", [f"CVDIAG {compact(e)}" for e in envs])


def test_the_views_show_an_mcp_call_handed_back_to_the_model_as_one_call(twice_log: Path) -> None:
    out = run("timeline", TID_TWICE, twice_log, env={"NO_COLOR": "1", "COLUMNS": "200"}).out
    lines = out.splitlines()
    at = lines.index("tool calls: 1 tool call, 1 failed: lookup_order (protocol)")
    assert lines[at + 2].split()[:6] == ["lookup_order", "mcp+wire", "orders", "err", "300", "ms"]
    assert lines[at + 2].rstrip().endswith(f"protocol: {MCP_RAISED!r}")
    assert lines[at + 3] == ""  # no second row for the hand-back
    doc = json.loads(run("timeline", TID_TWICE, twice_log, "--json").out)
    assert doc["tool_calls"] == [{
        "tool": "lookup_order", "source": "mcp", "server": "orders", "outcome": "err", "duration_ms": 300,
        "error_kind": "protocol", "error_excerpt": MCP_RAISED, "handed_back": True,
    }]  # fmt: skip
    compared = run("compare", TID_TOOL_OK, TID_TWICE, twice_log, env={"NO_COLOR": "1", "COLUMNS": "220"})
    assert compared.out.splitlines()[1].endswith("1 tool call, 1 failed: lookup_order (protocol)"), compared.out


def test_the_pytest_failure_report_lists_an_mcp_call_handed_back_once(
    pytester: pytest.Pytester, twice_log: Path
) -> None:
    out = _failure_report(pytester, twice_log, TID_TWICE)
    assert "tool calls: 1 tool call, 1 failed: lookup_order (protocol)" in out
    lines = out.splitlines()
    at = lines.index("tool calls: 1 tool call, 1 failed: lookup_order (protocol)")
    assert lines[at + 2].split()[:6] == ["lookup_order", "mcp+wire", "orders", "err", "300", "ms"]
    assert lines[at + 2].rstrip().endswith(f"protocol: {MCP_RAISED!r}")
    assert lines[at + 3] == ""  # no second row for the hand-back


# -- validate: the types of the extension keys ---------------------------------------------

_WRONG_KEYS = [
    ("backend.llm.call.start", {"client": 7, "output_schema": "yes"},
     ["metadata client is not a string", "metadata output_schema is not a boolean"]),
    ("backend.llm.call.response", {"tool_calls": -1, "tool_names": [f"t{i}" for i in range(9)], "output_valid": 1},
     ["metadata tool_calls is not a count (int >= 0)",
      "metadata tool_names is not a list of at most 8 strings of at most 64 characters",
      "metadata output_valid is not a boolean"]),
    ("backend.llm.call.response", {"tool_calls": True, "tool_names": "forecast"},
     ["metadata tool_calls is not a count (int >= 0)",
      "metadata tool_names is not a list of at most 8 strings of at most 64 characters"]),
    ("backend.llm.call.response", {"tool_names": [{"name": "forecast"}]},
     ["metadata tool_names is not a list of at most 8 strings of at most 64 characters"]),
    ("backend.agent.exit", {"error_message": ["boom"]},
     ["metadata error_message is not a string of at most 256 characters"]),
    ("backend.tool.call.start", {"tool_name": 3, "call_id": {}, "source": ["mcp"], "args_chars": 1.5,
                                 "args_hash": "3f2a9c1z"},
     ["metadata tool_name is not a string", "metadata call_id is not a string",
      "metadata source is not one of wire, mcp, hook, scope, otel", "metadata args_chars is not a count (int >= 0)",
      "metadata args_hash is not 8 hex digits"]),
    ("backend.tool.call.response", {"source": "llm", "error_kind": "crashed", "result_chars": "64"},
     ["metadata source is not one of wire, mcp, hook, scope, otel", "metadata result_chars is not a count (int >= 0)",
      "metadata error_kind is not one of raised, reported, protocol, transport, timeout"]),
]  # fmt: skip


def test_validate_checks_the_types_of_the_tool_and_llm_extension_keys(tmp_path: Path) -> None:
    good = tool_failure()  # every extension key, each of its type
    by_boundary = {e["boundary"]: e for e in good}
    by_boundary["backend.agent.exit"]["metadata"]["error_message"] = "the order service is down"
    lines = [f"CVDIAG {compact(e)}" for e in good]
    for boundary, wrong, _ in _WRONG_KEYS:
        env = json.loads(json.dumps(by_boundary[boundary]))
        env["metadata"].update(wrong)
        lines.append(f"CVDIAG {compact(env)}")
    log = write(tmp_path / "app.log", lines)
    result = run("validate", log, env={"CVDIAG_TRACEBACK": "1"})
    assert result.code == 1 and "Traceback" not in result.err, result.err
    bad = [line for line in result.out.splitlines() if line.startswith(f"{log}:")]
    expected = [f"{log}:{len(good) + n + 1}: {problem}" for n, (_, _, problems) in enumerate(_WRONG_KEYS)
                for problem in problems]  # fmt: skip
    assert bad == expected
    assert f"checked {len(lines)} envelopes: {len(_WRONG_KEYS)} invalid, 0 malformed lines" in result.out
