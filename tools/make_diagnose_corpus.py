"""Build the labelled corpus that ``tests/test_diagnose.py`` and ``tools/eval_diagnose.py`` score.

    python tools/make_diagnose_corpus.py hand      # -> tests/corpus/hand.jsonl
    python tools/make_diagnose_corpus.py backend   # -> tests/corpus/backend.jsonl (drives the real emitter)
    python tools/make_diagnose_corpus.py all

A corpus file is JSON Lines, one scenario per line:
``{"name", "label", "source", "thresholds": {...} | absent, "log_end": ts | absent, "events": [envelope, ...]}``.
``label`` is the class a careful reader would give from these events alone; ``thresholds``
are the ``Thresholds`` fields the scenario was labelled with (slow scenarios run with a
small ``slow_s`` so they take a second, not a minute); ``log_end`` is the ISO time of the
last line of the log the scenario came from.

Hand-built scenarios cover the layers cvdiag does not emit (probe, aimock, edge headers).
Backend scenarios run Starlette apps with the real middleware and scopes under uvicorn in
a subprocess (this file, ``serve`` sub-command), drive them with httpx (including a
client that hangs up mid-stream) and ``kill -9`` the server mid-request; the NDJSON file
sink is the log.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, ClassVar

from cvdiag.contract.schema import EDGE_HEADERS

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "corpus"

EDGE_KEYS = EDGE_HEADERS
_BASE = datetime(2026, 11, 21, 10, 0, 0, tzinfo=UTC)


def _ts(seconds: float) -> str:
    return (_BASE + timedelta(seconds=seconds)).isoformat(timespec="milliseconds").replace("+00:00", "Z")


# -- hand-built scenarios ------------------------------------------------------------------


class _Scenario:
    """Envelopes of one hand-built test, written in the order a reader would narrate them."""

    _OUTCOMES: ClassVar[dict[str, str]] = {
        "backend.llm.call.response": "ok",
        "backend.sse.first_byte": "ok",
        "backend.sse.aborted": "err",
        "backend.agent.exit": "ok",
        "backend.response.complete": "ok",
        "backend.error.caught": "err",
        "probe.exit": "ok",
        "probe.network.error": "err",
        "probe.console.error": "err",
        "probe.sse.aborted": "err",
        "aimock.response.aborted": "err",
        "aimock.response.complete": "ok",
    }

    def __init__(self, name: str, label: str, **options: Any) -> None:
        self.name, self.label, self.options = name, label, options
        self.test_id = f"hand-{name}"
        self.events: list[dict] = []
        self._span = 0

    def at(
        self,
        t: float,
        boundary: str,
        metadata: dict | None = None,
        *,
        outcome: str | None = None,
        duration_ms: int | None = None,
        edge: dict | None = None,
    ) -> _Scenario:
        layer = boundary.split(".", 1)[0]
        self._span += 1
        if outcome is None:
            outcome = self._OUTCOMES.get(boundary, "info")
            if boundary == "backend.response.complete" and (metadata or {}).get("http_status", 200) >= 500:
                outcome = "err"
            if boundary == "backend.llm.call.response" and (metadata or {}).get("error_class"):
                outcome = "err"
            if boundary == "backend.agent.exit" and (metadata or {}).get("terminal_outcome", "ok") != "ok":
                outcome = "err"
            if boundary == "probe.exit" and (metadata or {}).get("terminal_outcome", "ok") != "ok":
                outcome = "err"
        headers = dict.fromkeys(EDGE_KEYS)
        headers.update(edge or {})
        self.events.append(
            {
                "schema_version": 1,
                "test_id": self.test_id,
                "trace_id": self.test_id,
                "span_id": f"{self._span:016x}",
                "parent_span_id": None,
                "layer": layer,
                "boundary": boundary,
                "slug": {"backend": "shop-agent", "probe": "shop-agent", "aimock": "aimock"}[layer],
                "demo": "chat",
                "ts": _ts(t),
                "mono_ns": int(t * 1e9) + {"backend": 0, "probe": 7_000_000_000, "aimock": 3_000_000_000}[layer],
                "duration_ms": duration_ms,
                "outcome": outcome,
                "edge_headers": headers,
                "metadata": metadata or {},
                "_metadata_dropped": False,
                "_truncated": False,
            }
        )
        return self

    def record(self) -> dict:
        record: dict[str, Any] = {"name": self.name, "label": self.label, "source": "hand"}
        if "thresholds" in self.options:
            record["thresholds"] = self.options["thresholds"]
        if "log_end" in self.options:
            record["log_end"] = _ts(self.options["log_end"])
        record["events"] = self.events
        return record


# Reusable fragments: a harness run and a backend request, to keep each scenario short.


def _probe_start(s: _Scenario, t: float = 0.0) -> _Scenario:
    return (
        s.at(t, "probe.start", {"url": "https://shop.example.com/chat", "viewport": "1280x720"})
        .at(
            t + 0.8,
            "probe.navigate.complete",
            {"url": "https://shop.example.com/chat", "nav_ms": 800, "http_status": 200},
        )
        .at(t + 1.0, "probe.message.send", {"message_index": 0, "char_count": 42, "demo": "chat"})
    )


def _probe_exit(s: _Scenario, t: float, outcome: str = "ok", first_token: int | None = 1500, **md: Any) -> _Scenario:
    meta = {
        "terminal_outcome": outcome,
        "total_duration_ms": int(t * 1000),
        "sse_event_count": 0 if first_token is None else 12,
        "first_token_delta_ms": first_token,
        "failure_classifier": None,
    }
    meta.update(md)
    return s.at(t, "probe.exit", meta)


def _ingress(s: _Scenario, t: float, edge: dict | None = None) -> _Scenario:
    return s.at(
        t, "backend.request.ingress", {"method": "POST", "path": "/chat/stream", "content_length": 120}, edge=edge
    )


def _agent_llm_ok(s: _Scenario, t: float, latency: float = 1.2, tokens: int | None = 48) -> _Scenario:
    s.at(t, "backend.agent.enter", {"agent_name": "shopper", "model_id": "gpt-4o-mini"})
    s.at(
        t + 0.01,
        "backend.llm.call.start",
        {"provider": "openai", "model": "gpt-4o-mini", "prompt_token_count_estimate": 300},
    )
    return s.at(
        t + 0.01 + latency,
        "backend.llm.call.response",
        {
            "provider": "openai",
            "model": "gpt-4o-mini",
            "response_token_count": tokens,
            "latency_ms": int(latency * 1000),
            "error_class": None,
            "completion_tokens": tokens,
        },
        duration_ms=int(latency * 1000),
    )


def _stream_ok(s: _Scenario, t: float, events: int = 12, status: int = 200, edge: dict | None = None) -> _Scenario:
    s.at(t, "backend.sse.first_byte", {"delta_ms_from_ingress": int(t * 1000)}, edge=edge)
    for i in range(min(events, 3)):
        s.at(
            t + 0.01 * (i + 1),
            "backend.sse.event",
            {"event_type": "message", "payload_size_bytes": 40, "sequence_num": i},
        )
    s.at(t + 0.2, "backend.agent.exit", {"terminal_outcome": "ok", "total_duration_ms": 1500})
    return s.at(
        t + 0.21,
        "backend.response.complete",
        {"http_status": status, "content_length": 480, "total_duration_ms": 1700, "sse_event_count": events},
        duration_ms=1700,
        edge=edge,
    )


def _network_error(
    s: _Scenario,
    t: float,
    error_class: str,
    status: int | None = None,
    url: str = "https://shop.example.com/chat/stream",
    **options: Any,
) -> _Scenario:
    return s.at(
        t, "probe.network.error", {"url": url, "error_class": error_class, "response_status": status}, **options
    )


def _happy_backend(s: _Scenario, t: float = 1.1, edge: dict | None = None) -> _Scenario:
    _ingress(s, t, edge)
    _agent_llm_ok(s, t + 0.01)
    return _stream_ok(s, t + 1.3, edge=edge)


def _harness_saw_tokens(s: _Scenario, t: float) -> _Scenario:
    s.at(t, "probe.dom.container.mount", {"delta_ms_from_start": 1400})
    s.at(t + 0.1, "probe.dom.firsttoken", {"delta_ms_from_start": 1500, "text_length": 12})
    return _probe_exit(s, t + 1.0)


def hand_scenarios() -> list[dict]:
    out: list[_Scenario] = []
    add = out.append

    # probe-runner-crash: the harness broke, whatever the backend did.
    s = _probe_start(_Scenario("runner-target-closed", "probe-runner-crash"))
    _happy_backend(s)
    add(
        _probe_exit(
            s,
            4.0,
            "error",
            None,
            failure_classifier="TargetClosedError: Target page, context or browser has been closed",
        )
    )
    s = _probe_start(_Scenario("runner-page-crashed", "probe-runner-crash"))
    _network_error(s, 1.5, "Page crashed")
    add(_probe_exit(s, 2.0, "error", None))
    s = _probe_start(_Scenario("runner-protocol-error", "probe-runner-crash"))
    _happy_backend(s)
    add(
        _probe_exit(
            s, 4.0, "error", None, failure_classifier="Protocol error (Runtime.callFunctionOn): Session closed."
        )
    )
    s = _probe_start(_Scenario("runner-oom", "probe-runner-crash"))
    _ingress(s, 1.1)
    add(_probe_exit(s, 9.0, "error", None, failure_classifier="FATAL ERROR: JavaScript heap out of memory"))
    s = _probe_start(_Scenario("runner-browser-disconnected", "probe-runner-crash"))
    add(_network_error(s, 1.2, "BrowserDisconnectedError", url="https://shop.example.com/chat"))
    s = _probe_start(_Scenario("runner-oomkilled-with-llm-error", "probe-runner-crash"))
    _ingress(s, 1.1)
    s.at(
        1.2, "backend.llm.call.start", {"provider": "openai", "model": "gpt-4o-mini", "prompt_token_count_estimate": 10}
    )
    s.at(
        1.5,
        "backend.llm.call.response",
        {
            "provider": "openai",
            "model": "gpt-4o-mini",
            "response_token_count": None,
            "latency_ms": 300,
            "error_class": "APIConnectionError",
        },
        duration_ms=300,
    )
    add(_probe_exit(s, 3.0, "error", None, failure_classifier="chromium OOMKilled"))

    # edge-interference, one per sub-cause.
    s = _probe_start(_Scenario("edge-challenge", "edge-interference"))
    s.at(
        1.3,
        "probe.network.response",
        {"url": "https://shop.example.com/chat/stream", "status": 403, "content_length": 9000, "duration_ms": 80},
        edge={"cf-ray": "8f1a2b3c4d5e6f70-FRA", "cf-mitigated": "challenge", "server": "cloudflare"},
    )
    add(_probe_exit(s, 3.0, "error", None))
    s = _probe_start(_Scenario("edge-jschallenge", "edge-interference"))
    s.at(
        1.3,
        "probe.navigate.complete",
        {"url": "https://shop.example.com/chat", "nav_ms": 300, "http_status": 503},
        edge={"cf-ray": "8f1a2b3c4d5e6f71-AMS", "cf-mitigated": "JSChallenge"},
    )
    add(_probe_exit(s, 3.0, "error", None))
    s = _probe_start(_Scenario("edge-block-with-backend", "edge-interference"))
    _happy_backend(s)
    s.at(
        2.9,
        "probe.network.response",
        {"url": "https://shop.example.com/api/cart", "status": 403, "content_length": 100, "duration_ms": 20},
        edge={"cf-ray": "8f1a2b3c4d5e6f72-CDG", "cf-mitigated": "block"},
    )
    add(_probe_exit(s, 4.0, "error"))
    s = _probe_start(_Scenario("edge-rate-limited", "edge-interference"))
    s.at(
        1.2,
        "probe.network.response",
        {"url": "https://shop.example.com/chat/stream", "status": 429, "content_length": 0, "duration_ms": 15},
        edge={"cf-ray": "8f1a2b3c4d5e6f73-LHR", "retry-after": "30"},
    )
    add(_probe_exit(s, 2.0, "error", None))
    s = _probe_start(_Scenario("edge-rate-limited-network-error", "edge-interference"))
    _network_error(s, 1.2, "HTTPError", 503, edge={"retry-after": "120", "server": "railway-edge"})
    add(_probe_exit(s, 2.0, "error", None))
    s = _probe_start(_Scenario("edge-varnish-failed", "edge-interference"))
    _ingress(s, 1.1, edge={"via": "1.1 varnish (Varnish/7.4)"})
    s.at(1.2, "backend.sse.first_byte", {"delta_ms_from_ingress": 100})
    s.at(31.2, "backend.sse.aborted", {"termination_kind": "timeout", "bytes_before_abort": 0}, duration_ms=30100)
    add(_probe_exit(s, 32.0, "timeout", None))
    s = _probe_start(_Scenario("edge-squid-on-probe", "edge-interference"))
    s.at(
        1.2,
        "probe.network.response",
        {"url": "https://shop.example.com/chat/stream", "status": 502, "content_length": 300, "duration_ms": 40},
        edge={"via": "1.1 squid-proxy.corp:3128 (squid/5.7)"},
    )
    add(_probe_exit(s, 2.0, "error", None))
    s = _probe_start(_Scenario("edge-two-rays-backend", "edge-interference"))
    _ingress(s, 1.1, edge={"cf-ray": "8f1a2b3c4d5e6f74-FRA"})
    _ingress(s, 11.1, edge={"cf-ray": "8f1a2b3c4d5e6f75-FRA"})
    s.at(
        11.2,
        "backend.error.caught",
        {
            "exception_type": "RuntimeError",
            "message_scrubbed": "duplicate order",
            "stack_brief": [],
            "truncated": False,
        },
        duration_ms=100,
    )
    add(_probe_exit(s, 12.0, "error", None))

    # llm-error: the provider failed; the endpoint's visible effect does not matter.
    s = _Scenario("llm-error-rate-limit-relayed", "llm-error")
    _probe_start(s)
    _ingress(s, 1.1)
    s.at(
        1.2,
        "backend.llm.call.start",
        {"provider": "openai", "model": "gpt-4o-mini", "prompt_token_count_estimate": 300},
    )
    s.at(
        1.5,
        "backend.llm.call.response",
        {
            "provider": "openai",
            "model": "gpt-4o-mini",
            "response_token_count": None,
            "latency_ms": 300,
            "error_class": "RateLimitError",
        },
        duration_ms=300,
    )
    s.at(
        1.51,
        "backend.response.complete",
        {"http_status": 429, "content_length": 60, "total_duration_ms": 410, "sse_event_count": 0},
        duration_ms=410,
        edge={"retry-after": "20", "cf-ray": "8f1a2b3c4d5e6f76-IAD"},
    )
    s.at(
        1.6,
        "probe.network.response",
        {"url": "https://shop.example.com/chat/stream", "status": 429, "content_length": 60, "duration_ms": 500},
        edge={"retry-after": "20", "cf-ray": "8f1a2b3c4d5e6f77-FRA"},
    )
    add(_probe_exit(s, 2.0, "error", None))
    s = _Scenario("llm-error-outer-500", "llm-error")
    _ingress(s, 0.0)
    s.at(0.1, "backend.agent.enter", {"agent_name": "shopper", "model_id": "claude-3-5-sonnet-20241022"})
    s.at(
        0.1,
        "backend.llm.call.start",
        {"provider": "anthropic", "model": "claude-3-5-sonnet-20241022", "prompt_token_count_estimate": 900},
    )
    s.at(
        2.1,
        "backend.llm.call.response",
        {
            "provider": "anthropic",
            "model": "claude-3-5-sonnet-20241022",
            "response_token_count": None,
            "latency_ms": 2000,
            "error_class": "OverloadedError",
        },
        duration_ms=2000,
    )
    s.at(2.1, "backend.agent.exit", {"terminal_outcome": "error", "total_duration_ms": 2000})
    s.at(2.12, "backend.sse.first_byte", {"delta_ms_from_ingress": 2120})
    s.at(
        2.13,
        "backend.response.complete",
        {"http_status": 500, "content_length": 21, "total_duration_ms": 2130, "sse_event_count": 0},
        duration_ms=2130,
    )
    add(
        s.at(
            2.14,
            "backend.error.caught",
            {
                "exception_type": "OverloadedError",
                "message_scrubbed": "overloaded",
                "stack_brief": [],
                "truncated": False,
            },
            duration_ms=2140,
        )
    )
    s = _Scenario("llm-error-handled-by-app", "llm-error")
    _ingress(s, 0.0)
    s.at(
        0.1,
        "backend.llm.call.start",
        {"provider": "groq", "model": "llama-3.1-8b-instant", "prompt_token_count_estimate": None},
    )
    s.at(
        0.4,
        "backend.llm.call.response",
        {
            "provider": "groq",
            "model": "llama-3.1-8b-instant",
            "response_token_count": None,
            "latency_ms": 300,
            "error_class": "APITimeoutError",
        },
        duration_ms=300,
    )
    _stream_ok(s, 0.5, events=1)
    add(s)

    # provider-empty: the call answered ok with nothing, and nothing was streamed.
    s = _Scenario("provider-empty-zero-tokens", "provider-empty")
    _ingress(s, 0.0)
    _agent_llm_ok(s, 0.01, latency=0.8, tokens=0)
    s.at(0.9, "backend.sse.first_byte", {"delta_ms_from_ingress": 900})
    s.at(1.0, "backend.agent.exit", {"terminal_outcome": "ok", "total_duration_ms": 990})
    add(
        s.at(
            1.01,
            "backend.response.complete",
            {"http_status": 200, "content_length": 0, "total_duration_ms": 1010, "sse_event_count": 0},
            duration_ms=1010,
        )
    )
    s = _Scenario("provider-empty-null-tokens-with-probe", "provider-empty")
    _probe_start(s)
    _ingress(s, 1.1)
    _agent_llm_ok(s, 1.11, latency=0.5, tokens=None)
    s.at(
        1.7,
        "backend.response.complete",
        {"http_status": 200, "content_length": 0, "total_duration_ms": 600, "sse_event_count": 0},
        duration_ms=600,
    )
    s.at(2.0, "probe.dom.alternate_content", {"child_type_histogram": {"div": 1}})
    add(_probe_exit(s, 12.0, "error", None))
    s = _Scenario("provider-empty-default-tier-has-no-llm", "ok")  # the LLM layer is absent: never guessed
    s.at(0.0, "backend.agent.enter", {"agent_name": "shopper", "model_id": "gpt-4o-mini"})
    s.at(0.9, "backend.agent.exit", {"terminal_outcome": "ok", "total_duration_ms": 900})
    add(
        s.at(
            0.91,
            "backend.response.complete",
            {"http_status": 200, "content_length": 0, "total_duration_ms": 910, "sse_event_count": 0},
            duration_ms=910,
        )
    )

    s = _Scenario("json-endpoint-without-token-counts", "ok")
    _ingress(s, 0.0)
    _agent_llm_ok(s, 0.01, latency=0.5, tokens=None)
    s.at(0.6, "backend.agent.exit", {"terminal_outcome": "ok", "total_duration_ms": 590})
    add(
        s.at(
            0.61,
            "backend.response.complete",
            {"http_status": 200, "content_length": 85, "total_duration_ms": 610, "sse_event_count": 0},
            duration_ms=610,
        )
    )

    # aimock-fixture-mismatch: only when aimock itself logged.
    s = _Scenario("aimock-no-fixture", "aimock-fixture-mismatch")
    s.at(
        0.0,
        "aimock.request.ingress",
        {"path": "/v1/chat/completions", "content_length": 800, "match_keys": ["model", "last_user_message"]},
    )
    s.at(
        0.01,
        "aimock.match.decision",
        {"fixture_id": None, "match_score": 0.2, "reject_reasons": ["last_user_message differs"]},
    )
    add(
        s.at(
            0.02,
            "aimock.response.complete",
            {"http_status": 404, "total_bytes": 0, "total_duration_ms": 20, "chunk_count": 0},
        )
    )
    s = _Scenario("aimock-absent-fixture-key-aborted", "aimock-fixture-mismatch")
    s.at(0.0, "aimock.request.ingress", {"path": "/v1/messages", "content_length": 500, "match_keys": []})
    s.at(0.01, "aimock.match.decision", {"match_score": 0.0})
    add(s.at(0.5, "aimock.response.aborted", {"termination_kind": "fin_premature", "bytes_before_abort": 6}))
    s = _Scenario("aimock-default-tier-with-backend-error", "aimock-fixture-mismatch")
    s.at(0.0, "backend.agent.enter", {"agent_name": "shopper", "model_id": "gpt-4o-mini"})
    s.at(
        0.2,
        "aimock.response.complete",
        {"http_status": 404, "total_bytes": 12, "total_duration_ms": 5, "chunk_count": 0},
    )
    s.at(0.3, "backend.agent.exit", {"terminal_outcome": "error", "total_duration_ms": 300})
    add(
        s.at(
            0.31,
            "backend.error.caught",
            {
                "exception_type": "NotFoundError",
                "message_scrubbed": "no fixture",
                "stack_brief": [],
                "truncated": False,
            },
            duration_ms=310,
        )
    )
    s = _Scenario("aimock-matched-is-fine", "ok")
    s.at(
        0.0, "aimock.request.ingress", {"path": "/v1/chat/completions", "content_length": 800, "match_keys": ["model"]}
    )
    s.at(0.01, "aimock.match.decision", {"fixture_id": "greeting-01", "match_score": 1.0, "reject_reasons": []})
    s.at(0.02, "aimock.response.start", {"delta_ms_from_ingress": 20})
    add(
        s.at(
            0.3,
            "aimock.response.complete",
            {"http_status": 200, "total_bytes": 2400, "total_duration_ms": 300, "chunk_count": 30},
        )
    )
    s = _Scenario("aimock-small-but-matched", "ok")
    s.at(0.01, "aimock.match.decision", {"fixture_id": "empty-01", "match_score": 1.0, "reject_reasons": []})
    add(
        s.at(
            0.02,
            "aimock.response.complete",
            {"http_status": 200, "total_bytes": 2, "total_duration_ms": 20, "chunk_count": 1},
        )
    )

    # llm-stalled: a call that never answered and whose heartbeats stopped short.
    s = _Scenario("llm-stalled-heartbeats-stopped", "llm-stalled", log_end=42.4)
    _ingress(s, 0.0)
    s.at(0.1, "backend.agent.enter", {"agent_name": "shopper", "model_id": "gpt-4o-mini"})
    s.at(
        1.2,
        "backend.llm.call.start",
        {"provider": "openai", "model": "gpt-4o-mini", "prompt_token_count_estimate": 300},
    )
    s.at(11.2, "backend.llm.call.heartbeat", {"elapsed_ms_since_start": 10000})
    add(s.at(21.2, "backend.llm.call.heartbeat", {"elapsed_ms_since_start": 20000}))
    s = _Scenario("llm-stalled-no-heartbeat", "llm-stalled", log_end=90.0)
    _probe_start(s)
    _ingress(s, 1.1)
    s.at(1.2, "backend.llm.call.start", {"provider": "openai", "model": "gpt-4o", "prompt_token_count_estimate": 300})
    add(_probe_exit(s, 61.0, "timeout", None))
    s = _Scenario("llm-stalled-second-call", "llm-stalled")
    _ingress(s, 0.0)
    _agent_llm_ok(s, 0.1)
    s.at(
        1.5,
        "backend.llm.call.start",
        {"provider": "openai", "model": "gpt-4o-mini", "prompt_token_count_estimate": 600},
    )
    add(s.at(2.5, "backend.llm.call.heartbeat", {"elapsed_ms_since_start": 1000}))
    s = _Scenario("llm-stalled-events-shuffled-in", "llm-stalled", log_end=20.0)
    s.at(5.0, "backend.llm.call.heartbeat", {"elapsed_ms_since_start": 4000})
    s.at(
        1.0,
        "backend.llm.call.start",
        {"provider": "mistral", "model": "mistral-large-latest", "prompt_token_count_estimate": 10},
    )
    add(_ingress(s, 0.9))

    # llm-slow: latency (or heartbeats) at the threshold.
    s = _Scenario("llm-slow-answered", "llm-slow")
    _ingress(s, 0.0)
    _agent_llm_ok(s, 0.01, latency=45.0)
    add(_stream_ok(s, 45.1))
    s = _Scenario("llm-slow-still-beating", "llm-slow", log_end=50.0)
    _ingress(s, 0.0)
    s.at(0.1, "backend.llm.call.start", {"provider": "openai", "model": "o1", "prompt_token_count_estimate": 3000})
    for i in range(1, 4):
        s.at(0.1 + 10 * i, "backend.llm.call.heartbeat", {"elapsed_ms_since_start": 10000 * i})
    add(s)
    s = _Scenario("llm-slow-then-client-gave-up", "llm-slow")
    _ingress(s, 0.0)
    s.at(0.1, "backend.llm.call.start", {"provider": "openai", "model": "gpt-4o", "prompt_token_count_estimate": 3000})
    s.at(0.2, "backend.sse.first_byte", {"delta_ms_from_ingress": 200})
    s.at(
        35.1,
        "backend.llm.call.response",
        {
            "provider": "openai",
            "model": "gpt-4o",
            "response_token_count": None,
            "latency_ms": 35000,
            "error_class": "CancelledError",
        },
        outcome="timeout",
        duration_ms=35000,
    )
    add(s.at(35.1, "backend.sse.aborted", {"termination_kind": "rst", "bytes_before_abort": 14}, duration_ms=35100))
    s = _Scenario("llm-slow-custom-threshold", "llm-slow", thresholds={"slow_s": 5.0})
    _ingress(s, 0.0)
    _agent_llm_ok(s, 0.01, latency=6.0)
    add(_stream_ok(s, 6.1))
    s = _Scenario("llm-just-under-threshold", "ok")
    _ingress(s, 0.0)
    _agent_llm_ok(s, 0.01, latency=29.9)
    add(_stream_ok(s, 30.0))

    # server-error
    s = _Scenario("server-raised-before-response", "server-error")
    _ingress(s, 0.0)
    add(
        s.at(
            0.05,
            "backend.error.caught",
            {
                "exception_type": "KeyError",
                "message_scrubbed": "'cart_id'",
                "stack_brief": [{"file": "app.py", "line": 40}],
                "truncated": False,
            },
            duration_ms=50,
        )
    )
    s = _Scenario("server-outer-500-page", "server-error")
    _ingress(s, 0.0)
    s.at(0.05, "backend.sse.first_byte", {"delta_ms_from_ingress": 50})
    s.at(
        0.05,
        "backend.response.complete",
        {"http_status": 500, "content_length": 21, "total_duration_ms": 50, "sse_event_count": 0},
        duration_ms=50,
    )
    add(
        s.at(
            0.06,
            "backend.error.caught",
            {
                "exception_type": "ZeroDivisionError",
                "message_scrubbed": "division by zero",
                "stack_brief": [],
                "truncated": False,
            },
            duration_ms=60,
        )
    )
    s = _Scenario("server-503-no-exception", "server-error")
    _probe_start(s)
    s.at(
        1.1,
        "backend.response.complete",
        {"http_status": 503, "content_length": 19, "total_duration_ms": 3, "sse_event_count": 0},
        duration_ms=3,
    )
    add(_probe_exit(s, 1.5, "error", None))
    s = _Scenario("server-error-beats-agent-error", "server-error")
    s.at(0.0, "backend.agent.enter", {"agent_name": "shopper", "model_id": None})
    s.at(0.1, "backend.agent.exit", {"terminal_outcome": "error", "total_duration_ms": 100})
    add(
        s.at(
            0.1,
            "backend.error.caught",
            {"exception_type": "ValueError", "message_scrubbed": "bad tool", "stack_brief": [], "truncated": False},
            duration_ms=100,
        )
    )

    # stream-error
    s = _Scenario("stream-chunk-error", "stream-error")
    _ingress(s, 0.0)
    s.at(0.1, "backend.sse.first_byte", {"delta_ms_from_ingress": 100})
    s.at(0.3, "backend.sse.aborted", {"termination_kind": "chunk_error", "bytes_before_abort": 180}, duration_ms=300)
    add(
        s.at(
            0.31,
            "backend.error.caught",
            {
                "exception_type": "RuntimeError",
                "message_scrubbed": "tool failed",
                "stack_brief": [],
                "truncated": False,
            },
            duration_ms=310,
        )
    )
    s = _Scenario("stream-chunk-error-before-bytes", "stream-error")
    add(s.at(0.3, "backend.sse.aborted", {"termination_kind": "chunk_error", "bytes_before_abort": 0}, duration_ms=300))

    # client-disconnect
    s = _Scenario("client-rst-after-first-byte", "client-disconnect")
    _ingress(s, 0.0)
    s.at(0.1, "backend.sse.first_byte", {"delta_ms_from_ingress": 100})
    add(s.at(0.5, "backend.sse.aborted", {"termination_kind": "rst", "bytes_before_abort": 240}, duration_ms=500))
    s = _Scenario("client-rst-before-first-byte", "client-disconnect")
    _ingress(s, 0.0)
    s.at(
        0.1,
        "backend.llm.call.start",
        {"provider": "openai", "model": "gpt-4o-mini", "prompt_token_count_estimate": 300},
    )
    s.at(
        2.0,
        "backend.llm.call.response",
        {
            "provider": "openai",
            "model": "gpt-4o-mini",
            "response_token_count": None,
            "latency_ms": 1900,
            "error_class": "CancelledError",
        },
        outcome="timeout",
        duration_ms=1900,
    )
    add(s.at(2.0, "backend.sse.aborted", {"termination_kind": "rst", "bytes_before_abort": 0}, duration_ms=2000))
    s = _Scenario("client-fin-premature", "client-disconnect")
    add(
        s.at(
            0.5, "backend.sse.aborted", {"termination_kind": "fin_premature", "bytes_before_abort": 12}, duration_ms=500
        )
    )
    s = _Scenario("client-timeout-beats-agent-cancel", "client-disconnect")
    s.at(0.0, "backend.agent.enter", {"agent_name": "shopper", "model_id": None})
    s.at(10.0, "backend.agent.exit", {"terminal_outcome": "cancelled", "total_duration_ms": 10000})
    add(
        s.at(
            10.0, "backend.sse.aborted", {"termination_kind": "timeout", "bytes_before_abort": None}, duration_ms=10000
        )
    )

    # agent-error
    s = _Scenario("agent-error-handled", "agent-error")
    _ingress(s, 0.0)
    s.at(0.01, "backend.agent.enter", {"agent_name": "planner", "model_id": "gpt-4o-mini"})
    s.at(0.2, "backend.agent.exit", {"terminal_outcome": "error", "total_duration_ms": 190})
    add(
        s.at(
            0.21,
            "backend.response.complete",
            {"http_status": 200, "content_length": 30, "total_duration_ms": 210, "sse_event_count": 0},
            duration_ms=210,
        )
    )
    s = _Scenario("agent-cancelled-internally", "agent-error")
    s.at(0.0, "backend.agent.enter", {"agent_name": "planner", "model_id": None})
    s.at(0.3, "backend.agent.exit", {"terminal_outcome": "cancelled", "total_duration_ms": 300})
    _stream_ok(s, 0.4, events=2)
    add(s)

    # incomplete
    s = _Scenario("incomplete-mid-stream", "incomplete", log_end=9.0)
    _ingress(s, 0.0)
    s.at(0.1, "backend.sse.first_byte", {"delta_ms_from_ingress": 100})
    add(s.at(0.2, "backend.sse.event", {"event_type": "message", "payload_size_bytes": 20, "sequence_num": 0}))
    s = _Scenario("incomplete-agent-only", "incomplete")
    add(s.at(0.0, "backend.agent.enter", {"agent_name": "shopper", "model_id": None}))
    s = _Scenario("incomplete-second-request", "incomplete")
    _happy_backend(s, 0.0)
    add(_ingress(s, 5.0))

    # no-backend
    s = _Scenario("no-backend-timeout", "no-backend")
    _probe_start(s)
    add(_probe_exit(s, 31.0, "timeout", None))
    s = _Scenario("no-backend-connection-refused", "no-backend")
    _probe_start(s)
    _network_error(s, 1.1, "net::ERR_CONNECTION_REFUSED")
    add(_probe_exit(s, 1.5, "error", None))
    s = _Scenario("no-backend-http2-protocol-error-is-network", "no-backend")
    _probe_start(s)
    _network_error(s, 1.1, "net::ERR_HTTP2_PROTOCOL_ERROR")
    add(_probe_exit(s, 1.5, "error", None))

    # strict-harness / frontend-hydration
    s = _Scenario("strict-harness-alternate-content", "strict-harness")
    _probe_start(s)
    _happy_backend(s)
    s.at(3.0, "probe.dom.alternate_content", {"child_type_histogram": {"table": 1, "p": 3}})
    add(_probe_exit(s, 10.0, "error", None))
    s = _Scenario("strict-harness-no-exit", "strict-harness")
    _probe_start(s)
    _happy_backend(s)
    add(s.at(3.0, "probe.dom.alternate_content", {"child_type_histogram": {"pre": 1}}))
    s = _Scenario("frontend-hydration-console", "frontend-hydration")
    _probe_start(s)
    _happy_backend(s)
    s.at(
        2.8,
        "probe.console.error",
        {
            "level": "error",
            "message_scrubbed": "Hydration failed because the initial UI does not match",
            "source_file": "main.js",
            "line_col": "1:2040",
        },
    )
    add(_probe_exit(s, 10.0, "error", None))
    s = _Scenario("frontend-hydration-two-errors", "frontend-hydration")
    _probe_start(s)
    _happy_backend(s)
    s.at(
        2.8,
        "probe.console.error",
        {
            "level": "error",
            "message_scrubbed": "Minified React error #418",
            "source_file": "app.js",
            "line_col": "1:99",
        },
    )
    s.at(
        2.9,
        "probe.console.error",
        {
            "level": "error",
            "message_scrubbed": "Minified React error #423",
            "source_file": "app.js",
            "line_col": "1:99",
        },
    )
    add(_probe_exit(s, 10.0, "error", None))
    s = _Scenario("console-error-but-token-seen", "ok")
    _probe_start(s)
    _happy_backend(s)
    s.at(
        2.8,
        "probe.console.error",
        {"level": "warning", "message_scrubbed": "favicon 404", "source_file": "index.html", "line_col": "1:1"},
    )
    add(_harness_saw_tokens(s, 2.9))

    s = _Scenario("strict-harness-beats-console-error", "strict-harness")
    _probe_start(s)
    _happy_backend(s)
    s.at(
        2.8,
        "probe.console.error",
        {"level": "error", "message_scrubbed": "Uncaught TypeError", "source_file": "a.js", "line_col": "1:1"},
    )
    s.at(3.0, "probe.dom.alternate_content", {"child_type_histogram": {"img": 2}})
    s.at(3.5, "probe.dom.alternate_content", {"child_type_histogram": {"img": 3}})
    add(_probe_exit(s, 10.0, "error", None))
    s = _Scenario("frontend-hydration-no-exit", "frontend-hydration")
    _probe_start(s)
    _happy_backend(s)
    add(
        s.at(
            2.8,
            "probe.console.error",
            {
                "level": "error",
                "message_scrubbed": "Text content does not match server-rendered HTML",
                "source_file": "main.js",
                "line_col": "2:10",
            },
        )
    )
    s = _Scenario("no-backend-although-harness-passed", "no-backend")
    _probe_start(s)
    add(_harness_saw_tokens(s, 2.0))
    s = _Scenario("aimock-chunks-only", "aimock-fixture-mismatch")
    s.at(0.0, "aimock.match.decision", {"fixture_id": None, "match_score": 0.1, "reject_reasons": "model differs"})
    s.at(0.1, "aimock.sse.chunk", {"chunk_size_bytes": 6, "sequence_num": 0})
    add(s.at(0.2, "aimock.sse.chunk", {"chunk_size_bytes": 4, "sequence_num": 1}))
    s = _Scenario("aimock-unmatched-but-answered", "ok")
    s.at(0.0, "aimock.match.decision", {"fixture_id": None, "match_score": 0.0, "reject_reasons": []})
    s.at(
        0.3,
        "aimock.response.complete",
        {"http_status": 200, "total_bytes": 2048, "total_duration_ms": 300, "chunk_count": 20},
    )
    add(_happy_backend(s, 0.0))
    s = _Scenario("classifier-mentioning-zoom-is-not-oom", "ok")
    _probe_start(s)
    _happy_backend(s)
    s.at(2.9, "probe.dom.firsttoken", {"delta_ms_from_start": 1500, "text_length": 12})
    add(_probe_exit(s, 4.0, "ok", 1500, failure_classifier="zoom-room-bloom"))

    # ok
    s = _Scenario("ok-full-chain", "ok")
    _probe_start(s)
    _happy_backend(s, edge={"cf-ray": "8f1a2b3c4d5e6f78-FRA", "via": "1.1 varnish"})
    add(_harness_saw_tokens(s, 3.0))
    s = _Scenario("ok-backend-only", "ok")
    add(_happy_backend(s, 0.0))
    s = _Scenario("ok-default-tier", "ok")
    s.at(0.0, "backend.agent.enter", {"agent_name": "shopper", "model_id": "gpt-4o-mini"})
    s.at(1.0, "backend.agent.exit", {"terminal_outcome": "ok", "total_duration_ms": 1000})
    add(
        s.at(
            1.1,
            "backend.response.complete",
            {"http_status": 200, "content_length": 900, "total_duration_ms": 1100, "sse_event_count": 14},
            duration_ms=1100,
        )
    )
    s = _Scenario("ok-disconnect-after-last-chunk-is-not-abort", "ok")
    _ingress(s, 0.0)
    add(_stream_ok(s, 0.1, events=3))
    s = _Scenario("ok-many-rays-but-passed", "ok")
    _probe_start(s)
    s.at(
        1.05,
        "probe.network.response",
        {"url": "https://shop.example.com/a.js", "status": 200, "content_length": 10, "duration_ms": 5},
        edge={"cf-ray": "8f1a2b3c4d5e6f79-FRA"},
    )
    s.at(
        1.06,
        "probe.network.response",
        {"url": "https://shop.example.com/b.js", "status": 200, "content_length": 10, "duration_ms": 5},
        edge={"cf-ray": "8f1a2b3c4d5e6f7a-FRA"},
    )
    _happy_backend(s)
    add(_harness_saw_tokens(s, 3.0))
    s = _Scenario("ok-malformed-fields-tolerated", "ok")
    _happy_backend(s, 0.0)
    s.events.append({"boundary": "backend.sse.event", "metadata": "not-a-dict", "ts": "yesterday", "mono_ns": "x"})
    s.events.append({"layer": "backend", "boundary": 7})
    add(s)
    return [s.record() for s in out]


# -- backend scenarios: the real middleware and scopes under uvicorn ---------------------------

#: The slow threshold the backend scenarios are labelled with, so "slow" takes a second.
SLOW_S = 2.0
HEARTBEAT_S = 0.1
SLUG = "diag-corpus"


class RateLimitError(Exception):
    """Stands in for a provider client's rate-limit error (no network needed)."""


