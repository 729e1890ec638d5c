"""Spans in the process (issue 33, item 1): the real OpenTelemetry SDK in a process of its
own per case (its global provider can be set once per process), set up as an app would,
with an in-memory exporter standing for the app's own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("opentelemetry.sdk")

ROOT = Path(__file__).resolve().parent.parent
APP = str(Path(__file__).parent / "otel_app.py")


def run_app(order: str, cvdiag: str, sampler: str = "on") -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("CVDIAG_INSTRUMENT_OFF", None)
    done = subprocess.run(
        [sys.executable, APP, order, cvdiag, sampler], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def without_test_id(exported: list[dict]) -> list[dict]:
    for span in exported:
        span["attributes"].pop("cvdiag.test_id", None)
    return exported


TOOL_ERROR = {
    "boundary": "backend.tool.call.response",
    "test_id": "t-otel-1",
    "outcome": "err",
    "tool_name": "lookup",
    "call_id": "call_1",
    "source": "otel",
    "kind": "function",
    "error_kind": "raised",
    "error_class": "KeyError",
    "error_excerpt": "'no such order: 42'",
    "otel_convention": "genai",
}


@pytest.mark.parametrize("order", ["before", "after"])
def test_app_provider_keeps_exactly_its_traces(order):
    """Set before or after instrument(), the app's provider exports the same spans with
    cvdiag as without, but for cvdiag.test_id on those started inside a request."""
    alone = run_app(order, "absent")
    with_cvdiag = run_app(order, "on")
    assert with_cvdiag["provider"] == alone["provider"] == "TracerProvider"
    assert without_test_id(with_cvdiag["exported"]) == alone["exported"]
    assert with_cvdiag["recording"] == alone["recording"] == {"inside": True, "outside": True}
    assert with_cvdiag["warnings"] == alone["warnings"] == []


@pytest.mark.parametrize("order", ["before", "after"])
def test_every_span_in_a_request_carries_the_test_id(order):
    tagged = {span["name"]: span["attributes"].get("cvdiag.test_id") for span in run_app(order, "on")["exported"]}
    assert tagged == {"handler": "t-otel-1", "execute_tool lookup": "t-otel-1", "outside": None}


@pytest.mark.parametrize("order", ["before", "after", "never"])
def test_a_tool_that_raised_is_one_envelope_under_the_test(order):
    assert run_app(order, "on")["envelopes"] == [TOOL_ERROR]


def test_the_app_sampler_decides_and_cvdiag_sees_what_it_records():
    """An app that samples nothing exports nothing with cvdiag either; its spans never
    record, so they are no evidence (docs/opentelemetry.md says so)."""
    result = run_app("before", "on", sampler="off")
    assert result["exported"] == [] and result["envelopes"] == []
    assert result["recording"] == {"inside": False, "outside": False}


def test_without_a_provider_cvdiag_records_inside_requests_only_and_exports_nothing():
    result = run_app("never", "on")
    assert result["provider"] == "StandIn"
    assert result["recording"] == {"inside": True, "outside": False}
    assert result["exported"] == [] and result["warnings"] == []


def test_a_provider_set_later_replaces_the_stand_in_and_gets_the_tap():
    """set_tracer_provider works as if cvdiag had set none (no 'Overriding' warning); the
    tracer taken before follows the app's provider, and spans still become evidence."""
    result = run_app("late", "on")
    assert result["provider"] == "TracerProvider" and result["warnings"] == []
    assert [span["name"] for span in result["exported"]] == ["execute_tool lookup"]
    assert [e["test_id"] for e in result["envelopes"]] == ["t-otel-1", "t-otel-2"]


def test_otel_off_leaves_spans_alone():
    result = run_app("before", "off")
    assert result["otel"] == "off" and result["envelopes"] == []
    assert all("cvdiag.test_id" not in span["attributes"] for span in result["exported"])


def test_importing_and_instrumenting_loads_no_opentelemetry():
    code = (
        "import sys, cvdiag; states = cvdiag.instrument(); "
        "print(states['otel'], sorted(m for m in sys.modules if m.startswith('opentelemetry.')))"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.split() == ["pending", "[]"]


def test_an_mcp_call_its_sdk_also_traced_is_one_line():
    """The mcp SDK traces its own calls; the MCP capture writes them: one line each."""
    pytest.importorskip("mcp")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, APP, "mcp", "on"], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    calls = json.loads(done.stdout)
    assert [(c["tool_name"], c["outcome"], c["source"]) for c in calls] == [
        ("forecast", "ok", "mcp"),
        ("explode", "err", "mcp"),
    ]


def test_a_framework_no_table_names_is_read_by_its_convention():
    """Diagnosed the day it emits OpenInference spans: nothing names "acme-agents"."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, APP, "acme", "on"], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    tool, agent, llm = json.loads(done.stdout)
    assert (tool["boundary"], tool["outcome"], tool["tool_name"], tool["call_id"]) == (
        "backend.tool.call.response",
        "err",
        "refund",
        "t_9",
    )
    assert (tool["error_class"], tool["error_excerpt"], tool["otel_convention"]) == (
        "PermissionError",
        "refunds over 500 EUR need approval",
        "openinference",
    )
    assert (agent["boundary"], agent["agent_name"], agent["source"]) == ("backend.agent.exit", "acme-support", "otel")
    assert (llm["boundary"], llm["model"], llm["source"]) == ("backend.llm.call.response", "acme-1", "otel")
