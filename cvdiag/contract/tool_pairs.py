"""When two sightings of a tool call are one call: the wire's (the model asked, the
framework handed a result back), the MCP capture's, a span's (``source: otel``), a
hook's. One rule for the diagnosis, which counts such a call once, and for the read
side's views, which show it as one row."""

from __future__ import annotations

#: How far the times of a wire call and the MCP call inside it may disagree: timestamps
#: are to the millisecond, durations floored to it, and a line is written just after.
SPAN_SLACK_US = 5_000
#: The sources whose call id is the model's own (a span's ``gen_ai.tool.call.id``, the
#: wire's ``call_id``); the MCP capture's are its own (``mcp-7``), a hook's may be.
MODEL_ID_SOURCES = frozenset({"wire", "otel"})


def nested(wire_start: int, wire_end: int, mcp_start: int, mcp_end: int) -> bool:
    """The MCP call (start and end in microseconds) started after the model asked for the
    wire call and ended before its result went back: the same call, if the tool is too."""
    return wire_start - SPAN_SLACK_US <= mcp_start and mcp_end <= wire_end + SPAN_SLACK_US


def model_call_id(call_id: object, source: object) -> str | None:
    """The model's own id of a call (``call_abc``) as ``source`` saw it, None for none."""
    if isinstance(call_id, str) and call_id and source in MODEL_ID_SOURCES:
        return call_id
    return None


Sighting = tuple[object, object, object, int, int]


def same_call(a: Sighting, b: Sighting) -> bool:
    """Two sightings ``(source, tool name, model call id or None, start µs, end µs)`` by
    different sources are one call: by the model's call id where both carry one (a span's
    ``gen_ai.tool.call.id`` is the wire's ``call_id``), else the same tool with one's time
    inside the other's (the wire's sighting holds the tool's run; a span and the MCP
    capture time the same run). Names and ids may be given as any equal-when-equal values
    (the diagnosis keeps their CRCs)."""
    if a[0] == b[0]:
        return False
    if a[2] is not None and b[2] is not None:
        return a[2] == b[2]
    if a[1] != b[1]:
        return False
    return nested(a[3], a[4], b[3], b[4]) or nested(b[3], b[4], a[3], a[4])