class APITimeoutError(Exception):
    """Stands in for a provider client's timeout error."""


def build_app(wrap: str = "inner") -> Any:
    """A Starlette app with one endpoint per scenario (``/chat/<name>``).

    ``wrap="inner"`` adds the middleware with ``add_middleware`` (inside Starlette's
    ServerErrorMiddleware); ``"outer"`` wraps the whole app, so it sees the 500 page.
    """
    import asyncio
    import contextlib
    import time

    from starlette.applications import Starlette
    from starlette.responses import JSONResponse, PlainTextResponse, StreamingResponse
    from starlette.routing import Route

    import cvdiag

    async def llm(seconds: float, tokens: int, fail: BaseException | None = None) -> int:
        async with cvdiag.llm_call("openai", "gpt-4o-mini", heartbeat_s=HEARTBEAT_S) as call:
            await asyncio.sleep(seconds)
            if fail is not None:
                raise fail
            call.record(tokens, prompt_tokens=12, completion_tokens=tokens, finish_reason="stop")
        return tokens

    def sse(body: Any) -> StreamingResponse:
        return StreamingResponse(body, media_type="text/event-stream")

    async def happy(request: Any) -> Any:
        async def body() -> Any:
            async with cvdiag.agent_scope("shopper", model_id="gpt-4o-mini"):
                n = await llm(0.05, 5)
            for i in range(n):
                yield f"data: token {i}\n\n"

        return sse(body())

    def happy_json(request: Any) -> Any:  # sync: runs in the threadpool, heartbeats from a thread
        with (
            cvdiag.agent_scope("shopper", model_id="gpt-4o-mini"),
            cvdiag.llm_call("openai", "gpt-4o-mini", heartbeat_s=HEARTBEAT_S) as call,
        ):
            time.sleep(0.05)
            call.record(7, completion_tokens=7)
        return JSONResponse({"answer": "Here are three shoes you might like."})

    async def slow_stream(request: Any) -> Any:
        async def body() -> Any:
            async with cvdiag.agent_scope("shopper"):
                await llm(0.02, 40)
            for i in range(400):
                yield f"event: token\ndata: {i}\n\n"
                await asyncio.sleep(0.05)

        return sse(body())

    async def wait_first(request: Any) -> Any:
        async def body() -> Any:
            async with cvdiag.agent_scope("shopper"):
                await llm(5.0, 5)  # the client gives up long before this answers
            yield "data: too late\n\n"

        return sse(body())

    async def raise_before(request: Any) -> Any:
        raise KeyError("cart_id")

    async def raise_mid(request: Any) -> Any:
        async def body() -> Any:
            yield "data: one\n\n"
            await asyncio.sleep(0.01)
            yield "data: two\n\n"
            raise RuntimeError("tool failed mid-stream")

        return sse(body())

    async def llm_raise(request: Any) -> Any:
        async with cvdiag.agent_scope("shopper"):
            await llm(0.02, 0, RateLimitError("429 Too Many Requests"))
        return PlainTextResponse("unreachable")

    async def llm_raise_handled(request: Any) -> Any:
        async def body() -> Any:
            try:
                await llm(0.02, 0, APITimeoutError("provider timed out"))
            except APITimeoutError:
                yield "data: sorry, please try again\n\n"

        return sse(body())

    async def llm_hang(request: Any) -> Any:
        async def body() -> Any:
            async with cvdiag.agent_scope("shopper"):
                await llm(3600, 0)
            yield "data: never\n\n"

        return sse(body())

    async def llm_block(request: Any) -> Any:
        async with (
            cvdiag.agent_scope("shopper"),
            cvdiag.llm_call("openai", "gpt-4o-mini", heartbeat_s=HEARTBEAT_S),
        ):
            await asyncio.sleep(0.25)
            time.sleep(3600)  # a sync client on the event loop: heartbeats stop too
        return PlainTextResponse("never")

    async def llm_slow(request: Any) -> Any:
        async def body() -> Any:
            async with cvdiag.agent_scope("shopper"):
                n = await llm(SLOW_S * 1.3, 3)
            for i in range(n):
                yield f"data: token {i}\n\n"

        return sse(body())

    async def empty(request: Any) -> Any:
        async def body() -> Any:
            async with cvdiag.agent_scope("shopper"):
                n = await llm(0.02, 0)
            for i in range(n):
                yield f"data: token {i}\n\n"

        return sse(body())

    async def agent_error(request: Any) -> Any:
        try:
            async with cvdiag.agent_scope("planner"):
                raise ValueError("planner produced no plan")
        except ValueError:
            return JSONResponse({"error": "the planner failed, showing defaults"})

    async def agent_error_stream(request: Any) -> Any:
        async def body() -> Any:
            with contextlib.suppress(LookupError):
                async with cvdiag.agent_scope("planner"):
                    raise LookupError("no such product")
            for i in range(3):
                yield f"data: fallback {i}\n\n"

        return sse(body())

    async def unavailable(request: Any) -> Any:
        return JSONResponse({"error": "maintenance"}, status_code=503)

    async def health(request: Any) -> Any:
        return PlainTextResponse("ok")

    endpoints = {
        "happy": happy,
        "happy-json": happy_json,
        "slow-stream": slow_stream,
        "wait-first": wait_first,
        "raise-before": raise_before,
        "raise-mid": raise_mid,
        "llm-raise": llm_raise,
        "llm-raise-handled": llm_raise_handled,
        "llm-hang": llm_hang,
        "llm-block": llm_block,
        "llm-slow": llm_slow,
        "empty": empty,
        "agent-error": agent_error,
        "agent-error-stream": agent_error_stream,
        "unavailable": unavailable,
    }
    routes = [Route(f"/chat/{name}", fn) for name, fn in endpoints.items()]
    routes.append(Route("/health", health))

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> Any:
        yield
        cvdiag.flush()

    app = Starlette(routes=routes, lifespan=lifespan)
    if wrap == "outer":
        return cvdiag.CvdiagMiddleware(app, slug=SLUG, exclude_paths=("/health",))
    app.add_middleware(cvdiag.CvdiagMiddleware, slug=SLUG, exclude_paths=("/health",))
    return app


