"""Tool calls from the wire: the real capture (httpx, httpx2, the openai and anthropic SDKs)
against a real local server serving recorded provider answers; the later request that
carries each result is the conversation the SDK sends next."""

from __future__ import annotations

import asyncio
import json
import uuid

import anthropic
import httpx
import httpx2
import openai
import pytest
from emitkit import capture
from llm_server import DATA, Reply, llm_capture_on_fixture, server_fixture  # noqa: F401 (fixtures)

import cvdiag
from cvdiag.read.validate import problems
from cvdiag.write import _tool_wire
from cvdiag.write._tool_wire import CALLS_PER_ANSWER, NEW_BYTES_MAX, args_hash

pytestmark = pytest.mark.usefixtures("llm_capture_on")

CHAT = "/v1/chat/completions"
RESPONSES = "/v1/responses"
MESSAGES = "/v1/messages"
GEMINI = "/v1beta/models/gemini-2.0-flash:streamGenerateContent"
GEMINI_JSON = "/v1beta/models/gemini-2.0-flash:generateContent"
TEXT_ANSWER = (DATA / "openai_chat_stream.sse").read_bytes()
LANGGRAPH_ERROR = "Error: ValueError('no such city')\n Please fix your mistakes."


def _test_id() -> str:
    return f"t-{uuid.uuid4().hex[:12]}"


def _lines(cap, *boundaries: str) -> list[tuple]:
    """(boundary, outcome, metadata) of the lines of these boundaries, checked against the schema."""
    for env in cap.all():
        assert problems(env) == [], (env, problems(env))
    return [(e["boundary"], e["outcome"], e["metadata"]) for e in cap.events() if e["boundary"] in boundaries]


def _tools(cap) -> list[tuple]:
    return [
        (b.rsplit(".", 1)[-1], o, md["tool_name"], md["call_id"], md.get("error_kind"))
        for b, o, md in _lines(cap, "backend.tool.call.start", "backend.tool.call.response")
    ]


def _one(cap, boundary: str) -> dict:
    (found,) = [md for b, _, md in _lines(cap, boundary)]
    return found


def _json(body: dict) -> Reply:
    return Reply.json(json.dumps(body).encode())


# -- Chat Completions --------------------------------------------------------------------


def test_openai_sdk_stream_asks_then_the_next_request_answers_with_a_framework_error(server):
    server.plan(CHAT, Reply.sse("openai_chat_tools_stream.sse"), Reply.sse("openai_chat_stream.sse"))
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="sk-test-1")
    messages: list[dict] = [{"role": "user", "content": "Weather in Paris?"}]
    with capture("verbose") as cap, cvdiag.request_context(test_id=_test_id()):
        stream = client.chat.completions.create(model="gpt-4o-mini", messages=messages, stream=True)
        calls = {}
        for chunk in stream:
            for call in chunk.choices[0].delta.tool_calls or []:
                calls.setdefault(call.index, {"id": call.id, "name": call.function.name, "args": ""})
                calls[call.index]["args"] += call.function.arguments or ""
        (call,) = calls.values()
        messages.append(
            {
                "role": "assistant",
                "tool_calls": [
                    {
                        "id": call["id"],
                        "type": "function",
                        "function": {"name": call["name"], "arguments": call["args"]},
                    }
                ],
            }
        )
        messages.append({"role": "tool", "tool_call_id": call["id"], "content": LANGGRAPH_ERROR})
        stream = client.chat.completions.create(model="gpt-4o-mini", messages=messages, stream=True)
        text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert text.startswith("Hello")
    boundaries = [b for b, _, _ in _lines(cap, *{e["boundary"] for e in cap.events()})]
    assert boundaries == [
        "backend.llm.call.start",
        "backend.llm.call.response",
        "backend.tool.call.start",
        "backend.tool.call.response",
        "backend.llm.call.start",
        "backend.llm.call.response",
    ]
    first, second = [md for _, _, md in _lines(cap, "backend.llm.call.response")]
    assert (first["tool_calls"], first["tool_names"], second["tool_calls"], second["tool_names"]) == (
        1,
        ["get_weather"],
        0,
        None,
    )
    start = _one(cap, "backend.tool.call.start")
    assert start == {
        "tool_name": "get_weather",
        "call_id": "call_abc",
        "source": "wire",
        "server": None,
        "args_chars": len('{"city":"Paris"}'),
        "args_hash": args_hash('{"city": "Paris"}'),  # normalised: the spacing does not matter
    }
    (response,) = [e for e in cap.events() if e["boundary"] == "backend.tool.call.response"]
    assert response["outcome"] == "err" and isinstance(response["duration_ms"], int)
    assert response["metadata"] == {
        "tool_name": "get_weather",
        "call_id": "call_abc",
        "source": "wire",
        "server": None,
        "result_chars": len(LANGGRAPH_ERROR),
        "error_kind": "reported",
        "error_excerpt": LANGGRAPH_ERROR,
    }


