"""The standard library's client after ``cvdiag.instrument()``: ``urllib.request`` and
``http.client`` carry the test id (a live server in a subprocess correlates with the
test that drove it) and LLM calls through them are on the record, every way of reading
a body giving the same bytes and one call."""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from clientkit import BODY, CHAT, HAPPY, RECORDED, happy, instrumented_fixture  # noqa: F401 (fixture)
from cvdiag_cli import run
from emitkit import capture
from llm_server import DATA, Reply, server_fixture  # noqa: F401 (fixture)
from serverkit import free_port, wait_until_serving

import cvdiag


def _urllib_read(url: str, style: str) -> bytes:
    request = urllib.request.Request(
        url + CHAT, data=json.dumps(BODY).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        if style == "read":
            return response.read()
        if style == "read_amt":
            out = b""
            while piece := response.read(13):
                out += piece
            return out
        if style == "lines":
            return b"".join(response)
        if style == "read1":
            out = b""
            while piece := response.read1(17):
                out += piece
            return out
        if style == "readinto":
            out, buf = b"", bytearray(11)
            while n := response.readinto(buf):
                out += bytes(buf[:n])
            return out
        raise AssertionError(style)


def test_instrument_reports_the_standard_library_client(instrumented: dict) -> None:
    assert instrumented["http.client"] == "on"
    assert cvdiag.instrument(http_client=False)["http.client"] == "off"


@pytest.mark.parametrize("style", ["read", "read_amt", "lines", "read1", "readinto"])
@pytest.mark.parametrize("chunked", [True, False], ids=["chunked", "content-length"])
def test_urllib_every_reading_style_gets_the_bytes_and_one_call(server, style: str, chunked: bool) -> None:
    headers = {} if chunked else {"content-length": str(len(RECORDED))}
    server.plan(CHAT, Reply.sse("openai_chat_stream.sse", piece=37, headers=headers))
    with capture("verbose") as cap, cvdiag.request_context(test_id="t-urllib"):
        got = _urllib_read(server.url, style)
    assert got == RECORDED
    starts = cap.of("backend.llm.call.start")
    (end,) = cap.llm_responses()
    assert [s["metadata"]["client"] for s in starts] == ["http.client"] == [end["metadata"]["client"]]
    assert end["test_id"] == "t-urllib" and happy(end) == HAPPY
    assert server.requests[-1][1]["x-test-id"] == "t-urllib"


def test_a_provider_error_and_a_body_given_up_are_calls_that_failed(server) -> None:
    server.plan(CHAT, Reply(status=500, pieces=[b'{"error": {"message": "boom", "type": "server_error"}}']))
    with capture("verbose") as cap, cvdiag.request_context(test_id="t-500"), pytest.raises(urllib.error.HTTPError):
        _urllib_read(server.url, "read")
    (end,) = cap.llm_responses()
    assert (end["outcome"], end["metadata"]["http_status"]) == ("err", 500)

    server.plan(CHAT, Reply.sse("openai_chat_stream.sse", piece=37))
    with capture("verbose") as cap, cvdiag.request_context(test_id="t-gone"):
        conn = http.client.HTTPConnection(server.url.split("//")[1], timeout=30)
        conn.request("POST", CHAT, json.dumps(BODY), {"Content-Type": "application/json"})
        response = conn.getresponse()
        response.read(40)
        response.close()  # the caller gives up mid-answer
        conn.close()
    (end,) = cap.llm_responses()
    assert end["outcome"] == "timeout" and end["metadata"]["error_class"] == "CancelledError"


def test_a_header_the_caller_set_wins_and_its_mapping_is_not_changed(server) -> None:
    server.plan("/other", Reply(pieces=[b"ok"]))
    mine = {"x-test-id": "mine-1"}
    with cvdiag.request_context(test_id="t-context"):
        conn = http.client.HTTPConnection(server.url.split("//")[1], timeout=30)
        conn.request("GET", "/other", headers=mine)
        assert conn.getresponse().read() == b"ok"
        conn.close()
    assert server.requests[-1][1]["x-test-id"] == "mine-1"
    assert mine == {"x-test-id": "mine-1"}


_SERVER = """
import sys
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route
import cvdiag

async def hello(request):
    async with cvdiag.agent_scope("greeter"):
        return PlainTextResponse("hello")

app = Starlette(routes=[Route("/hello", hello)])
app.add_middleware(cvdiag.CvdiagMiddleware, slug="session-api")
"""


def test_a_live_server_in_a_subprocess_correlates_with_the_test_that_drove_it_by_urllib(
    tmp_path: Path, cvdiag_test_id: str
) -> None:
    (tmp_path / "session_app.py").write_text(_SERVER)
    log = tmp_path / "server.log"
    port = free_port()
    env = {
        **os.environ,
        "CVDIAG_ENABLED": "1",
        "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
    }
    cmd = [sys.executable, "-m", "uvicorn", "session_app:app", "--port", str(port), "--log-level", "warning"]
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=tmp_path)
    try:
        wait_until_serving(f"http://127.0.0.1:{port}", proc)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/hello", timeout=30) as response:
            assert response.read() == b"hello"
    finally:
        proc.terminate()
        proc.wait(10)
    r = run("tests", "--json", log)
    assert r.code == 0, r.err + log.read_text()
    assert [row["test_id"] for row in json.loads(r.out)] == [cvdiag_test_id]
