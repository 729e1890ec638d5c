"""Evidence: the facts one test's envelopes leave, folded one envelope at a time.

An ``Evidence`` is a streaming accumulator: counters and a few first/last values,
never the envelopes themselves, so a GB-sized log costs about 1.2 KB per test id.
Each boundary that carries a fact has one small handler; the rest are only counted.
The rules (``rules.py``) read the folded evidence; this module knows nothing of them.

Pure: no I/O, no clock, no Starlette or structlog (the CLI imports this at start-up).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from sys import intern
from typing import Any

from cvdiag.contract.schema import ACCOUNTING_PREFIX, FAILURE_OUTCOMES, LAYERS
from cvdiag.contract.timestamps import key_seconds, order_key
from cvdiag.diagnosis._agentic import Agentic
from cvdiag.diagnosis._causes import MATCH_CHARS, cause_of, finish_cause
from cvdiag.diagnosis._convert import EMPTY, as_float, as_int, as_mapping, as_name, as_text
from cvdiag.diagnosis._picks import Pick, earlier, earliest, later, latest, value_of
from cvdiag.diagnosis._shapes import MAX_STATUSES, NO_BOUNDARIES, NO_RESPONSE, LLMFailures, Response

# A histogram of boundary names stays bounded even if a log invents thousands of them.
_MAX_BOUNDARY_NAMES = 64
_OTHER_BOUNDARIES = "(other)"
_MAX_RAYS_PER_LAYER = 4

_LAYER_NAMES = ("aimock", "backend", "other", "probe")  # sorted, as the summary lists them
_LAYER_OF = {name: name for name in LAYERS}

# Browser/page/context crashes, CDP protocol errors and OOM, as Playwright, Puppeteer and
# Chromium name them. A Chromium net error such as ERR_HTTP2_PROTOCOL_ERROR is a network
# failure, not a broken harness: the lookbehind keeps ``_protocol_error`` out.
_RUNNER_CRASH = re.compile(
    r"(browser|page|context|target|renderer|tab)s?[\W_]*((has[\W_]*been|was|is|got)[\W_]*)?(crash|closed|disconnected)"
    r"|(?<![a-z0-9_])protocol[ ]?error"
    r"|out[\W_]*of[\W_]*memory|(?<![a-z])oom(?![a-z])|oomkill",
)


def names_runner_crash(text: str) -> bool:
    """Does an error class or classifier name a crash of the harness itself?"""
    return bool(_RUNNER_CRASH.search(text.lower()))


class Evidence:
    """Everything ``classify`` needs about one test, folded one envelope at a time.

    Memory stays constant in the number of envelopes: counters, small bounded
    dictionaries and a few first/last values. The CLI holds one per test of a log
    (tens of thousands), so each costs about 1.2 KB: what most tests never fill costs
    a None slot, what they all fill sits in slots of its own rather than in objects.
    """

    __slots__ = (
        "abort_first",
        "aborts",
        "agent_bad",
        "agent_error_class",
        "agent_exits",
        "agent_name",
        "agent_name_key",
        "agentic",
        "aimock_bytes",
        "aimock_chunk_bytes",
        "aimock_decisions",
        "aimock_events",
        "aimock_matched",
        "aimock_reject",
        "backend_events",
        "backend_statuses",
        "boundary_counts",
        "boundary_other",
        "boundary_shape",
        "complete_5xx",
        "complete_last",
        "complete_last_key",
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
        "first_boundary",
        "first_byte",
        "first_byte_key",
        "first_key",
        "first_ts",
        "heartbeat_last",
        "heartbeat_last_key",
        "heartbeat_max",
        "heartbeats",
        "ingress",
        "last_backend_boundary",
        "last_backend_key",
        "last_backend_ts",
        "last_boundary",
        "last_key",
        "last_ts",
        "llm_errors",
        "llm_failures",
        "llm_first_error",
        "llm_last_ok_key",
        "llm_last_response",
        "llm_last_response_key",
        "llm_last_start",
        "llm_last_start_key",
        "llm_ok",
        "llm_ok_with_tokens",
        "llm_ok_zero_tokens",
        "llm_responses",
        "llm_slowest",
        "llm_starts",
        "llm_timeouts",
        "other_events",
        "probe_alternate",
        "probe_console_errors",
        "probe_console_first",
        "probe_crash",
        "probe_events",
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
        self.aimock_events = self.backend_events = self.other_events = self.probe_events = 0
        # The boundary histogram: names in a shape shared by the tests that saw the same
        # names in the same order, counts in a list of this test's own.
        self.boundary_shape = NO_BOUNDARIES
        self.boundary_counts: list[int] = []
        self.boundary_other = 0  # envelopes beyond _MAX_BOUNDARY_NAMES names
        self.failures = 0  # envelopes whose outcome is err or timeout
        # The earliest and latest envelope, and the latest of the backend: key, ts, boundary
        # in slots of their own (the boundary, always a str, says whether one was seen).
        self.first_key: int | None = None
        self.first_ts: str | None = None
        self.first_boundary: str | None = None
        self.last_key: int | None = None
        self.last_ts: str | None = None
        self.last_boundary: str | None = None
        self.last_backend_key: int | None = None
        self.last_backend_ts: str | None = None
        self.last_backend_boundary: str | None = None
        # probe (harness)
        self.probe_crash: Pick | None = None  # (boundary, error text)
        self.probe_exit: Pick | None = None  # (terminal_outcome, first_token_delta_ms, failure_classifier)
        self.probe_first_tokens = 0
        self.probe_alternate = 0
        self.probe_console_errors = 0
        self.probe_console_first: Pick | None = None
        self.probe_network_errors = 0
        # edge
        self.edge_mitigated: Pick | None = None  # (layer, boundary, value)
        self.edge_proxy: Pick | None = None  # (layer, via)
        # The dictionaries and sets below stay None until a test needs one: most never do.
        self.edge_rays: dict[str, dict[str, float]] | None = None  # layer -> earliest few rays
        self.edge_retry: dict[int, Pick] | None = None  # status -> first (layer, retry-after)
        self.backend_statuses: tuple[int, ...] = ()  # distinct, at most MAX_STATUSES
        # LLM
        self.llm_starts = 0
        self.llm_responses = 0
        self.llm_ok = 0
        self.llm_ok_with_tokens = 0
        self.llm_ok_zero_tokens = 0  # ok calls that reported 0 tokens explicitly (not null)
        self.llm_errors = 0
        self.llm_timeouts = 0
        self.llm_first_error: Pick | None = None  # (error_class, provider, model, latency_ms)
        self.llm_failures: LLMFailures | None = None
        self.llm_last_ok_key: int | None = None
        self.llm_last_start: tuple[str | None, str | None] | None = None  # (provider, model)
        self.llm_last_start_key: int | None = None
        self.llm_last_response: Response | None = None
        self.llm_last_response_key: int | None = None
        self.llm_slowest: tuple[float, str, str] | None = None  # (latency_ms, provider, model)
        self.heartbeats = 0
        self.heartbeat_last: float | None = None  # elapsed_ms_since_start
        self.heartbeat_last_key: int | None = None
        self.heartbeat_max: float | None = None
        # backend request/stream
        self.ingress = 0
        self.first_byte: float | None = None  # delta_ms_from_ingress (or -1.0 when absent)
        self.first_byte_key: int | None = None
        self.sse_events = 0
        self.aborts: dict[str, int] | None = None
        self.abort_first: dict[str, Pick] | None = None  # kind -> (bytes_before_abort, duration_ms)
        self.completes = 0
        self.complete_ok_with_events = 0
        self.complete_ok_empty = 0  # ok completions with 0 SSE events
        self.complete_ok_bodiless = 0  # ... that also sent 0 bytes
        self.completes_5xx = 0
        self.complete_5xx: Pick | None = None  # (http_status, total_duration_ms) of the first
        self.complete_last: tuple[int | None, int | None, float | None] | None = None  # status, events, total ms
        self.complete_last_key: int | None = None
        self.errors = 0
        self.error_first: Pick | None = None  # (exception_type, message_scrubbed)
        self.agent_name: str | None = None
        self.agent_name_key: int | None = None
        self.agent_bad: Pick | None = None  # terminal_outcome error/cancelled
        self.agent_error_class: str | None = None  # of the first agent that exited with an error
        self.agent_exits = 0
        self.agentic: Agentic | None = None  # tool calls and agent-level causes, when there are any
        # aimock
        self.aimock_decisions = 0
        self.aimock_matched = 0
        self.aimock_reject: Pick | None = None
        self.aimock_bytes: Pick | None = None  # total_bytes or bytes_before_abort
        self.aimock_chunk_bytes = 0

    # -- folding ---------------------------------------------------------------------------

    def add(self, envelope: Mapping[str, Any]) -> None:
        """Fold one envelope in. Tolerates missing and odd fields; never raises."""
        try:
            self._add(envelope)
        except Exception:  # a reader must survive any parsed-but-malformed envelope
            self.skipped += 1

    def add_head(self, layer: Any, boundary: Any, outcome: Any, ts: Any, mono_ns: Any) -> None:
        """Fold an envelope from its head fields alone, as ``add`` would fold all of it.

        For the scan path: right only when ``needs_body(boundary)`` is False and the
        envelope's edge headers are all null, which is most of a log (every SSE event),
        and then no JSON parse is needed. Never raises.
        """
        try:
            head = self._fold_head(boundary, layer, outcome, ts, mono_ns)
            if head is not None:
                handler = _HANDLERS.get(head[0])
                if handler is not None:
                    handler(self, EMPTY, outcome, head[2], EMPTY)
        except Exception:
            self.skipped += 1

    @staticmethod
    def needs_body(boundary: str) -> bool:
        """Can an envelope of this boundary add a fact beyond its head (metadata, duration)?"""
        handler = _HANDLERS.get(boundary)
        return handler is not None and handler not in _HEAD_ONLY_HANDLERS

    def _fold_head(self, boundary: Any, layer: Any, outcome: Any, ts: Any, mono: Any) -> tuple[str, str, Any] | None:
        """Count one envelope and keep its place in time: (boundary, layer, key), or None
        when nothing more is to be learnt from it (no boundary, or cvdiag accounting)."""
        if type(boundary) is not str:
            self.skipped += 1
            return None
        self.events += 1
        boundary = intern(boundary)
        shape = self.boundary_shape
        index = shape.index.get(boundary)
        if index is not None:
            self.boundary_counts[index] += 1
        elif len(shape.names) < _MAX_BOUNDARY_NAMES:
            self.boundary_shape = shape.then(boundary)
            self.boundary_counts = [*self.boundary_counts, 1]  # exact size: append over-allocates
        else:
            self.boundary_other += 1
        if boundary.startswith(ACCOUNTING_PREFIX):  # is_accounting inlined: this runs per envelope
            return None  # accounting: counted in the histogram, says nothing about the test
        layer = _LAYER_OF.get(layer) if type(layer) is str else None
        if layer is None:
            layer = _LAYER_OF.get(boundary.split(".", 1)[0], "other")
        if layer == "backend":
            self.backend_events += 1
        elif layer == "probe":
            self.probe_events += 1
        elif layer == "aimock":
            self.aimock_events += 1
        else:
            self.other_events += 1
        if outcome in FAILURE_OUTCOMES:
            self.failures += 1
        key = order_key(ts, mono)
        if key is None:
            ts = None
        # The rules of _earlier and _later, inlined: this runs for every envelope.
        if self.first_boundary is None or (key is not None and (self.first_key is None or key < self.first_key)):
            self.first_key, self.first_ts, self.first_boundary = key, ts, boundary
        if self.last_boundary is None or (key is not None and (self.last_key is None or key >= self.last_key)):
            self.last_key, self.last_ts, self.last_boundary = key, ts, boundary
        if layer == "backend" and (
            self.last_backend_boundary is None
            or (key is not None and (self.last_backend_key is None or key >= self.last_backend_key))
        ):
            self.last_backend_key, self.last_backend_ts, self.last_backend_boundary = key, ts, boundary
        return boundary, layer, key

    def _add(self, env: Mapping[str, Any]) -> None:
        if type(env) is not dict and not isinstance(env, Mapping):
            self.skipped += 1
            return
        boundary = env.get("boundary")
        outcome = env.get("outcome")
        head = self._fold_head(boundary, env.get("layer"), outcome, env.get("ts"), env.get("mono_ns"))
        if head is None:
            return
        boundary, layer, key = head
        md = as_mapping(env.get("metadata"))
        edge = as_mapping(env.get("edge_headers"))
        # Most envelopes carry no edge header at all: one cheap test skips the edge rules.
        if edge and (edge.get("cf-ray") or edge.get("cf-mitigated") or edge.get("via") or edge.get("retry-after")):
            self._add_edge(layer, boundary, md, edge, key)
        handler = _HANDLERS.get(boundary)
        if handler is not None:
            handler(self, md, outcome, key, env)

    def _add_edge(self, layer: str, boundary: str, md: Mapping, edge: Mapping, key: Any) -> None:
        mitigated = as_text(edge.get("cf-mitigated"))
        if mitigated and mitigated.strip().lower() in _MITIGATIONS:
            self.edge_mitigated = earliest(self.edge_mitigated, key, (layer, boundary, mitigated.strip().lower()))
        via = as_text(edge.get("via"))
        if via and any(proxy in via.lower() for proxy in _PROXIES):
            self.edge_proxy = earliest(self.edge_proxy, key, (layer, via))
        ray = as_text(edge.get("cf-ray"))
        if ray:
            self._add_ray(layer, ray, key)
        retry_after = as_text(edge.get("retry-after"))
        # The backend's own response headers are the app's, even relayed ones (a provider's
        # 429 with its cf-ray): only what reached the harness, or carries edge marks, counts.
        if not retry_after or layer == "backend" or not (ray or via or layer == "probe"):
            return
        status = as_int(md.get(_STATUS_KEYS.get(boundary, "")))
        if status is None or status < 400:
            return
        if self.edge_retry is None:
            self.edge_retry = {}
        pick = self.edge_retry.get(status)
        if pick is None and len(self.edge_retry) >= MAX_STATUSES:
            return
        self.edge_retry[status] = earliest(pick, key, (layer, retry_after))

    def _add_ray(self, layer: str, ray: str, key: int | None) -> None:
        """Keep the few earliest distinct cf-rays per layer, whatever the arrival order."""
        rank = key if key is not None else math.inf
        if self.edge_rays is None:
            self.edge_rays = {}
        rays = self.edge_rays.setdefault(layer, {})
        if ray in rays:
            rays[ray] = min(rays[ray], rank)
            return
        rays[ray] = rank
        if len(rays) > _MAX_RAYS_PER_LAYER:
            del rays[max(rays, key=lambda r: (rays[r], r))]

    def distinct_rays(self) -> tuple[str, str, str] | None:
        """(layer, first ray, second ray) of the first layer that saw more than one cf-ray."""
        for layer in sorted(self.edge_rays or ()):
            rays = self.edge_rays[layer]
            if len(rays) > 1:
                first, second = sorted(rays, key=lambda r: (rays[r], r))[:2]
                return layer, first, second
        return None

    def agent(self) -> Agentic:
        """The agent-level part, made when the first fact of it arrives."""
        if self.agentic is None:
            self.agentic = Agentic()
        return self.agentic

    # -- derived facts -----------------------------------------------------------------------

    @property
    def layers(self) -> dict[str, int]:
        """Envelopes per layer, for the layers that have any."""
        counts = (self.aimock_events, self.backend_events, self.other_events, self.probe_events)
        return {name: n for name, n in zip(_LAYER_NAMES, counts, strict=True) if n}

    @property
    def boundaries(self) -> dict[str, int]:
        """Envelopes per boundary name; beyond the first 64 names they count as ``(other)``."""
        counts = dict(zip(self.boundary_shape.names, self.boundary_counts, strict=True))
        if self.boundary_other:
            counts[_OTHER_BOUNDARIES] = counts.get(_OTHER_BOUNDARIES, 0) + self.boundary_other
        return counts

    @property
    def last_backend_seconds(self) -> float | None:
        return None if self.last_backend_key is None else key_seconds(self.last_backend_key)

    def saw_first_byte(self) -> bool:
        return self.first_byte is not None

    def terminals(self) -> int:
        """Backend requests that ended: completions, aborts, and errors that were the terminal.

        backend.error.caught also follows a chunk_error abort and a 500 completion (spec
        section 8), so only the errors beyond those count as terminals of their own.
        """
        aborts = sum(self.aborts.values()) if self.aborts else 0
        chunk_errors = self.aborts.get("chunk_error", 0) if self.aborts else 0
        follow_ups = chunk_errors + self.completes_5xx
        return self.completes + aborts + max(0, self.errors - follow_ups)

    def summary(self, log_end: float | None = None) -> dict:
        """The JSON-ready evidence: events per layer, boundary histogram, derived numbers."""
        response = self.llm_last_response or NO_RESPONSE
        complete = self.complete_last or (None, None, None)
        abort_kind, abort_bytes, _ = self.first_abort()
        error = value_of(self.error_first) or (None, None)
        duration_ms = None
        if self.first_key is not None and self.last_key is not None:
            duration_ms = round((key_seconds(self.last_key) - key_seconds(self.first_key)) * 1000.0, 1)
        ttfb = self.first_byte
        last_start = self.llm_last_start
        return {
            "events": self.events,
            "events_per_layer": dict(sorted(self.layers.items())),
            "boundaries": dict(sorted(self.boundaries.items())),
            "skipped": self.skipped,
            "first_ts": self.first_ts,
            "last_ts": self.last_ts,
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
            "llm_provider": response.provider or _at(last_start, 0),
            "llm_model": response.model or _at(last_start, 1),
            "llm_latency_ms": response.latency_ms,
            "llm_max_latency_ms": self.llm_slowest[0] if self.llm_slowest else None,
            "llm_error_class": _at(value_of(self.llm_first_error), 0),
            "llm_failed_attempts": self.failed_attempts(),
            "llm_error_statuses": list(self.llm_failures.statuses) if self.llm_failures else [],
            "llm_error_type": self.llm_failures.error_type if self.llm_failures else None,
            "output_chars": response.output_chars,
            "open_llm_call_s": self.open_llm_call_s(log_end),
            "heartbeats": self.heartbeats,
            "last_heartbeat_elapsed_ms": self.heartbeat_last,
            "response_token_count": response.response_token_count,
            "prompt_tokens": response.prompt_tokens,
            "completion_tokens": response.completion_tokens,
            "http_status": self.worst_status(),
            "sse_event_count": complete[1],
            "termination_kind": abort_kind,
            "bytes_before_abort": abort_bytes,
            "exception_type": error[0],
            "agent_terminal_outcome": value_of(self.agent_bad),
            "agent_error_class": self.agent_error_class,
            **_agent_facts(self.agentic, response),
            "last_boundary": self.last_boundary,
            "last_backend_boundary": self.last_backend_boundary,
        }

    def failed_attempts(self) -> int:
        """LLM attempts that failed: the err responses, or more when a retry count says so."""
        failures = self.llm_failures
        highest = failures.max_attempt if failures is not None and failures.max_attempt is not None else -1
        return max(self.llm_errors, highest + 1)

    def llm_recovered(self) -> bool:
        """Did an ok LLM answer come after the last failed attempt (a retry that worked)?"""
        failures = self.llm_failures
        return (
            failures is not None
            and failures.last_key is not None
            and self.llm_last_ok_key is not None
            and self.llm_last_ok_key > failures.last_key
        )

    def worst_status(self) -> int | None:
        """The highest HTTP status the backend completed with."""
        return max(self.backend_statuses) if self.backend_statuses else None

    def first_abort(self) -> tuple[str | None, int | None, float | None]:
        """(termination_kind, bytes_before_abort, duration_ms) of the earliest abort."""
        best: tuple[str, Pick] | None = None
        for kind, pick in (self.abort_first or {}).items():
            if best is None or (pick.key is not None and (best[1].key is None or pick.key < best[1].key)):
                best = (kind, pick)
        if best is None:
            return None, None, None
        return best[0], best[1].value[0], best[1].value[1]

    def llm_alive_at_shutdown(self, within_s: float) -> bool:
        """Did the open LLM call show a sign of life (its start or a heartbeat) within
        ``within_s`` of the server's shutdown? If not, it had stalled long before: a
        harness that times out and tears the stack down makes the shutdown a consequence.
        """
        stop = (self.abort_first or {}).get("shutdown")
        signs = [k for k in (self.llm_last_start_key, self.heartbeat_last_key) if k is not None]
        if stop is None or stop.key is None or not signs:
            return True  # no clock to judge by: the shutdown is the last word
        return key_seconds(stop.key) - key_seconds(max(signs)) <= within_s

    def open_llm_call_s(self, log_end: float | None) -> float | None:
        """How long before the end of the log the last unanswered LLM call started."""
        if self.llm_starts <= self.llm_responses or self.llm_last_start_key is None:
            return None
        end = log_end if log_end is not None else (key_seconds(self.last_key) if self.last_key is not None else None)
        if end is None:
            return None
        return round(max(0.0, end - key_seconds(self.llm_last_start_key)), 1)


def _agent_facts(ag: Agentic | None, response: Response) -> dict[str, Any]:
    """The agent-level facts of the summary, the same keys whether or not there are any."""
    extra = response.extra or (None, None, None)
    failed = ag.tool_failed if ag is not None else None
    started, answered, errors = ag.calls() if ag is not None else (0, 0, 0)
    return {
        "agent_error_message": value_of(ag.agent_message) if ag is not None else None,
        "finish_reason": extra[0],
        "output_valid": extra[2],
        "tool_calls": {
            "started": started,
            "answered": answered,
            "failed": errors,
        },
        "tool_error": None
        if failed is None
        else {"tool": failed.name, "source": failed.source, "server": failed.server, "kind": failed.error_kind,
              "excerpt": failed.excerpt},
    }  # fmt: skip


def _at(value: Any, index: int) -> Any:
    return value[index] if isinstance(value, tuple) else None


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
    text = as_text(md.get("error_class"))
    if text and names_runner_crash(text):
        ev.probe_crash = earliest(ev.probe_crash, key, ("probe.network.error", text))


def _on_probe_exit(ev: Evidence, md: Mapping, outcome: Any, key: Any, env: Mapping) -> None:
    classifier = as_text(md.get("failure_classifier")) or as_text(md.get("error_class"))
    if classifier and names_runner_crash(classifier):
        ev.probe_crash = earliest(ev.probe_crash, key, ("probe.exit", classifier))
    ev.probe_exit = latest(
        ev.probe_exit, key, (as_text(md.get("terminal_outcome")), as_float(md.get("first_token_delta_ms")), classifier)
    )


def _on_probe_first_token(ev: Evidence, md: Mapping, outcome: Any, key: Any, env: Mapping) -> None:
    ev.probe_first_tokens += 1


def _on_probe_alternate(ev: Evidence, md: Mapping, outcome: Any, key: Any, env: Mapping) -> None:
    ev.probe_alternate += 1


def _on_probe_console(ev: Evidence, md: Mapping, outcome: Any, key: Any, env: Mapping) -> None:
    ev.probe_console_errors += 1
    ev.probe_console_first = earliest(ev.probe_console_first, key, as_text(md.get("message_scrubbed")) or "")


def _on_llm_start(ev: Evidence, md: Mapping, outcome: Any, key: Any, env: Mapping) -> None:
    ev.llm_starts += 1
    if later(ev.llm_last_start, ev.llm_last_start_key, key):
        ev.llm_last_start_key, ev.llm_last_start = key, (as_name(md.get("provider")), as_name(md.get("model")))


def _on_llm_heartbeat(ev: Evidence, md: Mapping, outcome: Any, key: Any, env: Mapping) -> None:
    ev.heartbeats += 1
    elapsed = as_float(md.get("elapsed_ms_since_start"))
    if elapsed is None:
        return
    if later(ev.heartbeat_last, ev.heartbeat_last_key, key):
        ev.heartbeat_last_key, ev.heartbeat_last = key, elapsed
    if ev.heartbeat_max is None or elapsed > ev.heartbeat_max:
        ev.heartbeat_max = elapsed


def _on_llm_response(ev: Evidence, md: Mapping, outcome: Any, key: Any, env: Mapping) -> None:
    ev.llm_responses += 1
    provider, model = as_name(md.get("provider")), as_name(md.get("model"))
    latency = as_float(md.get("latency_ms"))
    if latency is None:
        latency = as_float(env.get("duration_ms"))
    tokens = as_int(md.get("response_token_count"))
    completion = as_int(md.get("completion_tokens"))
    output = as_int(md.get("output_chars"))
    empty = False
    if outcome == "err":
        ev.llm_errors += 1
        ev.llm_first_error = earliest(
            ev.llm_first_error, key, (as_text(md.get("error_class")) or "an unnamed error", provider, model, latency)
        )
        if ev.llm_failures is None:
            ev.llm_failures = LLMFailures()
        ev.llm_failures.add(md, key)
    elif outcome == "timeout":
        ev.llm_timeouts += 1
    elif outcome == "ok":
        ev.llm_ok += 1
        if key is not None and (ev.llm_last_ok_key is None or key > ev.llm_last_ok_key):
            ev.llm_last_ok_key = key
        status = as_int(md.get("http_status"))
        # No output is no output, whatever the token count says; so is a 2xx stream of no events.
        empty = output == 0 or (
            md.get("stream") is True and as_int(md.get("chunks")) == 0 and status is not None and 200 <= status < 300
        )
        if empty:
            pass
        elif (tokens or 0) > 0 or (completion or 0) > 0 or (output or 0) > 0:
            ev.llm_ok_with_tokens += 1
        elif tokens == 0 or completion == 0:
            ev.llm_ok_zero_tokens += 1
    if latency is not None:
        candidate = (latency, provider or "?", model or "?")
        if ev.llm_slowest is None or candidate > ev.llm_slowest:
            ev.llm_slowest = candidate
    extra = _answer_extra(ev, md, outcome, key)
    response = Response(
        provider, model, latency, tokens, as_int(md.get("prompt_tokens")), completion, output, empty, extra
    )
    if later(ev.llm_last_response, ev.llm_last_response_key, key):
        ev.llm_last_response_key, ev.llm_last_response = key, response


def _answer_extra(ev: Evidence, md: Mapping, outcome: Any, key: Any) -> tuple | None:
    """(finish reason, tool calls, output valid) of an answer that has more to say than a
    plain stop; the causes its error names. None for a plain answer (most of them)."""
    if outcome == "err":
        for field in ("error_type", "error_class"):
            text = md.get(field)
            cls = cause_of(text, from_llm=True) if isinstance(text, str) else None
            if cls is not None:
                ev.agent().named(cls, text[:MATCH_CHARS], key, from_llm=True)
                break
    finish = as_name(md.get("finish_reason"))
    unusual = finish is not None and finish_cause(finish) is not None
    if unusual:
        ev.agent().finished(finish)  # type: ignore[arg-type]
    calls = as_int(md.get("tool_calls"))
    valid = md.get("output_valid")
    valid = valid if isinstance(valid, bool) else None
    if not unusual and not calls and valid is None:
        return None
    return (finish if unusual else None, calls, valid)


def _on_ingress(ev: Evidence, md: Mapping, outcome: Any, key: Any, env: Mapping) -> None:
    ev.ingress += 1


def _on_first_byte(ev: Evidence, md: Mapping, outcome: Any, key: Any, env: Mapping) -> None:
    delta = as_float(md.get("delta_ms_from_ingress"))
    if earlier(ev.first_byte, ev.first_byte_key, key):
        ev.first_byte_key, ev.first_byte = key, delta if delta is not None else -1.0


def _on_sse_event(ev: Evidence, md: Mapping, outcome: Any, key: Any, env: Mapping) -> None:
    ev.sse_events += 1


def _on_aborted(ev: Evidence, md: Mapping, outcome: Any, key: Any, env: Mapping) -> None:
    kind = intern(as_text(md.get("termination_kind")) or "unknown")
    if ev.aborts is None:
        ev.aborts, ev.abort_first = {}, {}
    ev.aborts[kind] = ev.aborts.get(kind, 0) + 1
    pick = ev.abort_first.get(kind)  # type: ignore[union-attr]
    if pick is None and len(ev.abort_first) >= MAX_STATUSES:  # type: ignore[arg-type]
        return
    ev.abort_first[kind] = earliest(pick, key, (as_int(md.get("bytes_before_abort")), as_float(env.get("duration_ms"))))  # type: ignore[index]


def _on_complete(ev: Evidence, md: Mapping, outcome: Any, key: Any, env: Mapping) -> None:
    ev.completes += 1
    status = as_int(md.get("http_status"))
    if status is not None and status not in ev.backend_statuses and len(ev.backend_statuses) < MAX_STATUSES:
        ev.backend_statuses += (status,)
    events = as_int(md.get("sse_event_count"))
    total = as_float(md.get("total_duration_ms"))
    if total is None:
        total = as_float(env.get("duration_ms"))
    if status is not None and status >= 500:
        ev.completes_5xx += 1
        ev.complete_5xx = earliest(ev.complete_5xx, key, (status, total))
    elif outcome == "ok":
        if (events or 0) > 0:
            ev.complete_ok_with_events += 1
        elif events == 0:
            ev.complete_ok_empty += 1
            if as_int(md.get("content_length")) == 0:
                ev.complete_ok_bodiless += 1
    if later(ev.complete_last, ev.complete_last_key, key):
        ev.complete_last_key, ev.complete_last = key, (status, events, total)


def _on_error(ev: Evidence, md: Mapping, outcome: Any, key: Any, env: Mapping) -> None:
    ev.errors += 1
    ev.error_first = earliest(
        ev.error_first, key, (as_text(md.get("exception_type")) or "an exception", as_text(md.get("message_scrubbed")))
    )
    _name_cause(ev, md.get("exception_type"), md.get("message_scrubbed"), key)


def _name_cause(ev: Evidence, error_class: Any, message: Any, key: Any) -> None:
    """Keep the cause an exception names (``Class: message``), if it names one."""
    parts = [p for p in (error_class, message) if isinstance(p, str) and p]
    if not parts:
        return
    text = ": ".join(parts)[:MATCH_CHARS]
    cls = cause_of(text)
    if cls is not None:
        ev.agent().named(cls, text, key)


def _on_agent_enter(ev: Evidence, md: Mapping, outcome: Any, key: Any, env: Mapping) -> None:
    if later(ev.agent_name, ev.agent_name_key, key):
        ev.agent_name_key, ev.agent_name = key, as_name(md.get("agent_name")) or "?"


def _on_agent_exit(ev: Evidence, md: Mapping, outcome: Any, key: Any, env: Mapping) -> None:
    ev.agent_exits += 1
    terminal = as_text(md.get("terminal_outcome"))
    if terminal in ("error", "cancelled"):
        if earlier(ev.agent_bad, ev.agent_bad.key if ev.agent_bad else None, key):
            ev.agent_error_class = as_name(md.get("error_class")) if terminal == "error" else None
        ev.agent_bad = earliest(ev.agent_bad, key, terminal)
        message = as_text(md.get("error_message"))
        if message:
            agent = ev.agent()
            agent.agent_message = earliest(agent.agent_message, key, message)
        _name_cause(ev, md.get("error_class"), md.get("error_message"), key)


def _on_tool_start(ev: Evidence, md: Mapping, outcome: Any, key: Any, env: Mapping) -> None:
    ev.agent().tool_start(md, key)


def _on_tool_response(ev: Evidence, md: Mapping, outcome: Any, key: Any, env: Mapping) -> None:
    ev.agent().tool_response(md, outcome, key, as_float(env.get("duration_ms")))


def _on_aimock_decision(ev: Evidence, md: Mapping, outcome: Any, key: Any, env: Mapping) -> None:
    ev.aimock_decisions += 1
    if md.get("fixture_id") not in (None, ""):
        ev.aimock_matched += 1
    reasons = md.get("reject_reasons")
    if reasons:
        ev.aimock_reject = earliest(
            ev.aimock_reject, key, as_text(reasons if isinstance(reasons, str) else ", ".join(map(str, reasons)))
        )


def _on_aimock_complete(ev: Evidence, md: Mapping, outcome: Any, key: Any, env: Mapping) -> None:
    total = as_int(md.get("total_bytes"))
    if total is not None:
        ev.aimock_bytes = latest(ev.aimock_bytes, key, total)


def _on_aimock_aborted(ev: Evidence, md: Mapping, outcome: Any, key: Any, env: Mapping) -> None:
    sent = as_int(md.get("bytes_before_abort"))
    if sent is not None:
        ev.aimock_bytes = latest(ev.aimock_bytes, key, sent)


def _on_aimock_chunk(ev: Evidence, md: Mapping, outcome: Any, key: Any, env: Mapping) -> None:
    ev.aimock_chunk_bytes += max(0, as_int(md.get("chunk_size_bytes")) or 0)


# Handlers that only count: their envelopes teach nothing beyond the head fields.
_HEAD_ONLY_HANDLERS = frozenset({_on_ingress, _on_sse_event, _on_probe_first_token, _on_probe_alternate})

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
    "backend.tool.call.start": _on_tool_start,
    "backend.tool.call.response": _on_tool_response,
    "aimock.match.decision": _on_aimock_decision,
    "aimock.response.complete": _on_aimock_complete,
    "aimock.response.aborted": _on_aimock_aborted,
    "aimock.sse.chunk": _on_aimock_chunk,
}
