"""Build the labelled corpus that ``tests/test_diagnose.py`` and ``tools/eval_diagnose.py`` score.

    python tools/make_diagnose_corpus.py hand      # -> tests/corpus/hand.jsonl
    python tools/make_diagnose_corpus.py backend   # -> tests/corpus/backend.jsonl (drives the real emitter)
    python tools/make_diagnose_corpus.py spans     # -> tests/corpus/spans.jsonl (OTLP fixtures, read as files are)
    python tools/make_diagnose_corpus.py all

A corpus file is JSON Lines, one scenario per line:
``{"name", "label", "source", "thresholds": {...} | absent, "log_end": ts | absent, "events": [envelope, ...]}``.
``label`` is the class a careful reader would give from these events alone; ``thresholds``
are the ``Thresholds`` fields the scenario was labelled with (slow scenarios run with a
small ``slow_s`` so they take a second, not a minute); ``log_end`` is the ISO time of the
last line of the log the scenario came from.

Hand-built scenarios cover the layers cvdiag does not emit (probe, aimock, edge headers).
Backend scenarios run Starlette apps with the real middleware and scopes under uvicorn in
a subprocess (``tests/corpus_server.py``, which the live tests share), drive them with
httpx (including a client that hangs up mid-stream) and ``kill -9`` the server
mid-request; the NDJSON file sink is the log.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, NamedTuple

from cvdiag.testing import envelope

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "corpus"
sys.path.insert(0, str(ROOT / "tests"))

from corpus_server import (  # noqa: E402
    SLOW_S,
    Driver,
    Server,
    give_up_before_first_byte,
    hang_up_after_first_chunk,
    kill_when,
    read_log,
    read_whole,
)

_BASE = datetime(2026, 11, 21, 10, 0, 0, tzinfo=UTC)


def _ts(seconds: float) -> str:
    return (_BASE + timedelta(seconds=seconds)).isoformat(timespec="milliseconds").replace("+00:00", "Z")


# -- hand-built scenarios ------------------------------------------------------------------
# One row of HAND_PLAN per scenario: its events in the order a reader would narrate them.
# A step is an Event, a list of them (a fragment: a harness run, a backend request) or a
# dict, which is a malformed line kept as it is.

SHOP = "https://shop.example.com"
CHAT_URL = f"{SHOP}/chat"
STREAM_URL = f"{SHOP}/chat/stream"
CLAUDE = "claude-3-5-sonnet-20241022"


class Event(NamedTuple):
    """One envelope of a hand-built scenario; ``_hand_envelope`` fills in the other fields."""

    t: float
    boundary: str
    metadata: dict[str, Any]
    outcome: str | None = None  # None: the boundary's usual outcome (``_outcome``)
    duration_ms: int | None = None
    edge: dict[str, str] | None = None


Step = Event | list[Event] | dict[str, Any]


class Hand(NamedTuple):
    """A hand-built scenario: its name, the class a careful reader gives it, its events."""

    name: str
    label: str
    steps: tuple[Step, ...]
    thresholds: dict[str, float] | None = None
    log_end: float | None = None


# Events whose metadata has the same shape in many scenarios.


def ingress(t: float, edge: dict[str, str] | None = None) -> Event:
    return Event(
        t, "backend.request.ingress", {"method": "POST", "path": "/chat/stream", "content_length": 120}, edge=edge
    )


def agent_enter(t: float, agent: str = "shopper", model: str | None = "gpt-4o-mini") -> Event:
    return Event(t, "backend.agent.enter", {"agent_name": agent, "model_id": model})


def agent_exit(t: float, outcome: str, total_ms: int) -> Event:
    return Event(t, "backend.agent.exit", {"terminal_outcome": outcome, "total_duration_ms": total_ms})


def llm_start(t: float, estimate: int | None = 300, model: str = "gpt-4o-mini", provider: str = "openai") -> Event:
    metadata = {"provider": provider, "model": model, "prompt_token_count_estimate": estimate}
    return Event(t, "backend.llm.call.start", metadata)


def llm_failed(
    t: float,
    latency_ms: int,
    error_class: str,
    model: str = "gpt-4o-mini",
    provider: str = "openai",
    outcome: str | None = None,
) -> Event:
    metadata = {
        "provider": provider,
        "model": model,
        "response_token_count": None,
        "latency_ms": latency_ms,
        "error_class": error_class,
    }
    return Event(t, "backend.llm.call.response", metadata, outcome, latency_ms)


def heartbeat(t: float, elapsed_ms: int) -> Event:
    return Event(t, "backend.llm.call.heartbeat", {"elapsed_ms_since_start": elapsed_ms})


def first_byte(t: float, delta_ms: int, edge: dict[str, str] | None = None) -> Event:
    return Event(t, "backend.sse.first_byte", {"delta_ms_from_ingress": delta_ms}, edge=edge)


def sse_event(t: float, size: int, sequence_num: int) -> Event:
    metadata = {"event_type": "message", "payload_size_bytes": size, "sequence_num": sequence_num}
    return Event(t, "backend.sse.event", metadata)


def sse_aborted(t: float, kind: str, bytes_before: int | None, duration_ms: int) -> Event:
    metadata = {"termination_kind": kind, "bytes_before_abort": bytes_before}
    return Event(t, "backend.sse.aborted", metadata, duration_ms=duration_ms)


def complete(
    t: float, status: int, length: int, total_ms: int, sse_events: int = 0, edge: dict[str, str] | None = None
) -> Event:
    metadata = {
        "http_status": status,
        "content_length": length,
        "total_duration_ms": total_ms,
        "sse_event_count": sse_events,
    }
    return Event(t, "backend.response.complete", metadata, duration_ms=total_ms, edge=edge)


def error_caught(t: float, exception_type: str, message: str, duration_ms: int, stack: list | None = None) -> Event:
    metadata = {
        "exception_type": exception_type,
        "message_scrubbed": message,
        "stack_brief": stack or [],
        "truncated": False,
    }
    return Event(t, "backend.error.caught", metadata, duration_ms=duration_ms)


def network_response(t: float, url: str, status: int, length: int, duration_ms: int, edge: dict[str, str]) -> Event:
    metadata = {"url": url, "status": status, "content_length": length, "duration_ms": duration_ms}
    return Event(t, "probe.network.response", metadata, edge=edge)


def network_error(
    t: float, error_class: str, status: int | None = None, url: str = STREAM_URL, edge: dict[str, str] | None = None
) -> Event:
    return Event(
        t, "probe.network.error", {"url": url, "error_class": error_class, "response_status": status}, edge=edge
    )


def console_error(t: float, message: str, source: str, line_col: str, level: str = "error") -> Event:
    metadata = {"level": level, "message_scrubbed": message, "source_file": source, "line_col": line_col}
    return Event(t, "probe.console.error", metadata)


def alternate_content(t: float, histogram: dict[str, int]) -> Event:
    return Event(t, "probe.dom.alternate_content", {"child_type_histogram": histogram})


def first_token(t: float) -> Event:
    return Event(t, "probe.dom.firsttoken", {"delta_ms_from_start": 1500, "text_length": 12})


def probe_exit(t: float, outcome: str = "ok", first_token_ms: int | None = 1500, **metadata: Any) -> Event:
    facts = {
        "terminal_outcome": outcome,
        "total_duration_ms": int(t * 1000),
        "sse_event_count": 0 if first_token_ms is None else 12,
        "first_token_delta_ms": first_token_ms,
        "failure_classifier": None,
    }
    return Event(t, "probe.exit", facts | metadata)


def match_decision(t: float, fixture_id: str | None, score: float, reasons: Any) -> Event:
    metadata = {"fixture_id": fixture_id, "match_score": score, "reject_reasons": reasons}
    return Event(t, "aimock.match.decision", metadata)


def aimock_complete(t: float, status: int, total_bytes: int, total_ms: int, chunks: int) -> Event:
    metadata = {"http_status": status, "total_bytes": total_bytes, "total_duration_ms": total_ms, "chunk_count": chunks}
    return Event(t, "aimock.response.complete", metadata)


# Fragments: a harness run and a backend request, to keep each row short.


def probe_start() -> list[Event]:
    return [
        Event(0.0, "probe.start", {"url": CHAT_URL, "viewport": "1280x720"}),
        Event(0.8, "probe.navigate.complete", {"url": CHAT_URL, "nav_ms": 800, "http_status": 200}),
        Event(1.0, "probe.message.send", {"message_index": 0, "char_count": 42, "demo": "chat"}),
    ]


def agent_llm_ok(t: float, latency: float = 1.2, tokens: int | None = 48) -> list[Event]:
    metadata = {
        "provider": "openai",
        "model": "gpt-4o-mini",
        "response_token_count": tokens,
        "latency_ms": int(latency * 1000),
        "error_class": None,
        "completion_tokens": tokens,
    }
    return [
        agent_enter(t),
        llm_start(t + 0.01),
        Event(t + 0.01 + latency, "backend.llm.call.response", metadata, duration_ms=int(latency * 1000)),
    ]


def stream_ok(t: float, events: int = 12, edge: dict[str, str] | None = None) -> list[Event]:
    return [
        first_byte(t, int(t * 1000), edge),
        *(sse_event(t + 0.01 * (i + 1), 40, i) for i in range(min(events, 3))),
        agent_exit(t + 0.2, "ok", 1500),
        complete(t + 0.21, 200, 480, 1700, events, edge),
    ]


def happy_backend(t: float = 1.1, edge: dict[str, str] | None = None) -> list[Event]:
    return [ingress(t, edge), *agent_llm_ok(t + 0.01), *stream_ok(t + 1.3, edge=edge)]


def harness_saw_tokens(t: float) -> list[Event]:
    return [
        Event(t, "probe.dom.container.mount", {"delta_ms_from_start": 1400}),
        first_token(t + 0.1),
        probe_exit(t + 1.0),
    ]


# Agent-level events: tool calls, answers with a finish reason, a framework's exception.


def tool_call(
    t: float,
    name: str,
    source: str = "wire",
    ms: int = 40,
    outcome: str = "ok",
    kind: str | None = None,
    excerpt: str | None = None,
    server: str | None = None,
    args_hash: str = "5f1c9a02",
    answered: bool = True,
) -> list[Event]:
    """A tool call's start and (when ``answered``) its response ``ms`` later."""
    call = {"tool_name": name, "call_id": f"call_{int(t * 1000)}", "source": source, "server": server}
    start = Event(t, "backend.tool.call.start", call | {"args_chars": 24, "args_hash": args_hash})
    if not answered:
        return [start]
    result = {"result_chars": 0 if excerpt else 180, "error_kind": kind, "error_excerpt": excerpt}
    return [start, Event(t + ms / 1000, "backend.tool.call.response", call | result, outcome, ms)]


