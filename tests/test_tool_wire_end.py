"""Wire tool calls whose result never came back: the end of the request (the middleware's
terminal) or of the outermost ``agent_scope`` gives up on them, one
backend.tool.call.response each, before the terminal. Through real uvicorn, the real
capture (the openai SDK on httpx) and a local provider stand-in."""

from __future__ import annotations

import asyncio
import contextvars
import time

import httpx
import openai
import pytest
from corpus_agents import QUESTION, ask, with_results
from emitkit import capture
from llm_server import Reply, llm_capture_on_fixture, server_fixture  # noqa: F401 (fixtures)
from serverkit import running_server
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, StreamingResponse
from starlette.routing import Route

import cvdiag
from cvdiag.diagnosis import Thresholds, diagnose
from cvdiag.read import toolcalls
from cvdiag.read.validate import problems

pytestmark = pytest.mark.usefixtures("llm_capture_on")

CHAT = "/v1/chat/completions"
TOOLS = Reply.sse("openai_chat_tools_stream.sse")
TEXT = Reply.sse("openai_chat_stream.sse")
TERMINALS = ("backend.response.complete", "backend.sse.aborted", "backend.error.caught")
TOOL_LINES = ("backend.tool.call.start", "backend.tool.call.response")


def _app(llm_url: str) -> Starlette:
    def client() -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(base_url=llm_url + "/v1", api_key="sk-test-1", max_retries=0)

    async def raises(request: Request) -> PlainTextResponse:
        """The model asks for get_weather; the tool raises and the agent does not catch it."""
        async with cvdiag.agent_scope("weather"):
            await ask(client(), QUESTION)
            raise RuntimeError("weather service down")

    async def hangs(request: Request) -> StreamingResponse:
        """The model asks; the tool runs long; the client hangs up meanwhile."""

        async def body():
            await ask(client(), QUESTION)
            yield b"data: asked\n\n"
            await asyncio.sleep(20)  # the tool, running
            yield b"data: never\n\n"

        return StreamingResponse(body(), media_type="text/event-stream")

    async def answers(request: Request) -> PlainTextResponse:
        """The model asks, the result goes back in the next request; ``?then=raise`` fails after it."""
        messages = QUESTION
        _, calls = await ask(client(), messages)
        await ask(client(), with_results(messages, calls, "18 C, sunny"))
        if request.query_params.get("then") == "raise":
            raise RuntimeError("the answer could not be rendered")
        return PlainTextResponse("done")

    async def hands_over(request: Request) -> PlainTextResponse:
        """The model asks for a tool that the client runs (a frontend tool): the request
        ends well with the call waiting; its result comes in the client's next request."""
        await ask(client(), QUESTION)
        return PlainTextResponse("run get_weather yourself")

    async def nested(request: Request) -> PlainTextResponse:
        """An inner agent fails while the outer agent's call waits; the outer one carries on."""
        async with cvdiag.agent_scope("outer"):
            _, calls = await ask(client(), QUESTION)
            try:
                async with cvdiag.agent_scope("inner"):
                    raise ValueError("inner agent gave up")
            except ValueError:
                pass
            await ask(client(), with_results(QUESTION, calls, "18 C, sunny"))
        return PlainTextResponse("done")

    async def boom(request: Request) -> PlainTextResponse:
        raise RuntimeError("another request of the same test fails")

    app = Starlette(
        routes=[
            Route("/boom", boom),
            Route("/raise", raises),
            Route("/hang", hangs),
            Route("/answer", answers),
            Route("/hand-over", hands_over),
            Route("/nested", nested),
        ]
    )
    app.add_middleware(cvdiag.CvdiagMiddleware, slug="toolend")
    return app


