"""OTLP JSON documents to CVDIAG lines: the translation ``otlp.translated`` runs (loaded
only when an input holds traces, with the contract's tables)."""

from __future__ import annotations

import base64
import re
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import Any, BinaryIO

import orjson

from cvdiag.contract.ids import new_span_id, sanitize_slug
from cvdiag.contract.otel import FailureEchoes, SpanEvidence, SpanView, read_span, scrub_metadata, span_test_id
from cvdiag.contract.otel._conventions import READ_KEYS
from cvdiag.contract.otel._read import TEST_ID_KEYS
from cvdiag.contract.schema import CATALOG, DEFAULT_DEMO, EDGE_HEADERS, PREFIX, SCHEMA_VERSION
from cvdiag.contract.timestamps import wire_ts

#: A document (one line of the Collector's file, or one pretty document) parsed whole is
#: at most this big; a bigger one is skipped and counted.
MAX_DOC_BYTES = 64 << 20
_READ = 1 << 20
_HEX = re.compile(r"[0-9a-f]+")
_SDK_KINDS = {"INTERNAL": 1, "SERVER": 2, "CLIENT": 3, "PRODUCER": 4, "CONSUMER": 5}
_NO_EDGE = orjson.Fragment(orjson.dumps(dict.fromkeys(EDGE_HEADERS)))  # written once, copied per line
_DEPTH = 8  # kvlist and array values nested deeper are not converted


@dataclass
class Tally:
    """What one OTLP input held, said in one note at the end."""

    documents: int = 0
    spans: int = 0
    lines: int = 0
    malformed: int = 0  # documents that are no JSON or cut, records of the wrong shape
    too_big: int = 0
    unfinished: int = 0  # spans with no end (never exported by an SDK: a hand-made or cut file)
    bad_ids: int = 0
    no_test: int = 0  # evidence with neither a test id nor a usable trace id
    by_trace_id: set[str] = field(default_factory=set)
    logs: int = 0
    other_logs: int = 0
    tests: set[str] = field(default_factory=set)
    echoes: FailureEchoes = field(default_factory=FailureEchoes)  # not counted: an echo is no loss

    def merge(self, other: Tally) -> None:
        """Add another part's counts (a file translated by ranges)."""
        for name in ("documents", "spans", "lines", "malformed", "too_big", "unfinished", "bad_ids", "no_test",
                     "logs", "other_logs"):  # fmt: skip
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.by_trace_id |= other.by_trace_id
        self.tests |= other.tests

    def note(self, name: str) -> str:
        parts = [_n(self.spans, "span") if self.spans else "", _n(self.logs, "log record") if self.logs else ""]
        said = ", ".join(p for p in parts if p) or "nothing"
        out = f"cvdiag: {name}: OpenTelemetry traces (OTLP JSON): {said} read, {_n(self.lines, 'evidence line')}"
        out += f" for {_n(len(self.tests), 'test')}"
        if self.by_trace_id:
            out += f" ({len(self.by_trace_id):,} named by their trace id: no cvdiag.test_id or test.id)"
        problems = [
            (self.malformed, "malformed or cut record", "malformed or cut records"),
            (self.too_big, "document over the size limit skipped", "documents over the size limit skipped"),
            (self.unfinished, "span that never ended skipped", "spans that never ended skipped"),
            (self.bad_ids, "id of the wrong shape", "ids of the wrong shape"),
            (
                self.no_test,
                "span with no test id and no trace id skipped",
                "spans with no test id and no trace id skipped",
            ),
            (
                self.other_logs,
                "log record that is no cvdiag envelope skipped",
                "log records that are no cvdiag envelope skipped",
            ),
        ]
        said_problems = [f"{n:,} {one if n == 1 else many}" for n, one, many in problems if n]
        return out + ("; " + "; ".join(said_problems) if said_problems else "")


# -- documents --------------------------------------------------------------------------------


def _n(count: int, what: str) -> str:
    return f"{count:,} {what}{'' if count == 1 else 's'}"