def output_tool_failed(t: float) -> list[Event]:
    """pydantic-ai's output tool, its arguments failing the schema (a retry prompt)."""
    return tool_call(
        t, "final_result", kind="reported", outcome="err", excerpt="1 validation error: city Field required"
    )


def answer(
    t: float,
    latency: float = 0.8,
    finish: str = "stop",
    tools: tuple[str, ...] = (),
    valid: bool | None = None,
    model: str = "gpt-4o-mini",
    provider: str = "openai",
    schema: bool = False,
) -> list[Event]:
    """An LLM call that answered ok: text, or the tools it asks for."""
    start = llm_start(t)
    start.metadata.update(provider=provider, model=model, output_schema=schema or None)
    metadata = {
        "provider": provider,
        "model": model,
        "latency_ms": int(latency * 1000),
        "completion_tokens": 64,
        "finish_reason": finish,
        "output_chars": 240,
        "tool_calls": len(tools),
        "tool_names": list(tools) or None,
        "output_valid": valid,
    }
    return [start, Event(t + latency, "backend.llm.call.response", metadata, duration_ms=int(latency * 1000))]


def llm_refused(t: float, status: int, error_type: str | None, error_class: str, model: str = "gpt-4o-mini",
                provider: str = "openai") -> list[Event]:  # fmt: skip
    """An LLM call the provider answered with an HTTP error."""
    failed = llm_failed(t + 0.2, 200, error_class, model, provider)
    failed.metadata.update(http_status=status, error_type=error_type, source="http", attempt=0)
    return [llm_start(t, model=model, provider=provider), failed]


def agent_failed(t: float, error_class: str, message: str | None, total_ms: int = 900) -> Event:
    metadata = {"terminal_outcome": "error", "total_duration_ms": total_ms, "error_class": error_class,
                "error_message": message}  # fmt: skip
    return Event(t, "backend.agent.exit", metadata)


# Lines read from OpenTelemetry spans (source otel, issue 33): what cvdiag.contract.otel makes.


def span_tool(
    t: float, name: str, ms: int, outcome: str = "ok", error_class: str | None = None, excerpt: str | None = None,
    call_id: str | None = None, handed_back: bool | None = None, kind: str = "function",
    convention: str = "genai",
) -> Event:  # fmt: skip
    """A tool call's span, ended at ``t`` after ``ms``."""
    error_kind = "raised" if outcome == "err" else "timeout" if error_class == "TimeoutError" else None
    metadata = {"tool_name": name, "call_id": call_id, "source": "otel", "kind": kind,
                "error_kind": error_kind, "error_class": error_class, "error_excerpt": excerpt,
                "handed_back": handed_back, "otel_convention": convention}  # fmt: skip
    return Event(t, "backend.tool.call.response", {k: v for k, v in metadata.items() if v is not None}, outcome, ms)


def span_agent_exit(
    t: float, agent: str, error_class: str | None = None, message: str | None = None,
    limit: tuple[str, int] | None = None, ms: int = 900, convention: str = "genai",
) -> Event:  # fmt: skip
    metadata = {"terminal_outcome": "error" if error_class else "ok", "total_duration_ms": ms,
                "error_class": error_class, "error_message": message, "agent_name": agent, "source": "otel",
                "limit_name": limit[0] if limit else None, "limit_value": limit[1] if limit else None,
                "otel_convention": convention}  # fmt: skip
    return Event(t, "backend.agent.exit", {k: v for k, v in metadata.items() if v is not None}, duration_ms=ms)


def span_output(t: float, agent: str, valid: bool, error_class: str | None = None, excerpt: str | None = None,
                attempts: int | None = None, schema: str | None = None) -> Event:  # fmt: skip
    metadata = {"agent_name": agent, "valid": valid, "schema_name": schema, "attempts": attempts,
                "error_class": error_class, "error_excerpt": excerpt, "source": "otel",
                "otel_convention": "genai"}  # fmt: skip
    return Event(t, "backend.agent.output", {k: v for k, v in metadata.items() if v is not None},
                 "ok" if valid else "err")  # fmt: skip


def span_llm_failed(t: float, error_class: str, ms: int = 5, status: int | None = None) -> Event:
    metadata = {"provider": "openai", "model": "gpt-4o-mini", "latency_ms": ms, "error_class": error_class,
                "http_status": status, "source": "otel", "otel_convention": "openllmetry"}  # fmt: skip
    return Event(t, "backend.llm.call.response", {k: v for k, v in metadata.items() if v is not None}, "err", ms)


def json_ok(t: float, total_ms: int = 900) -> list[Event]:
    """The agent exits ok and the endpoint answers 200 with a JSON body."""
    return [agent_exit(t, "ok", total_ms), complete(t + 0.01, 200, 310, total_ms + 10)]


def failed_500(t: float, exc: str, message: str) -> list[Event]:
    """The endpoint turned an exception into a 500."""
    return [
        first_byte(t, int(t * 1000)),
        complete(t + 0.01, 500, 21, int(t * 1000)),
        error_caught(t + 0.02, exc, message, int(t * 1000)),
    ]


