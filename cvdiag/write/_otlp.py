"""Envelopes to OpenTelemetry: each line also an OTLP log record, and spans on request.

A sink (``sinks.Sink``) on the writer's drain thread: the request path does nothing more
with export on than off (the middleware notes the request's trace, see ``_otlp_link``).
Each line becomes a record (spec section 9): event name ``cvdiag.`` + boundary, body
the envelope object exactly as written, attributes ``cvdiag.test_id``, ``.boundary``,
``.layer``, ``.slug``, ``.outcome`` and the metadata's plain values as ``cvdiag.<key>``,
severity WARN for ``err``/``timeout`` else INFO, and the trace and span of the OTel span
current when the request entered the middleware.

Records go to the application's own ``LoggerProvider`` when it configured one (an
OpenTelemetry SDK provider set globally), else to cvdiag's own exporter
(``_otlp_export``: a bounded queue, a thread, OTLP/HTTP protobuf or JSON by the standard
variables). Loaded only when export is on: importing cvdiag loads none of this.
"""

from __future__ import annotations

import atexit
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import orjson

from cvdiag.contract.timestamps import ts_seconds
from cvdiag.write import _otlp_link
from cvdiag.write._otlp_config import Resource, Target, resource, target
from cvdiag.write._otlp_export import DEFAULT_QUEUE, Counts, Exporter
from cvdiag.write._otlp_wire import SEVERITY_INFO, SEVERITY_WARN, LogRecord, json_logs, json_spans, pb_logs, pb_spans

log = logging.getLogger("cvdiag")

SCOPE_NAME = "cvdiag"
#: What the exporters get to finish at process exit (the writer's own drain comes first).
EXIT_DRAIN_SECONDS = 2.0
_FAILED = frozenset({"err", "timeout"})
_PLAIN = frozenset({str, int, float, bool})


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("cvdiag")
    except Exception:  # not installed (a checkout on PYTHONPATH)
        return "0"


def _ts_ns(ts: Any) -> int:
    try:
        return round(ts_seconds(ts) * 1000) * 1_000_000
    except (TypeError, ValueError):
        return time.time_ns()


#: metadata key -> its attribute name (``cvdiag.<key>``): the keys repeat on every line.
_ATTR_NAMES: dict[str, str] = {}


def _attr_name(key: str) -> str:
    name = _ATTR_NAMES.get(key)
    if name is None:
        name = "cvdiag." + key
        if len(_ATTR_NAMES) < 4096:
            _ATTR_NAMES[key] = name
    return name


def record_of(env: dict[str, Any], observed_ns: int) -> LogRecord:
    """The OTLP log record of one envelope (spec section 9)."""
    get = env.get
    boundary = str(get("boundary"))
    test_id = get("test_id")
    outcome = get("outcome")
    attributes: list[tuple[str, Any]] = [
        ("cvdiag.test_id", test_id),
        ("cvdiag.boundary", boundary),
        ("cvdiag.layer", get("layer")),
        ("cvdiag.slug", get("slug")),
        ("cvdiag.outcome", outcome),
    ]
    metadata = get("metadata")
    if type(metadata) is dict:
        names = _ATTR_NAMES
        for k, v in metadata.items():
            if type(v) in _PLAIN:
                attributes.append((names.get(k) or _attr_name(k), v))
    link = _otlp_link.links.get(test_id) if _otlp_link.links else None  # type: ignore[arg-type]
    return LogRecord(
        _ts_ns(get("ts")),
        observed_ns,
        SEVERITY_WARN if outcome in _FAILED else SEVERITY_INFO,
        env,
        attributes,
        "cvdiag." + boundary,
        bytes.fromhex(link[0]) if link else b"",
        bytes.fromhex(link[1]) if link else b"",
    )


def _parsed(lines: Sequence[bytes]) -> list[dict[str, Any]]:
    envelopes = []
    for line in lines:
        try:
            envelopes.append(orjson.loads(line))
        except orjson.JSONDecodeError:  # never happens for the emitter's own lines
            continue
    return envelopes


def _records(batch: Sequence[bytes | LogRecord]) -> list[LogRecord]:
    """A batch of written lines (and ready records, the plugin's verdict) as records."""
    now = time.time_ns()
    out = []
    for item in batch:
        if type(item) is LogRecord:
            out.append(item)
            continue
        try:
            env = orjson.loads(item)
        except orjson.JSONDecodeError:  # never happens for the emitter's own lines: sent as text
            out.append(
                LogRecord(now, now, SEVERITY_WARN, bytes(item).decode("utf-8", "replace"), [], "cvdiag.unparsed")
            )
            continue
        out.append(record_of(env, now))
    return out


