"""OTLP/HTTP request bodies, protobuf and JSON, written by hand from envelopes.

Why not the SDK's encoder: on this box the SDK takes ~27 µs to make a log record and
~165 µs to encode one whose body is an envelope (``encode_logs`` builds a protobuf
object per value), which caps one process near 5,000 envelopes/s. The messages here are
the few the export needs (``ExportLogsServiceRequest``, ``ExportTraceServiceRequest``,
from opentelemetry-proto's ``logs/v1``, ``trace/v1``, ``common/v1``), encoded field by
field; the tests decode them with opentelemetry-proto itself.

An AnyValue holds the envelope's JSON values exactly: str, bool, int (int64), float
(double), null (an empty AnyValue), list (arrayValue) and object (kvlistValue, keys in
order), so a reader rebuilds the line byte for byte (spec section 9).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

#: OTLP severity numbers (logs/v1 SeverityNumber).
SEVERITY_INFO = 9
SEVERITY_WARN = 13
#: OTLP span kinds and status codes (trace/v1).
KIND_INTERNAL = 1
KIND_SERVER = 2
KIND_CLIENT = 3
STATUS_UNSET = 0
STATUS_ERROR = 2
_INT64 = (1 << 64) - 1
_pack_fixed64 = struct.Struct("<Q").pack
_pack_double = struct.Struct("<d").pack


def _varint(n: int) -> bytes:
    if n < 0x80:
        return bytes((n,))
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


#: One-byte lengths, precomputed: most fields are short.
_SMALL = [bytes((n,)) for n in range(0x80)]


def _len(n: int) -> bytes:
    return _SMALL[n] if n < 0x80 else _varint(n)


def _field(tag: bytes, payload: bytes) -> bytes:
    """A length-delimited field: its tag byte, its length, its bytes."""
    return tag + (_SMALL[len(payload)] if len(payload) < 0x80 else _varint(len(payload))) + payload


#: key -> the encoded ``KeyValue.key`` field: keys repeat on every envelope.
_KEYS: dict[str, bytes] = {}


def _key(key: str) -> bytes:
    encoded = _KEYS.get(key)
    if encoded is None:
        encoded = _field(b"\x0a", key.encode())
        if len(_KEYS) < 4096:
            _KEYS[key] = encoded
    return encoded


def pb_any(value: Any) -> bytes:
    """The ``AnyValue`` message of one JSON value."""
    kind = type(value)
    if kind is str:
        return _field(b"\x0a", value.encode())
    if kind is bool:
        return b"\x10\x01" if value else b"\x10\x00"
    if kind is int:
        return b"\x18" + _varint(value & _INT64)
    if kind is float:
        return b"\x21" + _pack_double(value)
    if value is None:
        return b""
    if isinstance(value, Mapping):
        return _field(b"\x32", pb_kvlist(value.items()))
    if isinstance(value, list | tuple):
        return _field(b"\x2a", b"".join([_field(b"\x0a", pb_any(v)) for v in value]))
    if isinstance(value, bool):
        return b"\x10\x01" if value else b"\x10\x00"
    if isinstance(value, int):
        return b"\x18" + _varint(int(value) & _INT64)
    if isinstance(value, float):
        return b"\x21" + _pack_double(float(value))
    return _field(b"\x0a", str(value).encode())


#: (key, value) -> its encoded ``KeyValue`` field, for the values that repeat from one
#: envelope to the next (ids of a test, layer, boundary, slug, outcome, nulls, flags,
#: the usual edge headers); bounded, started over when full.
_PB_PAIRS: dict[bytes, dict[Any, bytes]] = {}
_JSON_PAIRS: dict[Any, dict[str, Any]] = {}
_PAIRS_KEPT = 8192
_SCALARS = frozenset({str, int, bool, type(None)})


#: Envelope fields that differ on every line: never cached.
_UNIQUE = frozenset({"span_id", "ts", "mono_ns"})


def _pair_key(k: str, v: Any) -> Any:
    """A hashable key for caching (k, v), or None when ``v`` is not worth caching."""
    kind = type(v)
    if kind in _SCALARS:
        return (k, kind, v)
    if kind is dict and len(v) <= 16 and all(type(x) in _SCALARS for x in v.values()):
        return (k, tuple(v.items()))
    return None


def _pb_pairs(tag: bytes, items: Iterable[tuple[str, Any]]) -> bytes:
    """Repeated ``KeyValue`` under field ``tag``; the pairs that repeat from one envelope
    to the next come whole from a cache (one per tag), the rest are written inline."""
    out = []
    cache = _PB_PAIRS.get(tag)
    if cache is None:
        cache = _PB_PAIRS[tag] = {}
    small = _SMALL
    for k, v in items:
        ck = None if k in _UNIQUE else _pair_key(k, v)
        if ck is not None:
            encoded = cache.get(ck)
            if encoded is not None:
                out.append(encoded)
                continue
        kind = type(v)
        if kind is str:
            b = v.encode()
            value = b"\x0a" + (small[len(b)] if len(b) < 0x80 else _varint(len(b))) + b
        elif kind is int and v >= 0:
            value = b"\x18" + (small[v] if v < 0x80 else _varint(v))
        else:
            value = pb_any(v)
        n = len(value)
        kv = _key(k) + b"\x12" + (small[n] if n < 0x80 else _varint(n)) + value
        n = len(kv)
        encoded = tag + (small[n] if n < 0x80 else _varint(n)) + kv
        if ck is not None:
            if len(cache) >= _PAIRS_KEPT:
                cache.clear()
            cache[ck] = encoded
        out.append(encoded)
    return b"".join(out)


def pb_kvlist(items: Iterable[tuple[str, Any]]) -> bytes:
    """The repeated ``KeyValue values = 1`` of a KeyValueList."""
    return _pb_pairs(b"\x0a", items)


def pb_attributes(tag: bytes, items: Iterable[tuple[str, Any]]) -> bytes:
    """Repeated ``KeyValue`` under field ``tag`` (attributes of a record, span, resource)."""
    return _pb_pairs(tag, items)


def json_any(value: Any) -> dict[str, Any]:
    """The OTLP/JSON ``AnyValue`` of one JSON value (int64 as a decimal string)."""
    kind = type(value)
    if kind is str:
        return {"stringValue": value}
    if kind is bool:
        return {"boolValue": value}
    if kind is int:
        return {"intValue": str(value)}
    if kind is float:
        return {"doubleValue": value}
    if value is None:
        return {}
    if isinstance(value, Mapping):
        return {"kvlistValue": {"values": json_attributes(value.items())}}
    if isinstance(value, list | tuple):
        return {"arrayValue": {"values": [json_any(v) for v in value]}}
    return {"stringValue": str(value)}


def json_attributes(items: Iterable[tuple[str, Any]]) -> list[dict[str, Any]]:
    """KeyValues; the ones that repeat are the same (never changed) dicts each time."""
    out = []
    cache = _JSON_PAIRS
    for k, v in items:
        kind = type(v)
        if kind is str and k in _UNIQUE:
            out.append({"key": k, "value": {"stringValue": v}})
            continue
        if kind is int and k in _UNIQUE:
            out.append({"key": k, "value": {"intValue": str(v)}})
            continue
        ck = _pair_key(k, v)
        pair = cache.get(ck) if ck is not None else None
        if pair is None:
            pair = {"key": k, "value": json_any(v)}
            if ck is not None:
                if len(cache) >= _PAIRS_KEPT:
                    cache.clear()
                cache[ck] = pair
        out.append(pair)
    return out


@dataclass(slots=True)
class LogRecord:
    """One log record as the export sends it (logs/v1 ``LogRecord``)."""

    time_ns: int
    observed_ns: int
    severity: int
    body: Any
    attributes: Sequence[tuple[str, Any]]
    event_name: str
    trace_id: bytes = b""
    span_id: bytes = b""


@dataclass(slots=True)
class Span:
    """One finished span (trace/v1 ``Span``)."""

    trace_id: bytes
    span_id: bytes
    parent_span_id: bytes
    name: str
    kind: int
    start_ns: int
    end_ns: int
    attributes: Sequence[tuple[str, Any]]
    error: bool = False
    status_message: str = ""


def _severity_text(severity: int) -> str:
    return "WARN" if severity >= SEVERITY_WARN else "INFO"


def _pb_log(r: LogRecord) -> bytes:
    text = _severity_text(r.severity)
    out = [
        b"\x09",
        _pack_fixed64(r.time_ns),
        b"\x10",
        _varint(r.severity),
        _field(b"\x1a", text.encode()),
        _field(b"\x2a", pb_any(r.body)),
        pb_attributes(b"\x32", r.attributes),
    ]
    if r.trace_id:
        out.append(_field(b"\x4a", r.trace_id))
        out.append(_field(b"\x52", r.span_id))
    out.append(b"\x59" + _pack_fixed64(r.observed_ns))
    out.append(_field(b"\x62", r.event_name.encode()))
    return b"".join(out)


def _pb_scope(name: str, version: str) -> bytes:
    return _field(b"\x0a", _field(b"\x0a", name.encode()) + _field(b"\x12", version.encode()))


def pb_logs(resource: Sequence[tuple[str, Any]], scope: tuple[str, str], records: Sequence[LogRecord]) -> bytes:
    """An ``ExportLogsServiceRequest`` with one resource and one scope."""
    scope_logs = _pb_scope(*scope) + b"".join([_field(b"\x12", _pb_log(r)) for r in records])
    resource_logs = _field(b"\x0a", pb_attributes(b"\x0a", resource)) + _field(b"\x12", scope_logs)
    return _field(b"\x0a", resource_logs)


def _pb_span(s: Span) -> bytes:
    out = [_field(b"\x0a", s.trace_id), _field(b"\x12", s.span_id)]
    if s.parent_span_id:
        out.append(_field(b"\x22", s.parent_span_id))
    out += [
        _field(b"\x2a", s.name.encode()),
        b"\x30",
        _varint(s.kind),
        b"\x39",
        _pack_fixed64(s.start_ns),
        b"\x41",
        _pack_fixed64(s.end_ns),
        pb_attributes(b"\x4a", s.attributes),
    ]
    if s.error:
        out.append(_field(b"\x7a", _field(b"\x12", s.status_message.encode()) + b"\x18" + _varint(STATUS_ERROR)))
    return b"".join(out)


def pb_spans(resource: Sequence[tuple[str, Any]], scope: tuple[str, str], spans: Sequence[Span]) -> bytes:
    """An ``ExportTraceServiceRequest`` with one resource and one scope."""
    scope_spans = _pb_scope(*scope) + b"".join([_field(b"\x12", _pb_span(s)) for s in spans])
    resource_spans = _field(b"\x0a", pb_attributes(b"\x0a", resource)) + _field(b"\x12", scope_spans)
    return _field(b"\x0a", resource_spans)


def _json_log(r: LogRecord) -> dict[str, Any]:
    record: dict[str, Any] = {
        "timeUnixNano": str(r.time_ns),
        "observedTimeUnixNano": str(r.observed_ns),
        "severityNumber": r.severity,
        "severityText": _severity_text(r.severity),
        "body": json_any(r.body),
        "attributes": json_attributes(r.attributes),
        "eventName": r.event_name,
    }
    if r.trace_id:
        record["traceId"] = r.trace_id.hex()
        record["spanId"] = r.span_id.hex()
    return record


def json_logs(resource: Sequence[tuple[str, Any]], scope: tuple[str, str], records: Sequence[LogRecord]) -> bytes:
    """The OTLP/JSON ``ExportLogsServiceRequest`` (ids in hex, int64 as strings)."""
    return orjson.dumps(
        {
            "resourceLogs": [
                {
                    "resource": {"attributes": json_attributes(resource)},
                    "scopeLogs": [
                        {
                            "scope": {"name": scope[0], "version": scope[1]},
                            "logRecords": [_json_log(r) for r in records],
                        }
                    ],
                }
            ]
        }
    )


def _json_span(s: Span) -> dict[str, Any]:
    span: dict[str, Any] = {
        "traceId": s.trace_id.hex(),
        "spanId": s.span_id.hex(),
        "name": s.name,
        "kind": s.kind,
        "startTimeUnixNano": str(s.start_ns),
        "endTimeUnixNano": str(s.end_ns),
        "attributes": json_attributes(s.attributes),
    }
    if s.parent_span_id:
        span["parentSpanId"] = s.parent_span_id.hex()
    if s.error:
        span["status"] = {"code": STATUS_ERROR, "message": s.status_message}
    return span


def json_spans(resource: Sequence[tuple[str, Any]], scope: tuple[str, str], spans: Sequence[Span]) -> bytes:
    """The OTLP/JSON ``ExportTraceServiceRequest``."""
    return orjson.dumps(
        {
            "resourceSpans": [
                {
                    "resource": {"attributes": json_attributes(resource)},
                    "scopeSpans": [
                        {"scope": {"name": scope[0], "version": scope[1]}, "spans": [_json_span(s) for s in spans]}
                    ],
                }
            ]
        }
    )
