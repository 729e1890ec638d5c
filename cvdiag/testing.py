"""Helpers for the tests of an application that uses cvdiag (and for cvdiag's own).

``capture()`` is to cvdiag what ``structlog.testing.capture_logs`` is to structlog::

    from cvdiag.testing import capture

    with capture() as envelopes:
        run_the_agent()
    assert [e["boundary"] for e in envelopes] == ["backend.agent.enter", "backend.agent.exit"]

The pytest plugin's ``cvdiag_events`` fixture is built on it. ``envelope()`` builds a
whole wire line without an emitter, for tests of whatever reads the logs.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import orjson

from cvdiag.contract.ids import new_span_id
from cvdiag.contract.schema import DEFAULT_DEMO, EDGE_HEADERS, ENVELOPE_FIELDS, SCHEMA_VERSION
from cvdiag.contract.timestamps import wire_ts
from cvdiag.write import config, emitter
from cvdiag.write._heartbeat import scheduler

__all__ = ["capture", "envelope", "reset"]

#: What ``capture()`` configures unless told otherwise: on at the debug tier under a
#: deployment label that allows it, nothing read from the process environment, so
#: nothing written to stdout or a file either.
CAPTURE_DEFAULTS: dict[str, Any] = {
    "enabled": True,
    "tier": "debug",
    "environ": {"CVDIAG_ENV": "test"},
    "stdout": False,
}


class _ListSink:
    """A sink that appends each line, as the dict it encodes, to a list."""

    __slots__ = ("_lock", "envelopes")

    def __init__(self, envelopes: list[dict[str, Any]]) -> None:
        self.envelopes = envelopes
        self._lock = threading.Lock()

    def write(self, lines: list[bytes]) -> None:
        decoded = [orjson.loads(line) for line in lines]
        with self._lock:
            self.envelopes.extend(decoded)

    def close(self) -> None:
        pass


@contextmanager
def capture(*, settings: config.Settings | None = None, **options: Any) -> Iterator[list[dict[str, Any]]]:
    """Collect the envelopes written inside the block, as dicts in wire order, in the
    list it yields; then put the configuration back as it was.

    ``options`` are ``cvdiag.configure()``'s arguments over ``CAPTURE_DEFAULTS``;
    ``settings`` applies a whole ``Settings`` instead (the pytest plugin's per test).
    The host's sinks stay as they are: an envelope also reaches the stdout or file the
    settings name. Lines reach the list from the writer thread: it is complete when
    the block ends, and inside it after ``cvdiag.flush()``. Accounting lines
    (``cvdiag.*``) and other contexts' envelopes are in it too.
    """
    if settings is not None and options:
        raise TypeError("capture() takes settings= or configure()'s arguments, not both")
    previous = config.get_settings()
    envelopes: list[dict[str, Any]] = []
    sink = _ListSink(envelopes)
    if not emitter.state.writer.idle:
        emitter.state.writer.flush()  # lines emitted before the block go out without it
    emitter.add_sink(sink)
    try:
        config.apply_settings(settings if settings is not None else config.build_settings(**CAPTURE_DEFAULTS | options))
        yield envelopes
    finally:
        try:
            emitter.flush()  # in strict mode a sink's failure is raised here
        finally:
            emitter.remove_sink(sink)
            config.apply_settings(previous)


def reset() -> None:
    """Forget what cvdiag remembered in this process, so that a test counts from zero:
    ``cvdiag.stats()``, the once-per-process reports (unregistered boundary warnings,
    ``cvdiag.metadata_dropped``), a pending strict-mode error, the LLM retry memory, the
    tool calls waiting for their results and the heartbeat thread. The configuration, the
    sinks, registered boundaries and LLM endpoints and httpx instrumentation stay (undo
    those with their own calls)."""
    # What can still write a line goes first (a heartbeat, a call the collector let go,
    # ending now): counted before the zeroing, never after it.
    scheduler.stop()
    llm_capture = sys.modules.get("cvdiag.write._llm_capture")
    if llm_capture is not None:  # not imported: no HTTP call was ever recognised
        llm_capture.between_calls.reset()
    tool_wire = sys.modules.get("cvdiag.write._tool_wire")
    if tool_wire is not None:
        tool_wire.asked_calls.reset()
    calls_seen = sys.modules.get("cvdiag.write._calls_seen")
    if calls_seen is not None:
        calls_seen.reset()
    emitter.state.reset()


#: Every field in wire order, holding what an emitter writes when nobody set it; the
#: fields that differ per envelope (ids, times, headers, metadata) are set by the call.
_TEMPLATE: dict[str, Any] = dict.fromkeys(ENVELOPE_FIELDS) | {
    "schema_version": SCHEMA_VERSION,
    "slug": "unknown",
    "demo": DEFAULT_DEMO,
    "outcome": "info",
    "_metadata_dropped": False,
    "_truncated": False,
}


def envelope(boundary: str, *, test_id: str = "t-1", ts: str | None = None, **fields: Any) -> dict[str, Any]:
    """A complete schema-v1 envelope of ``boundary``, keys in wire order: a log line to
    feed the reader, the CLI or the report without running an emitter.

    ``fields`` set any other envelope field by name (``span_id=``, ``outcome=``,
    ``metadata=`` ...). What is not set is what the emitter writes for a bare event: the
    layer from the boundary's first part, ``trace_id`` equal to ``test_id``, a fresh span
    id, the time now (``ts`` and ``mono_ns``), the unknown slug and the default demo, no
    metadata. ``edge_headers`` names only the headers seen: the rest of the nine are null,
    as on the wire. A name outside the schema is a ``TypeError``, not a silent extra key.
    """
    if not fields.keys() <= _TEMPLATE.keys():
        unknown = ", ".join(sorted(fields.keys() - _TEMPLATE.keys()))
        raise TypeError(f"envelope() got fields outside the schema: {unknown}")
    # Unpacking over the template keeps its (wire) order whatever order the fields come in.
    env = {
        **_TEMPLATE,
        "test_id": test_id,
        "trace_id": test_id,
        "layer": boundary.split(".", 1)[0],
        "boundary": boundary,
        "ts": ts if ts is not None else wire_ts(time.time_ns()),
        "metadata": {},
        **fields,
    }
    if "span_id" not in fields:
        env["span_id"] = new_span_id()
    if "mono_ns" not in fields:
        env["mono_ns"] = time.monotonic_ns()
    seen = fields.get("edge_headers")
    env["edge_headers"] = dict.fromkeys(EDGE_HEADERS) | seen if seen else dict.fromkeys(EDGE_HEADERS)
    return env
