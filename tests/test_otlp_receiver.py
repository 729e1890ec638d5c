"""``cvdiag receive`` and its receiver (issue 33 item 4): OTLP/HTTP from other processes,
protobuf (opentelemetry-proto) and JSON, written as the Collector's file format; bounded,
every refusal counted."""

from __future__ import annotations

import gzip
import http.client
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest
from cvdiag_cli import command
from otlpkit import attributes, documents, log_records, receiver, spans, value_of
from serverkit import free_port

from cvdiag.face._receiver import Receiver

TRACE = bytes.fromhex("0af7651916cd43dd8448eb211c80319c")
SPAN = bytes.fromhex("b7ad6b7169203331")


def _protobuf_logs() -> bytes:
    """What a real SDK sends: built with opentelemetry-proto's own classes."""
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
    from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord, ResourceLogs, ScopeLogs
    from opentelemetry.proto.resource.v1.resource_pb2 import Resource

    record = LogRecord(
        time_unix_nano=1_700_000_000_000_000_000,
        severity_number=17,
        body=AnyValue(string_value="tool_result"),
        attributes=[
            KeyValue(key="event.name", value=AnyValue(string_value="codex.tool_result")),
            KeyValue(key="success", value=AnyValue(bool_value=False)),
        ],
        trace_id=TRACE,
        span_id=SPAN,
    )
    resource = Resource(attributes=[KeyValue(key="test.id", value=AnyValue(string_value="t-42"))])
    request = ExportLogsServiceRequest(
        resource_logs=[ResourceLogs(resource=resource, scope_logs=[ScopeLogs(log_records=[record])])]
    )
    return request.SerializeToString()


def _protobuf_spans() -> bytes:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
    from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span, Status

    span = Span(
        trace_id=TRACE,
        span_id=SPAN,
        parent_span_id=bytes.fromhex("00f067aa0ba902b7"),
        name="execute_tool lookup",
        kind=Span.SPAN_KIND_INTERNAL,
        start_time_unix_nano=1,
        end_time_unix_nano=2,
        status=Status(code=Status.STATUS_CODE_ERROR, message="boom"),
    )
    return ExportTraceServiceRequest(
        resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=[span])])]
    ).SerializeToString()


def _post(endpoint: str, path: str, body: bytes, content_type: str, encoding: str | None = None) -> tuple[int, bytes]:
    host, port = endpoint.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    headers = {"Content-Type": content_type}
    if encoding:
        headers["Content-Encoding"] = encoding
    conn.request("POST", path, body=body, headers=headers)
    response = conn.getresponse()
    data = response.read()
    conn.close()
    return response.status, data


def test_protobuf_and_json_become_the_collectors_file_format(tmp_path: Path) -> None:
    out = str(tmp_path / "otlp.jsonl")
    json_logs = {
        "resourceLogs": [
            {
                "resource": {"attributes": [{"key": "test.id", "value": {"stringValue": "t-43"}}]},
                "scopeLogs": [{"logRecords": [{"timeUnixNano": "5", "body": {"stringValue": "api_request"}}]}],
            }
        ]
    }
    with receiver(out) as r:
        assert _post(r.endpoint, "/v1/logs", _protobuf_logs(), "application/x-protobuf")[0] == 200
        assert _post(r.endpoint, "/v1/traces", _protobuf_spans(), "application/x-protobuf")[0] == 200
        status, answer = _post(r.endpoint, "/v1/logs", orjson.dumps(json_logs), "application/json")
        assert (status, answer) == (200, b"{}")
        gz = gzip.compress(orjson.dumps(json_logs))
        assert _post(r.endpoint, "/v1/logs", gz, "application/json", "gzip")[0] == 200
    docs = documents(out)
    assert [next(iter(d)) for d in docs] == ["resourceLogs", "resourceSpans", "resourceLogs", "resourceLogs"]
    first = log_records(out)[0]
    assert first["_resource"]["test.id"] == "t-42"
    assert (first["traceId"], first["spanId"]) == (TRACE.hex(), SPAN.hex())  # hex, as OTLP/JSON has it
    assert (first["severityNumber"], first["timeUnixNano"]) == (17, "1700000000000000000")
    assert attributes(first) == {"event.name": "codex.tool_result", "success": False}
    assert value_of(first["body"]) == "tool_result"
    (span,) = spans(out)
    assert (span["parentSpanId"], span["kind"], span["status"]) == (
        "00f067aa0ba902b7",
        1,
        {"code": 2, "message": "boom"},
    )
    assert docs[2] == json_logs
    assert r.counts.written == 4 and r.counts.records == 4


