"""Diagnosis: name the root cause of one test's failure from its CVDIAG envelopes.

The read side folds every envelope of a test into an ``Evidence`` (a streaming
accumulator: counters and a few first/last values, never the events themselves, so a
GB-sized log costs a few kilobytes per test id), then ``classify`` runs the rules of
``diagnose_rules.RULES`` in precedence order and the first that matches names the
class. Causes deeper in the chain come first: an LLM failure that made the endpoint
raise is ``llm-error``, not ``server-error``. A rule that needs a layer the log lacks
does not match, so a class is never guessed.

Pure: no I/O, no clock, no Starlette or structlog (the CLI imports this at start-up).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from .diagnose_rules import RULES, names_runner_crash
from .schema import FAILURE_OUTCOMES, LAYERS, parse_ts

#: Every class ``classify`` can return, in precedence order (the first rule that matches wins).
CLASSES: tuple[str, ...] = (
    "probe-runner-crash",
    "edge-interference",
    "llm-error",
    "provider-empty",
    "aimock-fixture-mismatch",
    "llm-stalled",
    "llm-slow",
    "server-error",
    "stream-error",
    "client-disconnect",
    "agent-error",
    "incomplete",
    "no-backend",
    "strict-harness",
    "frontend-hydration",
    "ok",
)

# A histogram of boundary names stays bounded even if a log invents thousands of them.
_MAX_BOUNDARY_NAMES = 64
_OTHER_BOUNDARIES = "(other)"
# Free text kept for a reason sentence (error classes, console messages) is cut here.
_TEXT_LIMIT = 160
_MAX_STATUSES = 16
_MAX_RAYS_PER_LAYER = 4


@dataclass(frozen=True, slots=True)
class Thresholds:
    """Tunable limits of the rules; the defaults are the documented ones (docs/diagnosis.md)."""

    #: An LLM call whose latency, or whose last heartbeat's elapsed time, reaches this is slow.
    slow_s: float = 30.0
    #: aimock with no matching fixture is a mismatch when fewer bytes than this came back.
    aimock_min_bytes: int = 16


@dataclass(frozen=True, slots=True)
class Diagnosis:
    """The verdict for one test: a class, how sure, one sentence why, and the facts used."""

    test_id: str
    cls: str
    confidence: float
    reason: str
    evidence: dict

    def to_json(self) -> dict:
        return {
            "test_id": self.test_id,
            "class": self.cls,
            "confidence": self.confidence,
            "reason": self.reason,
            "evidence": self.evidence,
        }


# -- tolerant field readers: a malformed-but-parsed envelope must never raise -------------


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value):
        return int(value)
    return None


def _num(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float) and math.isfinite(value):
        return float(value)
    return None


def _text(value: Any) -> str | None:
    if isinstance(value, str):
        return value[:_TEXT_LIMIT]
    return None


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if type(value) is dict or isinstance(value, Mapping) else _EMPTY


_EMPTY: Mapping[str, Any] = MappingProxyType({})


class _Pick:
    """Keeps the earliest (or latest) value offered, ordered by (ts, mono_ns).

    Envelopes arrive in any order (several files merged), so "first" and "last" are
    decided by the key, not by arrival. A value without a key never displaces one
    that has a key; among keyless values the first offered stays.
    """

    __slots__ = ("_latest", "key", "value")

    def __init__(self, *, latest: bool = False) -> None:
        self._latest = latest
        self.key: tuple[float, int] | None = None
        self.value: Any = None

    def __bool__(self) -> bool:
        return self.value is not None

    def offer(self, key: tuple[float, int] | None, value: Any) -> None:
        if self.value is not None:
            if key is None:
                return
            if self.key is not None and ((key < self.key) if self._latest else (key >= self.key)):
                return
        self.key, self.value = key, value


class Evidence:
    """Everything ``classify`` needs about one test, folded one envelope at a time.

    Memory stays constant in the number of envelopes: counters, small bounded
    dictionaries and a few first/last values.
    """

    __slots__ = (
        "abort_first",
        "aborts",
        "agent_bad",
        "agent_exits",
        "agent_name",
        "aimock_bytes",
        "aimock_chunk_bytes",
        "aimock_decisions",
        "aimock_matched",
        "aimock_reject",
        "backend_statuses",
        "boundaries",
        "complete_5xx",
        "complete_last",
        "complete_ok_bodiless",
        "complete_ok_empty",
        "complete_ok_with_events",
        "completes",
        "completes_5xx",
        "edge_mitigated",
        "edge_proxy",
        "edge_rays",
        "edge_retry",
        "error_first",
        "errors",
        "events",
        "failures",
        "first",
        "first_byte",
        "heartbeat_last",
        "heartbeat_max",
        "heartbeats",
        "ingress",
        "last",
        "last_backend",
        "layers",
        "llm_errors",
        "llm_first_error",
        "llm_last_response",
        "llm_last_start",
        "llm_ok",
        "llm_ok_with_tokens",
        "llm_ok_zero_tokens",
        "llm_responses",
        "llm_slowest",
        "llm_starts",
        "llm_timeouts",
        "probe_alternate",
        "probe_console_errors",
        "probe_console_first",
        "probe_crash",
        "probe_exit",
        "probe_first_tokens",
        "probe_network_errors",
        "skipped",
        "sse_events",
        "test_id",
    )

    def __init__(self, test_id: str) -> None:
        self.test_id = test_id
        self.events = 0
        self.skipped = 0  # envelopes too odd to use (not a mapping, no boundary)
        self.layers: dict[str, int] = {}
        self.boundaries: dict[str, int] = {}
        self.failures = 0  # envelopes whose outcome is err or timeout
        self.first = _Pick()
        self.last = _Pick(latest=True)
        self.last_backend = _Pick(latest=True)
        # probe (harness)
        self.probe_crash = _Pick()  # (boundary, error text)
        self.probe_exit = _Pick(latest=True)  # (terminal_outcome, first_token_delta_ms, failure_classifier)
        self.probe_first_tokens = 0
        self.probe_alternate = 0
        self.probe_console_errors = 0
        self.probe_console_first = _Pick()
        self.probe_network_errors = 0
        # edge
        self.edge_mitigated = _Pick()  # (layer, boundary, value)
        self.edge_proxy = _Pick()  # (layer, via)
        self.edge_rays: dict[str, dict[str, tuple[float, int]]] = {}  # layer -> earliest few rays
        self.edge_retry: dict[int, _Pick] = {}  # status -> first (layer, retry-after)
        self.backend_statuses: set[int] = set()
        # LLM
        self.llm_starts = 0
        self.llm_responses = 0
        self.llm_ok = 0
        self.llm_ok_with_tokens = 0
        self.llm_ok_zero_tokens = 0  # ok calls that reported 0 tokens explicitly (not null)
        self.llm_errors = 0
        self.llm_timeouts = 0
        self.llm_first_error = _Pick()  # (error_class, provider, model, latency_ms)
        self.llm_last_start = _Pick(latest=True)  # (provider, model)
        self.llm_last_response = _Pick(latest=True)  # dict of the response's numbers
        self.llm_slowest: tuple[float, str, str] | None = None  # (latency_ms, provider, model)
        self.heartbeats = 0
        self.heartbeat_last = _Pick(latest=True)  # elapsed_ms_since_start
        self.heartbeat_max: float | None = None
        # backend request/stream
        self.ingress = 0
        self.first_byte = _Pick()  # delta_ms_from_ingress (or -1.0 when absent)
        self.sse_events = 0
        self.aborts: dict[str, int] = {}
        self.abort_first: dict[str, _Pick] = {}  # kind -> (bytes_before_abort, duration_ms)
        self.completes = 0
        self.complete_ok_with_events = 0
        self.complete_ok_empty = 0  # ok completions with 0 SSE events
        self.complete_ok_bodiless = 0  # ... that also sent 0 bytes
        self.completes_5xx = 0
        self.complete_5xx = _Pick()  # (http_status, total_duration_ms) of the first
        self.complete_last = _Pick(latest=True)  # (http_status, sse_event_count, total_duration_ms)
        self.errors = 0
        self.error_first = _Pick()  # (exception_type, message_scrubbed)
        self.agent_name = _Pick(latest=True)
        self.agent_bad = _Pick()  # terminal_outcome error/cancelled
        self.agent_exits = 0
        # aimock
        self.aimock_decisions = 0
        self.aimock_matched = 0
        self.aimock_reject = _Pick()
        self.aimock_bytes = _Pick(latest=True)  # total_bytes or bytes_before_abort
        self.aimock_chunk_bytes = 0

    # -- folding ---------------------------------------------------------------------------

    def add(self, envelope: Mapping[str, Any]) -> None:
        """Fold one envelope in. Tolerates missing and odd fields; never raises."""
        try:
            self._add(envelope)
        except Exception:  # a reader must survive any parsed-but-malformed envelope
            self.skipped += 1

    def _add(self, env: Mapping[str, Any]) -> None:
        if type(env) is not dict and not isinstance(env, Mapping):
            self.skipped += 1
            return
        boundary = env.get("boundary")
        if type(boundary) is not str:
            self.skipped += 1
            return
        self.events += 1
        boundaries = self.boundaries
        if boundary in boundaries:
            boundaries[boundary] += 1
        elif len(boundaries) < _MAX_BOUNDARY_NAMES:
            boundaries[boundary] = 1
        else:
            boundaries[_OTHER_BOUNDARIES] = boundaries.get(_OTHER_BOUNDARIES, 0) + 1
        if boundary.startswith("cvdiag."):
            return  # accounting: counted in the histogram, says nothing about the test
        layer = env.get("layer")
        if layer not in LAYERS:
            prefix = boundary.split(".", 1)[0]
            layer = prefix if prefix in LAYERS else "other"
        self.layers[layer] = self.layers.get(layer, 0) + 1
        outcome = env.get("outcome")
        if outcome in FAILURE_OUTCOMES:
            self.failures += 1
        key = _order_key(env)
        ts = env.get("ts") if key is not None else None
        self.first.offer(key, (ts, layer, boundary))
        self.last.offer(key, (ts, layer, boundary))
        if layer == "backend":
            self.last_backend.offer(key, (ts, boundary))
        md = _mapping(env.get("metadata"))
        edge = _mapping(env.get("edge_headers"))
        # Most envelopes carry no edge header at all: one cheap test skips the edge rules.
        if edge and (edge.get("cf-ray") or edge.get("cf-mitigated") or edge.get("via") or edge.get("retry-after")):
            self._add_edge(layer, boundary, md, edge, key)
        handler = _HANDLERS.get(boundary)
        if handler is not None:
            handler(self, md, outcome, key, env)

    def _add_edge(self, layer: str, boundary: str, md: Mapping, edge: Mapping, key: Any) -> None:
        mitigated = _text(edge.get("cf-mitigated"))
        if mitigated and mitigated.strip().lower() in _MITIGATIONS:
            self.edge_mitigated.offer(key, (layer, boundary, mitigated.strip().lower()))
        via = _text(edge.get("via"))
        if via and any(proxy in via.lower() for proxy in _PROXIES):
            self.edge_proxy.offer(key, (layer, via))
        ray = _text(edge.get("cf-ray"))
        if ray:
            self._add_ray(layer, ray, key)
        retry_after = _text(edge.get("retry-after"))
        # The backend's own response headers are the app's, even relayed ones (a provider's
        # 429 with its cf-ray): only what reached the harness, or carries edge marks, counts.
        if not retry_after or layer == "backend" or not (ray or via or layer == "probe"):
            return
        status = _int(md.get(_STATUS_KEYS.get(boundary, "")))
        if status is None or status < 400:
            return
        pick = self.edge_retry.get(status)
        if pick is None:
            if len(self.edge_retry) >= _MAX_STATUSES:
                return
            pick = self.edge_retry[status] = _Pick()
        pick.offer(key, (layer, retry_after))

    def _add_ray(self, layer: str, ray: str, key: tuple[float, int] | None) -> None:
        """Keep the few earliest distinct cf-rays per layer, whatever the arrival order."""
        rank = key if key is not None else (math.inf, 0)
        rays = self.edge_rays.setdefault(layer, {})
        if ray in rays:
            rays[ray] = min(rays[ray], rank)
            return
        rays[ray] = rank
        if len(rays) > _MAX_RAYS_PER_LAYER:
            del rays[max(rays, key=lambda r: (rays[r], r))]

    def distinct_rays(self) -> tuple[str, str, str] | None:
        """(layer, first ray, second ray) of the first layer that saw more than one cf-ray."""
        for layer in sorted(self.edge_rays):
            rays = self.edge_rays[layer]
            if len(rays) > 1:
                first, second = sorted(rays, key=lambda r: (rays[r], r))[:2]
                return layer, first, second
        return None

    # -- derived facts -----------------------------------------------------------------------

    @property
    def backend_events(self) -> int:
        return self.layers.get("backend", 0)

    def saw_first_byte(self) -> bool:
        return bool(self.first_byte)

    def terminals(self) -> int:
        """Backend requests that ended: completions, aborts, and errors that were the terminal.

        backend.error.caught also follows a chunk_error abort and a 500 completion (spec
        section 8), so only the errors beyond those count as terminals of their own.
        """
        aborts = sum(self.aborts.values())
        chunk_errors = self.aborts.get("chunk_error", 0)
        follow_ups = chunk_errors + self.completes_5xx
        return self.completes + aborts + max(0, self.errors - follow_ups)

    def summary(self, log_end: float | None = None) -> dict:
        """The JSON-ready evidence: events per layer, boundary histogram, derived numbers."""
        first = self.first.value or (None, None, None)
        last = self.last.value or (None, None, None)
        response = self.llm_last_response.value or {}
        complete = self.complete_last.value or (None, None, None)
        abort_kind, abort_bytes, _ = self.first_abort()
        error = self.error_first.value or (None, None)
        duration_ms = None
        if self.first.key is not None and self.last.key is not None:
            duration_ms = round((self.last.key[0] - self.first.key[0]) * 1000.0, 1)
        ttfb = self.first_byte.value
        return {
            "events": self.events,
            "events_per_layer": dict(sorted(self.layers.items())),
            "boundaries": dict(sorted(self.boundaries.items())),
            "skipped": self.skipped,
            "first_ts": first[0],
            "last_ts": last[0],
            "duration_ms": duration_ms,
            "failures": self.failures,
            "ttfb_ms": ttfb if isinstance(ttfb, float) and ttfb >= 0 else None,
            "llm_calls": {
                "started": self.llm_starts,
                "answered": self.llm_responses,
                "ok": self.llm_ok,
                "err": self.llm_errors,
                "timeout": self.llm_timeouts,
            },
            "llm_provider": response.get("provider") or _at(self.llm_last_start.value, 0),
            "llm_model": response.get("model") or _at(self.llm_last_start.value, 1),
            "llm_latency_ms": response.get("latency_ms"),
            "llm_max_latency_ms": self.llm_slowest[0] if self.llm_slowest else None,
            "llm_error_class": _at(self.llm_first_error.value, 0),
            "open_llm_call_s": self.open_llm_call_s(log_end),
            "heartbeats": self.heartbeats,
            "last_heartbeat_elapsed_ms": self.heartbeat_last.value,
            "response_token_count": response.get("response_token_count"),
            "prompt_tokens": response.get("prompt_tokens"),
            "completion_tokens": response.get("completion_tokens"),
            "http_status": self.worst_status(),
            "sse_event_count": complete[1],
            "termination_kind": abort_kind,
            "bytes_before_abort": abort_bytes,
            "exception_type": error[0],
            "agent_terminal_outcome": self.agent_bad.value,
            "last_boundary": last[2],
            "last_backend_boundary": _at(self.last_backend.value, 1),
        }

    def worst_status(self) -> int | None:
        """The highest HTTP status the backend completed with."""
        return max(self.backend_statuses) if self.backend_statuses else None

    def first_abort(self) -> tuple[str | None, int | None, float | None]:
        """(termination_kind, bytes_before_abort, duration_ms) of the earliest abort."""
        best: tuple[str, _Pick] | None = None
        for kind, pick in self.abort_first.items():
            if best is None or (pick.key is not None and (best[1].key is None or pick.key < best[1].key)):
                best = (kind, pick)
        if best is None:
            return None, None, None
        return best[0], best[1].value[0], best[1].value[1]

    def open_llm_call_s(self, log_end: float | None) -> float | None:
        """How long before the end of the log the last unanswered LLM call started."""
        if self.llm_starts <= self.llm_responses or self.llm_last_start.key is None:
            return None
        end = log_end if log_end is not None else (self.last.key[0] if self.last.key else None)
        if end is None:
            return None
        return round(max(0.0, end - self.llm_last_start.key[0]), 1)


def _at(value: Any, index: int) -> Any:
    return value[index] if isinstance(value, tuple) else None


def _order_key(env: Mapping[str, Any]) -> tuple[float, int] | None:
    ts = env.get("ts")
    if type(ts) is not str:
        return None
    try:
        seconds = parse_ts(ts)
    except (ValueError, TypeError, OverflowError):
        return None
    mono = env.get("mono_ns")
    return (seconds, mono if type(mono) is int else 0)


_MITIGATIONS = frozenset({"challenge", "jschallenge", "block"})
_PROXIES = ("squid", "varnish", "nginx-proxy")
# Where each boundary carries an HTTP status, for the retry-after sub-cause of edge-interference.
_STATUS_KEYS = {
    "backend.response.complete": "http_status",
    "probe.navigate.complete": "http_status",
    "probe.network.response": "status",
    "probe.network.error": "response_status",
    "aimock.response.complete": "http_status",
}


# -- one small handler per boundary that carries a fact -----------------------------------


def _on_probe_error(ev: Evidence, md: Mapping, outcome: Any, key: Any, env: Mapping) -> None:
    ev.probe_network_errors += 1
    text = _text(md.get("error_class"))
    if text and names_runner_crash(text):
        ev.probe_crash.offer(key, ("probe.network.error", text))


def _on_probe_exit(ev: Evidence, md: Mapping, outcome: Any, key: Any, env: Mapping) -> None:
    classifier = _text(md.get("failure_classifier")) or _text(md.get("error_class"))
    if classifier and names_runner_crash(classifier):
        ev.probe_crash.offer(key, ("probe.exit", classifier))
    ev.probe_exit.offer(key, (_text(md.get("terminal_outcome")), _num(md.get("first_token_delta_ms")), classifier))


def _on_probe_first_token(ev: Evidence, md: Mapping, outcome: Any, key: Any, env: Mapping) -> None:
    ev.probe_first_tokens += 1


def _on_probe_alternate(ev: Evidence, md: Mapping, outcome: Any, key: Any, env: Mapping) -> None:
    ev.probe_alternate += 1


def _on_probe_console(ev: Evidence, md: Mapping, outcome: Any, key: Any, env: Mapping) -> None:
    ev.probe_console_errors += 1
    ev.probe_console_first.offer(key, _text(md.get("message_scrubbed")) or "")


def _on_llm_start(ev: Evidence, md: Mapping, outcome: Any, key: Any, env: Mapping) -> None:
    ev.llm_starts += 1
    ev.llm_last_start.offer(key, (_text(md.get("provider")), _text(md.get("model"))))


def _on_llm_heartbeat(ev: Evidence, md: Mapping, outcome: Any, key: Any, env: Mapping) -> None:
    ev.heartbeats += 1
    elapsed = _num(md.get("elapsed_ms_since_start"))
    if elapsed is None:
        return
    ev.heartbeat_last.offer(key, elapsed)
    if ev.heartbeat_max is None or elapsed > ev.heartbeat_max:
        ev.heartbeat_max = elapsed


def _on_llm_response(ev: Evidence, md: Mapping, outcome: Any, key: Any, env: Mapping) -> None:
    ev.llm_responses += 1
    provider, model = _text(md.get("provider")), _text(md.get("model"))
    latency = _num(md.get("latency_ms"))
    if latency is None:
        latency = _num(env.get("duration_ms"))
    tokens = _int(md.get("response_token_count"))
    completion = _int(md.get("completion_tokens"))
    if outcome == "err":
        ev.llm_errors += 1
        ev.llm_first_error.offer(key, (_text(md.get("error_class")) or "an unnamed error", provider, model, latency))
    elif outcome == "timeout":
        ev.llm_timeouts += 1
    elif outcome == "ok":
        ev.llm_ok += 1
        if (tokens or 0) > 0 or (completion or 0) > 0:
            ev.llm_ok_with_tokens += 1
        elif tokens == 0 or completion == 0:
            ev.llm_ok_zero_tokens += 1
    if latency is not None:
        candidate = (latency, provider or "?", model or "?")
        if ev.llm_slowest is None or candidate > ev.llm_slowest:
            ev.llm_slowest = candidate
    ev.llm_last_response.offer(
        key,
        {
            "provider": provider,
            "model": model,
            "outcome": outcome if isinstance(outcome, str) else None,
            "latency_ms": latency,
            "response_token_count": tokens,
            "prompt_tokens": _int(md.get("prompt_tokens")),
            "completion_tokens": completion,
        },
    )


def _on_ingress(ev: Evidence, md: Mapping, outcome: Any, key: Any, env: Mapping) -> None:
    ev.ingress += 1


def _on_first_byte(ev: Evidence, md: Mapping, outcome: Any, key: Any, env: Mapping) -> None:
    delta = _num(md.get("delta_ms_from_ingress"))
    ev.first_byte.offer(key, delta if delta is not None else -1.0)


def _on_sse_event(ev: Evidence, md: Mapping, outcome: Any, key: Any, env: Mapping) -> None:
    ev.sse_events += 1


def _on_aborted(ev: Evidence, md: Mapping, outcome: Any, key: Any, env: Mapping) -> None:
    kind = _text(md.get("termination_kind")) or "unknown"
    ev.aborts[kind] = ev.aborts.get(kind, 0) + 1
    pick = ev.abort_first.get(kind)
    if pick is None:
        if len(ev.abort_first) >= _MAX_STATUSES:
            return
        pick = ev.abort_first[kind] = _Pick()
    pick.offer(key, (_int(md.get("bytes_before_abort")), _num(env.get("duration_ms"))))


def _on_complete(ev: Evidence, md: Mapping, outcome: Any, key: Any, env: Mapping) -> None:
    ev.completes += 1
    status = _int(md.get("http_status"))
    if status is not None and len(ev.backend_statuses) < _MAX_STATUSES:
        ev.backend_statuses.add(status)
    events = _int(md.get("sse_event_count"))
    total = _num(md.get("total_duration_ms"))
    if total is None:
        total = _num(env.get("duration_ms"))
    if status is not None and status >= 500:
        ev.completes_5xx += 1
        ev.complete_5xx.offer(key, (status, total))
    elif outcome == "ok":
        if (events or 0) > 0:
            ev.complete_ok_with_events += 1
        elif events == 0:
            ev.complete_ok_empty += 1
            if _int(md.get("content_length")) == 0:
                ev.complete_ok_bodiless += 1
    ev.complete_last.offer(key, (status, events, total))


def _on_error(ev: Evidence, md: Mapping, outcome: Any, key: Any, env: Mapping) -> None:
    ev.errors += 1
    ev.error_first.offer(key, (_text(md.get("exception_type")) or "an exception", _text(md.get("message_scrubbed"))))


def _on_agent_enter(ev: Evidence, md: Mapping, outcome: Any, key: Any, env: Mapping) -> None:
    ev.agent_name.offer(key, _text(md.get("agent_name")) or "?")


def _on_agent_exit(ev: Evidence, md: Mapping, outcome: Any, key: Any, env: Mapping) -> None:
    ev.agent_exits += 1
    terminal = _text(md.get("terminal_outcome"))
    if terminal in ("error", "cancelled"):
        ev.agent_bad.offer(key, terminal)


def _on_aimock_decision(ev: Evidence, md: Mapping, outcome: Any, key: Any, env: Mapping) -> None:
    ev.aimock_decisions += 1
    if md.get("fixture_id") not in (None, ""):
        ev.aimock_matched += 1
    reasons = md.get("reject_reasons")
    if reasons:
        ev.aimock_reject.offer(key, _text(reasons if isinstance(reasons, str) else ", ".join(map(str, reasons))))


def _on_aimock_complete(ev: Evidence, md: Mapping, outcome: Any, key: Any, env: Mapping) -> None:
    total = _int(md.get("total_bytes"))
    if total is not None:
        ev.aimock_bytes.offer(key, total)


def _on_aimock_aborted(ev: Evidence, md: Mapping, outcome: Any, key: Any, env: Mapping) -> None:
    sent = _int(md.get("bytes_before_abort"))
    if sent is not None:
        ev.aimock_bytes.offer(key, sent)


def _on_aimock_chunk(ev: Evidence, md: Mapping, outcome: Any, key: Any, env: Mapping) -> None:
    ev.aimock_chunk_bytes += max(0, _int(md.get("chunk_size_bytes")) or 0)


_HANDLERS = {
    "probe.network.error": _on_probe_error,
    "probe.exit": _on_probe_exit,
    "probe.dom.firsttoken": _on_probe_first_token,
    "probe.dom.alternate_content": _on_probe_alternate,
    "probe.console.error": _on_probe_console,
    "backend.request.ingress": _on_ingress,
    "backend.llm.call.start": _on_llm_start,
    "backend.llm.call.heartbeat": _on_llm_heartbeat,
    "backend.llm.call.response": _on_llm_response,
    "backend.sse.first_byte": _on_first_byte,
    "backend.sse.event": _on_sse_event,
    "backend.sse.aborted": _on_aborted,
    "backend.response.complete": _on_complete,
    "backend.error.caught": _on_error,
    "backend.agent.enter": _on_agent_enter,
    "backend.agent.exit": _on_agent_exit,
    "aimock.match.decision": _on_aimock_decision,
    "aimock.response.complete": _on_aimock_complete,
    "aimock.response.aborted": _on_aimock_aborted,
    "aimock.sse.chunk": _on_aimock_chunk,
}


def classify(evidence: Evidence, thresholds: Thresholds = Thresholds(), *, log_end: float | None = None) -> Diagnosis:
    """The class of one test: the first rule of ``RULES`` that matches. Pure, no I/O.

    ``log_end`` is the epoch time of the last ``ts`` in all inputs; it dates an LLM
    call that never answered ("started 41.2 s before the log ends"). Without it the
    test's own last event is used.
    """
    facts = evidence.summary(log_end)
    for rule in RULES:
        verdict = rule(evidence, thresholds, log_end, facts)
        if verdict is not None:
            cls, confidence, reason = verdict
            return Diagnosis(evidence.test_id, cls, confidence, reason, facts)
    raise AssertionError("the last rule always matches")  # pragma: no cover


def diagnose(
    envelopes: Iterable[Mapping[str, Any]], thresholds: Thresholds = Thresholds(), *, log_end: float | None = None
) -> Diagnosis:
    """Classify one test from its envelopes (any order); the id is taken from the first."""
    evidence: Evidence | None = None
    for envelope in envelopes:
        if evidence is None:
            test_id = envelope.get("test_id") if isinstance(envelope, Mapping) else None
            evidence = Evidence(test_id if isinstance(test_id, str) else "")
        evidence.add(envelope)
    return classify(evidence or Evidence(""), thresholds, log_end=log_end)