@pytest.mark.parametrize("lib", [httpx, httpx2], ids=["httpx", "httpx2"])
def test_non_streamed_parallel_calls_pair_each_result_by_id(server, lib):
    answer = {
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {"id": "call_a", "type": "function", "function": {"name": "add", "arguments": '{"a":1,"b":2}'}},
                        {"id": "call_b", "type": "function", "function": {"name": "fetch", "arguments": "{}"}},
                    ],
                },
            }
        ]
    }
    server.plan(CHAT, _json(answer), Reply.sse("openai_chat_stream.sse"))
    agents_error = "An error occurred while running the tool. Please try again."
    messages = [
        {"role": "user", "content": "go"},
        answer["choices"][0]["message"],
        {"role": "tool", "tool_call_id": "call_b", "content": agents_error},
        {"role": "tool", "tool_call_id": "call_a", "content": "3"},
    ]
    with capture("verbose") as cap, cvdiag.request_context(test_id=_test_id()), lib.Client() as client:
        client.post(server.url + CHAT, json={"model": "m", "messages": messages[:1]})
        client.post(server.url + CHAT, json={"model": "m", "messages": messages, "stream": True})
    assert _tools(cap) == [
        ("start", "info", "add", "call_a", None),
        ("start", "info", "fetch", "call_b", None),
        ("response", "err", "fetch", "call_b", "reported"),
        ("response", "ok", "add", "call_a", None),
    ]
    ok = next(md for _, o, md in _lines(cap, "backend.tool.call.response") if o == "ok")
    assert (ok["result_chars"], ok["error_excerpt"]) == (1, None)


# -- Responses ---------------------------------------------------------------------------


def test_responses_stream_function_call_and_a_pydantic_ai_error_object(server):
    server.plan(RESPONSES, Reply.sse("openai_responses_tools_stream.sse"), Reply.sse("openai_responses_stream.sse"))
    first = [{"role": "user", "content": "find cvdiag"}]
    call = {"type": "function_call", "call_id": "call_r1", "name": "search_docs", "arguments": '{"query":"cvdiag"}'}
    output = {"type": "function_call_output", "call_id": "call_r1", "output": '{"error":"index offline"}'}

    async def run():
        async with httpx.AsyncClient() as client:
            async with client.stream("POST", server.url + RESPONSES, json={"model": "m", "input": first}) as r:
                async for _ in r.aiter_bytes():
                    pass
            await client.post(server.url + RESPONSES, json={"model": "m", "input": [*first, call, output]})

    with capture("verbose") as cap, cvdiag.request_context(test_id=_test_id()):
        asyncio.run(run())
    assert _tools(cap) == [
        ("start", "info", "search_docs", "call_r1", None),
        ("response", "err", "search_docs", "call_r1", "reported"),
    ]
    assert _one(cap, "backend.tool.call.start")["args_hash"] == args_hash('{"query":"cvdiag"}')
    assert _one(cap, "backend.tool.call.response")["error_excerpt"] == '{"error":"index offline"}'


