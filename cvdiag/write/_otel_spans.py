"""Spans in the process: what frameworks and instrumentations record while a request runs
under cvdiag becomes envelopes under its test id (spec section 9).

Imported by ``cvdiag.instrument()`` only once the app has imported OpenTelemetry (never
by ``import cvdiag``). Three parts:

* ``SpanTap``, a SpanProcessor: ``on_start`` puts ``cvdiag.test_id`` on every span started
  inside a cvdiag request; ``on_end`` reads the finished span with the contract's
  ``read_span`` and emits the envelope it gives through the normal emit path (scrubbed,
  capped, tiered). A tool call the wire or the MCP capture saw is written once: a span
  whose call the MCP capture wrote is skipped, one whose call the model asked for on the
  wire answers it (the wire then writes no response of its own); an LLM span is written
  only when the wire saw no LLM call inside it (``source: otel``).
* The app's set-up is the app's: when it configured an SDK ``TracerProvider`` (before or
  after ``instrument()``), the tap is added to it and nothing else changes: its sampler,
  exporters and processors stay. When it configured none, frameworks' spans are
  non-recording; cvdiag then sets a provider of its own, ``StandIn``, that records only
  inside cvdiag requests, exports nothing, and steps aside when the app sets its own
  later (``set_tracer_provider`` then works as if cvdiag had set none, and tracers handed
  out before follow the app's provider).

What a finished span becomes, and when it is a call already written, is
``_span_evidence``'s (which the OpenAI Agents SDK's tap shares, without OpenTelemetry).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from opentelemetry import trace as trace_api
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.sampling import Decision, Sampler, SamplingResult
from opentelemetry.trace import StatusCode

from cvdiag.contract.otel import SpanView, may_be_evidence
from cvdiag.write import config
from cvdiag.write._span_evidence import emit_evidence, switch
from cvdiag.write.context import context_now
from cvdiag.write.emitter import note_internal_error
from cvdiag.write.hooks import Patch

__all__ = ["TEST_ID_ATTR", "SpanTap", "StandIn", "attach", "detach", "tap"]

#: The span attribute that names the test (spec section 9).
TEST_ID_ATTR = "cvdiag.test_id"
_NO_ATTRIBUTES: Mapping[str, Any] = MappingProxyType({})


def view_of(span: ReadableSpan) -> SpanView:
    """The contract's ``SpanView`` of a finished SDK span."""
    context = span.context
    parent = span.parent
    status = span.status
    scope = span.instrumentation_scope
    resource = span.resource
    return SpanView(
        name=span.name,
        trace_id=f"{context.trace_id:032x}" if context is not None else "0" * 32,
        span_id=f"{context.span_id:016x}" if context is not None else "0" * 16,
        parent_span_id=f"{parent.span_id:016x}" if parent is not None else None,
        start_ns=span.start_time or 0,
        end_ns=span.end_time or 0,
        status_error=status.status_code is StatusCode.ERROR,
        status_message=status.description,
        attributes=span.attributes or _NO_ATTRIBUTES,
        events=tuple((e.name, e.timestamp, e.attributes or _NO_ATTRIBUTES) for e in span.events),
        kind=span.kind.value + 1,  # the API's enum starts at INTERNAL = 0; OTLP's at UNSPECIFIED
        scope=scope.name if scope is not None else "",
        resource=resource.attributes if resource is not None else _NO_ATTRIBUTES,
    )


class SpanTap(SpanProcessor):
    """cvdiag's processor on an SDK provider: tags spans with the test id, reads the
    evidence of those that end. Never raises into the app."""

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        if not switch.on:
            return
        ctx = context_now()
        if ctx is not None:
            span.set_attribute(TEST_ID_ATTR, ctx.test_id)

    def on_end(self, span: ReadableSpan) -> None:
        if not switch.on:
            return
        attributes = span.attributes
        test_id = attributes.get(TEST_ID_ATTR) if attributes else None
        if test_id is None or not config.current.settings.enabled:
            return
        if not may_be_evidence(span.name, attributes):  # most spans of a request cost only their test id
            return
        try:
            emit_evidence(view_of(span), str(test_id))
        except Exception:
            note_internal_error()

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


tap = SpanTap()


# -- a provider of cvdiag's own, while the app has none ------------------------------------


