"""The emission path: gate, build, drop unknown metadata, scrub, cap, render, enqueue.

The steps after the gate are processors with structlog's signature, run in a plain
loop over ``PROCESSORS`` (the host's structlog configuration is never touched); the
"logger" they are handed is the queue. Accounting a step asks for (``cvdiag.metadata_dropped``)
is collected during the pass and emitted after the line it accounts for, never from inside it.
Nothing starts (no thread) until the first envelope is emitted while enabled. What
the path remembers between envelopes is one object, ``state``, which ``reset()``s for
tests (``cvdiag.testing.reset``).
"""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from random import getrandbits
from typing import Any

import orjson
import structlog

from cvdiag.contract.compiled import compiled_module
from cvdiag.contract.ids import new_span_id, new_test_id
from cvdiag.contract.schema import (
    ACCOUNTING_SLUG,
    DEMO_MAX_CHARS,
    EDGE_HEADER_MAX_CHARS,
    ENVELOPE_CAP_BYTES,
    ENVELOPE_FIELDS,
    OUTCOMES,
    SCHEMA_VERSION,
    Boundary,
    Tier,
    lookup_now,
    written_at,
)
from cvdiag.contract.scrubber import is_sensitive_key, scrub, scrub_clipped, scrub_tree, scrub_values_of
from cvdiag.contract.timestamps import wire_ts
from cvdiag.write import config
from cvdiag.write._caps import NO_EDGE_HEADERS, render_capped
from cvdiag.write._writer import Writer
from cvdiag.write.context import RequestContext, bind, context_now, current_context, resolve_slug, unbind
from cvdiag.write.sinks import FileSink, Sink, StdoutSink

log = logging.getLogger("cvdiag")


class CvdiagError(RuntimeError):
    """An internal cvdiag failure, raised only in strict mode."""


class Counters:
    """What cvdiag noticed and handled instead of raising; see ``cvdiag.stats()``."""

    __slots__ = (
        "emitted",
        "internal_errors",
        "metadata_dropped",
        "sink_errors",
        "truncated",
        "unknown_boundaries",
    )

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.emitted = 0
        self.internal_errors = 0
        self.metadata_dropped = 0
        self.sink_errors = 0
        self.truncated = 0
        self.unknown_boundaries = 0


class _Sinks:
    """Where the writer writes: the configured stdout and file sinks, then ``add_sink``'s.

    Host configuration, not memory: ``_EmitterState.reset`` leaves it alone (a test
    runner's own sink must outlive a test that resets).
    """

    __slots__ = ("extra", "files", "stdout")

    def __init__(self) -> None:
        self.extra: list[Sink] = []
        self.stdout = StdoutSink()
        self.files: dict[str, FileSink] = {}

    def active(self) -> list[Sink]:
        s = config.get_settings()
        sinks: list[Sink] = []
        if s.stdout:
            sinks.append(self.stdout)
        if s.file:
            sink = self.files.get(s.file)
            if sink is None:
                sink = self.files[s.file] = FileSink(s.file)
            sinks.append(sink)
        sinks.extend(self.extra)
        if s.otlp or s.otlp_spans:  # OTLP export (docs/opentelemetry.md): loaded only when on
            from cvdiag.write import _otlp

            sinks.append(_otlp.sink(config.get_settings, state.writer.flush))
        return sinks


