"""SSE lines end in CR, LF or CRLF (the SSE spec allows all three): the LLM stream reader
and the middleware read each the same, whatever the chunking (issue 18 item 7)."""

from __future__ import annotations

import httpx
import pytest
from emitkit import capture
from hypothesis import given, settings
from hypothesis import strategies as st
from llm_server import DATA, Reply, llm_capture_on_fixture, server_fixture  # noqa: F401 (fixtures)
from serverkit import running_server
from test_llm_stream import RECORDED, _facts, _read, _split

import cvdiag

ENDINGS = {"LF": b"\n", "CR": b"\r", "CRLF": b"\r\n"}


def _with_endings(data: bytes, ending: bytes) -> bytes:
    return data.replace(b"\n", ending)


@pytest.mark.parametrize("ending", ENDINGS, ids=list(ENDINGS))
@pytest.mark.parametrize(("name", "api", "chars", "finish", "prompt", "completion", "chunks"), RECORDED)
def test_recorded_stream_with_each_line_ending(name, api, chars, finish, prompt, completion, chunks, ending):
    data = _with_endings((DATA / name).read_bytes(), ENDINGS[ending])
    assert _facts(_read(api, [data])) == (chars, finish, prompt, completion, chunks, True, None)
    bytewise = _read(api, [data[i : i + 1] for i in range(len(data))])
    assert _facts(bytewise) == (chars, finish, prompt, completion, chunks, True, None)


@settings(max_examples=150, deadline=None)
@given(
    record=st.sampled_from(RECORDED),
    ending=st.sampled_from(list(ENDINGS.values())),
    cuts=st.lists(st.integers(min_value=0, max_value=6000), max_size=12),
)
def test_any_line_ending_in_any_chunking_gives_the_facts_of_lf(record, ending, cuts):
    name, api, *_ = record
    lf = (DATA / name).read_bytes()
    expected = _facts(_read(api, [lf]))
    assert _facts(_read(api, _split(_with_endings(lf, ending), cuts))) == expected


def test_a_cr_only_stream_has_its_first_token_time_output_and_chunks(server, llm_capture_on):
    """Through a real socket: the first token is seen when it arrives, not at the end."""
    data = _with_endings((DATA / "openai_chat_stream.sse").read_bytes(), b"\r")
    events = data.split(b"\r\r")
    pieces = [e + b"\r\r" for e in events[:-1] if e]
    server.plan("/v1/chat/completions", Reply(pieces=pieces, headers={"content-type": "text/event-stream"}, delay=0.15))
    body = {"model": "gpt-4o-mini", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    with capture("verbose") as cap, httpx.Client() as client:
        with client.stream("POST", server.url + "/v1/chat/completions", json=body) as response:
            assert b"".join(response.iter_raw()) == b"".join(pieces)  # the bytes pass unchanged
        (call,) = cap.of("backend.llm.call.response")
    md = call["metadata"]
    assert (md["output_chars"], md["chunks"], md["finish_reason"], md["completion_tokens"]) == (24, 7, "stop", 7)
    assert md["ttft_ms"] is not None and md["ttft_ms"] < md["latency_ms"] - 300


def test_the_middleware_names_events_of_a_cr_only_stream():
    async def app(scope, receive, send):
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        await send({"type": "http.response.body", "body": b"event: token\rdata: 1\r\r", "more_body": True})
        await send({"type": "http.response.body", "body": b"event: done\r\ndata: 2\r\n\r\n"})

    with capture("debug") as cap, running_server(cvdiag.CvdiagMiddleware(app, slug="cr")) as base:
        assert httpx.get(base + "/", headers={"x-test-id": "cr-events"}).status_code == 200
        cvdiag.flush()
        names = [e["metadata"]["event_type"] for e in cap.of("backend.sse.event") if e["test_id"] == "cr-events"]
    assert names == ["token", "done"]
