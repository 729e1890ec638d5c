"""MCP session discovery (``server/discover``, how the mcp SDK 2.x client opens a session,
e.g. under the OpenAI Agents SDK's ``MCPServerStreamableHttp``): a server that cannot be
reached fails there and is a tool failure of transport; a server without discovery answers
a JSON-RPC error, the client falls back to ``initialize``, and nothing is written."""

from __future__ import annotations

import contextlib
import json
import socket

import httpx2
from emitkit import capture
from llm_server import Reply, llm_capture_on_fixture, server_fixture  # noqa: F401 (fixtures)
from pytest import mark

import cvdiag

pytestmark = mark.usefixtures("llm_capture_on")
DISCOVER = {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": {}}}


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_discovery_of_a_server_never_started_is_a_transport_failure():
    port = _closed_port()
    with (
        capture("verbose") as cap,
        cvdiag.request_context(test_id="mcp-discover-down"),
        httpx2.Client() as client,
        contextlib.suppress(httpx2.ConnectError),
    ):
        client.post(f"http://127.0.0.1:{port}/mcp", json=DISCOVER)
    end = cap.one("backend.tool.call.response")
    md = end["metadata"]
    assert (end["outcome"], md["tool_name"], md["source"], md["error_kind"]) == (
        "err",
        "server/discover",
        "mcp",
        "transport",
    )
    assert md["server"] == f"127.0.0.1:{port}"
    assert md["error_excerpt"].startswith("ConnectError: ")


def test_a_server_without_discovery_is_not_a_failure(server):
    error = {"jsonrpc": "2.0", "id": 1, "error": {"code": -32601, "message": "Method not found"}}
    server.plan("/mcp", Reply.json(json.dumps(error).encode()))
    with capture("verbose") as cap, cvdiag.request_context(test_id="mcp-no-discover"), httpx2.Client() as client:
        client.post(server.url + "/mcp", json=DISCOVER)
    assert cap.events() == []
