"""Every envelope also an OTLP log record (issue 34): sent to a real OTLP/HTTP receiver on
127.0.0.1, in protobuf and JSON, rebuilt byte for byte; faults of the collector counted,
never felt by the app or its log."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import httpx
import orjson
import pytest
from otlpkit import (
    attributes,
    clean_env,
    closed_port,
    log_records,
    misbehaving_collector,
    receiver,
    spans,
    value_of,
)
from serverkit import running_server
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

import cvdiag
from cvdiag.testing import capture
from cvdiag.write import _otlp


@pytest.fixture(autouse=True)
def fresh_sink(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test's OTLP variables are read afresh (the sink reads them once per process)."""
    for name in list(os.environ):
        if name.startswith("OTEL_"):
            monkeypatch.delenv(name)
    _otlp.reset()
    yield
    _otlp.reset(0.5)


def _emit_a_request(test_id: str = "otlp-1") -> None:
    with cvdiag.request_context(test_id=test_id, slug="svc", demo="chat"):
        cvdiag.emit("backend.agent.enter", {"agent_name": "planner", "model_id": "gpt-4o-mini"})
        cvdiag.emit(
            "backend.llm.call.response",
            {
                "provider": "openai",
                "model": "gpt-4o-mini",
                "http_status": 500,
                "attempt": 1,
                "error_type": "server_error",
                "latency_ms": 120,
                "tool_names": ["météo", "calc"],
                "retry_after_ms": None,
            },
            outcome="err",
            duration_ms=120,
        )
        cvdiag.emit(
            "backend.agent.exit",
            {"terminal_outcome": "error", "total_duration_ms": 300, "error_class": "APIError"},
            outcome="err",
            duration_ms=300,
        )
        cvdiag.emit(
            "backend.response.complete",
            {"http_status": 500, "content_length": 12, "total_duration_ms": 400, "sse_event_count": 0},
            outcome="err",
            duration_ms=400,
        )


