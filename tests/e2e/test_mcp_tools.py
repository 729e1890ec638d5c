"""MCP tools end to end (issue 15): the OpenAI Agents SDK (``examples/openai_agents_mcp_app.py``,
``MCPServerStreamableHttp`` and ``MCPServerStdio`` as its docs show) uses a real MCP server
of the ``mcp`` package (``examples/mcp_server.py``) whose tools raise, return ``isError``
or kill the server, over streamable HTTP (the server under its own uvicorn) and over stdio
(a subprocess per answer, as the SDK runs it), plus servers that were never started.
aimock is the provider (``e2e/fixtures/agent_causes.json``).

A user must see the tool line with ``source: mcp`` and the server, and ``cvdiag
diagnose`` must say ``tool-error`` and name the server.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest
from agent_rig import Servers, ask_fixture, free_port  # noqa: F401 (the ask fixture)
from conftest import Aimock

#: A stdio server whose command does not exist: it fails at spawn.
MISSING_COMMAND = "/nonexistent/orders-mcp-server"


@pytest.fixture(scope="module")
def servers(
    aimock: Aimock, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Servers]:
    with Servers(aimock, tmp_path_factory, request.config) as started:
        # A live MCP server, and one that the "dies" scenario kills.
        started.start({"orders": ("mcp-server", {}), "doomed": ("mcp-server", {})})
        if {"orders", "doomed"} <= started.started.keys():
            targets = {
                "orders-http": f"{started.started['orders'].url}/mcp",
                "doomed-http": f"{started.started['doomed'].url}/mcp",
                "missing-http": f"http://127.0.0.1:{free_port()}/mcp",
                "orders-stdio": f"{sys.executable} -m examples.mcp_server",
                "missing-stdio": MISSING_COMMAND,
            }
            servers_env = ";".join(f"{name}={target}" for name, target in targets.items())
            started.start({"mcp": ("mcp", {**started.app_env(), "EXAMPLE_MCP_SERVERS": servers_env})})
        yield started


#: A tool that crashes: the mcp SDK keeps the exception's text on the server and answers
#: isError with its own words (mcp/server/mcpserver/tools/base.py).
RAISES = ("look up order M-1", "lookup_order", "Error executing tool lookup_order", "The order service is down, sorry.")
IS_ERROR = ("refund for order M-2", "refund_status", "refund system offline", "The refund system is offline, sorry.")


# isError over HTTP only: each stdio answer starts a server process (seconds of imports).
@pytest.mark.parametrize(
    ("route", "message", "tool", "excerpt", "answer"),
    [("orders-http", *RAISES), ("orders-http", *IS_ERROR), ("orders-stdio", *RAISES)],
    ids=["raises-http", "is-error-http", "raises-stdio"],
)
def test_mcp_tool_error_is_a_tool_error_naming_the_server(ask, route, message, tool, excerpt, answer) -> None:
    run = ask("mcp", message, route=f"/chat/{route}")

    assert run.text == answer  # the SDK handed the error to the model, the run went on
    (mcp,) = [t for t in run.tools if t["metadata"]["source"] == "mcp"]
    assert (mcp["outcome"], mcp["metadata"]["tool_name"], mcp["metadata"]["error_kind"]) == ("err", tool, "protocol")
    assert excerpt in mcp["metadata"]["error_excerpt"]
    server = mcp["metadata"]["server"]
    assert server
    (wire,) = [t for t in run.tools if t["metadata"]["source"] == "wire"]  # the SDK's hand-back to the model
    assert wire["metadata"]["tool_name"] == tool
    verdict = run.diagnose()
    assert verdict["class"] == "tool-error"
    assert tool in verdict["reason"]
    assert server in verdict["reason"]
    # One call, seen on the MCP traffic and on the wire: not "2 of 2 tool calls failed".
    assert "tool calls failed" not in verdict["reason"], verdict["reason"]
    assert f"Tool {tool} (mcp, server {server}) failed (protocol)" in verdict["reason"]


@pytest.mark.parametrize("route", ["doomed-http", "orders-stdio"])
def test_mcp_server_dying_mid_call_is_a_tool_error_naming_the_server(ask, route) -> None:
    run = ask("mcp", "cancel order M-3", route=f"/chat/{route}")

    assert "Order M-3 is cancelled." not in run.text
    (mcp,) = [t for t in run.tools if t["metadata"]["source"] == "mcp"]
    meta = mcp["metadata"]
    assert (meta["tool_name"], meta["error_kind"]) == ("cancel_order", "transport")
    assert mcp["outcome"] in ("err", "timeout")
    assert meta["server"]
    verdict = run.diagnose()
    assert verdict["class"] == "tool-error"
    assert meta["server"] in verdict["reason"]


# Over stdio a command that does not exist fails at spawn, before the mcp SDK's session
# exists: the line names the command.
@pytest.mark.parametrize("route", ["missing-http", "missing-stdio"])
def test_mcp_server_never_started_is_a_tool_error_naming_the_server(ask, aimock, route) -> None:
    run = ask("mcp", "look up order M-1", route=f"/chat/{route}")

    assert run.sse_error is not None  # the agent could not start
    assert aimock.journal(run.test_id) == []  # no LLM call was made
    (mcp,) = [t for t in run.tools if t["metadata"]["source"] == "mcp"]
    assert (mcp["outcome"], mcp["metadata"]["error_kind"]) == ("err", "transport")
    assert mcp["metadata"]["server"]
    if route == "missing-stdio":
        assert (mcp["metadata"]["tool_name"], mcp["metadata"]["server"]) == ("initialize", "orders-mcp-server")
    verdict = run.diagnose()
    assert verdict["class"] == "tool-error"
    assert mcp["metadata"]["server"] in verdict["reason"]
