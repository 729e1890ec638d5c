"""MCP tool calls: a real MCP server (the mcp package's MCPServer) over streamable HTTP and over
stdio, the mcp SDK's own client; and raw JSON-RPC over httpx against a local server for the
shapes a healthy server never sends (a stream without a result, a cut connection)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import sys
from pathlib import Path

import httpx2
import pytest

pytest.importorskip("mcp")  # the frameworks extra: without it, skipped, not a collection error

import mcp.client.stdio as stdio_module
from emitkit import capture
from frameworkkit import need
from llm_server import Reply, llm_capture_on_fixture, server_fixture  # noqa: F401 (fixtures)
from serverkit import running_server

import cvdiag
from cvdiag.read.validate import problems
from cvdiag.write import _mcp_capture
from cvdiag.write._tool_wire import args_hash
from cvdiag.write.propagation import instrument_httpx, uninstrument_httpx

need("mcp")  # the frameworks extra: without it this module skips, saying so
from mcp import ClientSession  # noqa: E402
from mcp.client.session import ClientSession as SessionClass  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from mcp_server import http_app  # noqa: E402

pytestmark = pytest.mark.usefixtures("llm_capture_on")
SERVER_SCRIPT = str(Path(__file__).parent / "mcp_server.py")


@pytest.fixture(scope="module")
def mcp_http():
    """The MCP server over streamable HTTP, answering in event streams and in JSON: URLs."""
    with (
        running_server(http_app(), lifespan="on", log_level="critical") as sse,
        running_server(http_app(json_response=True), lifespan="on", log_level="critical") as json_,
    ):
        yield {"sse": sse + "/mcp", "json": json_ + "/mcp"}


def _pairs(cap) -> list[tuple]:
    """(tool, outcome, error_kind, server) per call, with its start and response checked as one pair."""
    for env in cap.all():
        assert problems(env) == [], (env, problems(env))
    starts = {e["metadata"]["call_id"]: e for e in cap.of("backend.tool.call.start")}
    pairs = []
    for end in cap.of("backend.tool.call.response"):
        md = end["metadata"]
        start = starts.pop(md["call_id"])
        assert start["test_id"] == end["test_id"] and md["source"] == start["metadata"]["source"] == "mcp"
        pairs.append((md["tool_name"], end["outcome"], md["error_kind"], md["server"]))
    assert starts == {}, f"starts without a response: {list(starts)}"
    return pairs


async def _session_calls(session: ClientSession, *names: str) -> list[bool]:
    await session.initialize()
    return [(await session.call_tool(name, {"city": "Paris"})).is_error for name in names]


@pytest.mark.parametrize("answer", ["sse", "json"])
def test_streamable_http_session_writes_one_pair_per_call(mcp_http, answer):
    async def run():
        async with streamable_http_client(mcp_http[answer]) as (read, write, *_), ClientSession(read, write) as s:
            return await _session_calls(s, "forecast", "explode", "refuse")

    with capture("verbose") as cap, cvdiag.request_context(test_id=f"mcp-http-{answer}"):
        assert asyncio.run(run()) == [False, True, True]
    assert _pairs(cap) == [
        ("forecast", "ok", None, "weather"),
        ("explode", "err", "protocol", "weather"),
        ("refuse", "err", "protocol", "weather"),
    ]
    assert {e["test_id"] for e in cap.events()} == {f"mcp-http-{answer}"}
    forecast, explode, refuse = (e["metadata"] for e in cap.of("backend.tool.call.response"))
    assert (forecast["result_chars"], forecast["error_excerpt"]) == (len("Sunny in Paris, 21 degrees"), None)
    assert explode["error_excerpt"] == "Error executing tool explode"
    assert refuse["error_excerpt"] == "Error executing tool refuse: quota exhausted for Paris"
    start = cap.of("backend.tool.call.start")[0]["metadata"]
    assert (start["args_chars"], start["args_hash"]) == (len('{"city":"Paris"}'), args_hash('{"city":"Paris"}'))


def _closed_port() -> int:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return port


def test_a_server_that_was_never_started_is_a_transport_failure_of_initialize():
    url = f"http://127.0.0.1:{_closed_port()}/mcp"

    async def run():
        async with streamable_http_client(url) as (read, write, *_), ClientSession(read, write) as s:
            await asyncio.wait_for(s.initialize(), 10)

    with capture("verbose") as cap, cvdiag.request_context(test_id="mcp-down"), pytest.raises(BaseException):  # noqa: B017
        asyncio.run(run())
    (pair,) = _pairs(cap)
    assert pair == ("initialize", "err", "transport", f"127.0.0.1:{url.split(':')[2].split('/')[0]}")
    assert cap.one("backend.tool.call.response")["metadata"]["error_excerpt"].startswith("ConnectError: ")


def _stdio() -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=[SERVER_SCRIPT])


def test_stdio_session_calls_and_a_server_that_dies_mid_call():
    async def run():
        with open(os.devnull, "w") as quiet:
            async with stdio_client(_stdio(), errlog=quiet) as (read, write, *_), ClientSession(read, write) as s:
                results = await _session_calls(s, "forecast", "explode")
                with pytest.raises(Exception, match="Connection closed"):
                    await asyncio.wait_for(s.call_tool("die", {"city": "Paris"}), 20)
                return results

    with capture("verbose") as cap, cvdiag.request_context(test_id="mcp-stdio"):
        assert asyncio.run(run()) == [False, True]
    assert _pairs(cap) == [
        ("forecast", "ok", None, "weather"),
        ("explode", "err", "protocol", "weather"),
        ("die", "err", "transport", "weather"),
    ]
    assert cap.of("backend.tool.call.response")[2]["metadata"]["error_excerpt"] == "MCPError: Connection closed"


def test_a_stdio_server_whose_command_does_not_exist_is_a_transport_failure_of_initialize(tmp_path):
    """The spawn fails before any session exists: the tool line names the command."""
    params = StdioServerParameters(command=str(tmp_path / "orders-mcp-server"))

    async def run():
        async with stdio_client(params) as (read, write, *_), ClientSession(read, write) as s:
            await s.initialize()

    with (
        capture("verbose") as cap,
        cvdiag.request_context(test_id="mcp-stdio-missing"),
        pytest.raises(FileNotFoundError),
    ):
        asyncio.run(run())
    (pair,) = _pairs(cap)
    assert pair == ("initialize", "err", "transport", "orders-mcp-server")
    response = cap.one("backend.tool.call.response")
    assert response["test_id"] == "mcp-stdio-missing"
    assert response["metadata"]["error_excerpt"].startswith("FileNotFoundError: ")


def test_a_failed_spawn_reaches_the_app_unchanged_when_disabled_or_when_cvdiag_breaks(tmp_path, monkeypatch):
    params = StdioServerParameters(command=str(tmp_path / "orders-mcp-server"))

    async def run():
        async with stdio_client(params):
            pass

    with capture("verbose", enabled=False) as cap, pytest.raises(FileNotFoundError):
        asyncio.run(run())
    assert cap.all() == []

    def broken(*args):
        raise RuntimeError("cvdiag broke")

    monkeypatch.setattr(_mcp_capture, "_spawn_failed", broken)
    with capture("verbose") as cap, pytest.raises(FileNotFoundError):
        asyncio.run(run())
    assert cap.of("backend.tool.call.response") == []


# -- raw JSON-RPC over httpx: shapes a healthy server never sends --------------------------


def _rpc(method: str, **params) -> dict:
    return {"jsonrpc": "2.0", "id": 7, "method": method, "params": params}


def _sse(*messages: dict) -> bytes:
    return b"".join(b"event: message\ndata: " + json.dumps(m).encode() + b"\n\n" for m in messages)


PROGRESS = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}}


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        (Reply.sse(_sse(PROGRESS, {"jsonrpc": "2.0", "id": 7, "result": {"content": []}})), ("ok", None)),
        (  # a line split over many small pieces
            Reply.sse(_sse(PROGRESS, {"jsonrpc": "2.0", "id": 7, "result": {"isError": True}}), piece=7),
            ("err", "protocol"),
        ),
        (  # an answer too big to keep: unknown, not failed (and read in linear time)
            Reply.sse(
                _sse({"jsonrpc": "2.0", "id": 7, "result": {"content": [{"text": "x" * 2_000_000}]}}), piece=4096
            ),
            ("ok", None),
        ),
        (Reply.sse(_sse(PROGRESS)), ("err", "transport")),  # the stream ended without the result
        (Reply.sse(_sse(PROGRESS), cut=True), ("err", "transport")),
        (
            Reply.json(
                json.dumps({"jsonrpc": "2.0", "id": 7, "error": {"code": -32602, "message": "bad city"}}).encode()
            ),
            ("err", "protocol"),
        ),
        (Reply.json(b"Internal Server Error", status=500), ("err", "transport")),
    ],
    ids=[
        "result-after-progress",
        "split-is-error",
        "too-big",
        "ended-without-result",
        "cut",
        "jsonrpc-error",
        "http-500",
    ],
)
def test_raw_tools_call_over_httpx2(server, reply, expected):
    server.plan("/mcp", reply)
    with (
        capture("verbose") as cap,
        cvdiag.request_context(test_id="raw-mcp"),
        httpx2.Client() as client,
        contextlib.suppress(httpx2.HTTPError),
    ):
        client.post(server.url + "/mcp", json=_rpc("tools/call", name="forecast", arguments={"city": "x"}))
    ((tool, outcome, kind, host),) = _pairs(cap)
    assert (tool, outcome, kind) == ("forecast", *expected) and host.startswith("127.0.0.1:")


def test_other_json_rpc_and_other_posts_are_not_watched(server):
    server.plan("/mcp", Reply.json(json.dumps({"jsonrpc": "2.0", "id": 7, "result": {"tools": []}}).encode()))
    with capture("verbose") as cap, cvdiag.request_context(test_id="raw-other"), httpx2.Client() as client:
        responses = [
            client.post(server.url + "/mcp", json=_rpc("tools/list")),  # healthy: not a tool call
            client.post(server.url + "/mcp", json=_rpc("ping")),
            client.post(server.url + "/mcp", content=b'{"jsonrpc": broken'),
            client.post(server.url + "/other", json={"name": "tools/call"}),
        ]
    assert cap.events() == []
    # tools/list is watched for a failure; the others' bodies are never observed
    assert [type(r.stream).__name__ for r in responses[1:]] == ["BoundSyncStream"] * 3


def _wrapped_by_cvdiag(function: object) -> bool:
    """Ours: the code that runs is cvdiag's (``functools.wraps`` copies the rest)."""
    return function.__code__.co_filename.endswith("_mcp_capture.py")  # type: ignore[attr-defined]


