"""Property tests of the OTLP parts that take or make bytes: any JSON value survives
cvdiag's protobuf and JSON encodings (decoded by opentelemetry-proto itself), and the
parsers of trace headers and OTLP variables never raise, whatever they are given."""

from __future__ import annotations

import math

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st
from otlpkit import value_of

from cvdiag.contract.trace_context import baggage_test_id, parse_traceparent, trace_headers_test_id
from cvdiag.write._otlp_config import target
from cvdiag.write._otlp_wire import LogRecord, json_logs, pb_any, pb_logs

INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
FLOATS = st.floats(allow_nan=False, allow_infinity=False)
KEYS = st.text(max_size=12)
JSON = st.recursive(
    st.none() | st.booleans() | INT64 | FLOATS | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=4),
    max_leaves=25,
)


def _from_proto(any_value: object) -> object:
    kind = any_value.WhichOneof("value")  # type: ignore[attr-defined]
    if kind is None:
        return None
    if kind == "kvlist_value":
        return {kv.key: _from_proto(kv.value) for kv in any_value.kvlist_value.values}  # type: ignore[attr-defined]
    if kind == "array_value":
        return [_from_proto(v) for v in any_value.array_value.values]  # type: ignore[attr-defined]
    return getattr(any_value, kind)


def _same(a: object, b: object) -> bool:
    """Equal as JSON values (a float and the same float read back; -0.0 is 0.0)."""
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    return orjson.dumps(a) == orjson.dumps(b)


@settings(max_examples=300, deadline=None)
@given(JSON)
def test_any_json_value_survives_the_protobuf_encoding(value: object) -> None:
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue

    decoded = AnyValue()
    decoded.ParseFromString(pb_any(value))
    assert _same(_from_proto(decoded), value)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(KEYS, JSON, max_size=6), st.sampled_from(["pb", "json"]))
def test_a_record_body_rebuilds_its_object_in_both_protocols(body: dict, protocol: str) -> None:
    record = LogRecord(1, 2, 9, body, [("k", "v")], "cvdiag.x")
    if protocol == "pb":
        from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

        request = ExportLogsServiceRequest()
        request.ParseFromString(pb_logs([("service.name", "s")], ("cvdiag", "0"), [record]))
        rebuilt = _from_proto(request.resource_logs[0].scope_logs[0].log_records[0].body)
    else:
        doc = orjson.loads(json_logs([("service.name", "s")], ("cvdiag", "0"), [record]))
        rebuilt = value_of(doc["resourceLogs"][0]["scopeLogs"][0]["logRecords"][0]["body"])
    assert orjson.dumps(rebuilt) == orjson.dumps(body)


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=300) | st.text(max_size=300).map(str.encode), st.binary(max_size=300))
def test_trace_headers_of_any_shape_give_an_id_or_none(traceparent: bytes, baggage: bytes) -> None:
    found = trace_headers_test_id(traceparent, baggage)
    assert found is None or (0 < len(found) <= 128 and found == found.strip())
    parsed = parse_traceparent(traceparent)
    assert parsed is None or (len(parsed[0]) == 32 and len(parsed[1]) == 16)
    from_baggage = baggage_test_id(baggage)
    assert from_baggage is None or set(from_baggage) <= set("abcdefghijklmnopqrstuvwxyz0123456789._-")


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["ENDPOINT", "PROTOCOL", "HEADERS", "TIMEOUT", "LOGS_HEADERS"]), st.text(max_size=80)
    )
)
def test_any_otlp_variables_give_a_target_or_a_reason(values: dict[str, str]) -> None:
    environ = {f"OTEL_EXPORTER_OTLP_{k}": v for k, v in values.items()}
    found = target("logs", environ)
    assert found.url is not None or found.problems
    assert all(isinstance(v, str) and "\n" not in v and "\r" not in v for v in found.headers.values())
    secret_values = [v for k, v in environ.items() if "HEADERS" in k]
    for problem in found.problems:  # a header's value is never repeated
        for raw in secret_values:
            for entry in raw.split(","):
                value = entry.partition("=")[2].strip()
                assert len(value) < 6 or value not in problem