def _events(cap, test_id: str, timeout: float = 15) -> list[dict]:
    """The test's envelopes once its terminal is written (checked against the schema)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        events = [e for e in cap.events() if e["test_id"] == test_id]
        if any(e["boundary"] in TERMINALS for e in events):
            time.sleep(0.1)  # a line written after the terminal would come now
            events = [e for e in cap.events() if e["test_id"] == test_id]
            for env in events:
                assert problems(env) == [], (env, problems(env))
            return events
        time.sleep(0.02)
    raise AssertionError(f"no terminal for {test_id}")


def _tool_lines(events: list[dict]) -> list[tuple]:
    return [
        (e["boundary"].rsplit(".", 1)[-1], e["outcome"], e["metadata"]["call_id"], e["metadata"].get("error_kind"))
        for e in events
        if e["boundary"] in TOOL_LINES
    ]


def _after_tools(events: list[dict]) -> list[str]:
    """The boundaries from the first tool line on, LLM lines aside."""
    names = [e["boundary"] for e in events if not e["boundary"].startswith("backend.llm.")]
    return names[names.index("backend.tool.call.start") :]


@pytest.fixture(name="base")
def base_fixture(server):
    with running_server(_app(server.url)) as base:
        yield base


def test_an_agent_that_raises_while_a_call_waits_gives_it_a_raised_timeout_before_the_terminal(server, base):
    server.plan(CHAT, TOOLS, TEXT)
    with capture("verbose") as cap:
        assert httpx.get(base + "/raise", headers={"x-test-id": "end-raise"}).status_code == 500
        events = _events(cap, "end-raise")
    assert _tool_lines(events) == [("start", "info", "call_abc", None), ("response", "timeout", "call_abc", "raised")]
    assert _after_tools(events) == [
        "backend.tool.call.start",
        "backend.agent.exit",  # an agent_scope inside a request leaves the call to the request's end
        "backend.tool.call.response",
        "backend.error.caught",
    ]
    (response,) = [e for e in events if e["boundary"] == "backend.tool.call.response"]
    assert response["metadata"] == {
        "tool_name": "get_weather",
        "call_id": "call_abc",
        "source": "wire",
        "server": None,
        "result_chars": None,
        "error_kind": "raised",
        "error_excerpt": None,
    }
    assert isinstance(response["duration_ms"], int) and response["duration_ms"] >= 0
    got = diagnose(events)  # the agent's exception is the cause; the waiting call is evidence
    assert got.cls == "server-error" and "weather service down" in got.reason, (got.cls, got.reason)


def test_a_client_hanging_up_while_the_tool_runs_gives_the_call_a_timeout_before_the_abort(server, base):
    server.plan(CHAT, TOOLS, TEXT)
    with capture("verbose") as cap:
        with httpx.Client() as client, client.stream("GET", base + "/hang", headers={"x-test-id": "end-hangup"}) as r:
            for line in r.iter_lines():
                if line == "data: asked":
                    time.sleep(0.3)  # the tool has been running a while
                    break  # hang up
        events = _events(cap, "end-hangup")
    assert _tool_lines(events) == [("start", "info", "call_abc", None), ("response", "timeout", "call_abc", "timeout")]
    assert _after_tools(events)[-2:] == ["backend.tool.call.response", "backend.sse.aborted"]
    (aborted,) = [e for e in events if e["boundary"] == "backend.sse.aborted"]
    assert aborted["metadata"]["termination_kind"] == "rst"
    (response,) = [e for e in events if e["boundary"] == "backend.tool.call.response"]
    assert response["duration_ms"] >= 250  # up to the end of the request
    got = diagnose(events, Thresholds(slow_s=0.1))  # not tool-slow: 0.3 s was up to the hang-up
    assert got.cls == "client-disconnect", (got.cls, got.reason)
    # the faces (timeline, report, pytest) say the same: never answered, not failed
    (call,) = toolcalls.tool_calls(events)
    assert (call.outcome, call.failed, call.given_up, call.failure()) == ("timeout", False, True, "")
    assert toolcalls.summary([call]) == "1 tool call, 1 never answered"


@pytest.mark.parametrize("then", ["", "raise"])
def test_a_call_answered_in_time_gets_its_one_line_and_nothing_at_the_end(server, base, then):
    server.plan(CHAT, TOOLS, TEXT)
    test_id = f"end-answered-{then or 'ok'}"
    with capture("verbose") as cap:
        response = httpx.get(base + f"/answer?then={then}", headers={"x-test-id": test_id})
        assert response.status_code == (500 if then else 200)
        events = _events(cap, test_id)
    assert _tool_lines(events) == [("start", "info", "call_abc", None), ("response", "ok", "call_abc", None)]


def test_a_request_that_ends_well_leaves_a_handed_over_call_waiting_for_the_next_request(server, base):
    server.plan(CHAT, TOOLS, TEXT)
    with capture("verbose") as cap:
        assert httpx.get(base + "/hand-over", headers={"x-test-id": "end-handover"}).status_code == 200
        events = _events(cap, "end-handover")
        assert _tool_lines(events) == [("start", "info", "call_abc", None)]
        # The client ran the tool: its next request (same test id) carries the result.
        with cvdiag.request_context(test_id="end-handover"):
            asyncio.run(_askwith_results(server.url))
        events = [e for e in cap.events() if e["test_id"] == "end-handover"]
    assert _tool_lines(events) == [("start", "info", "call_abc", None), ("response", "ok", "call_abc", None)]


async def _askwith_results(llm_url: str) -> None:
    client = openai.AsyncOpenAI(base_url=llm_url + "/v1", api_key="sk-test-1", max_retries=0)
    calls = [{"id": "call_abc", "name": "get_weather", "args": '{"city":"Paris"}'}]
    await ask(client, with_results(QUESTION, calls, "18 C, sunny"))


def test_another_request_of_the_same_test_failing_leaves_the_waiting_call_alone(server, base):
    server.plan(CHAT, TOOLS, TEXT)
    with capture("verbose") as cap:
        assert httpx.get(base + "/hand-over", headers={"x-test-id": "end-other"}).status_code == 200
        assert httpx.get(base + "/boom", headers={"x-test-id": "end-other"}).status_code == 500
        _events(cap, "end-other")
        time.sleep(0.2)  # the second terminal
        events = [e for e in cap.events() if e["test_id"] == "end-other"]
    assert [e["boundary"] for e in events if e["boundary"] in TERMINALS] == [
        "backend.response.complete",
        "backend.error.caught",
    ]
    assert _tool_lines(events) == [("start", "info", "call_abc", None)]


def test_an_inner_agent_failing_does_not_close_the_outer_agents_waiting_call(server, base):
    server.plan(CHAT, TOOLS, TEXT)
    with capture("verbose") as cap:
        assert httpx.get(base + "/nested", headers={"x-test-id": "end-nested"}).status_code == 200
        events = _events(cap, "end-nested")
    assert _tool_lines(events) == [("start", "info", "call_abc", None), ("response", "ok", "call_abc", None)]


def test_without_middleware_the_outermost_agent_scope_ends_its_waiting_calls(server):
    server.plan(CHAT, TOOLS, TEXT)

    def llm() -> openai.AsyncOpenAI:  # one per event loop
        return openai.AsyncOpenAI(base_url=server.url + "/v1", api_key="sk-test-1", max_retries=0)

    async def agent() -> None:
        client = llm()
        async with cvdiag.agent_scope("worker"):
            _, calls = await ask(client, QUESTION)
            async with cvdiag.agent_scope("helper"):
                await ask(client, with_results(QUESTION, calls, "18 C"))
            raise asyncio.CancelledError  # cancelled while nothing waits

    async def agent_waiting() -> None:
        client = llm()
        async with cvdiag.agent_scope("worker"):
            await ask(client, QUESTION)
            raise KeyError("get_weather")

    with capture("verbose") as cap:
        # In a context of their own: the pytest plugin binds the test's id around the test.
        with pytest.raises(asyncio.CancelledError):
            contextvars.Context().run(asyncio.run, agent())
        server.plan(CHAT, TOOLS)
        with pytest.raises(KeyError):
            contextvars.Context().run(asyncio.run, agent_waiting())
        events = cap.events()
    by_test: dict[str, list[dict]] = {}
    for env in events:
        by_test.setdefault(env["test_id"], []).append(env)
    first, second = by_test.values()
    assert _tool_lines(first) == [("start", "info", "call_abc", None), ("response", "ok", "call_abc", None)]
    assert _tool_lines(second) == [("start", "info", "call_abc", None), ("response", "timeout", "call_abc", "raised")]
    assert [e["boundary"] for e in second][-2:] == ["backend.tool.call.response", "backend.agent.exit"]