class InRequests(Sampler):
    """Records (never samples for export) the spans started inside a cvdiag request; drops
    every other, as the absent provider did."""

    _DROP = SamplingResult(Decision.DROP)

    def should_sample(
        self, parent_context: Any, trace_id: int, name: str, kind: Any = None, attributes: Any = None, *args: Any
    ) -> SamplingResult:
        if switch.on and context_now() is not None:
            return SamplingResult(Decision.RECORD_ONLY, attributes)  # the span keeps the attributes it was given
        return self._DROP

    def get_description(self) -> str:
        return "cvdiag.InRequests"


class StandIn(TracerProvider):
    """The global provider while the app set none: its tracers record inside cvdiag
    requests only, and follow the app's provider once it sets one."""

    def __init__(self) -> None:
        super().__init__(sampler=InRequests(), shutdown_on_exit=False)
        self.add_span_processor(tap)

    def get_tracer(self, *args: Any, **kwargs: Any) -> Any:
        return _Following(self, args, kwargs)


class _Following(trace_api.Tracer):
    """A tracer of ``StandIn``: its own while ``StandIn`` is global, the global provider's
    once the app has set one."""

    def __init__(self, stand_in: StandIn, args: tuple, kwargs: dict) -> None:
        self._stand_in = stand_in
        self._args, self._kwargs = args, kwargs
        self._own = TracerProvider.get_tracer(stand_in, *args, **kwargs)
        self._theirs: tuple[Any, Any] | None = None

    def _tracer(self) -> Any:
        provider = trace_api.get_tracer_provider()
        if provider is self._stand_in:
            return self._own
        theirs = self._theirs
        if theirs is None or theirs[0] is not provider:
            theirs = self._theirs = (provider, provider.get_tracer(*self._args, **self._kwargs))
        return theirs[1]

    def start_span(self, *args: Any, **kwargs: Any) -> Any:
        return self._tracer().start_span(*args, **kwargs)

    def start_as_current_span(self, *args: Any, **kwargs: Any) -> Any:
        return self._tracer().start_as_current_span(*args, **kwargs)


class _Attached:
    """The providers the tap was added to (weakly), the stand-in, the wrapped setter."""

    __slots__ = ("lock", "providers", "setter", "stand_in")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.providers: weakref.WeakSet[Any] = weakref.WeakSet()
        self.stand_in: StandIn | None = None
        #: ``trace._set_tracer_provider`` wrapped (it stays: ours passes through when off).
        self.setter: Patch | None = None


attached = _Attached()


def _add_to(provider: Any) -> bool:
    """Add the tap to an SDK-like provider once; False for one that takes no processor."""
    add = getattr(provider, "add_span_processor", None)
    if add is None or isinstance(provider, StandIn):
        return isinstance(provider, StandIn)
    with attached.lock:
        if provider in attached.providers:
            return True
        add(tap)
        attached.providers.add(provider)
    return True


def _set_provider(tracer_provider: Any, log: bool) -> None:
    """``opentelemetry.trace._set_tracer_provider``, which both the public setter and the
    environment's provider go through: the app's provider replaces cvdiag's stand-in as
    if none had been set, and gets the tap."""
    stand_in = attached.stand_in
    if stand_in is not None and tracer_provider is not stand_in and trace_api._TRACER_PROVIDER is stand_in:
        with trace_api._TRACER_PROVIDER_SET_ONCE._lock:
            trace_api._TRACER_PROVIDER = None
            trace_api._TRACER_PROVIDER_SET_ONCE._done = False
    attached.setter.original(tracer_provider, log)  # type: ignore[union-attr]
    try:
        if switch.on and trace_api._TRACER_PROVIDER is tracer_provider:
            _add_to(tracer_provider)
    except Exception:
        note_internal_error()


def attach(*, stand_in: bool = True) -> str:
    """Put the tap on the app's provider, or a stand-in where there is none; ``on`` or
    ``foreign`` (a provider that takes no processor: spans get no test id, none is read)."""
    switch.on = True
    if attached.setter is None:
        attached.setter = Patch(trace_api, "_set_tracer_provider", _set_provider)
        attached.setter.install()
    provider = trace_api.get_tracer_provider()
    if isinstance(provider, trace_api.ProxyTracerProvider) and stand_in:
        if attached.stand_in is None:
            attached.stand_in = StandIn()
        trace_api._set_tracer_provider(attached.stand_in, log=False)
        provider = trace_api.get_tracer_provider()
    return "on" if _add_to(provider) else "foreign"


def detach() -> None:
    """The tap passes through; a stand-in stays global but records nothing."""
    switch.on = False
