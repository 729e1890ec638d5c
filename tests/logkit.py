"""Hand-made CVDIAG logs for the CLI tests: valid envelopes in every line shape."""

from __future__ import annotations

import gzip
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson

from cvdiag.testing import envelope as wire_envelope

T0 = datetime(2026, 11, 21, 10, 0, 0, tzinfo=UTC)
TID_OK = "0190a9c0-1a2b-7c3d-8e4f-5a6b7c8d9e01"
TID_ABORT = "0190a9c0-1a2b-7c3d-8e4f-5a6b7c8d9e02"
TID_ERROR = "0190a9c0-1a2b-7c3d-8e4f-5a6b7c8d9e03"
TID_HARNESS = "d4-agno-1234"
TID_TOOL = "0190a9c0-1a2b-7c3d-8e4f-5a6b7c8d9e05"
TID_TOOL_OK = "0190a9c0-1a2b-7c3d-8e4f-5a6b7c8d9e06"
#: The excerpt of the failed MCP tool call in ``tool_failure``.
TOOL_EXCERPT = "Unknown city: Atlantis"


def ts(seconds: float) -> str:
    return (T0 + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


_span = iter(range(1, 1 << 30))


def envelope(
    test_id: str,
    boundary: str,
    at: float,
    *,
    outcome: str = "info",
    duration_ms: int | None = None,
    slug: str = "agno",
    metadata: dict[str, Any] | None = None,
    **edges: str,
) -> dict[str, Any]:
    """A valid schema v1 envelope, keys in wire order; edge headers by keyword, ``cf_ray=``."""
    return wire_envelope(
        boundary,
        test_id=test_id,
        ts=ts(at),
        span_id=f"{next(_span):016x}",
        slug=slug,
        demo="chat",
        mono_ns=int(at * 1e9) + 1_000_000,
        duration_ms=duration_ms,
        outcome=outcome,
        edge_headers={name.replace("_", "-"): value for name, value in edges.items()},
        metadata=metadata or {},
    )


def compact(env: dict[str, Any]) -> str:
    return orjson.dumps(env).decode()


def ingress(test_id: str, at: float) -> dict[str, Any]:
    """A ``POST /chat`` with a 42-byte body arriving at ``at``."""
    return envelope(
        test_id, "backend.request.ingress", at, metadata={"method": "POST", "path": "/chat", "content_length": 42}
    )


def happy(test_id: str = TID_OK, start: float = 0.0) -> list[dict[str, Any]]:
    """A streamed request that completes: ingress, agent, LLM, first byte, complete."""
    return [
        ingress(test_id, start),
        envelope(
            test_id, "backend.agent.enter", start + 0.01, metadata={"agent_name": "planner", "model_id": "gpt-4o-mini"}
        ),
        envelope(
            test_id,
            "backend.llm.call.start",
            start + 0.02,
            metadata={"provider": "openai", "model": "gpt-4o-mini", "prompt_token_count_estimate": 12},
        ),
        envelope(
            test_id,
            "backend.llm.call.response",
            start + 0.5,
            outcome="ok",
            duration_ms=480,
            metadata={
                "provider": "openai",
                "model": "gpt-4o-mini",
                "response_token_count": 30,
                "latency_ms": 480,
                "error_class": None,
            },
        ),
        envelope(
            test_id, "backend.sse.first_byte", start + 0.52, outcome="ok", metadata={"delta_ms_from_ingress": 520}
        ),
        envelope(
            test_id,
            "backend.agent.exit",
            start + 0.6,
            outcome="ok",
            duration_ms=590,
            metadata={"terminal_outcome": "ok", "total_duration_ms": 590},
        ),
        envelope(
            test_id,
            "backend.response.complete",
            start + 0.61,
            outcome="ok",
            duration_ms=610,
            metadata={"http_status": 200, "content_length": 900, "total_duration_ms": 610, "sse_event_count": 7},
        ),
    ]


def _tool(test_id: str, at: float, name: str, call_id: str, ms: int, *, source: str, server: str | None = None,
          failed: bool = False) -> list[dict[str, Any]]:  # fmt: skip
    call = {"tool_name": name, "call_id": call_id, "source": source, "server": server}
    ended = {"result_chars": 0 if failed else 64, "error_kind": "protocol" if failed else None,
             "error_excerpt": TOOL_EXCERPT if failed else None}  # fmt: skip
    return [
        envelope(test_id, "backend.tool.call.start", at, metadata=call | {"args_chars": 18, "args_hash": "3f2a9c10"}),
        envelope(test_id, "backend.tool.call.response", at + ms / 1000, outcome="err" if failed else "ok",
                 duration_ms=ms, metadata=call | ended),
    ]  # fmt: skip


def _answer(test_id: str, at: float, tools: list[str]) -> list[dict[str, Any]]:
    model = {"provider": "openai", "model": "gpt-4o-mini", "client": "httpx", "source": "http"}
    said = {"latency_ms": 300, "http_status": 200, "output_chars": 120, "completion_tokens": 30,
            "finish_reason": "tool_calls" if tools else "stop", "tool_calls": len(tools),
            "tool_names": tools or None}  # fmt: skip
    return [
        envelope(test_id, "backend.llm.call.start", at, metadata=model),
        envelope(test_id, "backend.llm.call.response", at + 0.3, outcome="ok", duration_ms=300, metadata=model | said),
    ]


def tool_failure(test_id: str = TID_TOOL, start: float = 4.0, *, failed: bool = True) -> list[dict[str, Any]]:
    """An agent whose MCP tool ``forecast`` answers with an error the model is handed
    (``failed``; else it works), then answers anyway: HTTP 200, every exchange healthy."""
    return [
        envelope(test_id, "backend.request.ingress", start, metadata={"method": "POST", "path": "/chat"}),
        envelope(test_id, "backend.agent.enter", start + 0.01, metadata={"agent_name": "weather", "model_id": None}),
        *_answer(test_id, start + 0.02, ["forecast", "clock"]),
        *_tool(test_id, start + 0.33, "forecast", "call_fc1", 240, source="mcp", server="weather", failed=failed),
        *_tool(test_id, start + 0.34, "clock", "call_ck1", 20, source="wire"),
        *_answer(test_id, start + 0.6, []),
        envelope(test_id, "backend.sse.first_byte", start + 0.91, outcome="ok",
                 metadata={"delta_ms_from_ingress": 910}),
        envelope(test_id, "backend.agent.exit", start + 0.95, outcome="ok", duration_ms=940,
                 metadata={"terminal_outcome": "ok", "total_duration_ms": 940}),
        envelope(test_id, "backend.response.complete", start + 0.96, outcome="ok", duration_ms=960,
                 metadata={"http_status": 200, "content_length": 700, "total_duration_ms": 960, "sse_event_count": 5}),
    ]  # fmt: skip


def aborted(test_id: str = TID_ABORT, start: float = 1.0) -> list[dict[str, Any]]:
    """The client hangs up mid-stream, after a silence of several seconds."""
    return [
        ingress(test_id, start),
        envelope(test_id, "backend.sse.first_byte", start + 0.1, outcome="ok", metadata={"delta_ms_from_ingress": 100}),
        envelope(
            test_id,
            "backend.sse.aborted",
            start + 5.3,
            outcome="err",
            duration_ms=5300,
            metadata={"termination_kind": "rst", "bytes_before_abort": 120},
        ),
    ]


def errored(test_id: str = TID_ERROR, start: float = 2.0) -> list[dict[str, Any]]:
    return [
        envelope(
            test_id,
            "backend.request.ingress",
            start,
            metadata={"method": "GET", "path": "/boom", "content_length": None},
        ),
        envelope(
            test_id,
            "backend.error.caught",
            start + 0.05,
            outcome="err",
            duration_ms=50,
            metadata={
                "exception_type": "RuntimeError",
                "message_scrubbed": "boom",
                "stack_brief": [{"file": "app.py", "line": 3}],
                "truncated": False,
            },
        ),
    ]


def harness(test_id: str = TID_HARNESS, start: float = 3.0) -> list[dict[str, Any]]:
    """A harness id adopted by the backend: probe and backend lines join."""
    return [
        envelope(
            test_id,
            "probe.message.send",
            start,
            slug="agno",
            metadata={"message_index": 0, "char_count": 5, "demo": "chat"},
        ),
        *happy(test_id, start + 0.05),
    ]


def docker_line(text: str, at: float) -> str:
    return json.dumps({"log": text + "\n", "stream": "stdout", "time": ts(at)[:-1] + "123456Z"}, separators=(",", ":"))


def every_shape() -> tuple[list[str], dict[str, int]]:
    """One log with each line shape of spec section 1, plus noise and malformed lines.

    Returns the lines and the expected number of envelopes per test id.
    """
    ok, ab, er, hn = happy(), aborted(), errored(), harness()
    lines = [
        "2026-11-21 10:00:00,000 INFO uvicorn: Started server process",
        f"CVDIAG {compact(ok[0])}",
        f"2026-11-21T10:00:00.010Z INFO app CVDIAG {compact(ok[1])}",
        f"backend-1  | CVDIAG {compact(ok[2])}",
        f"\x1b[32mINFO\x1b[0m \x1b[2mCVDIAG {compact(ok[3])}\x1b[0m",
        f"CVDIAG_EVENT {compact(ok[4])}",
        compact(ok[5]),
        docker_line(f"CVDIAG {compact(ok[6])}", 0.61),
        f"2026-11-21T10:00:01.000000000Z stdout F CVDIAG {compact(ab[0])}",
        f"2026-11-21T10:00:01.100000000Z stdout F {compact(ab[1])}",
        f"CVDIAG {compact(ab[2])}\r",
        docker_line(compact(er[0]), 2.0),
        f"CVDIAG {compact(er[1])}",
        f"2026-11-21 10:00:02,060 ERROR app request failed test_id={TID_ERROR}",
        f"CVDIAG component=backend boundary=ingress run_id=r1 slug=agno header_present=true "
        f"header_value_prefix=0190 hop=1 status=ok test_id={TID_ERROR} error=none",
        "CVDIAG disabled for this worker",  # mentions the prefix, is not an envelope
        'CVDIAG {"schema_version":1,"test_id":"cut-off',  # truncated
        "CVDIAG {not json at all}",
        *(f"CVDIAG {compact(e)}" for e in hn),
    ]
    counts = {TID_OK: len(ok), TID_ABORT: len(ab), TID_ERROR: len(er), TID_HARNESS: len(hn)}
    return lines, counts


def write(path: Path, lines: list[str], *, gz: bool = False) -> Path:
    data = ("\n".join(lines) + "\n").encode()
    path.write_bytes(gzip.compress(data) if gz else data)
    return path