def test_session_wrapper_is_installed_once_undone_and_inert_when_disabled(mcp_http):
    assert _wrapped_by_cvdiag(SessionClass.call_tool)
    assert _wrapped_by_cvdiag(stdio_module._create_platform_compatible_process)
    instrument_httpx()
    wrapped = SessionClass.call_tool
    instrument_httpx()
    assert SessionClass.call_tool is wrapped  # idempotent
    uninstrument_httpx()
    assert not _wrapped_by_cvdiag(SessionClass.call_tool)
    assert not _wrapped_by_cvdiag(stdio_module._create_platform_compatible_process)
    instrument_httpx(llm=True)
    wrapped = SessionClass.call_tool
    assert _mcp_capture.install_session() is True and SessionClass.call_tool is wrapped  # in place, once

    async def run():
        async with streamable_http_client(mcp_http["json"]) as (read, write, *_), ClientSession(read, write) as s:
            return await _session_calls(s, "forecast")

    with capture("verbose", enabled=False) as cap:
        assert asyncio.run(run()) == [False]
    assert cap.all() == []


def test_instrument_httpx_does_not_import_mcp_but_wraps_it_when_the_app_does():
    import subprocess

    program = """
import sys
import cvdiag
cvdiag.instrument_httpx()
assert "mcp" not in sys.modules, "instrument_httpx imported mcp"
from mcp import ClientSession
assert ClientSession.call_tool.__code__.co_filename.endswith("_mcp_capture.py"), "not wrapped after import"
import mcp.client.stdio as stdio
assert stdio._create_platform_compatible_process.__code__.co_filename.endswith("_mcp_capture.py"), "spawn not wrapped"
cvdiag.uninstrument_httpx()
assert not ClientSession.call_tool.__code__.co_filename.endswith("_mcp_capture.py"), "still wrapped"
assert not stdio._create_platform_compatible_process.__code__.co_filename.endswith("_mcp_capture.py"), "spawn"
assert not [f for f in sys.meta_path if type(f).__name__ == "_AfterImport"], "import hook left behind"
print("ok")
"""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)}
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, env=env, timeout=120)
    assert (done.returncode, done.stdout.strip()) == (0, "ok"), done.stderr[-2000:]