def serve(wrap: str, tier: str, port: int, log: str) -> None:
    """The server side of a scenario run: cvdiag writes to ``log`` (NDJSON)."""
    import uvicorn

    import cvdiag

    cvdiag.configure(enabled=True, tier=tier, environ={"CVDIAG_ENV": "test"}, stdout=False, file=log)
    uvicorn.run(build_app(wrap), host="127.0.0.1", port=port, log_level="critical", lifespan="on")


class _Server:
    """``serve`` in a subprocess on a free loopback port, its log in ``log``."""

    def __init__(self, wrap: str, tier: str, log: Path) -> None:
        import socket
        import subprocess

        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        self.log = log
        self.base = f"http://127.0.0.1:{self.port}"
        cmd = [sys.executable, __file__, "serve", "--app", wrap, "--tier", tier, "--port", str(self.port)]
        self.proc = subprocess.Popen([*cmd, "--log", str(log)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self._wait_ready()

    def _wait_ready(self) -> None:
        import time

        import httpx

        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}")
            try:
                if httpx.get(self.base + "/health", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.1)
        raise RuntimeError("server did not start")

    def stop(self) -> None:
        import signal

        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)  # graceful: lifespan shutdown flushes the log
            try:
                self.proc.wait(timeout=15)
            except Exception:
                self.proc.kill()
                self.proc.wait()

    def kill(self) -> None:
        """``kill -9``: nothing is flushed, no terminal is written."""
        import signal

        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()


