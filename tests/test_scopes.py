"""agent_scope and llm_call: outcomes, heartbeats, cancellation, context of their own."""

from __future__ import annotations

import asyncio
import contextvars
import time

import pytest
from emitkit import capture
from frameworkkit import need

import cvdiag
from cvdiag.contract.schema import UUID7_RE
from cvdiag.testing import reset


def in_fresh_context(fn, *args):
    """Run outside any bound request context (the pytest plugin binds one per test)."""
    return contextvars.Context().run(fn, *args)


def test_agent_scope_ok_writes_enter_and_exit():
    with capture() as cap, cvdiag.request_context(test_id="agent-1"), cvdiag.agent_scope("planner", model_id="gpt-4o"):
        pass
    enter, exit_ = cap.events()
    assert enter["boundary"] == "backend.agent.enter" and enter["metadata"] == {
        "agent_name": "planner",
        "model_id": "gpt-4o",
    }
    assert exit_["metadata"]["terminal_outcome"] == "ok" and exit_["outcome"] == "ok"
    assert exit_["duration_ms"] == exit_["metadata"]["total_duration_ms"]


def test_agent_scope_error_is_recorded_and_the_exception_is_unchanged():
    error = KeyError("missing")
    with capture() as cap, cvdiag.request_context(), pytest.raises(KeyError) as raised, cvdiag.agent_scope("a"):
        raise error
    assert raised.value is error
    assert cap.one("backend.agent.exit")["metadata"]["terminal_outcome"] == "error"
    assert cap.one("backend.agent.exit")["outcome"] == "err"


def test_async_agent_scope_cancelled_propagates_cancellation():
    async def agent() -> None:
        async with cvdiag.agent_scope("a"):
            await asyncio.sleep(10)

    async def main() -> None:
        task = asyncio.ensure_future(agent())
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    with capture() as cap, cvdiag.request_context():
        asyncio.run(main())
    assert cap.one("backend.agent.exit")["metadata"]["terminal_outcome"] == "cancelled"


def test_scopes_outside_a_request_bind_one_fresh_id_for_their_duration():
    def run() -> None:
        with cvdiag.agent_scope("a"):
            inner = cvdiag.current_context()
            assert inner is not None
        assert cvdiag.current_context() is None
        with cvdiag.llm_call("openai", "m"):
            pass

    with capture() as cap:
        in_fresh_context(run)
    events = cap.events()
    agent_ids = {e["test_id"] for e in events if "agent" in e["boundary"]}
    llm_ids = {e["test_id"] for e in events if "llm" in e["boundary"]}
    assert len(agent_ids) == 1 and len(llm_ids) == 1 and agent_ids != llm_ids
    assert all(UUID7_RE.match(i) for i in agent_ids | llm_ids)


def test_llm_call_records_tokens_and_latency():
    with (
        capture() as cap,
        cvdiag.request_context(),
        cvdiag.llm_call("openai", "gpt-4o-mini", prompt_token_count_estimate=12) as call,
    ):
        call.first_token()
        call.record(42, prompt_tokens=12, completion_tokens=42, finish_reason="stop")
    start, response = cap.events()
    assert start["metadata"] == {
        "provider": "openai",
        "model": "gpt-4o-mini",
        "prompt_token_count_estimate": 12,
        "source": "scope",
    }
    md = response["metadata"]
    assert response["outcome"] == "ok" and md["error_class"] is None
    assert (md["response_token_count"], md["prompt_tokens"], md["completion_tokens"], md["finish_reason"]) == (
        42,
        12,
        42,
        "stop",
    )
    assert isinstance(md["ttft_ms"], int) and md["latency_ms"] == response["duration_ms"]


def test_llm_call_error_names_the_exception_class():
    class RateLimitError(Exception):
        pass

    with capture() as cap, cvdiag.request_context(), pytest.raises(RateLimitError), cvdiag.llm_call("openai", "m"):
        raise RateLimitError("429")
    response = cap.one("backend.llm.call.response")
    assert response["outcome"] == "err" and response["metadata"]["error_class"] == "RateLimitError"


def test_async_llm_call_heartbeats_while_open_and_never_after_the_response():
    async def main() -> None:
        async with cvdiag.llm_call("openai", "m", heartbeat_s=0.02):
            await asyncio.sleep(0.15)
        await asyncio.sleep(0.1)  # a late beat would land here

    with capture("verbose") as cap, cvdiag.request_context():
        asyncio.run(main())
    names = cap.boundaries()
    beats = cap.of("backend.llm.call.heartbeat")
    assert len(beats) >= 2
    assert names[-1] == "backend.llm.call.response"
    elapsed = [b["metadata"]["elapsed_ms_since_start"] for b in beats]
    assert elapsed == sorted(elapsed) and elapsed[0] >= 15


def test_sync_llm_call_heartbeats_from_a_thread_with_the_callers_id():
    with capture("verbose") as cap, cvdiag.request_context(test_id="sync-beat"):
        with cvdiag.llm_call("anthropic", "claude-3-5-sonnet-20241022", heartbeat_s=0.02):
            time.sleep(0.15)
        time.sleep(0.1)
    beats = cap.of("backend.llm.call.heartbeat")
    assert len(beats) >= 2 and {b["test_id"] for b in beats} == {"sync-beat"}
    assert cap.boundaries()[-1] == "backend.llm.call.response"


