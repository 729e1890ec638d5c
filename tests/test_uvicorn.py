"""A real uvicorn server on a loopback port and a real httpx client that hangs up."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
from emitkit import Captured, capture
from serverkit import running_server
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

import cvdiag


async def slow_stream(request: Request) -> StreamingResponse:
    async def body() -> AsyncIterator[bytes]:
        async with cvdiag.agent_scope("streamer"), cvdiag.llm_call("openai", "gpt-4o-mini", heartbeat_s=0.05):
            for i in range(200):
                yield f"event: token\ndata: {i}\n\n".encode()
                await asyncio.sleep(0.02)

    return StreamingResponse(body(), media_type="text/event-stream")


async def short_stream(request: Request) -> StreamingResponse:
    async def body() -> AsyncIterator[bytes]:
        for i in range(3):
            yield f"data: {i}\n\n".encode()

    return StreamingResponse(body(), media_type="text/event-stream")


@pytest.fixture
def server() -> Iterator[tuple[str, Captured]]:
    app = Starlette(routes=[Route("/slow", slow_stream), Route("/short", short_stream)])
    app.add_middleware(cvdiag.CvdiagMiddleware, slug="uvi")
    with capture("debug") as cap, running_server(app) as base:
        yield base, cap


def _wait_for(cap: Captured, boundary: str, test_id: str) -> list[dict]:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        events = [e for e in cap.events() if e["test_id"] == test_id]
        if any(e["boundary"] == boundary for e in events):
            return events
        time.sleep(0.02)
    raise AssertionError(f"no {boundary} for {test_id}: {[e['boundary'] for e in cap.events()]}")


def test_client_hanging_up_mid_stream_is_abort_rst_and_cancels_the_llm_call(server):
    base, cap = server
    with httpx.Client() as client, client.stream("GET", f"{base}/slow", headers={"x-test-id": "hangup-1"}) as response:
        assert response.headers["x-test-id"] == "hangup-1"
        for line in response.iter_lines():
            if line.startswith("data: 3"):
                break  # hang up mid-stream
    events = _wait_for(cap, "backend.sse.aborted", "hangup-1")
    names = [e["boundary"] for e in events]
    assert "backend.response.complete" not in names
    aborted = next(e for e in events if e["boundary"] == "backend.sse.aborted")
    assert aborted["metadata"]["termination_kind"] == "rst" and aborted["metadata"]["bytes_before_abort"] > 0
    llm = next(e for e in events if e["boundary"] == "backend.llm.call.response")
    assert llm["outcome"] == "timeout" and llm["metadata"]["error_class"] == "CancelledError"
    agent_exit = next(e for e in events if e["boundary"] == "backend.agent.exit")
    assert agent_exit["metadata"]["terminal_outcome"] == "cancelled"
    assert names.index("backend.llm.call.response") > max(i for i, n in enumerate(names) if n.endswith("heartbeat"))


def test_complete_stream_over_a_real_socket(server):
    base, cap = server
    response = httpx.get(f"{base}/short", headers={"x-test-id": "short-1"})
    assert response.status_code == 200
    events = _wait_for(cap, "backend.response.complete", "short-1")
    names = [e["boundary"] for e in events]
    assert names[0] == "backend.request.ingress" and names.count("backend.sse.event") == 3
    done = events[-1]
    assert done["metadata"]["sse_event_count"] == 3 and done["metadata"]["http_status"] == 200
