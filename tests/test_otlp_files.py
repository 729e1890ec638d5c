"""OpenTelemetry traces read from files (issue 33, item 3): the commands on OTLP JSON made
by the real instrumentations (tests/data/otlp/), and on OTLP that is broken every way."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from cvdiag_cli import run, run_in_process

OTLP = Path(__file__).parent / "data" / "otlp"


def _classes(*args: Any) -> dict[str, str]:
    r = run("tests", "--json", *args)
    assert r.code in (0, 1), r.err
    return {row["test_id"]: row["class"] for row in json.loads(r.out)}


@pytest.mark.parametrize(
    ("fixture", "expected"),
    [
        ("pydantic_ai.jsonl", {"pydantic-ai-ok": "ok", "pydantic-ai-tool-error": "tool-error",
                               "pydantic-ai-tool-slow": "tool-slow", "pydantic-ai-output-invalid": "output-invalid",
                               "pydantic-ai-loop": "agent-loop"}),
        ("pydantic_ai_console.json", {"pydantic-ai-ok": "ok", "pydantic-ai-tool-error": "tool-error"}),
        ("openinference_langgraph.jsonl", {"langgraph-tool-error": "tool-error",
                                           "langgraph-output-invalid": "output-invalid"}),
        ("openinference_openai_agents.jsonl", {"openai-agents-tool-error": "tool-error",
                                               "openai-agents-loop": "agent-loop"}),
        ("mcp_sdk.jsonl.gz", {"mcp-tool-raised": "tool-error", "mcp-tool-error-result": "tool-error"}),
    ],
)  # fmt: skip
def test_traces_of_the_real_instrumentations_get_their_class(fixture: str, expected: dict[str, str]) -> None:
    classes = _classes("--slow-s", "1", OTLP / fixture)
    assert {k: classes[k] for k in expected} == expected


def test_a_failure_every_span_around_it_marks_again_is_one_line() -> None:
    """LangChain marks the parser's exception on the sequence that ran it too: one output check."""
    r = run("grep", "--test-id", "langgraph-output-invalid", OTLP / "openinference_langgraph.jsonl")
    outputs = [json.loads(line) for line in r.out.splitlines() if "backend.agent.output" in line]
    assert [(o["outcome"], o["metadata"]["error_class"]) for o in outputs] == [("err", "OutputParserException")]


def test_the_rows_and_the_note_say_the_evidence_came_from_traces() -> None:
    r = run("tests", "--slow-s", "1", OTLP / "pydantic_ai.jsonl")
    assert "OpenTelemetry traces (OTLP JSON): 21 spans read" in r.err and "for 5 tests" in r.err
    row = next(line for line in r.out.splitlines() if line.startswith("pydantic-ai-tool-error"))
    assert "complete" in row and "fail" in row and "tool-error" in row
    d = run("diagnose", "pydantic-ai-tool-error", OTLP / "pydantic_ai.jsonl")
    assert "Tool lookup (traces) failed (raised), raising ConnectionError" in d.out


def test_a_file_whose_spans_name_no_test_is_read_by_trace_id() -> None:
    r = run("tests", "--json", OTLP / "openllmetry_openai.json")
    rows = json.loads(r.out)
    assert len(rows) == 3 and all(len(row["test_id"]) == 32 for row in rows)
    assert sorted(row["class"] for row in rows) == ["llm-error", "llm-error", "ok"]
    assert "3 named by their trace id" in r.err
    reasons = run("diagnose", "--all", "--json", OTLP / "openllmetry_openai.json").out
    assert "never reached the provider: the app's own HTTP client raised RuntimeError" in reasons
    assert "HTTP 500" in reasons