def documents(fh: BinaryIO, tally: Tally) -> Iterator[bytes]:
    """The JSON documents of an input: each line that is one, or the lines of a pretty one
    (from a line that opens it to the line ``}`` that closes it at column 0)."""
    pending: list[bytes] = []
    size = 0
    skipping = False  # inside a document over the limit: up to its end
    for line in _lines(fh, tally):
        stripped = line.strip()
        if not stripped:
            continue
        opens = line.startswith(b"{")  # at column 0: a new document (a pretty one's inner lines are indented)
        if skipping:
            if line.rstrip() == b"}":
                skipping = False
                continue
            if not opens:
                continue
            skipping = False
        if pending:
            if opens:  # the document before was cut: this line starts the next one
                tally.malformed += 1
                pending, size = [], 0
            else:
                pending.append(line)
                size += len(line)
                if size > MAX_DOC_BYTES:
                    tally.too_big += 1
                    pending, size = [], 0
                    skipping = line.rstrip() != b"}"
                elif line.rstrip() == b"}":
                    yield b"".join(pending)
                    pending, size = [], 0
                continue
        if len(stripped) > MAX_DOC_BYTES:
            tally.too_big += 1
        elif stripped.startswith(b"{") and stripped.endswith(b"}"):
            yield stripped
        elif stripped.startswith(b"{"):
            pending, size = [line], len(line)
        else:
            tally.malformed += 1
    if pending:
        tally.malformed += 1  # a document the input cut


def _lines(fh: BinaryIO, tally: Tally) -> Iterator[bytes]:
    """The lines of ``fh``; one longer than ``MAX_DOC_BYTES`` is skipped and counted."""
    carry = b""
    skipping = False
    while True:
        try:
            chunk = fh.read(_READ)
        except (OSError, EOFError, zlib.error):
            tally.malformed += 1 if carry else 0
            return
        if not chunk:
            break
        if skipping:
            nl = chunk.find(b"\n")
            if nl < 0:
                continue
            skipping, chunk = False, chunk[nl + 1 :]
        buf = carry + chunk if carry else chunk
        start = 0
        while True:
            nl = buf.find(b"\n", start)
            if nl < 0:
                break
            yield buf[start : nl + 1]
            start = nl + 1
        carry = buf[start:]
        if len(carry) > MAX_DOC_BYTES:
            tally.too_big += 1
            carry, skipping = b"", True
    if carry:
        yield carry


def lines_of(fh: BinaryIO, tally: Tally, test_id_attr: str | None = None) -> Iterator[bytes]:
    """The CVDIAG lines of an OTLP JSON input."""
    for doc in documents(fh, tally):
        try:
            value = orjson.loads(doc)
        except orjson.JSONDecodeError:
            tally.malformed += 1
            continue
        tally.documents += 1
        if not isinstance(value, dict):
            tally.malformed += 1
        elif "resourceSpans" in value:
            yield from _resource_spans(value["resourceSpans"], tally, test_id_attr)
        elif "resourceLogs" in value:
            yield from _resource_logs(value["resourceLogs"], tally)
        elif "context" in value and "name" in value:
            view = _sdk_span(value, tally)
            if view is not None:
                tally.spans += 1
                line = _line(view, tally, test_id_attr)
                if line:
                    tally.lines += line.count(b"\n")
                    yield line
        else:
            tally.malformed += 1


def proto_lines(fh: BinaryIO, tally: Tally, test_id_attr: str | None = None) -> Iterator[bytes]:
    """The CVDIAG lines of the Collector's protobuf file: each ``ExportTraceServiceRequest``
    after its 4-byte big-endian length (opentelemetry-proto reads it; its JSON mapping is
    then read as OTLP JSON is, ids in base64)."""
    from google.protobuf.json_format import MessageToDict
    from google.protobuf.message import DecodeError
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    while True:
        prefix = fh.read(4)
        if len(prefix) < 4:
            tally.malformed += 1 if prefix else 0
            return
        size = int.from_bytes(prefix, "big")
        if size > MAX_DOC_BYTES:
            tally.too_big += 1
            while size > 0:  # skipped as it streams by
                skipped = len(fh.read(min(size, _READ)))
                if not skipped:
                    return
                size -= skipped
            continue
        body = fh.read(size)
        if len(body) < size:
            tally.malformed += 1  # cut
            return
        request = ExportTraceServiceRequest()
        try:
            request.ParseFromString(body)
        except DecodeError:
            tally.malformed += 1
            continue
        tally.documents += 1
        document = MessageToDict(request)
        yield from _resource_spans(document.get("resourceSpans", []), tally, test_id_attr)