class _EmitterState:
    """What the emit path remembers between envelopes, in one place (like structlog's
    ``_CONFIG``), so that ``reset()`` can make a test start from nothing remembered."""

    __slots__ = (
        "counters",
        "drops_lock",
        "drops_reported",
        "id_lock",
        "pending_errors",
        "process_test_id",
        "reported_drops",
        "sensitive_boundaries",
        "warned_unknown",
        "writer",
    )

    def __init__(self) -> None:
        self.counters = Counters()
        self.writer = Writer(_sinks.active, _on_sink_error, on_idle=lambda: _report_drops())
        #: Sink errors kept for strict mode to raise on the next ``emit`` or ``flush``.
        self.pending_errors: list[BaseException] = []
        #: Unregistered boundary names already warned about (at most 1,000).
        self.warned_unknown: set[str] = set()
        #: (boundary, key) pairs already reported by ``cvdiag.metadata_dropped``.
        self.reported_drops: set[tuple[str, str]] = set()
        #: boundary name -> must its metadata be walked even when it holds only numbers.
        self.sensitive_boundaries: dict[str, bool] = {}
        #: The test id of accounting lines written outside any request.
        self.process_test_id: str | None = None
        self.id_lock = threading.Lock()
        self.drops_lock = threading.Lock()
        #: ``writer.dropped`` as of the last ``cvdiag.queue_dropped`` envelope.
        self.drops_reported = 0

    def reset(self) -> None:
        """Forget everything above: counters at zero, every once-per-process report due
        again, no pending strict-mode error, a new process test id. What is queued is
        written first; the writer thread, the settings and the sinks stay."""
        self.writer.flush()
        with self.drops_lock:
            self.writer.reset_counts()
            self.drops_reported = 0
        self.counters.reset()
        self.pending_errors.clear()
        self.warned_unknown.clear()
        self.reported_drops.clear()
        self.sensitive_boundaries.clear()
        self.process_test_id = None

    def mint_process_test_id(self) -> str:
        """The process test id, made once even when two threads ask for it together
        (the writer's ``cvdiag.queue_dropped`` and a caller's line, say)."""
        with self.id_lock:
            if self.process_test_id is None:
                self.process_test_id = new_test_id()
            return self.process_test_id


def _on_sink_error(exc: BaseException) -> None:
    state.counters.sink_errors += 1
    if config.get_settings().strict:
        state.pending_errors.append(exc)


_sinks = _Sinks()
state = _EmitterState()


def add_sink(sink: Sink) -> None:
    """Attach an extra sink on top of the configured stdout and file sinks."""
    if sink not in _sinks.extra:
        _sinks.extra.append(sink)


def remove_sink(sink: Sink) -> None:
    if sink in _sinks.extra:
        _sinks.extra.remove(sink)


def flush(timeout: float = 5.0) -> bool:
    """Block until everything emitted so far is written; False if ``timeout`` ran out."""
    _report_drops()
    done = state.writer.flush(timeout)
    _raise_pending()
    return done


def stats() -> dict[str, int]:
    """Counts of what was emitted, dropped, truncated or failed, for this process."""
    counters, writer = state.counters, state.writer
    tool_wire = sys.modules.get("cvdiag.write._tool_wire")  # loaded with LLM capture only
    return {
        "emitted": counters.emitted,
        "written": writer.written,
        "write_failed": writer.failed,
        "queue_dropped": writer.dropped,
        "sink_errors": counters.sink_errors,
        "internal_errors": counters.internal_errors,
        "unknown_boundaries": counters.unknown_boundaries,
        "metadata_dropped": counters.metadata_dropped,
        "truncated": counters.truncated,
        "tool_bodies_skipped": tool_wire.asked_calls.skipped_bodies if tool_wire is not None else 0,
        "tool_results_unpaired": tool_wire.asked_calls.unpaired if tool_wire is not None else 0,
        **(otlp.stats() if (otlp := sys.modules.get("cvdiag.write._otlp")) is not None else {}),
    }


def note_internal_error() -> None:
    """Count a failure of cvdiag's own instrumentation; re-raise it in strict mode.

    Call from an ``except`` block: the host goes on as if cvdiag were not there.
    """
    state.counters.internal_errors += 1
    if config.get_settings().strict:
        raise


def count_internal_error() -> None:
    """Count a failure of cvdiag's own where nothing may raise, even in strict mode
    (clean-up that a heartbeat or the next call does for another)."""
    state.counters.internal_errors += 1


def _raise_pending() -> None:
    pending = state.pending_errors
    if pending:
        exc = pending.pop(0)
        pending.clear()
        raise CvdiagError(f"cvdiag sink failed: {type(exc).__name__}: {exc}") from exc


