"""An MCP tool server (the ``mcp`` package's MCPServer, formerly FastMCP) whose tools fail
in each way MCP tools do: one raises (the SDK answers ``isError`` with the exception's
text), one returns an ``isError`` result itself, and one takes the whole server down in
the middle of the call.

    python -m examples.mcp_server                      # over stdio
    uvicorn examples.mcp_server:app --port 8001        # over streamable HTTP, at /mcp
"""

from __future__ import annotations

import os

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, TextContent
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

from examples.tools import OrderServiceDown

server = MCPServer("orders")


@server.tool()
def lookup_order(order_id: str) -> str:
    """Look up the status of an order by its id."""
    raise OrderServiceDown(f"order service unavailable while looking up {order_id}")


@server.tool()
def refund_status(order_id: str) -> CallToolResult:
    """Tell whether an order's refund went through."""
    text = f"refund system offline, no status for {order_id}"
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)


@server.tool()
def cancel_order(order_id: str) -> str:
    """Cancel an order."""
    os._exit(1)  # the server dies as the call arrives: no answer, the connection or pipe just ends


@server.custom_route("/health", methods=["GET"])
async def health(request: Request) -> Response:
    return PlainTextResponse("ok")


app = server.streamable_http_app()

if __name__ == "__main__":
    server.run()  # stdio