def test_timeline_report_and_history_read_traces(tmp_path: Path) -> None:
    tl = run("timeline", "openai-agents-loop", OTLP / "openinference_openai_agents.jsonl")
    assert "verdict: agent-loop" in tl.out and "max_turns=2" in tl.out
    page = tmp_path / "report.html"
    rep = run("report", "-o", page, OTLP / "pydantic_ai.jsonl")
    assert rep.code in (0, 1), rep.err
    assert "pydantic-ai-output-invalid" in page.read_text()
    pytest.importorskip("duckdb")
    db = tmp_path / "h.duckdb"
    add = run("history", "add", "--db", db, "--run-id", "r1", OTLP / "mcp_sdk.jsonl.gz")
    assert add.code == 0, add.err
    shown = run("history", "runs", "--db", db)
    assert "r1" in shown.out


def test_no_prompt_or_message_of_a_trace_reaches_any_output() -> None:
    lines = run("grep", OTLP / "pydantic_ai.jsonl").out + run("grep", OTLP / "openinference_langgraph.jsonl").out
    assert lines.count("\n") > 20
    for said in ("What is the weather in Oslo?", "Where is order A1?", "It is sunny.", "Here is what I found."):
        assert said not in lines


def test_validate_accepts_every_line_made_from_traces() -> None:
    for fixture in sorted(OTLP.glob("*.json*")):
        r = run("validate", fixture)
        assert r.code == 0 and " 0 invalid, 0 malformed lines" in r.out, (fixture, r.out, r.err)


# -- the test id and the shapes of OTLP JSON -----------------------------------------------------


def _span(
    name: str, attrs: dict[str, Any], *, trace: str = "5b8efff798038103d269b633813fc60c",
    span: str = "eee19b7ec3c1b174", parent: str = "", end: str = "1700000000500000000", error: bool = False,
) -> dict[str, Any]:  # fmt: skip
    return {
        "traceId": trace, "spanId": span, "parentSpanId": parent, "name": name, "kind": 1,
        "startTimeUnixNano": "1700000000000000000", "endTimeUnixNano": end,
        "attributes": [{"key": k, "value": {"stringValue": v} if isinstance(v, str) else {"intValue": str(v)}}
                       for k, v in attrs.items()],
        "status": {"code": 2 if error else 0},
    }  # fmt: skip


def _doc(*spans: dict[str, Any], resource: dict[str, str] | None = None) -> bytes:
    res = [{"key": k, "value": {"stringValue": v}} for k, v in (resource or {"service.name": "billing"}).items()]
    doc = {"resourceSpans": [{"resource": {"attributes": res}, "scopeSpans": [{"scope": {"name": "acme"},
                                                                               "spans": list(spans)}]}]}  # fmt: skip
    return orjson.dumps(doc)


_FAILED_TOOL = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "fetch_invoice"}


def test_the_test_id_comes_from_an_attribute_the_user_names(tmp_path: Path) -> None:
    path = tmp_path / "spans.jsonl"
    path.write_bytes(_doc(_span("execute_tool fetch_invoice", {**_FAILED_TOOL, "session.id": "S-42"}, error=True)))
    assert _classes(path) == {"5b8efff798038103d269b633813fc60c": "tool-error"}
    assert _classes("--test-id-attr", "session.id", path) == {"s-42": "tool-error"}
    path.write_bytes(_doc(_span("execute_tool fetch_invoice", _FAILED_TOOL, error=True), resource={"test.id": "t-9"}))
    assert _classes(path) == {"t-9": "tool-error"}


def test_ids_in_base64_as_protobufs_json_mapping_writes_them_are_read(tmp_path: Path) -> None:
    span = _span("execute_tool a", {**_FAILED_TOOL}, trace="W47/95gDgQPSabYzgT/GDA==", span="7uGbfsPBsXQ=", error=True)
    path = tmp_path / "b64.jsonl"
    path.write_bytes(_doc(span))
    assert _classes(path) == {"5b8efff798038103d269b633813fc60c": "tool-error"}


def test_gzip_and_stdin_are_read_too(tmp_path: Path) -> None:
    data = _doc(_span("execute_tool fetch_invoice", {**_FAILED_TOOL, "cvdiag.test_id": "t-1"}, error=True))
    path = tmp_path / "spans.json.gz"
    path.write_bytes(gzip.compress(data))
    assert _classes(path) == {"t-1": "tool-error"}
    r = run("tests", "--json", stdin=data + b"\n")
    assert {row["test_id"]: row["class"] for row in json.loads(r.out)} == {"t-1": "tool-error"}