# --- clocks -----------------------------------------------------------------------


def elapsed_ms(start_ns: int) -> int:
    """Whole milliseconds since ``start_ns`` on the monotonic clock."""
    return (time.monotonic_ns() - start_ns) // 1_000_000


# --- processors (structlog signature: logger, method_name, event_dict) -------------
# The event dict is {"envelope": <the wire dict, in field order>, "boundary": Boundary,
# "cap": bytes}, plus "accounting": [(boundary, metadata), ...] when a step asks for an
# accounting line; keeping our bookkeeping beside the envelope means it can never leak
# into a line. The last processor returns the rendered bytes.


def _drop_unknown(envelope: dict[str, Any], boundary: Boundary) -> Sequence[tuple[str, dict[str, Any]]]:
    """Remove metadata keys the boundary does not declare (spec section 2, fix); return
    the accounting line that reports keys never reported before, if any."""
    known = boundary.metadata
    metadata = envelope["metadata"]
    if known is None or not metadata or metadata.keys() <= known:
        return _NO_ACCOUNTING
    envelope["metadata"] = {k: v for k, v in metadata.items() if k in known}
    envelope["_metadata_dropped"] = True
    state.counters.metadata_dropped += 1
    reported = state.reported_drops
    new = sorted(str(k) for k in metadata if k not in known and (boundary.name, str(k)) not in reported)
    if not new:
        return _NO_ACCOUNTING
    reported.update((boundary.name, k) for k in new)
    return [("cvdiag.metadata_dropped", {"boundary": boundary.name, "keys": new})]


def drop_unknown_metadata(_logger: Any, _name: str, event: dict[str, Any]) -> dict[str, Any]:
    """Remove metadata keys the boundary does not declare (spec section 2, fix)."""
    asked = _drop_unknown(event["envelope"], event["boundary"])
    if asked:
        event.setdefault("accounting", []).extend(asked)
    return event


_PLAIN = frozenset({int, float, bool, type(None)})


def _walks_numbers(boundary: Boundary) -> bool:
    """Must metadata of plain numbers be walked all the same (cached per boundary)? Yes
    when the boundary declares no keys, or a key name the scrubber treats as secret."""
    found = state.sensitive_boundaries.get(boundary.name)
    if found is None:
        found = state.sensitive_boundaries[boundary.name] = boundary.metadata is None or any(
            map(is_sensitive_key, boundary.metadata)
        )
    return found


# demo and edge header values repeat across a request's envelopes and across requests;
# a long one (a 1 KB via header) is past the scrubber's own cache of short strings.
_scrubbed_clipped_str = lru_cache(maxsize=1024)(scrub_clipped)


def _scrubbed_clipped(value: object, limit: int) -> str:
    return _scrubbed_clipped_str(value, limit) if type(value) is str else scrub_clipped(value, limit)


#: demo -> its written form. Every envelope has a demo and a service has few: a dict
#: lookup costs a fifth of the lru_cache call (which builds and hashes a key tuple).
_DEMOS: dict[str, str] = {}
_DEMOS_KEPT = 1024


def _written_demo(demo: object) -> str:
    if type(demo) is not str:
        return scrub_clipped(demo, DEMO_MAX_CHARS)
    if len(_DEMOS) >= _DEMOS_KEPT:
        _DEMOS.clear()
    written = _DEMOS[demo] = scrub_clipped(demo, DEMO_MAX_CHARS)
    return written