HAND_PLAN: tuple[Hand, ...] = (
    # probe-runner-crash: the harness broke, whatever the backend did.
    Hand("runner-target-closed", "probe-runner-crash", (
        probe_start(),
        happy_backend(),
        probe_exit(4.0, "error", None,
                   failure_classifier="TargetClosedError: Target page, context or browser has been closed"),
    )),
    Hand("runner-page-crashed", "probe-runner-crash", (
        probe_start(), network_error(1.5, "Page crashed"), probe_exit(2.0, "error", None),
    )),
    Hand("runner-protocol-error", "probe-runner-crash", (
        probe_start(),
        happy_backend(),
        probe_exit(4.0, "error", None, failure_classifier="Protocol error (Runtime.callFunctionOn): Session closed."),
    )),
    Hand("runner-oom", "probe-runner-crash", (
        probe_start(),
        ingress(1.1),
        probe_exit(9.0, "error", None, failure_classifier="FATAL ERROR: JavaScript heap out of memory"),
    )),
    Hand("runner-browser-disconnected", "probe-runner-crash", (
        probe_start(), network_error(1.2, "BrowserDisconnectedError", url=CHAT_URL),
    )),
    Hand("runner-oomkilled-with-llm-error", "probe-runner-crash", (
        probe_start(),
        ingress(1.1),
        llm_start(1.2, 10),
        llm_failed(1.5, 300, "APIConnectionError"),
        probe_exit(3.0, "error", None, failure_classifier="chromium OOMKilled"),
    )),
    # edge-interference, one per sub-cause.
    Hand("edge-challenge", "edge-interference", (
        probe_start(),
        network_response(1.3, STREAM_URL, 403, 9000, 80,
                         {"cf-ray": "8f1a2b3c4d5e6f70-FRA", "cf-mitigated": "challenge", "server": "cloudflare"}),
        probe_exit(3.0, "error", None),
    )),
    Hand("edge-jschallenge", "edge-interference", (
        probe_start(),
        Event(1.3, "probe.navigate.complete", {"url": CHAT_URL, "nav_ms": 300, "http_status": 503},
              edge={"cf-ray": "8f1a2b3c4d5e6f71-AMS", "cf-mitigated": "JSChallenge"}),
        probe_exit(3.0, "error", None),
    )),
    Hand("edge-block-with-backend", "edge-interference", (
        probe_start(),
        happy_backend(),
        network_response(2.9, f"{SHOP}/api/cart", 403, 100, 20,
                         {"cf-ray": "8f1a2b3c4d5e6f72-CDG", "cf-mitigated": "block"}),
        probe_exit(4.0, "error"),
    )),
    Hand("edge-rate-limited", "edge-interference", (
        probe_start(),
        network_response(1.2, STREAM_URL, 429, 0, 15, {"cf-ray": "8f1a2b3c4d5e6f73-LHR", "retry-after": "30"}),
        probe_exit(2.0, "error", None),
    )),
    Hand("edge-rate-limited-network-error", "edge-interference", (
        probe_start(),
        network_error(1.2, "HTTPError", 503, edge={"retry-after": "120", "server": "railway-edge"}),
        probe_exit(2.0, "error", None),
    )),
    Hand("edge-varnish-failed", "edge-interference", (
        probe_start(),
        ingress(1.1, {"via": "1.1 varnish (Varnish/7.4)"}),
        first_byte(1.2, 100),
        sse_aborted(31.2, "timeout", 0, 30100),
        probe_exit(32.0, "timeout", None),
    )),
    Hand("edge-squid-on-probe", "edge-interference", (
        probe_start(),
        network_response(1.2, STREAM_URL, 502, 300, 40, {"via": "1.1 squid-proxy.corp:3128 (squid/5.7)"}),
        probe_exit(2.0, "error", None),
    )),
    Hand("edge-two-rays-backend", "edge-interference", (
        probe_start(),
        ingress(1.1, {"cf-ray": "8f1a2b3c4d5e6f74-FRA"}),
        ingress(11.1, {"cf-ray": "8f1a2b3c4d5e6f75-FRA"}),
        error_caught(11.2, "RuntimeError", "duplicate order", 100),
        probe_exit(12.0, "error", None),
    )),
    # llm-error: the provider failed; the endpoint's visible effect does not matter.
    Hand("llm-error-rate-limit-relayed", "llm-error", (
        probe_start(),
        ingress(1.1),
        llm_start(1.2),
        llm_failed(1.5, 300, "RateLimitError"),
        complete(1.51, 429, 60, 410, edge={"retry-after": "20", "cf-ray": "8f1a2b3c4d5e6f76-IAD"}),
        network_response(1.6, STREAM_URL, 429, 60, 500, {"retry-after": "20", "cf-ray": "8f1a2b3c4d5e6f77-FRA"}),
        probe_exit(2.0, "error", None),
    )),
    Hand("llm-error-outer-500", "llm-error", (
        ingress(0.0),
        agent_enter(0.1, model=CLAUDE),
        llm_start(0.1, 900, CLAUDE, "anthropic"),
        llm_failed(2.1, 2000, "OverloadedError", CLAUDE, "anthropic"),
        agent_exit(2.1, "error", 2000),
        first_byte(2.12, 2120),
        complete(2.13, 500, 21, 2130),
        error_caught(2.14, "OverloadedError", "overloaded", 2140),
    )),
    Hand("llm-error-handled-by-app", "llm-error", (
        ingress(0.0),
        llm_start(0.1, None, "llama-3.1-8b-instant", "groq"),
        llm_failed(0.4, 300, "APITimeoutError", "llama-3.1-8b-instant", "groq"),
        stream_ok(0.5, events=1),
    )),
    # provider-empty: the call answered ok with nothing, and nothing was streamed.
    Hand("provider-empty-zero-tokens", "provider-empty", (
        ingress(0.0),
        agent_llm_ok(0.01, latency=0.8, tokens=0),
        first_byte(0.9, 900),
        agent_exit(1.0, "ok", 990),
        complete(1.01, 200, 0, 1010),
    )),
    Hand("provider-empty-null-tokens-with-probe", "provider-empty", (
        probe_start(),
        ingress(1.1),
        agent_llm_ok(1.11, latency=0.5, tokens=None),
        complete(1.7, 200, 0, 600),
        alternate_content(2.0, {"div": 1}),
        probe_exit(12.0, "error", None),
    )),
    # The LLM layer is absent at the default tier: an empty answer is never guessed.
    Hand("provider-empty-default-tier-has-no-llm", "ok", (
        agent_enter(0.0), agent_exit(0.9, "ok", 900), complete(0.91, 200, 0, 910),
    )),
    Hand("json-endpoint-without-token-counts", "ok", (
        ingress(0.0),
        agent_llm_ok(0.01, latency=0.5, tokens=None),
        agent_exit(0.6, "ok", 590),
        complete(0.61, 200, 85, 610),
    )),
    # aimock-fixture-mismatch: only when aimock itself logged.
    Hand("aimock-no-fixture", "aimock-fixture-mismatch", (
        Event(0.0, "aimock.request.ingress",
              {"path": "/v1/chat/completions", "content_length": 800, "match_keys": ["model", "last_user_message"]}),
        match_decision(0.01, None, 0.2, ["last_user_message differs"]),
        aimock_complete(0.02, 404, 0, 20, 0),
    )),
    Hand("aimock-absent-fixture-key-aborted", "aimock-fixture-mismatch", (
        Event(0.0, "aimock.request.ingress", {"path": "/v1/messages", "content_length": 500, "match_keys": []}),
        Event(0.01, "aimock.match.decision", {"match_score": 0.0}),
        Event(0.5, "aimock.response.aborted", {"termination_kind": "fin_premature", "bytes_before_abort": 6}),
    )),
    Hand("aimock-default-tier-with-backend-error", "aimock-fixture-mismatch", (
        agent_enter(0.0),
        aimock_complete(0.2, 404, 12, 5, 0),
        agent_exit(0.3, "error", 300),
        error_caught(0.31, "NotFoundError", "no fixture", 310),
    )),
    Hand("aimock-matched-is-fine", "ok", (
        Event(0.0, "aimock.request.ingress",
              {"path": "/v1/chat/completions", "content_length": 800, "match_keys": ["model"]}),
        match_decision(0.01, "greeting-01", 1.0, []),
        Event(0.02, "aimock.response.start", {"delta_ms_from_ingress": 20}),
        aimock_complete(0.3, 200, 2400, 300, 30),
    )),
    Hand("aimock-small-but-matched", "ok", (
        match_decision(0.01, "empty-01", 1.0, []), aimock_complete(0.02, 200, 2, 20, 1),
    )),
    # llm-stalled: a call that never answered and whose heartbeats stopped short.
    Hand("llm-stalled-heartbeats-stopped", "llm-stalled", (
        ingress(0.0), agent_enter(0.1), llm_start(1.2), heartbeat(11.2, 10000), heartbeat(21.2, 20000),
    ), log_end=42.4),
    Hand("llm-stalled-no-heartbeat", "llm-stalled", (
        probe_start(), ingress(1.1), llm_start(1.2, model="gpt-4o"), probe_exit(61.0, "timeout", None),
    ), log_end=90.0),
    Hand("llm-stalled-second-call", "llm-stalled", (
        ingress(0.0), agent_llm_ok(0.1), llm_start(1.5, 600), heartbeat(2.5, 1000),
    )),
    Hand("llm-stalled-events-shuffled-in", "llm-stalled", (
        heartbeat(5.0, 4000), llm_start(1.0, 10, "mistral-large-latest", "mistral"), ingress(0.9),
    ), log_end=20.0),
    # llm-slow: latency (or heartbeats) at the threshold.
    Hand("llm-slow-answered", "llm-slow", (ingress(0.0), agent_llm_ok(0.01, latency=45.0), stream_ok(45.1))),
    Hand("llm-slow-still-beating", "llm-slow", (
        ingress(0.0), llm_start(0.1, 3000, "o1"), [heartbeat(0.1 + 10 * i, 10000 * i) for i in range(1, 4)],
    ), log_end=50.0),
    Hand("llm-slow-then-client-gave-up", "llm-slow", (
        ingress(0.0),
        llm_start(0.1, 3000, "gpt-4o"),
        first_byte(0.2, 200),
        llm_failed(35.1, 35000, "CancelledError", "gpt-4o", outcome="timeout"),
        sse_aborted(35.1, "rst", 14, 35100),
    )),
    Hand("llm-slow-custom-threshold", "llm-slow", (
        ingress(0.0), agent_llm_ok(0.01, latency=6.0), stream_ok(6.1),
    ), thresholds={"slow_s": 5.0}),
    Hand("llm-just-under-threshold", "ok", (ingress(0.0), agent_llm_ok(0.01, latency=29.9), stream_ok(30.0))),
    # server-error
    Hand("server-raised-before-response", "server-error", (
        ingress(0.0), error_caught(0.05, "KeyError", "'cart_id'", 50, [{"file": "app.py", "line": 40}]),
    )),
    Hand("server-outer-500-page", "server-error", (
        ingress(0.0),
        first_byte(0.05, 50),
        complete(0.05, 500, 21, 50),
        error_caught(0.06, "ZeroDivisionError", "division by zero", 60),
    )),
    Hand("server-503-no-exception", "server-error", (
        probe_start(), complete(1.1, 503, 19, 3), probe_exit(1.5, "error", None),
    )),
    Hand("server-error-beats-agent-error", "server-error", (
        agent_enter(0.0, model=None), agent_exit(0.1, "error", 100), error_caught(0.1, "ValueError", "bad tool", 100),
    )),
    # stream-error
    Hand("stream-chunk-error", "stream-error", (
        ingress(0.0),
        first_byte(0.1, 100),
        sse_aborted(0.3, "chunk_error", 180, 300),
        error_caught(0.31, "RuntimeError", "tool failed", 310),
    )),
    Hand("stream-chunk-error-before-bytes", "stream-error", (sse_aborted(0.3, "chunk_error", 0, 300),)),
    # client-disconnect
    Hand("client-rst-after-first-byte", "client-disconnect", (
        ingress(0.0), first_byte(0.1, 100), sse_aborted(0.5, "rst", 240, 500),
    )),
    Hand("client-rst-before-first-byte", "client-disconnect", (
        ingress(0.0),
        llm_start(0.1),
        llm_failed(2.0, 1900, "CancelledError", outcome="timeout"),
        sse_aborted(2.0, "rst", 0, 2000),
    )),
    Hand("client-fin-premature", "client-disconnect", (sse_aborted(0.5, "fin_premature", 12, 500),)),
    Hand("client-timeout-beats-agent-cancel", "client-disconnect", (
        agent_enter(0.0, model=None), agent_exit(10.0, "cancelled", 10000), sse_aborted(10.0, "timeout", None, 10000),
    )),
    # agent-error
    Hand("agent-error-handled", "agent-error", (
        ingress(0.0), agent_enter(0.01, "planner"), agent_exit(0.2, "error", 190), complete(0.21, 200, 30, 210),
    )),
    Hand("agent-cancelled-internally", "agent-error", (
        agent_enter(0.0, "planner", None), agent_exit(0.3, "cancelled", 300), stream_ok(0.4, events=2),
    )),
    # incomplete
    Hand("incomplete-mid-stream", "incomplete", (
        ingress(0.0), first_byte(0.1, 100), sse_event(0.2, 20, 0),
    ), log_end=9.0),
    Hand("incomplete-agent-only", "incomplete", (agent_enter(0.0, model=None),)),
    Hand("incomplete-second-request", "incomplete", (happy_backend(0.0), ingress(5.0))),
    # no-backend
    Hand("no-backend-timeout", "no-backend", (probe_start(), probe_exit(31.0, "timeout", None))),
    Hand("no-backend-connection-refused", "no-backend", (
        probe_start(), network_error(1.1, "net::ERR_CONNECTION_REFUSED"), probe_exit(1.5, "error", None),
    )),
    Hand("no-backend-http2-protocol-error-is-network", "no-backend", (
        probe_start(), network_error(1.1, "net::ERR_HTTP2_PROTOCOL_ERROR"), probe_exit(1.5, "error", None),
    )),
    # strict-harness / frontend-hydration
    Hand("strict-harness-alternate-content", "strict-harness", (
        probe_start(), happy_backend(), alternate_content(3.0, {"table": 1, "p": 3}), probe_exit(10.0, "error", None),
    )),
    Hand("strict-harness-no-exit", "strict-harness", (
        probe_start(), happy_backend(), alternate_content(3.0, {"pre": 1}),
    )),
    Hand("frontend-hydration-console", "frontend-hydration", (
        probe_start(),
        happy_backend(),
        console_error(2.8, "Hydration failed because the initial UI does not match", "main.js", "1:2040"),
        probe_exit(10.0, "error", None),
    )),
    Hand("frontend-hydration-two-errors", "frontend-hydration", (
        probe_start(),
        happy_backend(),
        console_error(2.8, "Minified React error #418", "app.js", "1:99"),
        console_error(2.9, "Minified React error #423", "app.js", "1:99"),
        probe_exit(10.0, "error", None),
    )),
    Hand("console-error-but-token-seen", "ok", (
        probe_start(),
        happy_backend(),
        console_error(2.8, "favicon 404", "index.html", "1:1", level="warning"),
        harness_saw_tokens(2.9),
    )),
    Hand("strict-harness-beats-console-error", "strict-harness", (
        probe_start(),
        happy_backend(),
        console_error(2.8, "Uncaught TypeError", "a.js", "1:1"),
        alternate_content(3.0, {"img": 2}),
        alternate_content(3.5, {"img": 3}),
        probe_exit(10.0, "error", None),
    )),
    Hand("frontend-hydration-no-exit", "frontend-hydration", (
        probe_start(),
        happy_backend(),
        console_error(2.8, "Text content does not match server-rendered HTML", "main.js", "2:10"),
    )),
    Hand("no-backend-although-harness-passed", "no-backend", (probe_start(), harness_saw_tokens(2.0))),
    Hand("aimock-chunks-only", "aimock-fixture-mismatch", (
        match_decision(0.0, None, 0.1, "model differs"),
        Event(0.1, "aimock.sse.chunk", {"chunk_size_bytes": 6, "sequence_num": 0}),
        Event(0.2, "aimock.sse.chunk", {"chunk_size_bytes": 4, "sequence_num": 1}),
    )),
    Hand("aimock-unmatched-but-answered", "ok", (
        match_decision(0.0, None, 0.0, []), aimock_complete(0.3, 200, 2048, 300, 20), happy_backend(0.0),
    )),
    Hand("classifier-mentioning-zoom-is-not-oom", "ok", (
        probe_start(),
        happy_backend(),
        first_token(2.9),
        probe_exit(4.0, "ok", 1500, failure_classifier="zoom-room-bloom"),
    )),
    # -- agent-level causes (issue 15): tools, loops, answers that stopped short -------------
    # tool-error: raised, handed back to the model, an MCP error, a server that never answered.
    Hand("tool-error-handed-back-to-the-model", "tool-error", (
        ingress(0.0), agent_enter(0.01),
        answer(0.02, tools=("get_weather",)),
        tool_call(0.83, "get_weather", kind="reported", outcome="err",
                  excerpt="Error: ValueError('unknown city: Atlantis')\n Please fix your mistakes."),
        answer(0.9), stream_ok(1.8),
    )),
    Hand("tool-error-mcp-is-error-passing-test", "tool-error", (
        probe_start(), ingress(1.1), agent_enter(1.11),
        answer(1.12, tools=("forecast",)),
        tool_call(1.93, "forecast", "mcp", 30, "err", "protocol", "Unknown city: Atlantis", "weather"),
        answer(2.0), stream_ok(2.9), harness_saw_tokens(3.2),
    )),
    Hand("tool-error-mcp-unreachable-then-500", "tool-error", (
        ingress(0.0), agent_enter(0.01), answer(0.02, tools=("search_docs",)),
        tool_call(0.83, "search_docs", "mcp", 5, "err", "transport", "ConnectError: All connection attempts failed",
                  "127.0.0.1:8931"),
        agent_failed(0.9, "ExceptionGroup", "unhandled errors in a TaskGroup (1 sub-exception)"),
        failed_500(0.91, "ExceptionGroup", "unhandled errors in a TaskGroup (1 sub-exception)"),
    )),
    Hand("tool-error-mcp-never-answered", "tool-error", (
        ingress(0.0), agent_enter(0.01), answer(0.02, tools=("search_docs",)),
        tool_call(0.83, "search_docs", "mcp", server="docs", answered=False),
    ), log_end=26.0),
    Hand("tool-raised-in-app-scope", "tool-error", (
        ingress(0.0), tool_call(0.1, "charge_card", "scope", 12, "err", "raised", "CardDeclined: insufficient funds"),
        json_ok(0.2),
    )),
    # issue 33: a client that hung up while a tool ran is the slow tool's doing.
    Hand("tool-cancelled-with-the-client-is-tool-slow", "tool-slow", (
        ingress(0.0), first_byte(0.1, 100), tool_call(0.2, "search_docs", "mcp", 800, "timeout", server="docs"),
        sse_aborted(1.0, "rst", 90, 1000),
    )),
    # issue 33: evidence read from spans (an invented framework's GenAI spans, OpenInference's,
    # OpenLLMetry's), next to the middleware's and the wire's lines.
    Hand("span-tool-raised-whatever-the-model-was-told", "tool-error", (
        ingress(0.0), agent_enter(0.01), answer(0.02, tools=("fetch_invoice",)),
        span_tool(0.9, "fetch_invoice", 60, "err", "InvoiceNotFound", "invoice 42 missing", "call_850", True),
        tool_call(0.85, "fetch_invoice", ms=70), answer(0.95), stream_ok(1.8),
    )),
    Hand("span-tool-running-when-the-client-hung-up-is-tool-slow", "tool-slow", (
        ingress(0.0), agent_enter(0.01), answer(0.02, tools=("crawl_site",)), first_byte(0.1, 100),
        sse_aborted(5.0, "timeout", 40, 5000), span_tool(9.0, "crawl_site", 8100),
    )),
    Hand("span-tool-cancelled-with-the-request-is-tool-slow", "tool-slow", (
        ingress(0.0), answer(0.02, tools=("crawl_site",)), sse_aborted(3.0, "rst", 0, 3000),
        span_tool(3.01, "crawl_site", 2900, "timeout", "CancelledError"),
    )),
    Hand("span-tool-own-timeout-is-tool-error", "tool-error", (
        ingress(0.0), answer(0.02, tools=("crawl_site",)),
        span_tool(2.0, "crawl_site", 1900, "timeout", "TimeoutError", "crawl timed out after 2 s"),
        answer(2.5), stream_ok(3.0),
    )),
    Hand("span-framework-limit-max-turns", "agent-loop", (
        ingress(0.0), answer(0.02, tools=("lookup_order",)), span_tool(0.3, "lookup_order", 20),
        answer(0.4, tools=("lookup_order",)), span_tool(0.7, "lookup_order", 20),
        span_agent_exit(0.8, "orders", "MaxTurnsExceeded", "Max turns (2) exceeded", ("max_turns", 2)),
        failed_500(0.81, "MaxTurnsExceeded", "Max turns (2) exceeded"),
    )),
    Hand("span-framework-limit-request-limit-behind-a-200", "agent-loop", (
        ingress(0.0), span_agent_exit(0.5, "weather", "UsageLimitExceeded",
                                      "The next request would exceed the request_limit of 3", ("request_limit", 3)),
        complete(0.51, 200, 40, 510),
    )),
    Hand("span-output-invalid-after-output-tool-retries", "output-invalid", (
        ingress(0.0), answer(0.02, tools=("final_result",)), output_tool_failed(0.3),
        answer(0.4, tools=("final_result",)), output_tool_failed(0.7),
        span_output(0.8, "weather", False, "UnexpectedModelBehavior", "Exceeded maximum output retries (1)", 2),
        failed_500(0.81, "UnexpectedModelBehavior", "Exceeded maximum output retries (1)"),
    )),
    Hand("span-output-invalid-validation-error-raised", "output-invalid", (
        ingress(0.0), answer(0.02),
        span_output(0.3, "RunnableSequence", False, "ValidationError",
                    "degrees: Input should be a valid integer [type=int_parsing]", schema="Forecast"),
        failed_500(0.31, "ValidationError", "1 validation error for Forecast"),
    )),
    Hand("span-output-valid-after-a-retry-is-ok", "ok", (
        ingress(0.0), span_output(0.3, "weather", False, "ValidationError", "degrees: missing"),
        span_output(0.6, "weather", True), answer(0.65), stream_ok(1.0),
    )),
    Hand("span-llm-app-client-closed-event-loop", "llm-error", (
        ingress(0.0), span_llm_failed(0.1, "RuntimeError"), failed_500(0.2, "APIConnectionError", "Connection error."),
    )),
    Hand("span-llm-provider-503-from-a-span", "llm-error", (
        ingress(0.0), span_llm_failed(0.1, "InternalServerError", status=503),
        failed_500(0.2, "InternalServerError", "Error code: 503"),
    )),
    Hand("span-only-trace-that-ended-ok", "ok", (
        span_tool(0.2, "lookup", 20), span_agent_exit(0.5, "weather"),
        Event(0.51, "backend.response.complete", {"total_duration_ms": 510, "source": "otel"}, "ok", 510),
    )),
    Hand("span-only-trace-whose-root-never-ended", "incomplete", (
        span_tool(0.2, "lookup", 20), answer(0.3, tools=("lookup",)),
    ), log_end=30.0),
    Hand("tool-calls-that-worked-are-ok", "ok", (
        ingress(0.0), agent_enter(0.01), answer(0.02, tools=("get_weather", "get_time")),
        tool_call(0.83, "get_weather"), tool_call(0.84, "get_time", "mcp", server="clock"),
        answer(0.9), stream_ok(1.8),
    )),
    Hand("output-tool-retried-then-valid-is-ok", "ok", (
        ingress(0.0), agent_enter(0.01),
        answer(0.02, tools=("final_result",), schema=True),
        output_tool_failed(0.83),
        answer(0.9, tools=("final_result",), valid=True, schema=True), json_ok(1.8),
    )),
    # tool-slow: a tool call at the slow threshold.
    Hand("tool-slow-wire", "tool-slow", (
        ingress(0.0), agent_enter(0.01), answer(0.02, tools=("crawl_site",)),
        tool_call(0.83, "crawl_site", ms=8000), answer(8.9), stream_ok(9.8),
    ), thresholds={"slow_s": 3.0}),
    Hand("tool-slow-mcp-default-threshold", "tool-slow", (
        ingress(0.0), answer(0.02, tools=("render_pdf",)),
        tool_call(0.83, "render_pdf", "mcp", 41000, server="office"), answer(41.9), json_ok(42.8),
    )),
    Hand("tool-just-under-the-threshold-is-ok", "ok", (
        ingress(0.0), answer(0.02, tools=("crawl_site",)), tool_call(0.83, "crawl_site", ms=2900),
        answer(3.8), stream_ok(4.7),
    ), thresholds={"slow_s": 3.0}),
    # output-truncated: the final answer stopped on the token limit, in each provider's words.
    Hand("output-truncated-openai-length", "output-truncated", (
        ingress(0.0), agent_enter(0.01), answer(0.02, finish="length"), stream_ok(0.9),
    )),
    Hand("output-truncated-anthropic-max-tokens", "output-truncated", (
        ingress(0.0), answer(0.02, finish="max_tokens", model=CLAUDE, provider="anthropic"), json_ok(0.9),
    )),
    Hand("output-truncated-gemini-max-tokens", "output-truncated", (
        ingress(0.0), answer(0.02, finish="MAX_TOKENS", model="gemini-2.0-flash", provider="google"), json_ok(0.9),
    )),
    Hand("output-truncated-pydantic-ai-raised-500", "output-truncated", (
        ingress(0.0), answer(0.02, finish="length", schema=True),
        agent_failed(0.9, "OutputTokenLimitExceeded",
                     "Model token limit (512) exceeded before any response was generated."),
        failed_500(0.91, "OutputTokenLimitExceeded", "Model token limit (512) exceeded"),
    )),
    Hand("output-truncated-agents-sdk-max-output-tokens", "output-truncated", (
        ingress(0.0), first_byte(0.01, 10),
        agent_failed(0.9, "ModelBehaviorError", "Response incomplete: incomplete_details=max_output_tokens"),
        complete(0.91, 200, 120, 910, 3),
    )),
    Hand("earlier-answer-truncated-final-fine-is-ok", "ok", (
        ingress(0.0), answer(0.02, finish="length"), answer(0.9), stream_ok(1.8),
    )),
    # content-filtered: refused or filtered.
    Hand("content-filtered-openai", "content-filtered", (
        ingress(0.0), answer(0.02, finish="content_filter"), stream_ok(0.9),
    )),
    Hand("content-filtered-anthropic-refusal", "content-filtered", (
        ingress(0.0), answer(0.02, finish="refusal", model=CLAUDE, provider="anthropic"), json_ok(0.9),
    )),
    Hand("content-filtered-gemini-safety", "content-filtered", (
        ingress(0.0), answer(0.02, finish="SAFETY", model="gemini-2.0-flash", provider="google"), json_ok(0.9),
    )),
    Hand("content-filtered-pydantic-ai-raised", "content-filtered", (
        ingress(0.0), agent_failed(0.9, "ContentFilterError", "Content filter triggered. Finish reason: 'SAFETY'"),
        failed_500(0.91, "ContentFilterError", "Content filter triggered."),
    )),
    # context-overflow, in each provider's words.
    Hand("context-overflow-openai-code", "context-overflow", (
        ingress(0.0), agent_enter(0.01), llm_refused(0.02, 400, "context_length_exceeded", "BadRequestError"),
        agent_failed(0.3, "BadRequestError", None), failed_500(0.31, "BadRequestError", "Error code: 400"),
    )),
    Hand("context-overflow-anthropic-prompt-too-long", "context-overflow", (
        ingress(0.0), llm_refused(0.02, 400, "invalid_request_error", "BadRequestError", CLAUDE, "anthropic"),
        agent_failed(0.3, "BadRequestError",
                     "Error code: 400 - invalid_request_error: prompt is too long: 208310 tokens > 200000 maximum"),
        failed_500(0.31, "BadRequestError", "Error code: 400"),
    )),
    Hand("context-overflow-gemini-default-tier", "context-overflow", (
        agent_enter(0.0, model="gemini-2.0-flash"),
        error_caught(0.4, "ClientError", "400 INVALID_ARGUMENT. The input token count (1200000) exceeds the maximum "
                     "number of tokens allowed (1048576).", 400),
    )),
    Hand("context-overflow-recovered-by-trimming-is-ok", "ok", (
        ingress(0.0), llm_refused(0.02, 400, "context_length_exceeded", "BadRequestError"), answer(0.5),
        stream_ok(1.4),
    )),
    # agent-loop: a framework's limit, or the same call again and again with no final answer.
    Hand("agent-loop-langgraph-recursion-500", "agent-loop", (
        ingress(0.0), agent_enter(0.01, "graph"),
        [e for i in range(4) for e in (*answer(0.02 + i, tools=("lookup",)), *tool_call(0.83 + i, "lookup"))],
        agent_failed(4.5, "GraphRecursionError", "Recursion limit of 8 reached without hitting a stop condition. "
                     "You can increase the limit by setting the `recursion_limit` config key."),
        failed_500(4.51, "GraphRecursionError", "Recursion limit of 8 reached"),
    )),
    Hand("agent-loop-same-call-empty-200", "agent-loop", (
        ingress(0.0), agent_enter(0.01, "graph"),
        [e for i in range(4) for e in (*answer(0.02 + i, tools=("lookup",)), *tool_call(0.83 + i, "lookup"))],
        first_byte(4.5, 4500), complete(4.51, 200, 0, 4510, 0),
    )),
    Hand("agent-loop-agents-sdk-max-turns", "agent-loop", (
        ingress(0.0), answer(0.02, tools=("lookup",)), tool_call(0.83, "lookup"),
        agent_failed(1.0, "MaxTurnsExceeded", "Max turns (1) exceeded"),
        failed_500(1.01, "MaxTurnsExceeded", "Max turns (1) exceeded"),
    )),
    Hand("agent-loop-pydantic-ai-request-limit", "agent-loop", (
        ingress(0.0), answer(0.02, tools=("lookup",)), tool_call(0.83, "lookup", args_hash="0c1d2e3f"),
        agent_failed(1.0, "UsageLimitExceeded", "The next request would exceed the request_limit of 2"),
        json_ok(1.1),
    )),
    Hand("same-call-three-times-then-answered-is-ok", "ok", (
        ingress(0.0),
        [e for i in range(3) for e in (*answer(0.02 + i, tools=("lookup",)), *tool_call(0.83 + i, "lookup"))],
        answer(3.5), stream_ok(4.4),
    )),
    Hand("three-calls-different-arguments-is-not-a-loop", "ok", (
        ingress(0.0),
        [e for i in range(3)
         for e in (*answer(0.02 + i, tools=("lookup",)), *tool_call(0.83 + i, "lookup", args_hash=f"{i:08x}"))],
        answer(3.5), stream_ok(4.4),
    )),
    # output-invalid: structured output that failed validation, or a framework that gave up.
    Hand("output-invalid-final-answer", "output-invalid", (
        ingress(0.0), answer(0.02, valid=False, schema=True), json_ok(0.9),
    )),
    Hand("output-invalid-pydantic-ai-gave-up", "output-invalid", (
        ingress(0.0), answer(0.02, tools=("final_result",), schema=True),
        output_tool_failed(0.83),
        answer(0.9, tools=("final_result",), schema=True),
        output_tool_failed(1.7),
        agent_failed(1.8, "UnexpectedModelBehavior", "Exceeded maximum output retries (1)"),
        failed_500(1.81, "UnexpectedModelBehavior", "Exceeded maximum output retries (1)"),
    )),
    Hand("output-invalid-agents-sdk-invalid-json", "output-invalid", (
        ingress(0.0), answer(0.02, schema=True),
        agent_failed(0.9, "ModelBehaviorError", "Invalid JSON when parsing model output"),
        failed_500(0.91, "ModelBehaviorError", "Invalid JSON when parsing model output"),
    )),
    Hand("output-valid-is-ok", "ok", (ingress(0.0), answer(0.02, valid=True, schema=True), json_ok(0.9))),
    # llm-auth / llm-config: the provider refused the key or the request.
    Hand("llm-auth-401", "llm-auth", (
        ingress(0.0), llm_refused(0.02, 401, "invalid_api_key", "AuthenticationError"),
        agent_failed(0.3, "AuthenticationError", "Error code: 401 - Incorrect API key provided"),
        failed_500(0.31, "AuthenticationError", "Error code: 401"),
    )),
    Hand("llm-auth-anthropic-403", "llm-auth", (
        ingress(0.0), llm_refused(0.02, 403, "permission_error", "PermissionDeniedError", CLAUDE, "anthropic"),
        json_ok(0.3),
    )),
    Hand("llm-auth-default-tier-pydantic-ai", "llm-auth", (
        agent_enter(0.0), agent_failed(0.3, "ModelAuthenticationError", "status_code: 401, model_name: gpt-4o"),
        error_caught(0.31, "ModelAuthenticationError", "status_code: 401", 310),
    )),
    Hand("llm-config-404-model", "llm-config", (
        ingress(0.0), llm_refused(0.02, 404, "model_not_found", "NotFoundError", "gpt-5-turbo-nope"),
        failed_500(0.3, "NotFoundError", "Error code: 404"),
    )),
    Hand("llm-config-400-parameter", "llm-config", (
        ingress(0.0), llm_refused(0.02, 400, "unsupported_parameter", "BadRequestError", "o3-mini"), json_ok(0.3),
    )),
    Hand("llm-config-fallback-recovered-is-ok", "ok", (
        ingress(0.0), llm_refused(0.02, 404, "model_not_found", "NotFoundError", "gpt-5-turbo-nope"), answer(0.3),
        stream_ok(1.2),
    )),
    Hand("app-not-found-error-is-not-llm-config", "server-error", (
        ingress(0.0), error_caught(0.05, "NotFoundError", "order 12 not found", 50),
    )),
    Hand("llm-rate-limit-stays-llm-error", "llm-error", (
        ingress(0.0),
        llm_refused(0.02, 429, "rate_limit_exceeded", "RateLimitError"),
        failed_500(0.3, "RateLimitError", "429"),
    )),
    # client-disconnect with an orphaned LLM call (issue 18 item 16): the hang-up is the cause.
    Hand("client-hangup-orphaned-call-kept-beating", "client-disconnect", (
        ingress(0.0), agent_enter(0.01), llm_start(0.1, model="gpt-4o"), first_byte(0.3, 300),
        sse_aborted(1.0, "rst", 120, 1000), [heartbeat(0.1 + 10 * i, 10000 * i) for i in range(1, 6)],
    ), log_end=52.0),
    Hand("client-hangup-orphaned-call-beat-then-stopped", "client-disconnect", (
        ingress(0.0), llm_start(0.1, model="gpt-4o"), first_byte(0.3, 300),
        sse_aborted(1.0, "fin_premature", 120, 1000), heartbeat(5.1, 5000), heartbeat(10.1, 10000),
    ), log_end=60.0),
    Hand("llm-stalled-before-the-client-gave-up", "llm-stalled", (
        ingress(0.0), llm_start(0.1, model="gpt-4o"), heartbeat(5.1, 5000), sse_aborted(20.0, "rst", 0, 20000),
    ), log_end=21.0),
    # ok
    Hand("ok-full-chain", "ok", (
        probe_start(),
        happy_backend(edge={"cf-ray": "8f1a2b3c4d5e6f78-FRA", "via": "1.1 varnish"}),
        harness_saw_tokens(3.0),
    )),
    Hand("ok-backend-only", "ok", (happy_backend(0.0),)),
    Hand("ok-default-tier", "ok", (agent_enter(0.0), agent_exit(1.0, "ok", 1000), complete(1.1, 200, 900, 1100, 14))),
    Hand("ok-disconnect-after-last-chunk-is-not-abort", "ok", (ingress(0.0), stream_ok(0.1, events=3))),
    Hand("ok-many-rays-but-passed", "ok", (
        probe_start(),
        network_response(1.05, f"{SHOP}/a.js", 200, 10, 5, {"cf-ray": "8f1a2b3c4d5e6f79-FRA"}),
        network_response(1.06, f"{SHOP}/b.js", 200, 10, 5, {"cf-ray": "8f1a2b3c4d5e6f7a-FRA"}),
        happy_backend(),
        harness_saw_tokens(3.0),
    )),
    Hand("ok-malformed-fields-tolerated", "ok", (
        happy_backend(0.0),
        {"boundary": "backend.sse.event", "metadata": "not-a-dict", "ts": "yesterday", "mono_ns": "x"},
        {"layer": "backend", "boundary": 7},
    )),
)  # fmt: skip