@pytest.mark.parametrize(
    ("body", "content_type", "encoding", "status", "counted"),
    [
        (b"\xff\xfe not protobuf", "application/x-protobuf", None, 400, "bad_body"),
        (b"{not json", "application/json", None, 400, "bad_body"),
        (b'{"resourceLogs": 3}', "application/json", None, 400, "bad_body"),
        (b"not gzip", "application/json", "gzip", 400, "bad_body"),
        (gzip.compress(b"[" * 5000 + b"]" * 5000), "application/json", "br", 400, "bad_body"),
        (gzip.compress(b" " * 3_000_000), "application/json", "gzip", 400, "bad_body"),
        (b'{"resourceLogs": [{"scopeLogs": [{"logRecords": 5}]}]}', "application/json", None, 400, "bad_body"),
    ],
)
def test_bad_bodies_are_refused_and_counted(
    body: bytes, content_type: str, encoding: str | None, status: int, counted: str, tmp_path: Path
) -> None:
    out = str(tmp_path / "otlp.jsonl")
    with receiver(out, max_body=2_000_000) as r:
        got, answer = _post(r.endpoint, "/v1/logs", body, content_type, encoding)
    assert got == status and answer
    assert getattr(r.counts, counted) == 1 and r.counts.written == 0
    assert Path(out).read_bytes() == b""


def test_a_body_over_the_limit_is_refused_unread(tmp_path: Path) -> None:
    out = str(tmp_path / "otlp.jsonl")
    with receiver(out, max_body=1000) as r:
        status, _ = _post(r.endpoint, "/v1/logs", b"x" * 5000, "application/json")
    assert status == 413 and r.counts.too_big == 1


def test_a_sender_that_stops_mid_body_is_cut_off_and_counted(tmp_path: Path) -> None:
    out = str(tmp_path / "otlp.jsonl")
    with receiver(out, timeout_s=0.5) as r:
        with socket.create_connection((r.host, r.port)) as s:
            s.sendall(
                b"POST /v1/logs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"
            )
            s.shutdown(socket.SHUT_WR)
            s.settimeout(5)
            s.recv(100)
        # the receiver is not stuck: the next request is served
        assert _post(r.endpoint, "/v1/logs", b'{"resourceLogs": []}', "application/json")[0] == 200
    assert r.counts.bad_body == 1


def test_a_full_write_queue_says_retry_rather_than_wait(tmp_path: Path) -> None:
    out = str(tmp_path / "otlp.jsonl")
    r = Receiver(out, queue_size=1)
    r._write = lambda: None  # type: ignore[method-assign]  # a writer that never drains
    r.start()
    try:
        body = orjson.dumps({"resourceLogs": [{"scopeLogs": [{"logRecords": [{}]}]}]})
        statuses = [_post(r.endpoint, "/v1/logs", body, "application/json")[0] for _ in range(3)]
    finally:
        r._server.shutdown()
        r._server.server_close()
    assert statuses == [200, 503, 503]
    assert r.counts.queue_full == 2


def test_cvdiag_receive_serves_until_terminated_and_says_what_it_got(tmp_path: Path) -> None:
    out = tmp_path / "got" / "otlp.jsonl"
    port = free_port()
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[1]), os.environ.get("PYTHONPATH", "")]),
    }
    proc = subprocess.Popen(
        [*command(), "receive", "--port", str(port), "--out", str(out)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        first = proc.stdout.readline()  # type: ignore[union-attr]
        assert (
            first.strip()
            == f"cvdiag receive: listening; export with OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:{port}"
        )
        assert _post(f"http://127.0.0.1:{port}", "/v1/logs", _protobuf_logs(), "application/x-protobuf")[0] == 200
        assert _post(f"http://127.0.0.1:{port}", "/v1/nothing", b"", "application/json")[0] == 404
    finally:
        time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        rest, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
    assert rest.strip() == (
        "cvdiag receive: 2 requests, 1 written (1 records), 0 ignored (metrics), 0 refused "
        "(too big 0, unreadable 0, queue full 0, too many connections 0)"
    )
    assert log_records(str(out))[0]["_resource"]["test.id"] == "t-42"


def test_cvdiag_receive_on_a_port_in_use_is_one_line(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = subprocess.run(
            [*command(), "receive", "--port", str(port), "--out", str(tmp_path / "x.jsonl")],
            capture_output=True,
            text=True,
            timeout=30,
            env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])},
        )
    assert result.returncode == 1
    assert result.stderr.startswith(f"cvdiag receive: cannot listen on 127.0.0.1:{port}: ")
    assert len(result.stderr.strip().splitlines()) == 1


def test_the_receiver_needs_no_server_of_cvdiags_to_import() -> None:
    heavy = ("opentelemetry", "google", "starlette", "cvdiag.write")
    code = f"import cvdiag.face._receiver, sys; print(sorted(m for m in sys.modules if m.startswith({heavy!r})))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.stdout.strip() == "[]", result.stderr