def _scrub(envelope: dict[str, Any], boundary: Boundary) -> None:
    """Scrub ``demo``, every string leaf of metadata and edge header values, then cut
    the last two to their length limits (spec section 7: scrub first, cut after).

    Metadata of plain numbers under harmless key names (most boundaries) has nothing
    to scrub and skips the walk. The other string fields are ids, enums and
    timestamps that cvdiag itself made or sanitized.
    """
    demo = envelope["demo"]
    written = _DEMOS.get(demo) if type(demo) is str else None
    envelope["demo"] = written if written is not None else _written_demo(demo)
    metadata = envelope["metadata"]
    if metadata:
        walk = _walks_numbers(boundary)
        if walk or not _PLAIN.issuperset(map(type, metadata.values())):
            # Declared keys only, none of them a secret's name: the values alone need it.
            harmless = not walk and metadata.keys() <= boundary.metadata  # type: ignore[operator]
            envelope["metadata"] = scrub_values_of(metadata) if harmless else scrub_tree(metadata)
    edge = envelope["edge_headers"]
    if edge is not NO_EDGE_HEADERS:
        envelope["edge_headers"] = _scrubbed_edge(edge)


def _scrubbed_edge(edge: Mapping[str, str | None]) -> dict[str, str | None]:
    """Edge header values scrubbed, then cut to their length limit."""
    return {k: (None if v is None else _scrubbed_clipped(v, EDGE_HEADER_MAX_CHARS)) for k, v in edge.items()}


def scrub_values(_logger: Any, _name: str, event: dict[str, Any]) -> dict[str, Any]:
    """Scrub the envelope's free text (``_scrub``)."""
    _scrub(event["envelope"], event["boundary"])
    return event


def _render(envelope: dict[str, Any], cap: int) -> bytes:
    line = render_capped(envelope, cap)
    if envelope["_truncated"]:
        state.counters.truncated += 1
    return line


def render_within_cap(_logger: Any, _name: str, event: dict[str, Any]) -> bytes:
    """Render with orjson inside the tier's byte cap (spec section 7 ladder)."""
    return _render(event["envelope"], event["cap"])


class _QueueLogger:
    """The 'logger' handed to the processors: the queue, as structlog hands a processor
    its logger. ``_emit`` queues the rendered line itself."""

    __slots__ = ("counters", "writer")

    def __init__(self, writer: Writer, counters: Counters) -> None:
        self.writer = writer
        self.counters = counters


#: The steps from built envelope to line, each ``(logger, method_name, event_dict)`` like
#: a structlog processor; insert yours before the last (the renderer). Raising
#: ``structlog.DropEvent`` drops the envelope.
PROCESSORS: list[Callable[[Any, str, dict[str, Any]], Any]] = [drop_unknown_metadata, scrub_values, render_within_cap]
#: ``PROCESSORS`` as cvdiag ships it: while it is unchanged the three steps run in one
#: frame (``_steps``), without the event dict and the loop; and in C (``_cemit``) when built.
_DEFAULT_PROCESSORS = list(PROCESSORS)
# The writer and counters live as long as the process: ``reset`` clears them in place.
_queue = _QueueLogger(state.writer, state.counters)


#: What a pass that asks for no accounting line returns.
_NO_ACCOUNTING: tuple[tuple[str, dict[str, Any]], ...] = ()


def _run_processors(
    envelope: dict[str, Any], boundary: Boundary, cap: int, method: str
) -> tuple[Sequence[tuple[str, dict[str, Any]]], bytes | None]:
    """The accounting lines asked for and the line (None when a step dropped it), by
    running ``PROCESSORS`` (a user's steps among them) in a loop."""
    event = {"envelope": envelope, "boundary": boundary, "cap": cap}
    line: Any = event
    try:
        for processor in PROCESSORS:
            line = processor(_queue, method, line)
    except structlog.DropEvent:  # the line is dropped; what the pass found about its keys is still told
        line = None
    return event.get("accounting", _NO_ACCOUNTING), line


def _steps(
    envelope: dict[str, Any], boundary: Boundary, cap: int, accounting: bool
) -> tuple[Sequence[tuple[str, dict[str, Any]]], bytes | None]:
    """Take ``envelope`` through the processors: the accounting lines the pass asked
    for and the line (None when a step dropped it)."""
    if PROCESSORS == _DEFAULT_PROCESSORS:  # the same steps as the loop, called directly
        asked = _drop_unknown(envelope, boundary)
        _scrub(envelope, boundary)
        return asked, _render(envelope, cap)
    return _run_processors(envelope, boundary, cap, "accounting" if accounting else "envelope")