# The builder: one row of HAND_PLAN -> one corpus record.

_SLUGS = {"backend": "shop-agent", "probe": "shop-agent", "aimock": "aimock"}
#: Each layer's monotonic clock starts elsewhere, as separate processes' clocks do.
_MONO_OFFSET_NS = {"backend": 0, "probe": 7_000_000_000, "aimock": 3_000_000_000}
#: The outcome a boundary has unless its metadata says it failed (``_outcome``).
_OUTCOMES = {
    "backend.llm.call.response": "ok",
    "backend.sse.first_byte": "ok",
    "backend.sse.aborted": "err",
    "backend.agent.exit": "ok",
    "backend.response.complete": "ok",
    "backend.error.caught": "err",
    "backend.tool.call.response": "ok",
    "probe.exit": "ok",
    "probe.network.error": "err",
    "probe.console.error": "err",
    "probe.sse.aborted": "err",
    "aimock.response.aborted": "err",
    "aimock.response.complete": "ok",
}


def _outcome(boundary: str, metadata: dict[str, Any]) -> str:
    """The outcome an emitter gives this event: a 5xx, a provider error or a failed exit is ``err``."""
    if boundary == "backend.response.complete" and metadata.get("http_status", 200) >= 500:
        return "err"
    if boundary == "backend.llm.call.response" and metadata.get("error_class"):
        return "err"
    if boundary in ("backend.agent.exit", "probe.exit") and metadata.get("terminal_outcome", "ok") != "ok":
        return "err"
    return _OUTCOMES.get(boundary, "info")


