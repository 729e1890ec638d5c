"""MCP servers over stdio (issue 33, item 5): a real ``mcp`` stdio server's start and
``initialize`` on the record, a server that dies before it answers named with its real
exception and its stderr, and a tool error the SDK masks kept with the server's stderr."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

pytest.importorskip("mcp")

from cvdiag_cli import run as run_cli
from emitkit import capture
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

import cvdiag
from cvdiag.write._stderr_tail import tail_text
from cvdiag.write.propagation import instrument_httpx

SERVER_SCRIPT = str(Path(__file__).parent / "mcp_server.py")
PROGRAM = Path(sys.executable).name
#: A server that dies as it starts, saying why on its stderr only.
DIES_AT_START = "import sys; print('orders server: missing config ORDERS_DB', file=sys.stderr); raise SystemExit(2)"


@pytest.fixture(autouse=True)
def session_wrapped():
    instrument_httpx()  # wraps the mcp SDK's session and stdio spawn (idempotent)


async def _session(params: StdioServerParameters, errlog, *calls: str) -> list[bool]:
    async with stdio_client(params, errlog=errlog) as (read, write, *_), ClientSession(read, write) as session:
        await asyncio.wait_for(session.initialize(), 30)
        return [(await session.call_tool(name, {"city": "Paris"})).is_error for name in calls]


def test_a_stdio_server_start_and_initialize_is_one_line(tmp_path):
    with (
        (tmp_path / "err.log").open("w") as errlog,
        capture("verbose") as cap,
        cvdiag.request_context(test_id="mcp-start"),
    ):
        asyncio.run(_session(StdioServerParameters(command=sys.executable, args=[SERVER_SCRIPT]), errlog, "forecast"))
    start = cap.one("backend.tool.server.start")
    assert start["outcome"] == "ok" and start["test_id"] == "mcp-start"
    assert start["metadata"] == {
        "server": "weather",
        "transport": "stdio",
        "command": PROGRAM,
        "error_class": None,
        "error_excerpt": None,
        "stderr_tail": None,
    }
    assert start["duration_ms"] >= 0
    (call,) = cap.of("backend.tool.call.response")
    assert call["metadata"]["stderr_tail"] is None  # a healthy call keeps none


def test_a_masked_tool_error_keeps_the_server_stderr_and_the_app_still_gets_it(tmp_path):
    err_file = tmp_path / "err.log"
    with err_file.open("w") as errlog, capture("verbose") as cap, cvdiag.request_context(test_id="mcp-masked"):
        assert asyncio.run(
            _session(StdioServerParameters(command=sys.executable, args=[SERVER_SCRIPT]), errlog, "explode")
        ) == [True]
    (failed,) = cap.of("backend.tool.call.response")
    meta = failed["metadata"]
    assert (failed["outcome"], meta["tool_name"], meta["error_kind"]) == ("err", "explode", "protocol")
    assert meta["error_excerpt"] == "Error executing tool explode"  # all the client is told
    assert "ValueError: no weather station near Paris" in meta["stderr_tail"]  # what the server said
    assert len(meta["stderr_tail"]) <= 512
    assert "ValueError: no weather station near" in err_file.read_text()  # the app's errlog, as before


def test_a_server_that_dies_at_start_is_a_failed_start_naming_it(tmp_path):
    params = StdioServerParameters(command=sys.executable, args=["-c", DIES_AT_START])
    err_file = tmp_path / "err.log"
    with (
        err_file.open("w") as errlog,
        capture("verbose") as cap,
        cvdiag.request_context(test_id="mcp-dies"),
        pytest.raises(BaseException) as raised,
    ):
        asyncio.run(_session(params, errlog))
    assert isinstance(raised.value, BaseExceptionGroup)  # what the app sees is unchanged
    start = cap.one("backend.tool.server.start")
    meta = start["metadata"]
    assert (start["outcome"], meta["server"], meta["command"]) == ("err", PROGRAM, PROGRAM)
    assert (meta["error_class"], meta["error_excerpt"]) == ("MCPError", "Connection closed")  # not the group
    assert meta["stderr_tail"] == "orders server: missing config ORDERS_DB"
    (initialize,) = cap.of("backend.tool.call.response")
    assert (initialize["metadata"]["tool_name"], initialize["metadata"]["error_kind"]) == ("initialize", "transport")
    assert "missing config ORDERS_DB" in err_file.read_text()

    log = tmp_path / "app.log"
    log.write_text("".join(f"CVDIAG {json.dumps(e)}\n" for e in cap.all()))
    result = run_cli("diagnose", "mcp-dies", str(log), "--json")
    (verdict,) = json.loads(result.out)
    assert verdict["class"] == "tool-error"
    assert PROGRAM in verdict["reason"]


def test_disabled_cvdiag_leaves_the_server_stderr_alone(tmp_path):
    err_file = tmp_path / "err.log"
    with err_file.open("w") as errlog, capture("verbose", enabled=False) as cap:
        asyncio.run(_session(StdioServerParameters(command=sys.executable, args=[SERVER_SCRIPT]), errlog, "explode"))
    assert cap.all() == []
    assert "ValueError: no weather station near" in err_file.read_text()


def test_an_app_whose_stdio_server_dies_at_start_reads_as_that_server_not_a_server_error(tmp_path):
    """Through the real middleware: the app's 500 carries the SDK's ExceptionGroup, the
    diagnosis names the server that did not start and the real exception."""
    from starlette.applications import Starlette
    from starlette.responses import PlainTextResponse
    from starlette.routing import Route
    from starlette.testclient import TestClient

    async def chat(request):
        with (tmp_path / "err.log").open("w") as errlog:
            await _session(StdioServerParameters(command=sys.executable, args=["-c", DIES_AT_START]), errlog)
        return PlainTextResponse("never")

    app = Starlette(routes=[Route("/chat", chat)])
    app = cvdiag.CvdiagMiddleware(app, slug="mcp-app")
    with capture("verbose") as cap, TestClient(app, raise_server_exceptions=False) as client:
        assert client.get("/chat", headers={"x-test-id": "mcp-app-dies"}).status_code == 500
    caught = cap.one("backend.error.caught")
    assert caught["metadata"]["exception_type"] == "ExceptionGroup"
    assert caught["metadata"]["message_scrubbed"].startswith("MCPError: Connection closed")  # the leaf, named
    log = tmp_path / "app.log"
    log.write_text("".join(f"CVDIAG {json.dumps(e)}\n" for e in cap.all()))
    (verdict,) = json.loads(run_cli("diagnose", "mcp-app-dies", str(log), "--json").out)
    assert verdict["class"] == "tool-error", verdict
    assert PROGRAM in verdict["reason"]


@given(st.binary(max_size=4096) | st.text(max_size=3000).map(str.encode))
def test_a_stderr_tail_is_short_text_whatever_the_server_wrote(data):
    tail = tail_text(data)
    assert tail is None or (isinstance(tail, str) and 0 < len(tail) <= 512)


def test_a_stderr_tail_keeps_the_exception_and_no_secret():
    tail = tail_text(
        b"Traceback (most recent call last):\n  File 'x.py', line 3\n"
        b"KeyError: 'ORDERS_DB'\nusing key sk-proj-Zx9QabcdefghijklmnopqrstuvwxyZ0123456789\n"
        + b"x" * 2000
        + b"\nshutting down\n" * 6
    )  # a 2,000-character line and six more after the exception: it is still kept
    assert "KeyError: 'ORDERS_DB'" in tail
    assert "Zx9Qabcdefghijklmnop" not in tail and len(tail) <= 512
