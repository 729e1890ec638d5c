"""Structured output through the real capture: output_schema on backend.llm.call.start when
the request asked for a schema, output_valid on the response when the answer held it."""

from __future__ import annotations

import json
import uuid

import httpx
import openai
import pytest
from emitkit import capture
from llm_server import Reply, llm_capture_on_fixture, server_fixture  # noqa: F401 (fixtures)

import cvdiag
from cvdiag.write._output_schema import ANSWER_CAP, Schema, requested

pytestmark = pytest.mark.usefixtures("llm_capture_on")

CHAT = "/v1/chat/completions"
RESPONSES = "/v1/responses"
GEMINI = "/v1beta/models/gemini-2.0-flash:generateContent"
MESSAGES = "/v1/messages"
WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "temp": {"type": "number"}},
    "required": ["city", "temp"],
}
RESPONSE_FORMAT = {"type": "json_schema", "json_schema": {"name": "weather", "schema": WEATHER, "strict": True}}


def _chat_answer(content: str) -> Reply:
    body = {"choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}]}
    return Reply.json(json.dumps(body).encode())


def _schema_keys(cap) -> tuple:
    start = next(e for e in cap.events() if e["boundary"] == "backend.llm.call.start")
    end = next(e for e in cap.events() if e["boundary"] == "backend.llm.call.response")
    return start["metadata"]["output_schema"], end["metadata"]["output_valid"]


@pytest.mark.parametrize(
    ("content", "valid"),
    [
        ('{"city": "Paris", "temp": 21}', True),
        ('```json\n{"city": "Paris", "temp": 21}\n```', True),
        ('{"city": "Paris"}', False),
        ("Sorry, I cannot answer in JSON.", False),
        ("", None),
    ],
)
def test_openai_sdk_response_format_json_schema(server, content, valid):
    server.plan(CHAT, _chat_answer(content))
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="sk-test-1")
    with capture("verbose") as cap, cvdiag.request_context(test_id=uuid.uuid4().hex):
        client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "w"}], response_format=RESPONSE_FORMAT
        )
    assert _schema_keys(cap) == (True, valid)


def test_a_request_without_a_schema_checks_nothing(server):
    server.plan(CHAT, _chat_answer('{"city": "Paris"}'))
    with capture("verbose") as cap, cvdiag.request_context(test_id=uuid.uuid4().hex), httpx.Client() as client:
        client.post(server.url + CHAT, json={"model": "m", "messages": [{"role": "user", "content": "json please"}]})
    assert _schema_keys(cap) == (False, None)


def test_streamed_chat_text_is_gathered_and_checked(server):
    pieces = ['{"city": ', '"Paris", ', '"temp": 21}']
    events = [{"choices": [{"index": 0, "delta": {"content": p}, "finish_reason": None}]} for p in pieces]
    events.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    sse = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events) + b"data: [DONE]\n\n"
    server.plan(CHAT, Reply.sse(sse))
    body = {"model": "m", "stream": True, "messages": [], "response_format": RESPONSE_FORMAT}
    with capture("verbose") as cap, cvdiag.request_context(test_id=uuid.uuid4().hex), httpx.Client() as client:
        client.post(server.url + CHAT, json=body)
    assert _schema_keys(cap) == (True, True)


@pytest.mark.parametrize(("args", "valid"), [('{"city":"Paris","temp":3}', True), ('{"city":"Paris"}', False)])
def test_a_final_result_tool_is_the_structured_answer(server, args, valid):
    """pydantic-ai asks for structured output as a ``final_result`` tool (its default output mode)."""
    call = {"id": "call_f", "type": "function", "function": {"name": "final_result", "arguments": args}}
    answer = {"choices": [{"index": 0, "message": {"role": "assistant", "tool_calls": [call]}}]}
    server.plan(CHAT, Reply.json(json.dumps(answer).encode()))
    tools = [
        {
            "type": "function",
            "function": {"name": "final_result", "description": "The final response", "parameters": WEATHER},
        }
    ]
    with capture("verbose") as cap, cvdiag.request_context(test_id=uuid.uuid4().hex), httpx.Client() as client:
        client.post(server.url + CHAT, json={"model": "m", "messages": [], "tools": tools})
    assert _schema_keys(cap) == (True, valid)


def test_responses_text_format_streamed(server):
    deltas = ['{"city":"Oslo",', '"temp":-2}']
    events = [{"type": "response.output_text.delta", "delta": d} for d in deltas]
    events.append({"type": "response.completed", "response": {"status": "completed", "output": []}})
    sse = b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)
    server.plan(RESPONSES, Reply.sse(sse))
    text = {"format": {"type": "json_schema", "name": "weather", "schema": WEATHER}}
    with capture("verbose") as cap, cvdiag.request_context(test_id=uuid.uuid4().hex), httpx.Client() as client:
        client.post(server.url + RESPONSES, json={"model": "m", "input": "w", "stream": True, "text": text})
    assert _schema_keys(cap) == (True, True)


def test_gemini_response_schema_and_anthropic_output_format(server):
    gemini = {
        "candidates": [{"content": {"role": "model", "parts": [{"text": '{"city":"Rome"}'}]}, "finishReason": "STOP"}]
    }
    server.plan(GEMINI, Reply.json(json.dumps(gemini).encode()))
    claude = {"content": [{"type": "text", "text": '{"city":"Rome","temp":30}'}], "stop_reason": "end_turn"}
    server.plan(MESSAGES, Reply.json(json.dumps(claude).encode()))
    config = {"responseMimeType": "application/json", "responseSchema": WEATHER}
    output_format = {"type": "json_schema", "schema": WEATHER}
    with capture("verbose") as cap, cvdiag.request_context(test_id=uuid.uuid4().hex), httpx.Client() as client:
        client.post(server.url + GEMINI, json={"contents": [], "generationConfig": config})
        client.post(
            server.url + MESSAGES, json={"model": "c", "max_tokens": 5, "messages": [], "output_format": output_format}
        )
    got = [
        (e["boundary"].rsplit(".", 1)[-1], e["metadata"].get("output_schema"), e["metadata"].get("output_valid"))
        for e in cap.events()
    ]
    assert got == [("start", True, None), ("response", None, False), ("start", True, None), ("response", None, True)]


def test_an_answer_over_the_cap_is_not_checked():
    schema = Schema(("city",))
    assert schema.check('{"city": "' + "x" * ANSWER_CAP + '"}', {}) is None
    assert schema.check('{"city": "x"}', {}) is True


def test_requested_is_bounded_and_never_raises():
    assert requested(b'{"response_format":{"type":"json_schema","json_schema":{"schema":{"required":') == Schema(())
    assert requested(b"\xff" * 10) is None
    assert requested(b'{"messages":[],"response_format":{"type":"json_object"}}') == Schema()