# -- OTLP JSON --------------------------------------------------------------------------------


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _resource_spans(groups: Any, tally: Tally, test_id_attr: str | None) -> Iterator[bytes]:
    wanted = _wanted(test_id_attr)
    if not isinstance(groups, list):
        tally.malformed += 1
    for group in _list(groups):
        if not isinstance(group, dict):
            tally.malformed += 1
            continue
        resource = _attributes(_dict(group.get("resource")).get("attributes"))
        scopes = group.get("scopeSpans") or group.get("instrumentationLibrarySpans")
        for scope in _list(scopes):
            if not isinstance(scope, dict):
                tally.malformed += 1
                continue
            scope_info = scope.get("scope") or scope.get("instrumentationLibrary") or {}
            scope_name = scope_info.get("name") if isinstance(scope_info, dict) else None
            for span in _list(scope.get("spans")):
                tally.spans += 1
                view = _otlp_span(span, resource, scope_name, wanted, tally)
                if view is not None:
                    line = _line(view, tally, test_id_attr)
                    if line:
                        tally.lines += line.count(b"\n")
                        yield line


def _wanted(test_id_attr: str | None) -> frozenset[str]:
    keys = READ_KEYS | frozenset(TEST_ID_KEYS)
    return keys | {test_id_attr} if test_id_attr else keys


def _otlp_span(
    span: Any, resource: Mapping[str, Any], scope: Any, wanted: frozenset[str], tally: Tally
) -> SpanView | None:
    if type(span) is not dict:
        tally.malformed += 1
        return None
    get = span.get
    start, end = _nanos(get("startTimeUnixNano")), _nanos(get("endTimeUnixNano"))
    if not end or end < start:
        tally.unfinished += 1
        return None
    status = get("status")
    if type(status) is not dict:
        status = _NO_STATUS
    message = status.get("message")
    raw_events = get("events")
    events: tuple[tuple[str, int, Mapping[str, Any]], ...] = ()
    if raw_events:
        events = tuple(
            ("exception", _nanos(e.get("timeUnixNano")), _attributes(e.get("attributes")))
            for e in _list(raw_events)[-4:]  # the last exception is the one read
            if type(e) is dict and e.get("name") == "exception"
        )
    parent = get("parentSpanId")
    kind = get("kind")
    name = get("name")
    return SpanView(
        name=name[:512] if type(name) is str else str(name or "")[:512],
        trace_id=_id(get("traceId"), 32, tally) or "",
        span_id=_id(get("spanId"), 16, tally) or "",
        parent_span_id=_id(parent, 16, tally, optional=True) if parent else None,
        start_ns=start,
        end_ns=end,
        status_error=status.get("code") in (2, "STATUS_CODE_ERROR"),
        status_message=message if type(message) is str else None,
        attributes=_attributes(get("attributes"), wanted),
        events=events,
        kind=_KINDS.get(kind, kind if type(kind) is int else 0),
        scope=scope if type(scope) is str else "",
        resource=resource,
    )


_NO_STATUS: dict[str, Any] = {}
_KINDS = {
    "SPAN_KIND_UNSPECIFIED": 0,
    "SPAN_KIND_INTERNAL": 1,
    "SPAN_KIND_SERVER": 2,
    "SPAN_KIND_CLIENT": 3,
    "SPAN_KIND_PRODUCER": 4,
    "SPAN_KIND_CONSUMER": 5,
}


def _attributes(values: Any, wanted: frozenset[str] | None = None) -> dict[str, Any]:
    """OTLP ``[{"key": k, "value": {"stringValue": …}}]`` as a dict, only of ``wanted`` keys."""
    out: dict[str, Any] = {}
    if type(values) is not list:
        return out
    for kv in values:
        try:
            key = kv["key"]
            if wanted is not None and key not in wanted:
                continue
            value = kv["value"]
            text = value.get("stringValue")  # the usual case, first
            out[key] = text if type(text) is str else _value(value, 0)
        except (TypeError, KeyError, AttributeError):
            continue  # a record of the wrong shape: not an attribute
    return out