def _hand_envelope(test_id: str, span: int, event: Event) -> dict[str, Any]:
    layer = event.boundary.split(".", 1)[0]
    return envelope(
        event.boundary,
        test_id=test_id,
        ts=_ts(event.t),
        span_id=f"{span:016x}",
        slug=_SLUGS[layer],
        demo="chat",
        mono_ns=int(event.t * 1e9) + _MONO_OFFSET_NS[layer],
        duration_ms=event.duration_ms,
        outcome=event.outcome if event.outcome is not None else _outcome(event.boundary, event.metadata),
        edge_headers=event.edge or {},
        metadata=event.metadata,
    )


def _hand_record(hand: Hand) -> dict[str, Any]:
    test_id = f"hand-{hand.name}"
    events: list[dict[str, Any]] = []
    span = 0
    for step in hand.steps:
        for item in step if isinstance(step, list) else [step]:
            if isinstance(item, dict):
                events.append(item)  # a malformed line, as it is
                continue
            span += 1
            events.append(_hand_envelope(test_id, span, item))
    record: dict[str, Any] = {"name": hand.name, "label": hand.label, "source": "hand"}
    if hand.thresholds is not None:
        record["thresholds"] = hand.thresholds
    if hand.log_end is not None:
        record["log_end"] = _ts(hand.log_end)
    record["events"] = events
    return record