def test_default_tier_starts_no_heartbeat():
    import threading

    with capture("default") as cap, cvdiag.request_context():
        before = threading.active_count()
        with cvdiag.llm_call("openai", "m", heartbeat_s=0.01):
            assert threading.active_count() == before
            time.sleep(0.05)
    assert cap.events() == []


def test_cancelled_llm_call_is_timeout_and_cancellation_propagates():
    async def call() -> None:
        async with cvdiag.llm_call("openai", "m", heartbeat_s=0.01):
            await asyncio.sleep(10)

    async def main() -> None:
        task = asyncio.ensure_future(call())
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.sleep(0.05)

    with capture("verbose") as cap, cvdiag.request_context():
        asyncio.run(main())
    response = cap.one("backend.llm.call.response")
    assert response["outcome"] == "timeout" and response["metadata"]["error_class"] == "CancelledError"
    assert cap.boundaries()[-1] == "backend.llm.call.response"


def test_request_context_adopts_or_mints_ids():
    with cvdiag.request_context(test_id=" Harness-7 ", slug="Svc One", demo="chat") as ctx:
        assert cvdiag.current_context() is ctx
        assert (ctx.test_id, ctx.trace_id, ctx.slug, ctx.demo) == ("harness-7", "harness-7", "svcone", "chat")
    with cvdiag.request_context() as ctx:
        assert UUID7_RE.match(ctx.test_id)


def test_resetting_a_context_from_another_task_does_not_blow_up():
    from cvdiag.write.context import bind, new_context, unbind

    async def main() -> None:
        tokens = bind(new_context(test_id="outer"))
        await asyncio.get_running_loop().create_task(asyncio.to_thread(unbind, tokens))
        unbind(tokens)

    asyncio.run(main())


def test_concurrent_sync_calls_share_one_heartbeat_thread():
    import threading
    from concurrent.futures import ThreadPoolExecutor

    def call(i: int) -> None:
        with cvdiag.request_context(test_id=f"pool-{i}"), cvdiag.llm_call("openai", "m", heartbeat_s=0.02):
            time.sleep(0.1)

    def heartbeat_threads() -> list[threading.Thread]:
        return [t for t in threading.enumerate() if t.name == "cvdiag-heartbeat"]

    reset()  # stops the heartbeat thread an earlier test started
    assert heartbeat_threads() == []
    with capture("verbose") as cap, ThreadPoolExecutor(8) as pool:
        list(pool.map(call, range(8)))
        beating = heartbeat_threads()
    assert len(beating) == 1  # started by the first call that wanted beats, shared by all eight
    beats = cap.of("backend.llm.call.heartbeat")
    assert {b["test_id"] for b in beats} == {f"pool-{i}" for i in range(8)}


def test_agent_scope_error_keeps_the_scrubbed_message_cut_to_256():
    secret = "sk-proj-" + "A1b2C3d4" * 6
    long = f"Model behaviour: incomplete_details=max_output_tokens (key {secret}) " + "and more " * 80
    with capture() as cap, cvdiag.request_context(), pytest.raises(RuntimeError), cvdiag.agent_scope("a"):
        raise RuntimeError(long)
    md = cap.one("backend.agent.exit")["metadata"]
    assert md["error_class"] == "RuntimeError" and len(md["error_message"]) == 256
    assert md["error_message"].startswith("Model behaviour: incomplete_details=max_output_tokens (key ")
    assert secret not in md["error_message"] and "sk-proj-A1b2" not in md["error_message"]


def test_agent_error_after_streaming_started_keeps_the_message_of_the_real_exception():
    """The agent streams through Starlette's StreamingResponse; the failure comes mid-stream,
    out of the response's task group (an exception group on Python 3.11)."""
    need("agents")
    from agents.exceptions import ModelBehaviorError
    from starlette.applications import Starlette
    from starlette.responses import StreamingResponse
    from starlette.routing import Route
    from starlette.testclient import TestClient

    async def tokens():
        async with cvdiag.agent_scope("writer"):
            yield b"data: first\n\n"
            raise ModelBehaviorError("Response incomplete: incomplete_details=max_output_tokens")

    async def endpoint(request):
        return StreamingResponse(tokens(), media_type="text/event-stream")

    app = Starlette(routes=[Route("/chat", endpoint)])
    with capture() as cap, cvdiag.request_context(), TestClient(app) as client, pytest.raises(Exception):  # noqa: B017
        client.get("/chat")
    md = cap.one("backend.agent.exit")["metadata"]
    assert (md["terminal_outcome"], md["error_class"], md["error_message"]) == (
        "error",
        "ModelBehaviorError",
        "Response incomplete: incomplete_details=max_output_tokens",
    )


def test_exception_group_names_its_first_leaf_and_ok_has_no_message():
    with capture() as cap, cvdiag.request_context(), pytest.raises(ExceptionGroup), cvdiag.agent_scope("a"):
        raise ExceptionGroup("unhandled errors in a TaskGroup", [ConnectionError("upstream reset"), KeyError("x")])
    with capture() as ok, cvdiag.request_context(), cvdiag.agent_scope("a"):
        pass
    assert cap.one("backend.agent.exit")["metadata"]["error_message"] == "ConnectionError: upstream reset"
    assert ok.one("backend.agent.exit")["metadata"]["error_message"] is None