class _AppLogger:
    """The application's own SDK ``LoggerProvider``, when it set one globally: records are
    handed to it (its processors and exporters count what becomes of them)."""

    def __init__(self) -> None:
        self.handed = 0

    @staticmethod
    def provider() -> Any:
        logs = sys.modules.get("opentelemetry._logs")
        if logs is None:
            return None
        provider = logs.get_logger_provider()
        if type(provider).__name__ in ("ProxyLoggerProvider", "NoOpLoggerProvider"):
            return None
        return provider

    def emit(self, provider: Any, records: Sequence[LogRecord]) -> None:
        from opentelemetry import trace
        from opentelemetry._logs import SeverityNumber

        logger = provider.get_logger(SCOPE_NAME, _version())
        for r in records:
            context = None
            if r.trace_id:
                span = trace.NonRecordingSpan(
                    trace.SpanContext(
                        int.from_bytes(r.trace_id, "big"),
                        int.from_bytes(r.span_id, "big"),
                        is_remote=True,
                        trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED),
                    )
                )
                context = trace.set_span_in_context(span)
            logger.emit(
                timestamp=r.time_ns,
                observed_timestamp=r.observed_ns,
                context=context,
                severity_number=SeverityNumber(r.severity),
                severity_text="WARN" if r.severity >= SEVERITY_WARN else "INFO",
                body=r.body,
                attributes={k: v for k, v in r.attributes if v is not None},
                event_name=r.event_name,
            )
            self.handed += 1