def _compiled_line() -> Callable[..., bytes | None] | None:
    """``_cemit.line``, handed what it calls, or None when the module is off or not
    built: the line of the fused steps built and encoded in one C call (``_cemit.c``)."""
    module = compiled_module("cvdiag.write._cemit")
    if module is None:
        return None
    if tuple(getattr(module, "FIELDS", ())) != ENVELOPE_FIELDS:  # it would write another envelope: refused
        with contextlib.suppress(Exception):  # warnings as errors: the Python steps all the same
            warnings.warn(
                "cvdiag: cvdiag.write._cemit writes other fields than contract.schema.ENVELOPE_FIELDS:"
                " running without it; rebuild it",
                RuntimeWarning,
                stacklevel=1,
            )
        return None
    module.setup(
        orjson.dumps,
        time.time_ns,
        time.monotonic_ns,
        getrandbits,
        _DEMOS,
        state.sensitive_boundaries,
        _written_demo,
        scrub,
        scrub_values_of,
        scrub_tree,
        _scrubbed_edge,
        NO_EDGE_HEADERS,
        orjson.dumps(NO_EDGE_HEADERS),
        b'{"schema_version":' + orjson.dumps(SCHEMA_VERSION) + b',"test_id":',
    )
    return module.line  # type: ignore[no-any-return]


#: ``_cemit.line`` or None (then every line takes the Python steps); a module global, so
#: that tests can compare both paths in one process.
_line_compiled = _compiled_line()


# --- the gate and the call --------------------------------------------------------


def _unknown(name: str, strict: bool) -> None:
    state.counters.unknown_boundaries += 1
    if strict:
        raise CvdiagError(f"cvdiag: unregistered boundary {name!r}")
    warned = state.warned_unknown
    if name not in warned and len(warned) < 1000:
        warned.add(name)
        log.warning("cvdiag: unregistered boundary %r was not emitted (register_boundary() it first)", str(name)[:128])


def is_enabled() -> bool:
    return config.get_settings().enabled


def active_tier(slug: str | None = None) -> Tier | None:
    """The tier in force for ``slug`` (the current context's by default), None when off."""
    s = config.get_settings()
    if not s.enabled:
        return None
    if slug is None:
        ctx = current_context()
        slug = ctx.slug if ctx is not None else resolve_slug()
    return s.tier_for(slug)


def emit(
    boundary: str,
    metadata: Mapping[str, Any] | None = None,
    *,
    outcome: str | None = None,
    duration_ms: int | None = None,
) -> None:
    """Write one envelope if cvdiag is enabled and the tier allows ``boundary``.

    Never raises into the caller (except in strict mode) and never blocks.
    """
    emit_edge(boundary, metadata, outcome=outcome, duration_ms=duration_ms, edge_headers=None)


def emit_as(
    ctx: RequestContext,
    boundary: str,
    metadata: Mapping[str, Any] | None = None,
    *,
    outcome: str | None = None,
    duration_ms: int | None = None,
) -> None:
    """``emit`` bound to ``ctx``: a line of that request written from another thread or task
    (an answer read later, an MCP transport's own task)."""
    if current_context() is ctx:
        emit(boundary, metadata, outcome=outcome, duration_ms=duration_ms)
        return
    token = bind(ctx)
    try:
        emit(boundary, metadata, outcome=outcome, duration_ms=duration_ms)
    finally:
        unbind(token)


def emit_edge(
    boundary: str,
    metadata: Mapping[str, Any] | None,
    *,
    outcome: str | None,
    duration_ms: int | None,
    edge_headers: Mapping[str, str | None] | None,
) -> None:
    """``emit`` with edge headers: a mapping of exactly the 9 keys of spec section 6."""
    settings = config.current.settings
    if not settings.enabled:
        return
    try:
        after = _emit(settings, boundary, metadata, outcome, duration_ms, edge_headers)
        if after:
            for name, accounted in after:  # accounting lines ask for none of their own
                _emit(settings, name, accounted, None, None, None)
    except Exception:
        note_internal_error()