def _read_log(path: Path) -> list[dict]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue  # a line cut by kill -9
    return out


def _wait_for(server: _Server, test_id: str, boundary: str, count: int = 1, timeout: float = 15.0) -> None:
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        seen = [e for e in _read_log(server.log) if e.get("test_id") == test_id and e.get("boundary") == boundary]
        if len(seen) >= count:
            return
        time.sleep(0.02)
    raise RuntimeError(f"{test_id}: no {count} x {boundary} in the log")


# Drivers: what the client does. Each takes the server and the test id.


def _get(server: _Server, test_id: str, name: str) -> None:
    import httpx

    # A stream that breaks off mid-body is a scenario, not a failure of the driver.
    with contextlib.suppress(httpx.HTTPError):
        httpx.get(f"{server.base}/chat/{name}", headers={"x-test-id": test_id}, timeout=30)


def _hang_up_after_first_chunk(server: _Server, test_id: str, name: str) -> None:
    import httpx

    with (
        httpx.Client(timeout=30) as client,
        client.stream("GET", f"{server.base}/chat/{name}", headers={"x-test-id": test_id}) as response,
    ):
        for _ in response.iter_raw():
            break  # closing the stream here drops the connection mid-body
    _wait_for(server, test_id, "backend.sse.aborted")


