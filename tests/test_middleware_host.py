"""The host's bytes and time through a real server: headers given as an iterable, files
sent by path (pathsend, zerocopy), errors whose line cannot be built, and a Starlette
``BaseHTTPMiddleware`` between cvdiag and the app (issue 18, items 2 to 5)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import AsyncIterator

import httpx
import orjson
import pytest
from emitkit import Captured, capture
from serverkit import free_port, running_server, wait_until_serving
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

import cvdiag

TERMINALS = ("backend.response.complete", "backend.sse.aborted", "backend.error.caught")


def _wait_for_terminal(cap: Captured, test_id: str, timeout: float = 15) -> list[dict]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        events = [e for e in cap.events() if e["test_id"] == test_id]
        if any(e["boundary"] in TERMINALS for e in events):
            time.sleep(0.1)  # a second terminal, if one were written, would come now
            return [e for e in cap.events() if e["test_id"] == test_id]
        time.sleep(0.02)
    raise AssertionError(f"no terminal for {test_id}: {[e['boundary'] for e in cap.events()]}")


def _one_terminal(events: list[dict]) -> dict:
    ends = [e for e in events if e["boundary"] in TERMINALS]
    assert len(ends) == 1, [e["boundary"] for e in events]
    return ends[0]


# -- item 2: headers handed as an iterable ----------------------------------------------


def _generator_headers_app(scope, receive, send):
    async def app() -> None:
        body = b"hello from the app"
        headers = (
            (k, v) for k, v in [(b"content-type", b"text/plain"), (b"content-length", b"18"), (b"x-app", b"mine")]
        )
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    return app()


@pytest.mark.parametrize("echo", [True, False], ids=["echo", "no-echo"])
def test_headers_given_as_a_generator_reach_the_client(echo: bool):
    app = cvdiag.CvdiagMiddleware(_generator_headers_app, slug="hdr", echo_test_id=echo)
    with capture("debug"), running_server(app) as base:
        response = httpx.get(base + "/", headers={"x-test-id": "gen-headers"})
    assert response.status_code == 200 and response.text == "hello from the app"
    assert response.headers["content-type"] == "text/plain" and response.headers["x-app"] == "mine"
    assert response.headers.get("x-test-id") == ("gen-headers" if echo else None)


def test_headers_given_as_a_generator_when_the_app_echoes_the_id_itself():
    async def app(scope, receive, send):
        pairs = [(b"content-type", b"text/plain"), (b"x-test-id", b"own"), (b"x-app", b"mine")]
        await send({"type": "http.response.start", "status": 200, "headers": iter(pairs)})
        await send({"type": "http.response.body", "body": b"ok"})

    with capture("debug"), running_server(cvdiag.CvdiagMiddleware(app, slug="hdr")) as base:
        response = httpx.get(base + "/", headers={"x-test-id": "gen-own"})
    assert response.headers["x-app"] == "mine" and response.headers["x-test-id"] == "own"


# -- item 3: a file sent by path (pathsend) or from a descriptor (zerocopy) -------------

FILE_APP = textwrap.dedent(
    """
    import os
    from starlette.applications import Starlette
    from starlette.responses import FileResponse
    from starlette.routing import Route

    import cvdiag

    async def report(request):
        return FileResponse(os.environ["SERVED_FILE"], media_type="application/octet-stream")

    app = cvdiag.CvdiagMiddleware(Starlette(routes=[Route("/file", report)]), slug="files")
    """
)


def _read_lines(log) -> list[dict]:
    return [orjson.loads(line) for line in log.read_bytes().splitlines() if line.strip()] if log.exists() else []


def test_a_file_sent_by_pathsend_under_granian_ends_in_response_complete(tmp_path):
    pytest.importorskip("granian")
    served = tmp_path / "served.bin"
    served.write_bytes(os.urandom(300_000))
    (tmp_path / "fileapp.py").write_text(FILE_APP)
    log = tmp_path / "cvdiag.ndjson"
    port = free_port()
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(tmp_path), os.getcwd()]),
        "SERVED_FILE": str(served),
        "CVDIAG_ENABLED": "1",
        "CVDIAG_TIER": "verbose",
        "CVDIAG_FILE": str(log),
        "CVDIAG_STDOUT": "0",
    }
    granian = os.path.join(os.path.dirname(sys.executable), "granian")
    command = [granian, "--interface", "asgi", "--host", "127.0.0.1", "--port", str(port), "--workers", "1"]
    proc = subprocess.Popen(
        [*command, "fileapp:app"], env=env, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        base = f"http://127.0.0.1:{port}"
        wait_until_serving(base, proc)
        response = httpx.get(base + "/file", headers={"x-test-id": "pathsend-1"}, timeout=10)
        assert response.status_code == 200 and response.content == served.read_bytes()
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            events = [e for e in _read_lines(log) if e["test_id"] == "pathsend-1"]
            if any(e["boundary"] in TERMINALS for e in events):
                break
            time.sleep(0.05)
    finally:
        proc.terminate()
        proc.wait(15)
    time.sleep(0)
    events = [e for e in _read_lines(log) if e["test_id"] == "pathsend-1"]
    end = _one_terminal(events)
    assert end["boundary"] == "backend.response.complete", events
    assert end["metadata"]["http_status"] == 200 and end["metadata"]["content_length"] == 300_000


def test_a_file_response_under_uvicorn_still_ends_in_response_complete(tmp_path):
    from starlette.responses import FileResponse

    served = tmp_path / "served.bin"
    served.write_bytes(os.urandom(100_000))
    app = Starlette(routes=[Route("/file", lambda request: FileResponse(served))])
    with capture("verbose") as cap, running_server(cvdiag.CvdiagMiddleware(app, slug="files")) as base:
        response = httpx.get(base + "/file", headers={"x-test-id": "file-uvi"})
        assert response.content == served.read_bytes()
        end = _one_terminal(_wait_for_terminal(cap, "file-uvi"))
    assert end["boundary"] == "backend.response.complete" and end["metadata"]["content_length"] == 100_000


async def _serve_once(app, extensions: dict) -> list[dict]:
    """Drive ``app`` as an ASGI server offering ``extensions`` does; returns what it sent."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.4"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": "/file",
        "raw_path": b"/file",
        "query_string": b"",
        "headers": [(b"host", b"test"), (b"x-test-id", b"zerocopy-1")],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 80),
        "extensions": extensions,
    }
    sent: list[dict] = []

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        sent.append(message)

    await app(scope, receive, send)
    return sent