class OtlpSink:
    """The sink the emitter adds while ``CVDIAG_OTLP``/``CVDIAG_OTLP_SPANS`` is on."""

    def __init__(self, settings: Callable[[], Any], flush_writer: Callable[[float], bool]) -> None:
        self._settings = settings
        self._flush_writer = flush_writer
        self._lock = threading.Lock()
        self._environ = dict(os.environ)
        self._version = _version()
        self._resource: Resource = resource(self._environ, self._version)
        self._targets: dict[str, Target] = {}
        self.exporters: dict[str, Exporter | None] = {}
        self.app = _AppLogger()
        self.spans: Any = None  # the _otlp_spans.Builder, made when spans are first asked for
        self.convert_ns = 0
        self.converted = 0
        self.errors = 0
        atexit.register(self.at_exit)

    def _exporter(self, signal: str) -> Exporter | None:
        if signal in self.exporters:
            return self.exporters[signal]
        with self._lock:
            if signal not in self.exporters:
                found = self._targets[signal] = target(signal, self._environ)
                for problem in found.problems:
                    log.warning("cvdiag: %s (the log is still written)", problem)
                self.exporters[signal] = (
                    None
                    if found.url is None
                    else Exporter(found, self._encoder(signal), self._queue_size(), on_problem=log.warning)
                )
        return self.exporters[signal]

    def _queue_size(self) -> int:
        raw = self._environ.get("CVDIAG_OTLP_QUEUE_SIZE")
        try:
            return max(1, int(raw)) if raw else DEFAULT_QUEUE
        except ValueError:
            log.warning("cvdiag: CVDIAG_OTLP_QUEUE_SIZE=%r is not a number; using %d", raw[:32], DEFAULT_QUEUE)
            return DEFAULT_QUEUE

    def _encoder(self, signal: str) -> Callable[[Sequence[Any], bool], bytes]:
        attrs = self._resource.attributes
        scope = (SCOPE_NAME, self._version)
        if signal == "logs":
            return lambda batch, json: (json_logs if json else pb_logs)(attrs, scope, _records(batch))
        return lambda batch, json: (json_spans if json else pb_spans)(attrs, scope, batch)

    def write(self, lines: list[bytes]) -> None:
        """Hand the batch's records (and spans) over; never raises: the log sink's lines
        are not this sink's to lose, and trouble here is counted in ``otlp_errors``."""
        settings = self._settings()
        if not (settings.otlp or settings.otlp_spans):
            return
        try:
            self._write(lines, settings)
        except Exception as exc:
            self.errors += 1
            if self.errors == 1:
                log.warning("cvdiag: OTLP export failed: %s: %s (counted in cvdiag.stats())", type(exc).__name__, exc)

    def _write(self, lines: list[bytes], settings: Any) -> None:
        started = time.thread_time_ns()  # this thread's CPU: the cost per envelope, without GIL waits
        provider = self.app.provider() if settings.otlp else None
        envelopes = _parsed(lines) if provider is not None or settings.otlp_spans else []
        if provider is not None:
            now = time.time_ns()
            self.app.emit(provider, [record_of(env, now) for env in envelopes])
        elif settings.otlp and (exporter := self._exporter("logs")) is not None:
            # The lines as they are: the export thread makes the records, the writer's
            # thread (which the log sink shares) only hands them over.
            exporter.put(lines)
        if settings.otlp_spans:
            exporter = self._exporter("traces")
            if exporter is not None:
                if self.spans is None:
                    from cvdiag.write._otlp_spans import Builder

                    self.spans = Builder()
                exporter.put(self.spans.add(envelopes))
        self.convert_ns += time.thread_time_ns() - started
        self.converted += len(lines)

    def send_event(
        self,
        event_name: str,
        body: dict[str, Any],
        *,
        test_id: str,
        trace_id: str,
        span_id: str,
        warn: bool = True,
    ) -> None:
        """One log record that is not an envelope (the pytest plugin's verdict of a failed
        test), where the envelopes' records go; ``cvdiag.`` + each plain body key as an attribute."""
        now = time.time_ns()
        record = LogRecord(
            time_ns=now,
            observed_ns=now,
            severity=SEVERITY_WARN if warn else SEVERITY_INFO,
            body=body,
            attributes=[
                ("cvdiag.test_id", test_id),
                *((f"cvdiag.{k}", v) for k, v in body.items() if type(v) in _PLAIN),
            ],
            event_name=event_name,
            trace_id=bytes.fromhex(trace_id),
            span_id=bytes.fromhex(span_id),
        )
        provider = self.app.provider()
        if provider is not None:
            self.app.emit(provider, [record])
        elif (exporter := self._exporter("logs")) is not None:
            exporter.put([record])

    def close(self) -> None:
        pass

    def flush(self, timeout: float) -> bool:
        """Send what is open and queued: spans still waiting for their request's end too."""
        deadline = time.monotonic() + timeout
        if self.spans is not None:
            exporter = self.exporters.get("traces")
            if exporter is not None:
                exporter.put(self.spans.drain())
        done = True
        for exporter in list(self.exporters.values()):
            if exporter is not None:
                done = exporter.flush(max(0.0, deadline - time.monotonic())) and done
        return done

    def stats(self) -> dict[str, int]:
        """Counts for ``cvdiag.stats()``: per signal, records handed over, exported and dropped."""
        out: dict[str, int] = {"otlp_logs_to_app_provider": self.app.handed, "otlp_errors": self.errors}
        for signal, key in (("logs", "otlp_logs"), ("traces", "otlp_spans")):
            exporter = self.exporters.get(signal)
            counts = exporter.counts if exporter is not None else Counts()
            out[f"{key}_handed"] = counts.handed
            out[f"{key}_exported"] = counts.exported
            out[f"{key}_dropped_queue_full"] = counts.dropped_queue_full
            out[f"{key}_dropped_collector_down"] = counts.dropped_unreachable
            out[f"{key}_dropped_rejected"] = counts.dropped_rejected
            out[f"{key}_pending"] = exporter.pending if exporter is not None else 0
        if self.spans is not None:
            out["otlp_spans_evicted_open"] = self.spans.evicted
        return out

    def summary(self) -> tuple[str, bool]:
        """The shutdown line, and whether anything was lost."""
        parts = []
        lost = False
        if self.app.handed:
            parts.append(f"logs: {self.app.handed} handed to the app's LoggerProvider")
        for signal, exporter in self.exporters.items():
            if exporter is None:
                parts.append(f"{signal}: not exported (see the warning at start)")
                continue
            c = exporter.counts
            unsent = exporter.pending
            lost = lost or c.dropped > 0 or unsent > 0
            parts.append(
                f"{signal}: {c.handed} handed, {c.exported} exported, {c.dropped} dropped "
                f"(queue full {c.dropped_queue_full}, collector down {c.dropped_unreachable}, "
                f"rejected {c.dropped_rejected}), {unsent} unsent at exit"
            )
        return "cvdiag: OTLP export: " + ("; ".join(parts) or "nothing to export"), lost

    def at_exit(self) -> None:
        try:
            # Requests still open get their terminal first (the middleware's own exit hook,
            # which may run after this one, then finds them ended): they are exported too.
            inflight = sys.modules.get("cvdiag.write._inflight")
            if inflight is not None:
                inflight._at_exit()
            self._flush_writer(EXIT_DRAIN_SECONDS)
            self.flush(EXIT_DRAIN_SECONDS)
            line, lost = self.summary()
            log.log(logging.WARNING if lost else logging.INFO, "%s", line)
        except Exception:  # never fail the host's exit
            pass


_sink: OtlpSink | None = None
_sink_lock = threading.Lock()


def sink(settings: Callable[[], Any], flush_writer: Callable[[float], bool]) -> OtlpSink:
    """The process's one OTLP sink, made on first use."""
    global _sink
    if _sink is None:
        with _sink_lock:
            if _sink is None:
                _sink = OtlpSink(settings, flush_writer)
    return _sink


def stats() -> dict[str, int]:
    return _sink.stats() if _sink is not None else {}


def reset(timeout: float = 2.0) -> None:
    """Forget the sink (for tests: the next envelope reads the OTLP variables afresh);
    what it holds is sent first, within ``timeout``."""
    global _sink
    with _sink_lock:
        old, _sink = _sink, None
    if old is not None:
        old.flush(timeout)
        atexit.unregister(old.at_exit)


def flush(timeout: float = 5.0) -> bool:
    return _sink.flush(timeout) if _sink is not None else True


def _after_fork() -> None:
    """A forked worker has none of the parent's export threads: it makes its own sink."""
    global _sink
    _sink = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)