def test_a_log_that_is_not_otlp_is_read_as_before(tmp_path: Path) -> None:
    path = tmp_path / "docker.log"
    path.write_text(json.dumps({"log": "hello\n", "stream": "stdout", "time": "2026-11-21T10:00:00Z"}) + "\n")
    r = run("tests", path)
    assert "OpenTelemetry" not in r.err


def test_broken_otlp_is_counted_and_said_never_a_crash(tmp_path: Path) -> None:
    good = _span("execute_tool a", {**_FAILED_TOOL, "test.id": "t-1"}, error=True)
    lines = [
        _doc(good),
        b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "12"',  # cut mid-document
        b"not json at all",
        _doc(_span("execute_tool b", {**_FAILED_TOOL, "test.id": "t-2"}, end="0")),  # never ended
        _doc(_span("execute_tool c", {**_FAILED_TOOL, "test.id": "t-3"}, trace="abc", span="zz", error=True)),
        _doc(_span("x", {"test.id": "t-4"}, span="aaaaaaaaaaaaaaaa", parent="bbbbbbbbbbbbbbbb"),
             _span("y", {"test.id": "t-4"}, span="bbbbbbbbbbbbbbbb", parent="aaaaaaaaaaaaaaaa")),  # a cycle
        _doc(_span("acme.frobnicate", {"acme.kind": "unknown", "test.id": "t-5"})),  # no convention
        orjson.dumps({"resourceSpans": "not a list"}),
        orjson.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [7, None, {"name": 3}]}]}]}),
    ]  # fmt: skip
    path = tmp_path / "broken.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    r = run("tests", "--json", path)
    assert r.code in (0, 1), r.err
    classes = {row["test_id"]: row["class"] for row in json.loads(r.out)}
    assert classes["t-1"] == "tool-error" and classes["t-3"] == "tool-error"
    assert "t-2" not in classes and "t-4" not in classes
    assert (
        "4 malformed or cut records" in r.err
    )  # the cut document took the line after it and "2 spans that never ended skipped" in r.err
    assert "2 ids of the wrong shape" in r.err


def test_a_ten_megabyte_attribute_and_many_spans_stay_bounded(tmp_path: Path) -> None:
    huge = "A" * (10 << 20)
    spans = [_span("execute_tool big", {**_FAILED_TOOL, "test.id": "t-big", "gen_ai.tool.call.result": huge},
                   error=True)]  # fmt: skip
    spans += [
        _span(
            "execute_tool many", {**_FAILED_TOOL, "test.id": "t-many"}, span=f"{i + 1:016x}", parent="00000000000000ff"
        )
        for i in range(20_000)
    ]
    path = tmp_path / "big.jsonl"
    path.write_bytes(_doc(*spans[:1]) + b"\n" + _doc(*spans[1:]) + b"\n")
    code, out, _err = run_in_process(["tests", "--json", str(path)])
    assert code in (0, 1)
    rows = {row["test_id"]: row for row in json.loads(out)}
    assert rows["t-big"]["class"] == "tool-error" and rows["t-many"]["events"] == 20_000
    assert "A" * 300 not in out