def hand_scenarios() -> list[dict[str, Any]]:
    return [_hand_record(hand) for hand in HAND_PLAN]


# -- backend scenarios: the real middleware and scopes under uvicorn ---------------------------
# The app, the server and the drivers are tests/corpus_server.py's.

# (scenario, endpoint, driver, {tier: label}). A tier missing from the dict is not run:
# at the default tier there are no LLM events, and a scenario whose only trace is an LLM
# event would just be "ok" there.
_ALL = ("debug", "verbose", "default")
_VERBOSE = ("debug", "verbose")
BACKEND_PLAN: tuple[tuple[str, str, Driver, dict[str, str]], ...] = (
    ("happy-sse", "happy", read_whole, dict.fromkeys(_ALL, "ok")),
    ("happy-json-sync", "happy-json", read_whole, dict.fromkeys(_ALL, "ok")),
    (
        "disconnect-after-first-byte",
        "slow-stream",
        hang_up_after_first_chunk,
        dict.fromkeys(_ALL, "client-disconnect"),
    ),
    (
        "disconnect-before-first-byte",
        "wait-first",
        give_up_before_first_byte,
        dict.fromkeys(_ALL, "client-disconnect"),
    ),
    ("raise-before-response", "raise-before", read_whole, dict.fromkeys(_ALL, "server-error")),
    ("raise-mid-stream", "raise-mid", read_whole, dict.fromkeys(_ALL, "stream-error")),
    # A failed LLM call is written at the default tier too (spec: tier promotion).
    ("llm-raises", "llm-raise", read_whole, dict.fromkeys(_ALL, "llm-error")),
    ("llm-raises-handled", "llm-raise-handled", read_whole, {"debug": "llm-error", "verbose": "llm-error"}),
    ("llm-slow-heartbeats", "llm-slow", read_whole, {"debug": "llm-slow", "verbose": "llm-slow"}),
    ("provider-empty-answer", "empty", read_whole, {"debug": "provider-empty", "verbose": "provider-empty"}),
    ("agent-error-json", "agent-error", read_whole, dict.fromkeys(_ALL, "agent-error")),
    ("agent-error-stream", "agent-error-stream", read_whole, dict.fromkeys(_ALL, "agent-error")),
    ("status-503", "unavailable", read_whole, dict.fromkeys(_ALL, "server-error")),
    # agent scenarios: a real provider stand-in through the HTTP capture (tests/corpus_agents.py).
    # Tool lines and answers' finish reasons are verbose: at the default tier only failed
    # LLM calls (promoted) and the agent's exit are written.
    ("agent-tool-error", "agent-tool-error", read_whole, dict.fromkeys(_VERBOSE, "tool-error")),
    ("agent-tool-slow", "agent-tool-slow", read_whole, dict.fromkeys(_VERBOSE, "tool-slow")),
    (
        "agent-tool-running-hangup",
        "agent-tool-running-hangup",
        hang_up_after_first_chunk,
        dict.fromkeys(_ALL, "client-disconnect"),
    ),
    ("agent-loop-limit", "agent-loop-limit", read_whole, dict.fromkeys(_ALL, "agent-loop")),
    ("agent-truncated", "agent-truncated", read_whole, dict.fromkeys(_VERBOSE, "output-truncated")),
    ("agent-filtered", "agent-filtered", read_whole, dict.fromkeys(_VERBOSE, "content-filtered")),
    ("agent-output-invalid", "agent-output-invalid", read_whole, dict.fromkeys(_VERBOSE, "output-invalid")),
    ("agent-auth", "agent-auth", read_whole, dict.fromkeys(_ALL, "llm-auth")),
    ("agent-config", "agent-config", read_whole, dict.fromkeys(_ALL, "llm-config")),
    ("agent-context-overflow", "agent-context-overflow", read_whole, dict.fromkeys(_ALL, "context-overflow")),
    # kill -9 scenarios: each on its own server.
    (
        "killed-mid-stream",
        "slow-stream",
        kill_when("backend.agent.exit", settle=0.3),
        dict.fromkeys(_ALL, "incomplete"),
    ),
    (
        "llm-hanging-killed",
        "llm-hang",
        kill_when("backend.llm.call.heartbeat", count=2),
        {"debug": "llm-stalled", "verbose": "llm-stalled"},
    ),
    (
        "llm-hanging-killed-default-tier",
        "llm-hang",
        kill_when("backend.agent.enter", settle=0.3),
        {"default": "incomplete"},
    ),
    (
        "llm-blocks-event-loop-killed",
        "llm-block",
        kill_when("backend.llm.call.heartbeat", count=2, settle=0.3),
        {"debug": "llm-stalled", "verbose": "llm-stalled"},
    ),
)