def _value(v: Any, depth: int) -> Any:
    if not isinstance(v, dict):
        return None
    for kind, item in v.items():
        if kind == "stringValue":
            return item if isinstance(item, str) else None
        if kind == "intValue":
            try:
                return int(item)
            except (TypeError, ValueError):
                return None
        if kind == "doubleValue":
            return item if isinstance(item, (int, float)) and not isinstance(item, bool) else None
        if kind == "boolValue":
            return item if isinstance(item, bool) else None
        if kind == "arrayValue" and depth < _DEPTH and isinstance(item, dict):
            return tuple(_value(x, depth + 1) for x in _list(item.get("values"))[:64])
        if kind == "kvlistValue" and depth < _DEPTH and isinstance(item, dict):
            return {
                kv["key"]: _value(kv.get("value"), depth + 1)
                for kv in _list(item.get("values"))
                if isinstance(kv, dict) and isinstance(kv.get("key"), str)
            }
        return None
    return None


def _nanos(v: Any) -> int:
    if type(v) is str:  # OTLP JSON's 64-bit integers: strings
        return int(v) if len(v) <= 20 and v.isdigit() else 0
    if type(v) is int:
        return v if v > 0 else 0
    return 0


def _id(v: Any, length: int, tally: Tally, optional: bool = False) -> str | None:
    """A trace or span id as lowercase hex of its length; None (and counted) otherwise."""
    if type(v) is str and len(v) == length and _HEX.fullmatch(v) and v.strip("0"):
        return v  # OTLP JSON's own form: the usual case
    if v is None or v == "":
        if not optional:
            tally.bad_ids += 1
        return None
    text = v.lower().removeprefix("0x") if isinstance(v, str) else ""
    if len(text) == length and _HEX.fullmatch(text) and text.strip("0"):
        return text
    if isinstance(v, str) and len(v) == _BASE64_LEN.get(length):  # protobuf's JSON mapping: bytes in base64
        try:
            raw = base64.b64decode(v, validate=True)
        except ValueError:
            raw = b""
        if len(raw) * 2 == length and raw.strip(b"\0"):
            return raw.hex()
    tally.bad_ids += 1
    return None


_BASE64_LEN = {32: 24, 16: 12}


# -- the SDK's own JSON (ReadableSpan.to_json) ---------------------------------------------------


def _sdk_span(d: dict[str, Any], tally: Tally) -> SpanView | None:
    start, end = _iso_ns(d.get("start_time")), _iso_ns(d.get("end_time"))
    if not end or end < start:
        tally.unfinished += 1
        return None
    context = d.get("context") if isinstance(d.get("context"), dict) else {}
    status = d.get("status") if isinstance(d.get("status"), dict) else {}
    resource = d.get("resource") if isinstance(d.get("resource"), dict) else {}
    kind = str(d.get("kind") or "").rpartition(".")[2]
    return SpanView(
        name=str(d.get("name") or "")[:512],
        trace_id=_id(context.get("trace_id"), 32, tally) or "",
        span_id=_id(context.get("span_id"), 16, tally) or "",
        parent_span_id=_id(d.get("parent_id"), 16, tally, optional=True),
        start_ns=start,
        end_ns=end,
        status_error=status.get("status_code") == "ERROR",
        status_message=status.get("description") if isinstance(status.get("description"), str) else None,
        attributes=MappingProxyType(_plain(d.get("attributes"))),
        events=tuple(
            (str(e.get("name", "")), _iso_ns(e.get("timestamp")), MappingProxyType(_plain(e.get("attributes"))))
            for e in _list(d.get("events"))[-4:]
            if isinstance(e, dict)
        ),
        kind=_SDK_KINDS.get(kind, 0),
        resource=MappingProxyType(_plain(resource.get("attributes"))),
    )


def _plain(v: Any) -> dict[str, Any]:
    if not isinstance(v, dict):
        return {}
    return {k: tuple(x) if isinstance(x, list) else x for k, x in v.items() if isinstance(k, str)}


def _iso_ns(v: Any) -> int:
    if not isinstance(v, str):
        return 0
    try:
        dt = datetime.fromisoformat(v.replace("Z", "+00:00"))
    except ValueError:
        return 0
    return int(dt.timestamp()) * 1_000_000_000 + dt.microsecond * 1000


# -- evidence to a line -------------------------------------------------------------------------


_TERMINALS = ("backend.response.complete", "backend.error.caught")


