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
        headers = ((k, v) for k, v in [(b"content-type", b"text/plain"), (b"content-length", b"18"), (b"x-app", b"mine")])
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