def _ts_of(envelopes: list[dict]) -> str | None:
    stamps = [e["ts"] for e in envelopes if isinstance(e.get("ts"), str)]
    return max(stamps) if stamps else None


def backend_scenarios(workdir: Path | None = None) -> list[dict]:
    """Run every planned scenario against the real emitter; one record per (scenario, wrap, tier)."""
    import tempfile

    records: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="cvdiag-corpus-") as tmp:
        base = workdir or Path(tmp)
        for wrap in ("inner", "outer"):
            for tier in _ALL:
                shared = [p for p in BACKEND_PLAN if tier in p[3] and not getattr(p[2], "kills", False)]
                killed = [p for p in BACKEND_PLAN if tier in p[3] and getattr(p[2], "kills", False)]
                runs: list[tuple[Path, list[tuple[str, str]]]] = []
                log = base / f"{wrap}-{tier}.ndjson"
                server = Server(wrap, tier, log)
                try:
                    runs.append((log, [(name, labels[tier]) for name, _, _, labels in shared]))
                    for name, endpoint, drive, _ in shared:
                        drive(server, f"be-{wrap}-{tier}-{name}", endpoint)
                finally:
                    server.stop()
                for name, endpoint, drive, labels in killed:
                    log = base / f"{wrap}-{tier}-{name}.ndjson"
                    server = Server(wrap, tier, log)
                    try:
                        drive(server, f"be-{wrap}-{tier}-{name}", endpoint)
                    finally:
                        server.stop()
                    runs.append((log, [(name, labels[tier])]))
                for log, planned in runs:
                    envelopes = read_log(log)
                    log_end = _ts_of(envelopes)
                    for name, label in planned:
                        test_id = f"be-{wrap}-{tier}-{name}"
                        events = [e for e in envelopes if e.get("test_id") == test_id]
                        if not events:
                            raise RuntimeError(f"{test_id}: no envelope in {log}")
                        records.append(
                            {
                                "name": f"{name} ({wrap} middleware, {tier} tier)",
                                "label": label,
                                "source": "emitter",
                                "thresholds": {"slow_s": SLOW_S},
                                "log_end": log_end,
                                "events": events,
                            }
                        )
                print(f"  {wrap}/{tier}: {sum(len(p) for _, p in runs)} scenarios", file=sys.stderr)
    return records