@pytest.mark.parametrize("protocol", ["http/protobuf", "http/json"])
def test_each_envelope_is_one_record_that_rebuilds_its_line(
    protocol: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out, log = str(tmp_path / "otlp.jsonl"), tmp_path / "cvdiag.ndjson"
    with receiver(out) as r:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", r.endpoint)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
        monkeypatch.setenv("OTEL_SERVICE_NAME", "my-backend")
        with capture(tier="verbose", otlp=True, file=log):
            _emit_a_request()
            cvdiag.flush()
            assert _otlp.flush(10)
    lines = log.read_bytes().splitlines()
    records = log_records(out)
    assert len(records) == len(lines) == 4
    # The body is the envelope object: a reader rebuilds the line byte for byte.
    assert [orjson.dumps(value_of(rec["body"])) for rec in records] == lines
    failed = records[1]
    assert failed["eventName"] == "cvdiag.backend.llm.call.response"
    assert (failed["severityNumber"], failed["severityText"]) == (13, "WARN")
    assert records[0]["severityText"] == "INFO"
    attrs = attributes(failed)
    assert attrs["cvdiag.test_id"] == "otlp-1"
    assert attrs["cvdiag.boundary"] == "backend.llm.call.response"
    assert (attrs["cvdiag.layer"], attrs["cvdiag.slug"], attrs["cvdiag.outcome"]) == ("backend", "svc", "err")
    assert (attrs["cvdiag.http_status"], attrs["cvdiag.error_type"], attrs["cvdiag.model"]) == (
        500,
        "server_error",
        "gpt-4o-mini",
    )
    assert "cvdiag.tool_names" not in attrs  # lists stay in the body
    assert failed["_resource"]["service.name"] == "my-backend"
    envelope = orjson.loads(lines[1])
    assert int(failed["timeUnixNano"]) // 1_000_000 == _ms(envelope["ts"])
    stats = cvdiag.stats()
    assert stats["otlp_logs_handed"] == stats["otlp_logs_exported"] == 4
    assert stats["otlp_logs_dropped_collector_down"] == stats["otlp_logs_dropped_queue_full"] == 0


def _ms(ts: str) -> int:
    from cvdiag.contract.timestamps import ts_seconds

    return round(ts_seconds(ts) * 1000)


def test_records_carry_the_trace_of_the_request(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The span current at the middleware (an OTel ASGI server span) or, without one, the
    request's own traceparent gives each record its trace and span ids."""
    from opentelemetry.instrumentation.asgi import OpenTelemetryMiddleware
    from opentelemetry.sdk.trace import TracerProvider

    async def hello(request: object) -> PlainTextResponse:
        cvdiag.emit("backend.agent.enter", {"agent_name": "a", "model_id": None})
        return PlainTextResponse("hi")

    plain = cvdiag.CvdiagMiddleware(Starlette(routes=[Route("/", hello)]), slug="svc")
    traced = OpenTelemetryMiddleware(plain, tracer_provider=TracerProvider())
    out = str(tmp_path / "otlp.jsonl")
    parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    with receiver(out) as r:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", r.endpoint)
        with capture(tier="verbose", otlp=True):
            with running_server(plain) as base:
                httpx.get(base + "/", headers={"x-test-id": "from-header", "traceparent": parent})
            with running_server(traced) as base:
                httpx.get(base + "/", headers={"x-test-id": "from-otel", "traceparent": parent})
            cvdiag.flush()
            assert _otlp.flush(10)
    by_test: dict[str, set[tuple[str, str]]] = {}
    for rec in log_records(out):
        by_test.setdefault(attributes(rec)["cvdiag.test_id"], set()).add((rec.get("traceId"), rec.get("spanId")))
    assert by_test["from-header"] == {("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331")}
    ((trace_id, span_id),) = by_test["from-otel"]
    assert trace_id == "0af7651916cd43dd8448eb211c80319c"  # the server span continues the caller's trace
    assert span_id != "b7ad6b7169203331"  # ... and is a span of its own


def test_the_log_is_whole_and_the_loss_counted_when_the_collector_is_down(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "cvdiag.ndjson"
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{closed_port()}")
    with capture(tier="verbose", otlp=True, file=log):
        for i in range(50):
            _emit_a_request(f"down-{i}")
        assert cvdiag.flush()  # the writer is never held up by the export
        _otlp.flush(30)
    assert len(log.read_bytes().splitlines()) == 200
    stats = cvdiag.stats()
    assert stats["otlp_logs_handed"] == 200
    assert stats["otlp_logs_exported"] == 0
    assert stats["otlp_logs_dropped_collector_down"] == 200
    line, lost = _otlp._sink.summary()  # type: ignore[union-attr]
    assert lost
    assert "logs: 200 handed, 0 exported, 200 dropped (queue full 0, collector down 200, rejected 0)" in line


@pytest.mark.parametrize(
    ("mode", "counted"), [("503", "collector_down"), ("429", "collector_down"), ("400", "rejected")]
)
def test_a_refusing_collector_is_retried_then_counted(
    mode: str, counted: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "cvdiag.ndjson"
    with misbehaving_collector(mode) as endpoint:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
        with capture(tier="verbose", otlp=True, file=log):
            _emit_a_request()
            assert cvdiag.flush()
            assert _otlp.flush(30)
    assert len(log.read_bytes().splitlines()) == 4
    stats = cvdiag.stats()
    assert stats[f"otlp_logs_dropped_{counted}"] == stats["otlp_logs_handed"] == 4
    assert stats["otlp_logs_exported"] == 0


def test_a_collector_that_closes_mid_body_costs_the_batch_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "cvdiag.ndjson"
    with misbehaving_collector("close-mid-body") as endpoint:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
        with capture(tier="verbose", otlp=True, file=log):
            _emit_a_request()
            assert cvdiag.flush()
            assert _otlp.flush(30)
    assert len(log.read_bytes().splitlines()) == 4
    assert cvdiag.stats()["otlp_logs_dropped_collector_down"] == 4


def test_a_slow_collector_fills_the_export_queue_not_the_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A collector taking 10 s per request: the log is written at once, the export's own
    bounded queue drops its oldest records and says how many."""
    log = tmp_path / "cvdiag.ndjson"
    with misbehaving_collector("slow", delay_s=10.0) as endpoint:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "500")
        monkeypatch.setenv("CVDIAG_OTLP_QUEUE_SIZE", "20")
        with capture(tier="verbose", otlp=True, file=log):
            for i in range(100):
                _emit_a_request(f"slow-{i}")
            assert cvdiag.flush()
            assert len(log.read_bytes().splitlines()) == 400
            _otlp.flush(0.1)
            stats = cvdiag.stats()
    assert stats["otlp_logs_handed"] == 400
    assert stats["otlp_logs_dropped_queue_full"] > 0
    accounted = (
        stats["otlp_logs_exported"]
        + stats["otlp_logs_dropped_queue_full"]
        + stats["otlp_logs_dropped_collector_down"]
        + stats["otlp_logs_dropped_rejected"]
        + stats["otlp_logs_pending"]
    )
    assert accounted == 400


@pytest.mark.parametrize(
    ("variable", "value", "said"),
    [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "localhost:4318", "is not an http(s) URL; logs not exported"),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://[::1", "is not an http(s) URL; logs not exported"),
        (
            "OTEL_EXPORTER_OTLP_PROTOCOL",
            "grpc",
            "is not one cvdiag sends (http/protobuf, http/json); logs not exported",
        ),
        ("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer sk-live,broken", "entry 2 is not name=value"),
    ],
)
def test_a_bad_setting_is_one_clear_line_and_the_log_still_written(
    variable: str,
    value: str,
    said: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    log = tmp_path / "cvdiag.ndjson"
    monkeypatch.setenv(variable, value)
    with caplog.at_level(logging.WARNING, logger="cvdiag"), capture(tier="verbose", otlp=True, file=log):
        _emit_a_request()
        _emit_a_request()
        assert cvdiag.flush()
    warnings = [r.getMessage() for r in caplog.records if r.name == "cvdiag"]
    assert len(warnings) == 1, warnings
    assert variable in warnings[0] and said in warnings[0]
    assert "the log is still written" in warnings[0]
    assert "sk-live" not in warnings[0]  # a header's value is never repeated
    assert len(log.read_bytes().splitlines()) == 8


def test_the_apps_own_logger_provider_gets_the_records(tmp_path: Path) -> None:
    """An app that set an SDK LoggerProvider gets cvdiag's records through its own
    processors and exporters (a fresh process: the global provider is set once)."""
    code = textwrap.dedent(
        """
        import cvdiag
        from opentelemetry._logs import set_logger_provider
        from opentelemetry.sdk._logs import LoggerProvider
        from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
        exporter = InMemoryLogRecordExporter()
        provider = LoggerProvider()
        provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
        set_logger_provider(provider)
        cvdiag.configure(enabled=True, otlp=True, stdout=False)
        with cvdiag.request_context(test_id="app-1", slug="svc"):
            cvdiag.emit("backend.agent.enter", {"agent_name": "a", "model_id": "m"})
        cvdiag.flush()
        (got,) = exporter.get_finished_logs()
        record = got.log_record
        print(record.event_name, record.body["test_id"], record.attributes["cvdiag.boundary"], record.severity_text)
        print(cvdiag.stats()["otlp_logs_to_app_provider"], cvdiag.stats()["otlp_logs_handed"])
        """
    )
    result = subprocess.run([sys.executable, "-c", code], env=clean_env(), capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[:2] == ["cvdiag.backend.agent.enter app-1 backend.agent.enter INFO", "1 0"]


INERT = textwrap.dedent(
    """
    import sys
    import cvdiag
    from starlette.applications import Starlette
    from starlette.testclient import TestClient
    cvdiag.configure(enabled=True, stdout=False, otlp={otlp})
    app = cvdiag.CvdiagMiddleware(Starlette())
    with TestClient(app) as client:
        client.get("/", headers={{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}})
    cvdiag.flush()
    print(sorted({{m.split(".")[0] for m in sys.modules if m.startswith("opentelemetry")}}),
          "cvdiag.write._otlp" in sys.modules)
    """
)


@pytest.mark.parametrize(("otlp", "expected"), [(False, "[] False"), (True, "[] True")])
def test_no_opentelemetry_is_loaded_and_off_loads_nothing_of_the_export(otlp: bool, expected: str) -> None:
    """Export off: nothing of it is loaded. On: cvdiag's own exporter, still no OpenTelemetry package."""
    env = {**clean_env(), "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{closed_port()}"}
    code = INERT.format(otlp=otlp)
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == expected


def test_spans_nest_under_the_request_with_genai_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = str(tmp_path / "otlp.jsonl")
    test_id = "0190a9c0-1a2b-7c3d-8e4f-5a6b7c8d9e0f"
    with receiver(out) as r:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", r.endpoint)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
        with capture(tier="verbose", otlp_spans=True):
            _emit_a_request(test_id)
            with cvdiag.request_context(test_id=test_id, slug="svc"):
                cvdiag.emit(
                    "backend.tool.call.response",
                    {
                        "tool_name": "forecast",
                        "call_id": "c1",
                        "source": "mcp",
                        "server": "weather",
                        "result_chars": 0,
                        "error_kind": "protocol",
                        "error_excerpt": "Unknown city",
                    },
                    outcome="err",
                    duration_ms=30,
                )
                cvdiag.emit(
                    "backend.response.complete",
                    {"http_status": 200, "content_length": 1, "total_duration_ms": 50, "sse_event_count": 0},
                    outcome="ok",
                    duration_ms=50,
                )
            cvdiag.flush()
            assert _otlp.flush(10)
    assert log_records(out) == []  # spans only: CVDIAG_OTLP is off
    sent = spans(out)
    assert [s["name"] for s in sent] == [
        "chat gpt-4o-mini",
        "invoke_agent planner",
        "HTTP",
        "execute_tool forecast",
        "HTTP",
    ]
    trace = test_id.replace("-", "")
    assert {s["traceId"] for s in sent} == {trace}  # the test's own trace
    llm, agent, request, tool, second = sent
    assert "parentSpanId" not in request
    assert agent["parentSpanId"] == request["spanId"] and llm["parentSpanId"] == agent["spanId"]
    assert (request["kind"], agent["kind"], llm["kind"]) == (2, 1, 3)
    llm_attrs = attributes(llm)
    assert llm_attrs["gen_ai.operation.name"] == "chat"
    assert llm_attrs["gen_ai.request.model"] == "gpt-4o-mini"
    assert (llm_attrs["http.response.status_code"], llm_attrs["http.request.resend_count"]) == (500, 1)
    assert llm_attrs["error.type"] == "server_error" and llm["status"]["code"] == 2
    assert llm_attrs["cvdiag.test_id"] == test_id
    assert int(llm["endTimeUnixNano"]) - int(llm["startTimeUnixNano"]) == 120_000_000
    assert attributes(tool)["gen_ai.tool.name"] == "forecast" and attributes(tool)["error.type"] == "protocol"
    assert tool["parentSpanId"] == second["spanId"] != request["spanId"]


def test_with_openllmetry_active_cvdiags_llm_span_leaves_the_genai_view() -> None:
    """OpenLLMetry's OpenAI instrumentation makes the GenAI span of each call: cvdiag's
    attempt span keeps its HTTP facts but no gen_ai.operation.name, so the call shows once."""
    from opentelemetry.instrumentation.openai import OpenAIInstrumentor

    from cvdiag.write._otlp_spans import Builder

    env = {
        "test_id": "t",
        "slug": "svc",
        "layer": "backend",
        "boundary": "backend.llm.call.response",
        "ts": "2026-11-21T10:00:00.500Z",
        "outcome": "err",
        "duration_ms": 100,
        "metadata": {"provider": "openai", "model": "gpt-4o-mini", "http_status": 503, "api": "chat.completions"},
    }
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument()
    try:
        (span,) = Builder().add([env])
    finally:
        instrumentor.uninstrument()
    (alone,) = Builder().add([env])
    assert alone.name == "chat gpt-4o-mini" and ("gen_ai.operation.name", "chat") in alone.attributes
    assert span.name == "cvdiag llm attempt"
    keys = dict(span.attributes)
    assert "gen_ai.operation.name" not in keys and keys["cvdiag.gen_ai.request.model"] == "gpt-4o-mini"
    assert keys["http.response.status_code"] == 503 and keys["error.type"] == "503"


EXIT = textwrap.dedent(
    """
    import asyncio, threading, time
    import cvdiag
    from starlette.applications import Starlette
    from starlette.routing import Route

    async def hang(request):
        await asyncio.sleep(3600)

    cvdiag.configure(enabled=True, otlp=True, stdout=False)
    app = cvdiag.CvdiagMiddleware(Starlette(routes=[Route("/", hang)]), slug="svc")
    scope = {"type": "http", "method": "GET", "path": "/", "headers": [(b"x-test-id", b"open-at-exit")],
             "query_string": b""}

    async def receive():
        await asyncio.sleep(3600)

    async def send(message):
        pass

    threading.Thread(target=lambda: asyncio.run(app(scope, receive, send)), daemon=True).start()
    with cvdiag.request_context(test_id="before", slug="svc"):
        cvdiag.emit("backend.agent.enter", {"agent_name": "a", "model_id": None})
    time.sleep(0.5)
    """
)


def test_a_request_open_at_exit_is_exported_with_its_terminal_and_the_exit_line(tmp_path: Path) -> None:
    """Process exit: the open request gets its terminal, which is exported too, before the
    one line that accounts for every record."""
    out = str(tmp_path / "otlp.jsonl")
    with receiver(out) as r:
        env = {**clean_env(), "OTEL_EXPORTER_OTLP_ENDPOINT": r.endpoint, "PYTHONPATH": str(Path(__file__).parents[1])}
        result = subprocess.run([sys.executable, "-c", EXIT], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    bodies = [value_of(rec["body"]) for rec in log_records(out)]
    assert [(b["test_id"], b["boundary"]) for b in bodies] == [
        ("before", "backend.agent.enter"),
        ("open-at-exit", "backend.sse.aborted"),
    ]
    assert bodies[1]["metadata"]["termination_kind"] == "shutdown"
