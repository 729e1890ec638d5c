"""Evidence: the facts one test's envelopes leave, folded one envelope at a time.

An ``Evidence`` is a streaming accumulator: counters and a few first/last values,
never the envelopes themselves, so a GB-sized log costs about 1.2 KB per test id.
Its state is ``_facts.Facts``; here are the entry points that fold an envelope (its
head: counts and place in time; then its boundary's handler) and the questions the
rules ask. Each boundary that carries a fact has one small handler in the ``_fold_*``
module of its family; the rest are only counted. The rules (``rules.py``) read the
folded evidence; this module knows nothing of them.

Pure: no I/O, no clock, no Starlette or structlog (the CLI imports this at start-up).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from sys import intern
from typing import Any, ClassVar

from cvdiag.contract.schema import ACCOUNTING_PREFIX, FAILURE_OUTCOMES, LAYERS
from cvdiag.contract.timestamps import key_seconds, order_key
from cvdiag.diagnosis._agentic import Agentic
from cvdiag.diagnosis._convert import EMPTY, as_mapping
from cvdiag.diagnosis._facts import Counting, Facts, Handler
from cvdiag.diagnosis._fold_agent import HANDLERS as AGENT_HANDLERS
from cvdiag.diagnosis._fold_aimock import HANDLERS as AIMOCK_HANDLERS
from cvdiag.diagnosis._fold_edge import fold_edge
from cvdiag.diagnosis._fold_llm import HANDLERS as LLM_HANDLERS
from cvdiag.diagnosis._fold_probe import HANDLERS as PROBE_HANDLERS
from cvdiag.diagnosis._fold_stream import HANDLERS as STREAM_HANDLERS
from cvdiag.diagnosis._picks import Pick, earliest_of, latest_key, value_of
from cvdiag.diagnosis._shapes import NO_RESPONSE, Response

# A histogram of boundary names stays bounded even if a log invents thousands of them.
_MAX_BOUNDARY_NAMES = 64
_OTHER_BOUNDARIES = "(other)"

_LAYER_NAMES = ("aimock", "backend", "other", "probe")  # sorted, as the summary lists them
_LAYER_OF = {name: name for name in LAYERS}

#: The handler of each boundary that carries a fact, from the module of its family.
_HANDLERS: dict[str, Handler] = {
    **PROBE_HANDLERS,
    **STREAM_HANDLERS,
    **LLM_HANDLERS,
    **AGENT_HANDLERS,
    **AIMOCK_HANDLERS,
}
#: Handlers that only count: their envelopes teach nothing beyond the head fields.
_HEAD_ONLY_HANDLERS = frozenset(h for h in _HANDLERS.values() if isinstance(h, Counting))
#: The handlers of a body folded after a head folded elsewhere, which counted the head-only
#: ones; never an accounting line's (it is counted with its head).
_BODY_HANDLERS = {
    b: h for b, h in _HANDLERS.items() if h not in _HEAD_ONLY_HANDLERS and not b.startswith(ACCOUNTING_PREFIX)
}
#: The slots the head-only handlers count in, in the order of the compiled fold's counters.
_HEAD_COUNTERS = tuple(sorted(h.slot for h in _HEAD_ONLY_HANDLERS))


class Evidence(Facts):
    """Everything ``classify`` needs about one test, folded one envelope at a time.

    The slots are ``Facts``'s (this class adds none: an instance costs the same); the
    methods are the folding entry points and the questions the rules ask of them.
    """

    __slots__ = ()

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

    def add_body(self, envelope: Mapping[str, Any]) -> None:
        """Fold what an envelope says beyond its head, when its head was folded elsewhere
        (the compiled fold, which hands its head facts over in ``take_head``). Never raises."""
        try:
            boundary = envelope.get("boundary")
            if type(boundary) is not str or boundary.startswith(ACCOUNTING_PREFIX):
                return  # skipped or accounting: counted with the head
            layer = _layer_of(envelope.get("layer"), boundary)
            key = order_key(envelope.get("ts"), envelope.get("mono_ns"))
            self._fold_body(envelope, intern(boundary), layer, key, _BODY_HANDLERS)
        except Exception:
            self.skipped += 1

    def add_metadata(self, boundary: str, key: int | None, outcome: str, metadata: Any, duration_ms: Any) -> None:
        """``add_body`` of an envelope in the emitter's plain layout (every edge header null),
        given what the compiled fold read of it: its metadata object, parsed alone, and its
        head fields. Most bodies a log holds are such: the rest of the line is not parsed."""
        try:
            handler = _BODY_HANDLERS.get(boundary)
            if handler is not None:
                md = metadata if type(metadata) is dict else as_mapping(metadata)  # the usual case: no call
                handler(self, md, outcome, key, {"duration_ms": duration_ms})
        except Exception:
            self.skipped += 1

    def take_head(self, head: tuple) -> None:
        """The head facts the compiled fold kept for this test (``_cfold.c``'s ``results``):
        what ``_fold_head`` and the head-only handlers would have left."""
        events, names, counts, other, layers, failures, first, last, backend, counters, skipped = head
        self.boundary_shape = self.boundary_shape.then_all(names)
        self.boundary_counts, self.boundary_other = counts, other
        self.events += events
        self.skipped += skipped
        self.aimock_events, self.backend_events, self.other_events, self.probe_events = layers
        self.failures = failures
        self.first_key, self.first_ts, self.first_boundary = first
        self.last_key, self.last_ts, self.last_boundary = last
        self.last_backend_key, self.last_backend_ts, self.last_backend_boundary = backend
        for slot, n in zip(_HEAD_COUNTERS, counters, strict=True):  # the C keeps as many as handed in
            setattr(self, slot, n)

    #: The head-only counters a compiled fold must keep for this class.
    head_counters = len(_HEAD_COUNTERS)

    @staticmethod
    def head_counter(boundary: str) -> int:
        """Which counter of ``take_head`` the envelopes of ``boundary`` add to, or -1."""
        handler = _HANDLERS.get(boundary)
        return _HEAD_COUNTERS.index(handler.slot) if handler in _HEAD_ONLY_HANDLERS else -1

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
        layer = _layer_of(layer, boundary)
        if layer == "backend":
            self.backend_events += 1
        elif layer == "probe":
            self.probe_events += 1
        elif layer == "aimock":
            self.aimock_events += 1
        else:
            self.other_events += 1
        if type(outcome) is str and outcome in FAILURE_OUTCOMES:
            self.failures += 1
        key = order_key(ts, mono)
        if key is None:
            ts = None
        # _picks.earlier and _picks.later, inlined: three calls per envelope would cost 1.5%
        # of `cvdiag tests` (tests/test_diagnose.py checks the copies against the rules).
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
        self._fold_body(env, boundary, layer, key, _HANDLERS)

    def _fold_body(
        self, env: Mapping[str, Any], boundary: str, layer: str, key: int | None, handlers: Mapping[str, Handler]
    ) -> None:
        md = as_mapping(env.get("metadata"))
        edge = as_mapping(env.get("edge_headers"))
        # Most envelopes carry no edge header at all: one cheap test skips the edge rules.
        if edge and (edge.get("cf-ray") or edge.get("cf-mitigated") or edge.get("via") or edge.get("retry-after")):
            fold_edge(self, layer, boundary, md, edge, key)
        handler = handlers.get(boundary)
        if handler is not None:
            handler(self, md, env.get("outcome"), key, env)

    def distinct_rays(self) -> tuple[str, str, str] | None:
        """(layer, first ray, second ray) of the first layer that saw more than one cf-ray."""
        for layer in sorted(self.edge_rays or ()):
            rays = self.edge_rays[layer]
            if len(rays) > 1:
                first, second = sorted(rays, key=lambda r: (rays[r], r))[:2]
                return layer, first, second
        return None

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
            "ttfb_ms": self.ttfb_ms(),
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
            "agent_terminal_outcome": value_of(self.agent_failed),
            "agent_error_class": self.agent_error_class,
            **_agent_facts(self.agentic, response),
            "last_boundary": self.last_boundary,
            "last_backend_boundary": self.last_backend_boundary,
        }

    def ttfb_ms(self) -> float | None:
        """Milliseconds from ingress to the backend's first byte, when it said."""
        ttfb = self.first_byte
        return ttfb if isinstance(ttfb, float) and ttfb >= 0 else None

    #: Facts of the summary that cost a call, not the summary: (evidence, log_end) -> value.
    CHEAP_FACTS: ClassVar[Mapping[str, Callable[[Evidence, float | None], Any]]] = {
        "ttfb_ms": lambda ev, log_end: ev.ttfb_ms(),
        "open_llm_call_s": lambda ev, log_end: ev.open_llm_call_s(log_end),
        "http_status": lambda ev, log_end: ev.worst_status(),
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

    def first_abort(self, kinds: tuple[str, ...] | None = None) -> tuple[str | None, int | None, float | None]:
        """(termination_kind, bytes_before_abort, duration_ms) of the earliest abort (of
        one of ``kinds``, when given)."""
        first = self.earliest_abort(kinds)
        if first is None:
            return None, None, None
        return first[0], first[1].value[0], first[1].value[1]

    def earliest_abort(self, kinds: tuple[str, ...] | None = None) -> tuple[str, Pick] | None:
        """(termination_kind, its first abort) of the earliest abort (of one of ``kinds``)."""
        aborts = self.abort_first
        if not aborts:  # most tests: asked of each by the summary and two rules
            return None
        return earliest_of((kind, aborts[kind]) for kind in (aborts if kinds is None else kinds) if kind in aborts)

    def llm_alive_at_shutdown(self, within_s: float) -> bool:
        """Did the open LLM call show a sign of life (its start or a heartbeat) within
        ``within_s`` of the server's shutdown? If not, it had stalled long before: a
        harness that times out and tears the stack down makes the shutdown a consequence.
        """
        stop = (self.abort_first or {}).get("shutdown")
        sign = latest_key(self.llm_last_start_key, self.heartbeat_last_key)
        if stop is None or stop.key is None or sign is None:
            return True  # no clock to judge by: the shutdown is the last word
        return key_seconds(stop.key) - key_seconds(sign) <= within_s

    def open_llm_call_s(self, log_end: float | None) -> float | None:
        """How long before the end of the log the last unanswered LLM call started."""
        if self.llm_starts <= self.llm_responses or self.llm_last_start_key is None:
            return None
        end = log_end if log_end is not None else (key_seconds(self.last_key) if self.last_key is not None else None)
        if end is None:
            return None
        return round(max(0.0, end - key_seconds(self.llm_last_start_key)), 1)


# Every slot of an Evidence, for code that walks them by ``__slots__`` (a class names
# only its own there, and this one's are ``Facts``'s). Set once the class is made, it
# changes no layout: an instance costs what a ``Facts`` costs.
Evidence.__slots__ = Facts.__slots__


def _layer_of(layer: Any, boundary: str) -> str:
    """The layer an envelope counts under: its own when known, else its boundary's first part."""
    known = _LAYER_OF.get(layer) if type(layer) is str else None
    return known if known is not None else _LAYER_OF.get(boundary.split(".", 1)[0], "other")


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