def test_responses_json_body_and_previous_response_id_input(server):
    answer = {
        "status": "completed",
        "output": [{"type": "function_call", "call_id": "call_j", "name": "lookup", "arguments": '{"q":"x"}'}],
    }
    server.plan(RESPONSES, _json(answer), Reply.sse("openai_responses_stream.sse"))
    with capture("verbose") as cap, cvdiag.request_context(test_id=_test_id()), httpx2.Client() as client:
        client.post(server.url + RESPONSES, json={"model": "m", "input": "hello"})
        follow = {"type": "function_call_output", "call_id": "call_j", "output": "found it"}
        client.post(server.url + RESPONSES, json={"model": "m", "previous_response_id": "resp_1", "input": [follow]})
    assert _tools(cap) == [("start", "info", "lookup", "call_j", None), ("response", "ok", "lookup", "call_j", None)]


# -- Anthropic ---------------------------------------------------------------------------


def test_anthropic_sdk_stream_tool_use_and_an_is_error_result(server):
    server.plan(MESSAGES, Reply.sse("anthropic_messages_stream.sse"), Reply.sse("anthropic_messages_stream.sse"))
    client = anthropic.Anthropic(base_url=server.url, api_key="sk-ant-test")
    messages: list[dict] = [{"role": "user", "content": "weather?"}]
    with capture("verbose") as cap, cvdiag.request_context(test_id=_test_id()):
        with client.messages.stream(model="claude-3-5-sonnet", max_tokens=64, messages=messages) as stream:
            message = stream.get_final_message()
        (tool_use,) = [b for b in message.content if b.type == "tool_use"]
        messages += [
            {"role": "assistant", "content": [b.model_dump() for b in message.content]},
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": tool_use.id,
                        "is_error": True,
                        "content": "Error executing tool get_weather: upstream 503 (api_key=sk-live-abcdef1234567890)",
                    }
                ],
            },
        ]
        with client.messages.stream(model="claude-3-5-sonnet", max_tokens=64, messages=messages) as stream:
            stream.get_final_message()
    assert _tools(cap)[:2] == [
        ("start", "info", "get_weather", "toolu_01", None),
        ("response", "err", "get_weather", "toolu_01", "protocol"),
    ]
    start = _one_of(cap, "backend.tool.call.start", 0)
    assert (start["args_chars"], start["args_hash"]) == (len('{"city": "Paris"}'), args_hash('{"city":"Paris"}'))
    excerpt = _one(cap, "backend.tool.call.response")["error_excerpt"]
    assert excerpt.startswith("Error executing tool get_weather: upstream 503") and "sk-live-abcdef" not in excerpt


def _one_of(cap, boundary: str, index: int) -> dict:
    return [md for b, _, md in _lines(cap, boundary)][index]


def test_anthropic_json_answer_and_a_plain_result(server):
    answer = {
        "content": [
            {"type": "text", "text": "Let me look."},
            {"type": "tool_use", "id": "toolu_j", "name": "lookup", "input": {"q": "sky"}},
        ],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 3, "output_tokens": 4},
    }
    server.plan(MESSAGES, _json(answer), Reply.sse("anthropic_messages_stream.sse"))
    history = [{"role": "user", "content": "sky?"}]
    result = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_j", "content": "blue"}]}
    with capture("verbose") as cap, cvdiag.request_context(test_id=_test_id()), httpx.Client() as client:
        client.post(server.url + MESSAGES, json={"model": "claude", "max_tokens": 9, "messages": history})
        follow = [*history, {"role": "assistant", "content": answer["content"]}, result]
        client.post(server.url + MESSAGES, json={"model": "claude", "max_tokens": 9, "messages": follow})
    assert _tools(cap)[:2] == [
        ("start", "info", "lookup", "toolu_j", None),
        ("response", "ok", "lookup", "toolu_j", None),
    ]
    assert _one_of(cap, "backend.tool.call.response", 0)["result_chars"] == 4


# -- Gemini ------------------------------------------------------------------------------


