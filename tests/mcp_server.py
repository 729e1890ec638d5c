"""A real MCP server (the ``mcp`` package's MCPServer, i.e. FastMCP) for tests: ``weather``,
with a tool that works, one that raises, one that returns ``isError`` and one that kills
its own process mid-call. Run as ``python tests/mcp_server.py`` it serves over stdio;
``http_app()`` is the same server as a streamable-HTTP ASGI app."""

from __future__ import annotations

import os
import sys
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("weather")


@server.tool()
def forecast(city: str) -> str:
    """The forecast for a city."""
    return f"Sunny in {city}, 21 degrees"


@server.tool()
def explode(city: str) -> str:
    """A tool that raises."""
    raise ValueError(f"no weather station near {city}")


@server.tool()
def refuse(city: str) -> str:
    """A tool that reports its own failure (isError with a message)."""
    raise ToolError(f"quota exhausted for {city}")


@server.tool()
def die(city: str) -> str:
    """A tool whose server dies as the call arrives."""
    os._exit(3)


def http_app(json_response: bool = False) -> Any:
    """The server as a streamable-HTTP ASGI app (serve it with lifespan on), at ``/mcp``."""
    return server.streamable_http_app(json_response=json_response)


if __name__ == "__main__":
    server.run(sys.argv[1] if len(sys.argv) > 1 else "stdio")
