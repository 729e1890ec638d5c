"""When a wire tool call and an MCP tool call are one call seen twice: the MCP call
(``source: mcp``) and the framework's hand-back of its result to the model (``source:
wire``). One rule for the diagnosis, which counts such a pair once, and for the read
side's views, which show it as one row."""

from __future__ import annotations

#: How far the times of a wire call and the MCP call inside it may disagree: timestamps
#: are to the millisecond, durations floored to it, and a line is written just after.
SPAN_SLACK_US = 5_000


def nested(wire_start: int, wire_end: int, mcp_start: int, mcp_end: int) -> bool:
    """The MCP call (start and end in microseconds) started after the model asked for the
    wire call and ended before its result went back: the same call, if the tool is too."""
    return wire_start - SPAN_SLACK_US <= mcp_start and mcp_end <= wire_end + SPAN_SLACK_US