def test_a_document_over_the_size_limit_is_skipped_and_said(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from cvdiag.read import _otlp_read

    monkeypatch.setattr(_otlp_read, "MAX_DOC_BYTES", 4096)
    small = _doc(_span("execute_tool a", {**_FAILED_TOOL, "test.id": "t-1"}, error=True))
    big = _doc(*[_span("execute_tool b", {**_FAILED_TOOL, "test.id": "t-2"}) for _ in range(50)])
    path = tmp_path / "mixed.jsonl"
    path.write_bytes(small + b"\n" + big + b"\n" + small + b"\n")
    _code, out, err = run_in_process(["tests", "--json", str(path)])
    assert [row["test_id"] for row in json.loads(out)] == ["t-1"]
    assert "1 document over the size limit skipped" in err


def test_a_big_file_is_translated_by_ranges_in_processes_with_the_same_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cvdiag.read import otlp

    docs = [
        _doc(
            *[
                _span(
                    "execute_tool t",
                    {**_FAILED_TOOL, "test.id": f"t-{i}"},
                    span=f"{i * 8 + k + 1:016x}",
                    parent="00000000000000ff",
                    error=k == 0,
                )
                for k in range(8)
            ]
        )
        for i in range(40)
    ]
    path = tmp_path / "collector.jsonl"
    path.write_bytes(b"\n".join(docs) + b"\n")
    _, whole, _ = run_in_process(["tests", "--json", str(path)])
    monkeypatch.setattr(otlp, "_PARALLEL_MIN_BYTES", 1)
    code, parts, err = run_in_process(["tests", "--json", str(path)])
    assert code in (0, 1) and "320 spans read" in err
    assert json.loads(parts) == json.loads(whole) and len(json.loads(whole)) == 40


def _any_value(v: Any) -> dict[str, Any]:
    if isinstance(v, dict):
        return {"kvlistValue": {"values": [{"key": k, "value": _any_value(x)} for k, x in v.items()]}}
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}
    if v is None:
        return {}
    return {"stringValue": str(v)}


def test_cvdiag_envelopes_exported_as_log_records_are_read_back(tmp_path: Path) -> None:
    from cvdiag.testing import envelope

    env = envelope("backend.tool.call.response", test_id="t-logs", outcome="err", duration_ms=40,
                   metadata={"tool_name": "forecast", "source": "mcp", "error_kind": "protocol",
                             "error_excerpt": "Unknown city"})  # fmt: skip
    records = [
        {"timeUnixNano": "1", "body": _any_value(env), "attributes": []},
        {"timeUnixNano": "2", "body": {"stringValue": "an app's own log line"}},
    ]
    doc = {"resourceLogs": [{"resource": {}, "scopeLogs": [{"scope": {"name": "cvdiag"}, "logRecords": records}]}]}
    path = tmp_path / "logs.jsonl"
    path.write_bytes(orjson.dumps(doc) + b"\n")
    r = run("tests", "--json", path)
    assert {row["test_id"]: row["class"] for row in json.loads(r.out)} == {"t-logs": "tool-error"}
    assert "2 log records read, 1 evidence line for 1 test" in r.err
    assert "1 log record that is no cvdiag envelope skipped" in r.err


def test_the_collectors_protobuf_file_is_read_where_opentelemetry_proto_is(tmp_path: Path) -> None:
    pytest.importorskip("opentelemetry.proto")
    encoder = pytest.importorskip("opentelemetry.exporter.otlp.proto.common.trace_encoder")
    from opentelemetry.trace import Status, StatusCode
    from otelkit import recorder

    provider, exporter = recorder()
    tracer = provider.get_tracer("acme-agents")
    agent = {"gen_ai.operation.name": "invoke_agent"}
    with (
        tracer.start_as_current_span("invoke_agent billing", attributes=agent),
        tracer.start_as_current_span(
            "execute_tool fetch_invoice", attributes={**_FAILED_TOOL, "test.id": "t-proto"}
        ) as span,
    ):
        span.record_exception(LookupError("invoice 42 missing"))
        span.set_status(Status(StatusCode.ERROR))
    body = encoder.encode_spans(exporter.get_finished_spans()).SerializeToString()
    path = tmp_path / "traces.binpb"
    path.write_bytes(len(body).to_bytes(4, "big") + body + b"\x00\x00\x00\x40" + b"\x0a" * 7)  # then a cut one
    r = run("tests", "--json", path)
    assert {row["test_id"]: row["class"] for row in json.loads(r.out)}["t-proto"] == "tool-error"
    assert "1 malformed or cut record" in r.err
    d = run("diagnose", "t-proto", path)
    assert "raising LookupError: 'invoice 42 missing'" in d.out