def test_gemini_stream_pairs_by_name_in_order_and_reads_an_error_response(server):
    server.plan(GEMINI, Reply.sse("gemini_stream.sse"), Reply.sse("gemini_stream.sse"))
    asked = {"role": "model", "parts": [{"functionCall": {"name": "lookup", "args": {"q": "sky"}}}]}
    answered = {
        "role": "user",
        "parts": [{"functionResponse": {"name": "lookup", "response": {"error": "quota exhausted"}}}],
    }
    first = [{"role": "user", "parts": [{"text": "sky?"}]}]
    with capture("verbose") as cap, cvdiag.request_context(test_id=_test_id()), httpx.Client() as client:
        client.post(server.url + GEMINI + "?alt=sse", json={"contents": first})
        client.post(server.url + GEMINI + "?alt=sse", json={"contents": [*first, asked, answered]})
    (start, response, *_) = _tools(cap)
    call_id = start[3]  # Gemini sends no id: cvdiag's own, the same on both lines
    assert call_id.startswith("lookup#")
    assert [start, response] == [
        ("start", "info", "lookup", call_id, None),
        ("response", "err", "lookup", call_id, "reported"),
    ]
    assert _one_of(cap, "backend.tool.call.response", 0)["error_excerpt"] == '{"error":"quota exhausted"}'
    assert _one_of(cap, "backend.llm.call.response", 0)["tool_names"] == ["lookup"]


def test_gemini_json_answer(server):
    answer = {
        "candidates": [
            {
                "content": {"role": "model", "parts": [{"functionCall": {"name": "f", "args": {}}}]},
                "finishReason": "STOP",
            }
        ]
    }
    server.plan(GEMINI_JSON, _json(answer))
    with capture("verbose") as cap, cvdiag.request_context(test_id=_test_id()), httpx.Client() as client:
        client.post(server.url + GEMINI_JSON, json={"contents": [{"role": "user", "parts": [{"text": "hi"}]}]})
    ((kind, outcome, name, call_id, error_kind),) = _tools(cap)
    assert (kind, outcome, name, call_id.split("#")[0], error_kind) == ("start", "info", "f", "f", None)


# -- a long conversation: only what is new is read ---------------------------------------


@pytest.mark.parametrize("moving_prefix", [False, True], ids=["fixed-prefix", "a-key-before-messages-changes"])
def test_a_growing_conversation_is_read_from_where_the_last_body_ended(server, moving_prefix):
    turns = 30
    answers = []
    for n in range(turns):
        call = {"id": f"call_{n}", "type": "function", "function": {"name": "step", "arguments": json.dumps({"n": n})}}
        answers.append(_json({"choices": [{"index": 0, "message": {"role": "assistant", "tool_calls": [call]}}]}))
    server.plan(CHAT, *answers)
    messages: list[dict] = [
        {"role": "system", "content": "You are a careful agent. " * 20},
        {"role": "user", "content": "go"},
    ]
    _tool_wire.asked_calls.reset()
    with capture("verbose") as cap, cvdiag.request_context(test_id=_test_id()), httpx.Client() as client:
        for n in range(turns):
            prefix = {"user": "u" * (n % 5) if moving_prefix else "u"}  # a key before the array
            body = {**prefix, "model": "m", "messages": messages, "tools": [{"type": "function"}]}
            client.post(server.url + CHAT, json=body)
            messages.append(
                {
                    "role": "assistant",
                    "tool_calls": [{"id": f"call_{n}", "type": "function", "function": {"name": "step"}}],
                }
            )
            messages.append({"role": "tool", "tool_call_id": f"call_{n}", "content": "x" * 2000})
    responses = [md["call_id"] for _, _, md in _lines(cap, "backend.tool.call.response")]
    assert responses == [f"call_{n}" for n in range(turns - 1)]  # each result once, in order
    # Everything before the last body's end was skipped, not parsed again: ~ a quadratic sum.
    assert _tool_wire.asked_calls.skipped_bytes > 2000 * (turns - 2) * (turns - 3) // 2
    assert _tool_wire.asked_calls.skipped_bodies == 0