def _give_up_before_first_byte(server: _Server, test_id: str, name: str) -> None:
    import httpx

    try:
        with (
            httpx.Client(timeout=httpx.Timeout(30, read=0.4)) as client,
            client.stream("GET", f"{server.base}/chat/{name}", headers={"x-test-id": test_id}) as response,
        ):
            for _ in response.iter_raw():
                break
    except httpx.ReadTimeout:
        pass
    _wait_for(server, test_id, "backend.sse.aborted")


def _kill_when(boundary: str, count: int = 1, settle: float = 0.0) -> Any:
    """A driver that starts the request, waits for ``boundary`` in the log, then kill -9s."""

    def drive(server: _Server, test_id: str, name: str) -> None:
        import threading
        import time

        import httpx

        def request() -> None:
            try:
                with (
                    httpx.Client(timeout=60) as client,
                    client.stream("GET", f"{server.base}/chat/{name}", headers={"x-test-id": test_id}) as response,
                ):
                    for _ in response.iter_raw():
                        pass
            except httpx.HTTPError:
                pass  # the server died under us: that is the scenario

        thread = threading.Thread(target=request, daemon=True)
        thread.start()
        _wait_for(server, test_id, boundary, count)
        time.sleep(settle)
        server.kill()
        thread.join(timeout=10)

    drive.kills = True  # type: ignore[attr-defined]
    return drive


