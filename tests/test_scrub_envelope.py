"""Scrubbing through the real middleware: every string field of every envelope
(``demo`` included), and scrub first, cut after (spec section 7)."""

from __future__ import annotations

import json

import pytest
from emitkit import capture
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.testclient import TestClient

import cvdiag
from cvdiag.contract.schema import DEMO_MAX_CHARS, EDGE_HEADER_MAX_CHARS

KEY = "sk-proj-Zx9QmT4vLk2Wn8Rb6Yc1Hd5Jf3Gp7Ks0Xa"
EMAIL = "alice.smith@example.com"
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"


async def anything(request: Request) -> JSONResponse:
    return JSONResponse({"ok": True})


def make_app() -> Starlette:
    app = Starlette(routes=[Route("/{rest:path}", anything)])
    app.add_middleware(cvdiag.CvdiagMiddleware, slug="svc")
    return app


def _pieces(secret: str, width: int = 8) -> list[str]:
    return [secret[i : i + width] for i in range(len(secret) - width + 1)]


def _leaks(secret: str, envelopes: list[dict]) -> list[str]:
    written = json.dumps(envelopes)
    return [piece for piece in _pieces(secret) if piece in written]


@pytest.mark.parametrize("secret", [KEY, EMAIL, JWT])
def test_secret_in_the_first_path_segment_never_reaches_demo(secret):
    with capture("debug") as cap, TestClient(make_app()) as client:
        client.get(f"/{secret}/chat")
    events = cap.events()
    assert events, "the middleware wrote nothing"
    assert {e["demo"] for e in events} == {"[REDACTED]"}
    assert _leaks(secret, events) == []


def test_demo_set_by_a_request_context_is_scrubbed_too():
    with capture("debug") as cap, cvdiag.request_context(demo=f"tenant:{EMAIL}"), cvdiag.agent_scope("planner"):
        pass
    assert {e["demo"] for e in cap.events()} == {"tenant:[REDACTED]"}


def test_plain_demo_is_unchanged():
    with capture("debug") as cap, TestClient(make_app()) as client:
        client.get("/api/chat")
    assert {e["demo"] for e in cap.events()} == {"api"}


def test_long_demo_is_scrubbed_before_it_is_cut():
    # The key straddles the 256-character cut: cut first, its prefix would be left.
    segment = "a" * (DEMO_MAX_CHARS - 12) + "." + KEY
    with capture("debug") as cap, TestClient(make_app()) as client:
        client.get(f"/{segment}/chat")
    events = cap.events()
    assert _leaks(KEY, events) == [] and "sk-proj" not in json.dumps(events)
    assert all(len(e["demo"]) <= DEMO_MAX_CHARS for e in events)


@pytest.mark.parametrize("offset", [200, 232, 240, 250, EDGE_HEADER_MAX_CHARS - 8, 1000, 3000])
def test_key_deep_in_an_edge_header_is_scrubbed_before_the_cut(offset):
    via = "1.1 " + "p" * (offset - 5) + " " + KEY + " 1.1 proxy"
    with capture("debug") as cap, TestClient(make_app()) as client:
        client.get("/api/chat", headers={"via": via})
    events = cap.events()
    written = [e["edge_headers"]["via"] for e in events if e["edge_headers"]["via"] is not None]
    assert written, "no envelope carried the via header"
    assert all(len(v) <= EDGE_HEADER_MAX_CHARS for v in written)
    assert _leaks(KEY, events) == [] and "sk-proj" not in json.dumps(events)


def test_plain_long_edge_header_is_cut_with_a_mark():
    via = ", ".join(f"1.1 proxy{i}.example.net" for i in range(40))
    with capture("debug") as cap, TestClient(make_app()) as client:
        client.get("/api/chat", headers={"via": via})
    value = cap.one("backend.request.ingress")["edge_headers"]["via"]
    assert len(value) == EDGE_HEADER_MAX_CHARS and value.endswith("…")
    assert via.startswith(value[:-1])


@pytest.mark.parametrize("junk", [4096, 5000, 100_000])
def test_test_id_after_a_long_run_of_junk_is_adopted(junk):
    with capture("default") as cap, TestClient(make_app()) as client:
        response = client.get("/api/chat", headers={"x-test-id": "!" * junk + "d4-agno-1234"})
    assert response.headers["x-test-id"] == "d4-agno-1234"
    assert cap.one("backend.response.complete")["test_id"] == "d4-agno-1234"
