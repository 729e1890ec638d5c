"""What a tool result handed back to a model looks like when the tool failed: one table.

Agent frameworks catch a tool's exception and send the model a result that says so,
in words of their own. Each entry of ``FAILURES`` is one such hand-back, copied from
the framework's source (the file is named beside it), so that the tool call is written
as failed although every HTTP exchange was healthy. ``is_failure`` looks only at the
head and the tail of a result: a megabyte of text costs what four kilobytes do.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["FAILURES", "HEAD_CHARS", "TAIL_CHARS", "Failure", "is_failure"]

#: The start and the end of a result that the table's patterns look at.
HEAD_CHARS = 4096
TAIL_CHARS = 512


@dataclass(frozen=True, slots=True)
class Failure:
    """One framework's way of telling the model that a tool failed."""

    name: str
    #: ``reported`` (the framework handed an error back) or ``protocol`` (an MCP ``isError`` result).
    kind: str
    #: Matched at the start of the result (``re.match`` on its head), or None.
    starts: re.Pattern[str] | None
    #: Searched for in the result's tail, or None.
    ends: re.Pattern[str] | None = None

    def matches(self, head: str, tail: str) -> bool:
        return (self.starts is None or self.starts.match(head) is not None) and (
            self.ends is None or self.ends.search(tail) is not None
        )


def _re(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.DOTALL)


#: In order: the first entry that matches names the failure (specific before generic).
FAILURES: tuple[Failure, ...] = (
    # langgraph/prebuilt/tool_node.py around an MCP isError that an MCP adapter raised as a
    # ToolException: before the generic LangGraph entry, which matches it too.
    Failure("langgraph-mcp-error", "protocol", _re(r"Error: ToolException\(['\"]Error executing tool ")),
    # langgraph/prebuilt/tool_node.py TOOL_CALL_ERROR_TEMPLATE: "Error: {repr(e)}\n Please fix your mistakes."
    Failure("langgraph-tool-error", "reported", _re(r"Error: "), _re(r"\n Please fix your mistakes\.\s*$")),
    # langgraph/prebuilt/tool_node.py INVALID_TOOL_NAME_ERROR_TEMPLATE
    Failure("langgraph-invalid-tool", "reported", _re(r"Error: .{1,512}? is not a valid tool, try one of \[")),
    # langgraph/prebuilt/tool_node.py TOOL_EXECUTION_ERROR_TEMPLATE and TOOL_INVOCATION_ERROR_TEMPLATE
    Failure(
        "langgraph-tool-execution",
        "reported",
        _re(r"Error (?:executing|invoking) tool '[^'\n]{1,256}' with kwargs .*? with error:\n"),
        _re(r"\n Please fix the error and try again\.\s*$"),
    ),
    # langchain_core/tools/base.py _handle_tool_error: a ToolException without a message
    Failure("langchain-tool-exception", "reported", _re(r"Tool execution error\s*$")),
    # agents/tool.py default_tool_error_function (older releases add " Error: {e}")
    Failure(
        "openai-agents-tool-error", "reported", _re(r"An error occurred while running the tool\. Please try again\.")
    ),
    # pydantic_ai/messages.py RetryPromptPart.model_response: "...\n\nFix the errors and try again."
    Failure("pydantic-ai-retry", "reported", None, _re(r"\n\nFix the errors and try again\.\s*$")),
    # pydantic_ai/messages.py ToolReturnPart.model_response_str: a failed outcome as {"error": ...}
    Failure("pydantic-ai-error-object", "reported", _re(r'\{\s*"error"\s*:\s*(?!null\s*\})'), _re(r"\}\s*$")),
    # mcp/server/mcpserver/tools/base.py: FastMCP's isError text for a tool that raised
    Failure("mcp-tool-error", "protocol", _re(r"Error executing tool [^\s:]{1,256}(?::|\s*$)")),
    # pydantic_ai/mcp.py: an isError result with no content
    Failure("pydantic-ai-mcp-error", "protocol", _re(r"Tool '[^'\n]{1,256}' returned an error\s*$")),
    # agents/mcp/util.py: an MCP call that raised, as the Agents SDK words it
    Failure("openai-agents-mcp-error", "protocol", _re(r"Error invoking MCP tool ")),
)


def is_failure(text: str) -> Failure | None:
    """The table's entry for a result text that reads as a failed tool, or None."""
    if not text:
        return None
    head = text[:HEAD_CHARS].lstrip()
    tail = text[-TAIL_CHARS:]
    for failure in FAILURES:
        if failure.matches(head, tail):
            return failure
    return None