def test_a_file_sent_by_zerocopy_ends_in_response_complete(tmp_path):
    served = tmp_path / "served.bin"
    served.write_bytes(b"z" * 50_000)

    async def app(scope, receive, send):
        assert "http.response.zerocopy" in scope["extensions"]
        await send(
            {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/octet-stream")]}
        )
        with open(served, "rb") as f:
            await send({"type": "http.response.zerocopy", "file": f.fileno(), "count": 30_000, "more_body": True})
            await send({"type": "http.response.zerocopy", "file": f.fileno(), "more_body": False})

    with capture("verbose") as cap:
        sent = asyncio.run(_serve_once(cvdiag.CvdiagMiddleware(app, slug="files"), {"http.response.zerocopy": {}}))
        events = [e for e in cap.events() if e["test_id"] == "zerocopy-1"]
    assert [m["type"] for m in sent][1:] == ["http.response.zerocopy", "http.response.zerocopy"]
    end = _one_terminal(events)
    assert end["boundary"] == "backend.response.complete" and end["metadata"]["http_status"] == 200
    assert "backend.sse.first_byte" in [e["boundary"] for e in events]


def test_a_file_sent_by_pathsend_at_the_asgi_level_ends_in_response_complete(tmp_path):
    from starlette.responses import FileResponse

    served = tmp_path / "served.bin"
    served.write_bytes(b"p" * 40_000)
    app = Starlette(routes=[Route("/file", lambda request: FileResponse(served))])
    with capture("verbose") as cap:
        sent = asyncio.run(_serve_once(cvdiag.CvdiagMiddleware(app, slug="files"), {"http.response.pathsend": {}}))
        events = [e for e in cap.events() if e["test_id"] == "zerocopy-1"]
    assert [m["type"] for m in sent] == ["http.response.start", "http.response.pathsend"]
    end = _one_terminal(events)
    assert end["boundary"] == "backend.response.complete" and end["metadata"]["content_length"] == 40_000


# -- item 4: one terminal even when the error line cannot be built ----------------------


class Unprintable(Exception):
    def __str__(self) -> str:
        raise ValueError("no text for you")


def _ends(events: list[dict]) -> list[str]:
    """The request's terminal: response.complete or sse.aborted, else error.caught (spec section 8)."""
    names = [e["boundary"] for e in events]
    return [n for n in names if n in TERMINALS[:2]] or [n for n in names if n == TERMINALS[2]]


@pytest.mark.parametrize("streamed", [False, True], ids=["before-start", "mid-stream"])
def test_an_exception_whose_str_raises_still_gets_one_terminal(streamed: bool):
    async def app(scope, receive, send):  # no error middleware: cvdiag's line is the only account
        if not streamed:
            raise Unprintable()
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        await send({"type": "http.response.body", "body": b"data: 1\n\n", "more_body": True})
        raise Unprintable()

    with capture("verbose") as cap, running_server(cvdiag.CvdiagMiddleware(app, slug="unprintable")) as base:
        try:
            status = httpx.get(base + "/fail", headers={"x-test-id": "unprintable-1"}).status_code
        except httpx.HTTPError:
            status = None
        assert status == (None if streamed else 500)
        events = _wait_for_terminal(cap, "unprintable-1")
    assert _ends(events) == ["backend.sse.aborted" if streamed else "backend.error.caught"]
    caught = [e for e in events if e["boundary"] == "backend.error.caught"]
    assert [e["metadata"]["exception_type"] for e in caught] == ["Unprintable"]
    assert "ValueError" in caught[0]["metadata"]["message_scrubbed"]


REMOVED_CWD_APP = textwrap.dedent(
    """
    import os, shutil, sys
    import uvicorn

    import cvdiag

    async def fails(scope, receive, send):
        if scope["type"] == "http" and scope["path"] == "/fail":
            raise RuntimeError("the database went away")
        await send({"type": "http.response.start", "status": 404, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    app = cvdiag.CvdiagMiddleware(fails, slug="nocwd")
    os.chdir(sys.argv[2])
    shutil.rmtree(sys.argv[2])  # a deploy removed the release directory under the server
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="critical", lifespan="off")
    """
)


def test_a_server_whose_working_directory_was_removed_still_gets_one_terminal(tmp_path):
    script = tmp_path / "server.py"
    script.write_text(REMOVED_CWD_APP)
    doomed = tmp_path / "release"
    doomed.mkdir()
    log = tmp_path / "cvdiag.ndjson"
    port = free_port()
    env = {
        **os.environ,
        "PYTHONPATH": os.getcwd(),
        "CVDIAG_ENABLED": "1",
        "CVDIAG_TIER": "verbose",
        "CVDIAG_FILE": str(log),
        "CVDIAG_STDOUT": "0",
    }
    proc = subprocess.Popen([sys.executable, str(script), str(port), str(doomed)], env=env, stderr=subprocess.PIPE)
    try:
        base = f"http://127.0.0.1:{port}"
        wait_until_serving(base, proc)
        assert httpx.get(base + "/fail", headers={"x-test-id": "nocwd-1"}).status_code == 500
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and not any(
            e["boundary"] in TERMINALS for e in _read_lines(log) if e["test_id"] == "nocwd-1"
        ):
            time.sleep(0.05)
    finally:
        proc.terminate()
        proc.wait(15)
    assert not doomed.exists()
    events = [e for e in _read_lines(log) if e["test_id"] == "nocwd-1"]
    assert _ends(events) == ["backend.error.caught"]
    end = events[-1]
    assert end["metadata"]["message_scrubbed"] == "the database went away"
    assert {f["file"] for f in end["metadata"]["stack_brief"]} >= {"server.py"}


# -- item 5: a BaseHTTPMiddleware between cvdiag and the app ---------------------------


class PassThrough(BaseHTTPMiddleware):
    async def dispatch(self, request, call_next):
        return await call_next(request)


async def _long_stream(request: Request) -> StreamingResponse:
    async def body() -> AsyncIterator[bytes]:
        for i in range(300):
            yield f"data: {i}\n\n".encode()
            await asyncio.sleep(0.02)

    return StreamingResponse(body(), media_type="text/event-stream")


async def _with_background(request: Request) -> Response:
    return PlainTextResponse("all of it", background=BackgroundTask(asyncio.sleep, 3))


def _base_http_app() -> Starlette:
    app = Starlette(
        routes=[Route("/stream", _long_stream), Route("/background", _with_background)],
        middleware=[Middleware(PassThrough)],
    )
    app.add_middleware(cvdiag.CvdiagMiddleware, slug="basehttp")
    return app


def test_a_client_hanging_up_under_base_http_middleware_is_an_abort():
    with capture("verbose") as cap, running_server(_base_http_app()) as base:
        with httpx.Client() as client, client.stream("GET", base + "/stream", headers={"x-test-id": "bhm-hangup"}) as r:
            for line in r.iter_lines():
                if line.startswith("data: 3"):
                    break  # hang up mid-stream
        events = _wait_for_terminal(cap, "bhm-hangup")
    assert _ends(events) == ["backend.sse.aborted"]
    aborted = events[-1] if events[-1]["boundary"] == "backend.sse.aborted" else None
    aborted = next(e for e in events if e["boundary"] == "backend.sse.aborted")
    assert aborted["metadata"]["termination_kind"] == "rst" and aborted["outcome"] == "err"


def test_a_background_task_does_not_count_in_the_response_duration():
    with capture("verbose") as cap, running_server(_base_http_app()) as base:
        started = time.monotonic()
        response = httpx.get(base + "/background", headers={"x-test-id": "bhm-background"})
        client_ms = (time.monotonic() - started) * 1000
        assert response.text == "all of it"
        events = _wait_for_terminal(cap, "bhm-background")
    (done,) = [e for e in events if e["boundary"] == "backend.response.complete"]
    # The client had the whole answer at client_ms; the 3 s task ran after it.
    assert client_ms < 2500
    assert done["metadata"]["total_duration_ms"] <= client_ms and done["duration_ms"] <= client_ms
