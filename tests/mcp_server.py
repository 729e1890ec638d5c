"""A real MCP server (the ``mcp`` package's MCPServer, i.e. FastMCP) for tests: ``weather``,
with a tool that works, one that raises, one that returns ``isError`` and one that kills
its own process mid-call. Run as ``python tests/mcp_server.py`` it serves over stdio;
``http_server()`` serves it over streamable HTTP with uvicorn on a free loopback port."""

from __future__ import annotations

import os
import socket
import sys
import threading
import time

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


class HttpServer:
    """The server over streamable HTTP on a free loopback port, in a thread."""

    def __init__(self, json_response: bool = False) -> None:
        import uvicorn

        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.sock = sock
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
        app = server.streamable_http_app(json_response=json_response)
        config = uvicorn.Config(app, log_level="critical", lifespan="on")
        self.uvicorn = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.uvicorn.run, kwargs={"sockets": [sock]}, daemon=True)

    def start(self) -> HttpServer:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.uvicorn.started:
            if time.monotonic() > deadline:
                raise RuntimeError("MCP test server did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self.uvicorn.should_exit = True
        self.thread.join(timeout=10)
        self.sock.close()


if __name__ == "__main__":
    server.run(sys.argv[1] if len(sys.argv) > 1 else "stdio")