def test_an_edited_history_is_read_afresh_and_old_results_are_not_paired_again(server):
    call = {"id": "call_same", "type": "function", "function": {"name": "again", "arguments": "{}"}}
    asks = _json({"choices": [{"index": 0, "message": {"role": "assistant", "tool_calls": [call]}}]})
    server.plan(CHAT, asks)
    history: list[dict] = [{"role": "user", "content": "loop " * 30}]
    with capture("verbose") as cap, cvdiag.request_context(test_id=_test_id()), httpx.Client() as client:
        for n in range(3):
            client.post(server.url + CHAT, json={"model": "m", "messages": history})
            history += [
                {"role": "assistant", "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "call_same", "content": f"r{n}"},
            ]
            history[0] = {"role": "user", "content": f"edited {n} " * 30}  # the framework rewrote the first message
    got = [(md["call_id"], md["result_chars"]) for _, _, md in _lines(cap, "backend.tool.call.response")]
    assert got == [("call_same", 2), ("call_same", 2)]  # r0 then r1 (r2 was never sent): each once


# -- hostile input -----------------------------------------------------------------------


def test_a_megabyte_result_is_measured_and_classified_from_its_ends(server):
    call = {"id": "call_big", "type": "function", "function": {"name": "dump", "arguments": "{}"}}
    server.plan(CHAT, _json({"choices": [{"index": 0, "message": {"role": "assistant", "tool_calls": [call]}}]}))
    huge = "Error: RuntimeError('" + "the quick brown fox " * 75_000 + "')\n Please fix your mistakes."
    with capture("verbose") as cap, cvdiag.request_context(test_id=_test_id()), httpx.Client() as client:
        client.post(server.url + CHAT, json={"model": "m", "messages": [{"role": "user", "content": "dump"}]})
        messages = [
            {"role": "assistant", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_big", "content": huge},
        ]
        response = client.post(server.url + CHAT, json={"model": "m", "messages": messages})
    assert response.status_code == 200
    md = _one(cap, "backend.tool.call.response")
    assert (md["result_chars"], md["error_kind"], len(md["error_excerpt"])) == (len(huge), "reported", 256)


def test_thousands_of_tool_calls_in_one_answer_are_counted_and_bounded(server):
    calls = [
        {"id": f"c{n}", "type": "function", "function": {"name": f"tool_{n}_" + "n" * 100, "arguments": "{}"}}
        for n in range(3000)
    ]
    server.plan(CHAT, _json({"choices": [{"index": 0, "message": {"role": "assistant", "tool_calls": calls}}]}))
    with capture("verbose") as cap, cvdiag.request_context(test_id=_test_id()), httpx.Client() as client:
        client.post(server.url + CHAT, json={"model": "m", "messages": [{"role": "user", "content": "all"}]})
    md = _one(cap, "backend.llm.call.response")
    assert md["tool_calls"] == 3000 and len(md["tool_names"]) == 8 and all(len(n) == 64 for n in md["tool_names"])
    assert len(_lines(cap, "backend.tool.call.start")) == CALLS_PER_ANSWER


def test_malformed_and_oversized_request_bodies_are_left_alone(server):
    call = {"id": "call_m", "type": "function", "function": {"name": "m", "arguments": "{}"}}
    server.plan(CHAT, _json({"choices": [{"index": 0, "message": {"role": "assistant", "tool_calls": [call]}}]}))
    before = cvdiag.stats()["internal_errors"]
    bodies = [
        b'{"model":"m","messages":[{"role":"tool","tool_call_id":"call_m","content":"x"}, {broken',
        b'{"model":"m","messages":[' + b"[" * 100_000 + b"]" * 100_000 + b"]}",
        b'{"model":"m","messages":[{"role":"tool","tool_call_id":"call_m","content":"'
        + b"z" * (NEW_BYTES_MAX + 10)
        + b'"}]}',
        b'{"model":"m","messages":"not a list","tool_call_id":"call_m"}',
        b'{"model":"m","messages":[{"role":"tool","tool_call_id":"call_m","content":"\xff\xfe"}]}',
    ]
    with capture("verbose") as cap, cvdiag.request_context(test_id=_test_id()), httpx.Client() as client:
        client.post(server.url + CHAT, json={"model": "m", "messages": []})
        statuses = [client.post(server.url + CHAT, content=body).status_code for body in bodies]
    assert statuses == [200] * len(bodies)
    assert _lines(cap, "backend.tool.call.response") == []  # the call still waits: nothing was guessed
    assert cvdiag.stats()["internal_errors"] == before
    assert cvdiag.stats()["tool_bodies_skipped"] >= 3


def test_unknown_formats_write_no_tool_lines(server):
    server.plan("/v1/embeddings", _json({"data": [], "tool_calls": [{"id": "x"}]}))
    with capture("verbose") as cap, cvdiag.request_context(test_id=_test_id()), httpx.Client() as client:
        client.post(server.url + "/v1/embeddings", json={"model": "e", "input": "x", "messages": [{"role": "tool"}]})
    assert _lines(cap, "backend.tool.call.start", "backend.tool.call.response") == []
    assert "tool_calls" not in _one(cap, "backend.llm.call.response")


def test_a_cut_answer_asks_for_nothing(server):
    server.plan(CHAT, Reply.sse("openai_chat_tools_stream.sse", cut=True))
    body = (DATA / "openai_chat_tools_stream.sse").read_bytes().replace(b"data: [DONE]\n\n", b"")
    server.plan(CHAT, Reply(pieces=[body], headers={"content-type": "text/event-stream"}, cut=True))
    with (
        capture("verbose") as cap,
        cvdiag.request_context(test_id=_test_id()),
        httpx.Client() as client,
        pytest.raises(httpx.RemoteProtocolError),
    ):
        client.post(server.url + CHAT, json={"model": "m", "stream": True, "messages": []})
    md = _one(cap, "backend.llm.call.response")
    assert (md["tool_calls"], _lines(cap, "backend.tool.call.start")) == (None, [])


# -- pairing rules, on the memory itself -------------------------------------------------


def test_a_repeated_call_id_is_answered_by_its_newest_result():
    memory = _tool_wire.AskedCalls()
    memory.asked("t", [_tool_wire.Asked("call_1", "again")], 0)
    old = {"type": "function_call_output", "call_id": "call_1", "output": "old"}
    new = {"type": "function_call_output", "call_id": "call_1", "output": "the newest"}
    call = {"type": "function_call", "call_id": "call_1", "name": "again", "arguments": "{}"}
    body = json.dumps({"input": [{"role": "user", "content": "go"}, call, old, call, new]}).encode()
    (line,) = memory.request("t", "responses", body).results
    assert (line[0]["call_id"], line[0]["result_chars"], memory.unpaired) == ("call_1", len("the newest"), 1)


def test_gemini_calls_of_one_name_pair_in_order():
    memory = _tool_wire.AskedCalls()
    first, second = _tool_wire.Asked(None, "lookup"), _tool_wire.Asked(None, "lookup")
    memory.asked("t", [first, second], 0)
    parts = [{"functionResponse": {"name": "lookup", "response": {"output": text}}} for text in ("a", "bbbb")]
    body = json.dumps({"contents": [{"role": "model", "parts": []}, {"role": "user", "parts": parts}]}).encode()
    lines = memory.request("t", "generate_content", body).results
    assert [(md["call_id"], md["result_chars"]) for md, _, _ in lines] == [
        (first.call_id, len('{"output":"a"}')),
        (second.call_id, len('{"output":"bbbb"}')),
    ]
    assert first.call_id != second.call_id and memory.waiting == {}


def test_streamed_calls_beyond_the_cap_are_each_counted_once(server):
    events = []
    for n in range(300):
        first = {"index": n, "id": f"c{n}", "type": "function", "function": {"name": f"t{n}", "arguments": ""}}
        events.append({"choices": [{"index": 0, "delta": {"tool_calls": [first]}}]})
        for piece in ('{"a":', "1}"):
            events.append(
                {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": n, "function": {"arguments": piece}}]}}]}
            )
    events.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    sse = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events) + b"data: [DONE]\n\n"
    server.plan(CHAT, Reply.sse(sse))
    with capture("verbose") as cap, cvdiag.request_context(test_id=_test_id()), httpx.Client() as client:
        client.post(server.url + CHAT, json={"model": "m", "stream": True, "messages": []})
    md = _one(cap, "backend.llm.call.response")
    assert (md["tool_calls"], md["tool_names"]) == (300, [f"t{n}" for n in range(8)])
    starts = _lines(cap, "backend.tool.call.start")
    assert len(starts) == CALLS_PER_ANSWER and starts[0][2]["args_hash"] == args_hash('{"a":1}')