def _line(view: SpanView, tally: Tally, test_id_attr: str | None) -> bytes | None:
    """The envelope line the span ends, and for a trace's root the end of the work it
    traced (a ``backend.response.complete`` with no HTTP status, ``source: otel``): a
    test whose root span never ended (a stalled call: never exported) has no end."""
    evidence = read_span(view)
    if evidence is not None and tally.echoes.is_echo(view, evidence):
        evidence = None
    root = view.parent_span_id is None and (evidence is None or evidence.boundary not in _TERMINALS)
    if evidence is None and not root:
        return None
    # A file holds no baggage: a BaggageSpanProcessor copies it onto the span as the attribute.
    test_id = span_test_id(view, None, test_id_attr)
    if test_id is None:
        if not view.trace_id:
            tally.no_test += 1
            return None
        test_id = view.trace_id
        tally.by_trace_id.add(test_id)
    tally.tests.add(test_id)
    out = b""
    if evidence is not None:
        out += _envelope(view, test_id, evidence, view.span_id or new_span_id())
    if root:
        duration = evidence.duration_ms if evidence is not None else _ms(view)
        end = SpanEvidence(
            "backend.response.complete",
            "err" if view.status_error else "ok",
            duration,
            {"total_duration_ms": duration, "source": "otel"},
            "",
        )
        # Its own span id, made from the root's so that a file reads the same every time.
        end_id = f"{int(view.span_id, 16) ^ 1 << 63:016x}" if view.span_id else new_span_id()
        out += _envelope(view, test_id, end, end_id)
    return out


def _ms(view: SpanView) -> int | None:
    return (view.end_ns - view.start_ns) // 1_000_000 if view.end_ns >= view.start_ns else None


def _envelope(view: SpanView, test_id: str, evidence: SpanEvidence, span_id: str) -> bytes:
    env = {
        "schema_version": SCHEMA_VERSION,
        "test_id": test_id,
        "trace_id": view.trace_id or test_id,
        "span_id": span_id,
        "parent_span_id": view.parent_span_id,
        "layer": CATALOG[evidence.boundary].layer,
        "boundary": evidence.boundary,
        "slug": _slug(view.resource.get("service.name")),
        "demo": DEFAULT_DEMO,
        "ts": wire_ts(view.end_ns),
        "mono_ns": view.end_ns,
        "duration_ms": evidence.duration_ms,
        "outcome": evidence.outcome,
        "edge_headers": _NO_EDGE,
        "metadata": scrub_metadata(evidence.metadata),
        "_metadata_dropped": False,
        "_truncated": False,
    }
    return _PREFIX + orjson.dumps(env) + b"\n"


_PREFIX = PREFIX.encode()
_SLUGS: dict[str, str] = {}


def _slug(name: Any) -> str:
    if not isinstance(name, str):
        return "unknown"
    slug = _SLUGS.get(name)
    if slug is None:
        slug = sanitize_slug(name[:128]) or "unknown"
        if len(_SLUGS) < 1024:
            _SLUGS[name] = slug
    return slug


# -- OTLP logs: cvdiag's own envelopes exported as log records (spec section 9) -------------------


def _resource_logs(groups: Any, tally: Tally) -> Iterator[bytes]:
    for group in _list(groups):
        if not isinstance(group, dict):
            tally.malformed += 1
            continue
        for scope in _list(group.get("scopeLogs") or group.get("instrumentationLibraryLogs")):
            if not isinstance(scope, dict):
                continue
            for record in _list(scope.get("logRecords")):
                tally.logs += 1
                env = _envelope_of(record)
                if env is None:
                    tally.other_logs += 1
                    continue
                tally.lines += 1
                tally.tests.add(str(env.get("test_id")))
                yield PREFIX.encode() + orjson.dumps(env) + b"\n"


def _envelope_of(record: Any) -> dict[str, Any] | None:
    """The envelope a cvdiag log record carries as its body, or None for any other record."""
    if not isinstance(record, dict):
        return None
    body = _value(record.get("body"), 0)
    if isinstance(body, str) and body.startswith("{"):
        try:
            body = orjson.loads(body)
        except orjson.JSONDecodeError:
            return None
    if not isinstance(body, dict) or not isinstance(body.get("boundary"), str) or "test_id" not in body:
        return None
    return body