def _emit(
    settings: config.Settings,
    name: str,
    metadata: Mapping[str, Any] | None,
    outcome: str | None,
    duration_ms: int | None,
    edge_headers: Mapping[str, str | None] | None,
) -> Sequence[tuple[str, dict[str, Any]]]:
    """Build the envelope and run it through the processors; return the accounting
    lines it asked for (to be emitted after it)."""
    if settings.strict and state.pending_errors:
        _raise_pending()
    boundary = lookup_now(name)
    if boundary is None:
        _unknown(name, settings.strict)
        return _NO_ACCOUNTING
    ctx = context_now()
    accounting = boundary.metadata is None
    tier = settings.tier  # accounting lines: the global tier's cap
    if accounting:
        slug = ACCOUNTING_SLUG
    else:
        slug = ctx.slug if ctx is not None else resolve_slug()
        if tier is Tier.DEBUG:  # only debug differs per slug (``tier_for``)
            tier = settings.tier_for(slug)
        if boundary.tier > tier and written_at(boundary, outcome) > tier:
            return _NO_ACCOUNTING
        if tier is Tier.DEBUG:
            config.count_debug_envelope()
    if ctx is not None:
        test_id, trace_id, demo = ctx.test_id, ctx.trace_id, ctx.demo
    elif accounting:
        test_id = trace_id = state.process_test_id or state.mint_process_test_id()
        demo = "default"
    else:
        test_id = trace_id = new_test_id()
        demo = "default"
    if outcome not in OUTCOMES:
        outcome = "info"
    cap = ENVELOPE_CAP_BYTES[tier]  # the slug's tier, not the global one
    # The shipped steps in C; None when they must be taken in Python (see _cemit.c).
    line = (
        _line_compiled(boundary, name, test_id, trace_id, slug, demo, duration_ms, outcome, edge_headers, metadata, cap)
        if _line_compiled is not None and PROCESSORS == _DEFAULT_PROCESSORS
        else None
    )
    asked: Sequence[tuple[str, dict[str, Any]]] = _NO_ACCOUNTING
    if line is None:
        now = time.time_ns()
        envelope = {
            "schema_version": SCHEMA_VERSION,
            "test_id": test_id,
            "trace_id": trace_id,
            "span_id": new_span_id(),
            "parent_span_id": None,
            "layer": boundary.layer,
            "boundary": name,
            "slug": slug,
            "demo": demo,
            "ts": wire_ts(now),
            "mono_ns": time.monotonic_ns(),
            "duration_ms": duration_ms
            if type(duration_ms) is int or (isinstance(duration_ms, int) and not isinstance(duration_ms, bool))
            else None,
            "outcome": outcome,
            "edge_headers": edge_headers if edge_headers is not None else NO_EDGE_HEADERS,
            "metadata": dict(metadata) if metadata else {},
            "_metadata_dropped": False,
            "_truncated": False,
        }
        asked, line = _steps(envelope, boundary, cap, accounting)
        if line is None:
            return asked
    # Accounting lines may exceed the bound by one: a report of lost lines must not
    # itself push out another line.
    state.writer.put(line, settings.queue_size + 1 if accounting else settings.queue_size)
    state.counters.emitted += 1
    return asked


def _report_drops() -> None:
    """Turn lines the full queue dropped into one ``cvdiag.queue_dropped`` envelope.

    Called by the writer when it has drained the queue (the overflow is over) and by
    ``flush``, so one overflow episode gives one envelope, not one per lost line.
    """
    dropped = state.writer.dropped
    if dropped == state.drops_reported or not state.drops_lock.acquire(blocking=False):
        return
    try:
        new = dropped - state.drops_reported
        state.drops_reported = dropped
    finally:
        state.drops_lock.release()
    if new > 0:
        emit("cvdiag.queue_dropped", {"_dropped_count": new})