# (scenario, endpoint, driver, {tier: label}). A tier missing from the dict is not run:
# at the default tier there are no LLM events, and a scenario whose only trace is an LLM
# event would just be "ok" there.
_ALL = ("debug", "verbose", "default")
BACKEND_PLAN: tuple[tuple[str, str, Any, dict[str, str]], ...] = (
    ("happy-sse", "happy", _get, dict.fromkeys(_ALL, "ok")),
    ("happy-json-sync", "happy-json", _get, dict.fromkeys(_ALL, "ok")),
    (
        "disconnect-after-first-byte",
        "slow-stream",
        _hang_up_after_first_chunk,
        dict.fromkeys(_ALL, "client-disconnect"),
    ),
    (
        "disconnect-before-first-byte",
        "wait-first",
        _give_up_before_first_byte,
        dict.fromkeys(_ALL, "client-disconnect"),
    ),
    ("raise-before-response", "raise-before", _get, dict.fromkeys(_ALL, "server-error")),
    ("raise-mid-stream", "raise-mid", _get, dict.fromkeys(_ALL, "stream-error")),
    ("llm-raises", "llm-raise", _get, {"debug": "llm-error", "verbose": "llm-error", "default": "server-error"}),
    ("llm-raises-handled", "llm-raise-handled", _get, {"debug": "llm-error", "verbose": "llm-error"}),
    ("llm-slow-heartbeats", "llm-slow", _get, {"debug": "llm-slow", "verbose": "llm-slow"}),
    ("provider-empty-answer", "empty", _get, {"debug": "provider-empty", "verbose": "provider-empty"}),
    ("agent-error-json", "agent-error", _get, dict.fromkeys(_ALL, "agent-error")),
    ("agent-error-stream", "agent-error-stream", _get, dict.fromkeys(_ALL, "agent-error")),
    ("status-503", "unavailable", _get, dict.fromkeys(_ALL, "server-error")),
    # kill -9 scenarios: each on its own server.
    (
        "killed-mid-stream",
        "slow-stream",
        _kill_when("backend.agent.exit", settle=0.3),
        dict.fromkeys(_ALL, "incomplete"),
    ),
    (
        "llm-hanging-killed",
        "llm-hang",
        _kill_when("backend.llm.call.heartbeat", count=2),
        {"debug": "llm-stalled", "verbose": "llm-stalled"},
    ),
    (
        "llm-hanging-killed-default-tier",
        "llm-hang",
        _kill_when("backend.agent.enter", settle=0.3),
        {"default": "incomplete"},
    ),
    (
        "llm-blocks-event-loop-killed",
        "llm-block",
        _kill_when("backend.llm.call.heartbeat", count=2, settle=0.3),
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
                server = _Server(wrap, tier, log)
                try:
                    runs.append((log, [(name, labels[tier]) for name, _, _, labels in shared]))
                    for name, endpoint, drive, _ in shared:
                        drive(server, f"be-{wrap}-{tier}-{name}", endpoint)
                finally:
                    server.stop()
                for name, endpoint, drive, labels in killed:
                    log = base / f"{wrap}-{tier}-{name}.ndjson"
                    server = _Server(wrap, tier, log)
                    try:
                        drive(server, f"be-{wrap}-{tier}-{name}", endpoint)
                    finally:
                        server.stop()
                    runs.append((log, [(name, labels[tier])]))
                for log, planned in runs:
                    envelopes = _read_log(log)
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


def write_jsonl(path: Path, records: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as fh:
        for record in records:
            fh.write(json.dumps(record, separators=(",", ":"), sort_keys=False) + "\n")
    print(f"wrote {len(records)} scenarios to {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=("hand", "backend", "all", "serve"))
    parser.add_argument("--out", type=Path, default=CORPUS, help="corpus directory (default tests/corpus)")
    parser.add_argument("--app", default="inner", help=argparse.SUPPRESS)
    parser.add_argument("--tier", default="debug", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--log", default="", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.what == "serve":
        serve(args.app, args.tier, args.port, args.log)
        return 0
    if args.what in ("hand", "all"):
        write_jsonl(args.out / "hand.jsonl", hand_scenarios())
    if args.what in ("backend", "all"):
        write_jsonl(args.out / "backend.jsonl", backend_scenarios())
    return 0


if __name__ == "__main__":
    sys.exit(main())