# -- writing -------------------------------------------------------------------------------


# -- span scenarios: the OTLP fixtures of the real instrumentations, through the real reader --
# (tests/data/otlp/, made by tools/make_otlp_fixtures.py). Each test id -> its label; a file
# whose tests are named by their trace ids lists its labels in the order they first appear.

OTLP = ROOT / "tests" / "data" / "otlp"
SPAN_PLAN: tuple[tuple[str, dict[str, str] | tuple[str, ...], dict[str, float] | None], ...] = (
    ("pydantic_ai.jsonl", {"pydantic-ai-ok": "ok", "pydantic-ai-tool-error": "tool-error",
                           "pydantic-ai-tool-slow": "tool-slow", "pydantic-ai-output-invalid": "output-invalid",
                           "pydantic-ai-loop": "agent-loop"}, {"slow_s": 1.0}),
    ("pydantic_ai_console.json", {"pydantic-ai-ok": "ok", "pydantic-ai-tool-error": "tool-error"}, None),
    # langgraph-loop is left out: OpenInference's LangGraph spans never record the
    # GraphRecursionError (the root CHAIN ends OK), so its events cannot say it.
    ("openinference_langgraph.jsonl", {"langgraph-tool-error": "tool-error",
                                       "langgraph-output-invalid": "output-invalid"}, None),
    ("openinference_openai_agents.jsonl", {"openai-agents-tool-error": "tool-error",
                                           "openai-agents-loop": "agent-loop"}, None),
    ("openllmetry_openai.json", ("ok", "llm-error", "llm-error"), None),
    ("mcp_sdk.jsonl.gz", {"mcp-tool-raised": "tool-error", "mcp-tool-error-result": "tool-error"}, None),
)  # fmt: skip


def span_scenarios() -> list[dict[str, Any]]:
    import gzip

    from cvdiag.read._otlp_read import Tally, lines_of

    records = []
    for name, labels, thresholds in SPAN_PLAN:
        path = OTLP / name
        raw = path.read_bytes()
        with io.BytesIO(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw) as fh:
            events: dict[str, list[dict[str, Any]]] = {}
            for chunk in lines_of(fh, Tally()):
                for line in chunk.splitlines():
                    env = json.loads(line.split(b" ", 1)[1])
                    events.setdefault(env["test_id"], []).append(env)
        order = list(events)
        named = labels if isinstance(labels, dict) else dict(zip(order, labels, strict=True))
        for test_id, label in named.items():
            record: dict[str, Any] = {"name": f"{test_id} ({name})", "label": label, "source": "spans"}
            if thresholds is not None:
                record["thresholds"] = thresholds
            record["events"] = events[test_id]
            records.append(record)
    return records


def write_jsonl(path: Path, records: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as fh:
        for record in records:
            fh.write(json.dumps(record, separators=(",", ":"), sort_keys=False) + "\n")
    print(f"wrote {len(records)} scenarios to {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=("hand", "backend", "spans", "all"))
    parser.add_argument("--out", type=Path, default=CORPUS, help="corpus directory (default tests/corpus)")
    args = parser.parse_args(argv)
    if args.what in ("hand", "all"):
        write_jsonl(args.out / "hand.jsonl", hand_scenarios())
    if args.what in ("backend", "all"):
        write_jsonl(args.out / "backend.jsonl", backend_scenarios())
    if args.what in ("spans", "all"):
        write_jsonl(args.out / "spans.jsonl", span_scenarios())
    return 0


if __name__ == "__main__":
    sys.exit(main())
