"""AnswerReader (byte scans, batches) against a straightforward reader (``json.loads`` of every
event) on real recorded streams of each provider, in any chunking and with any line ends."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from cvdiag.write._llm_stream import AnswerReader, error_type_of

DATA = Path(__file__).parent / "data" / "llm"


def _chat(event: dict, text: str) -> None:
    event["choices"][0]["delta"]["content"] = text


def _responses(event: dict, text: str) -> None:
    event["delta"] = text


def _messages(event: dict, text: str) -> None:
    event["delta"]["text"] = text


def _gemini(event: dict, text: str) -> None:
    event["candidates"][0]["content"]["parts"][0]["text"] = text


# (recording, api, the output event's marker, how to put new text in it or None, JSON separators)
RECORDINGS = [
    ("openai_chat_stream.sse", "chat.completions", b'"content":"Hello"', _chat, (",", ":")),
    ("openai_chat_tools_stream.sse", "chat.completions", b'"arguments":"{', None, None),
    ("openai_responses_stream.sse", "responses", b'"delta":"Hi"', _responses, (",", ":")),
    ("openai_responses_tools_stream.sse", "responses", b'"delta":"{', None, None),
    ("anthropic_messages_stream.sse", "messages", b'"text":"Hello"', _messages, (",", ":")),
    ("gemini_stream.sse", "generate_content", b'"text": "The sky"', _gemini, (",", ": ")),
]


# -- the reference: every event parsed whole ------------------------------------------


def _events(body: bytes) -> list[tuple[int, Any]]:
    """(offset where the line is known to have ended: its first line-end byte, parsed JSON
    or the raw text) of every ``data:`` line."""
    found = []
    for match in re.finditer(rb"([^\r\n]*)(?:\r\n|\r|\n)", body):
        line = match.group(1)
        if line.startswith(b"data:"):
            raw = line[5:].strip()
            try:
                found.append((match.end(1) + 1, json.loads(raw)))
            except ValueError:
                found.append((match.end(1) + 1, raw.decode()))
    return found


def _dumped(value: Any) -> int:
    return len(value) if isinstance(value, str) else len(json.dumps(value, separators=(",", ":")))


def _out_chat(event: dict, facts: dict) -> int:
    chars = 0
    for choice in event.get("choices") or []:
        delta = choice.get("delta") or {}
        chars += len(delta.get("content") or "") + len(delta.get("refusal") or "")
        for call in delta.get("tool_calls") or []:
            chars += len((call.get("function") or {}).get("arguments") or "")
        if choice.get("finish_reason"):
            facts["finish_reason"] = choice["finish_reason"]
    usage = event.get("usage") or {}
    facts["prompt_tokens"] = usage.get("prompt_tokens", facts["prompt_tokens"])
    facts["completion_tokens"] = usage.get("completion_tokens", facts["completion_tokens"])
    return chars


def _out_responses(event: dict, facts: dict) -> int:
    kind = event.get("type", "")
    if kind in ("response.completed", "response.incomplete", "response.failed"):
        facts["terminal"] = True
        response = event.get("response") or {}
        facts["finish_reason"] = kind.split(".")[1]
        if kind == "response.incomplete":
            facts["finish_reason"] = (response.get("incomplete_details") or {}).get("reason", "incomplete")
        usage = response.get("usage") or {}
        facts["prompt_tokens"] = usage.get("input_tokens", facts["prompt_tokens"])
        facts["completion_tokens"] = usage.get("output_tokens", facts["completion_tokens"])
    return len(event["delta"]) if isinstance(event.get("delta"), str) else 0


def _out_messages(event: dict, facts: dict) -> int:
    kind = event.get("type")
    for usage in ((event.get("message") or {}).get("usage"), event.get("usage")):
        if usage:
            facts["prompt_tokens"] = usage.get("input_tokens", facts["prompt_tokens"])
            facts["completion_tokens"] = usage.get("output_tokens", facts["completion_tokens"])
    if kind == "message_stop":
        facts["terminal"] = True
    delta = event.get("delta") or {}
    if delta.get("stop_reason"):
        facts["finish_reason"] = delta["stop_reason"]
    block = event.get("content_block") or {}
    return sum(len(part.get(key) or "") for part in (delta, block) for key in ("text", "partial_json", "thinking"))


def _out_gemini(event: dict, facts: dict) -> int:
    chars = 0
    for candidate in event.get("candidates") or []:
        for part in (candidate.get("content") or {}).get("parts") or []:
            chars += len(part.get("text") or "")
            if "functionCall" in part:
                chars += _dumped(part["functionCall"].get("args") or {})
        if candidate.get("finishReason"):
            facts["finish_reason"] = candidate["finishReason"]
            facts["terminal"] = True
    usage = event.get("usageMetadata") or {}
    facts["prompt_tokens"] = usage.get("promptTokenCount", facts["prompt_tokens"])
    facts["completion_tokens"] = usage.get("candidatesTokenCount", facts["completion_tokens"])
    return chars


_OUTPUT = {
    "chat.completions": _out_chat,
    "responses": _out_responses,
    "messages": _out_messages,
    "generate_content": _out_gemini,
}


def reference(api: str, body: bytes) -> tuple[dict, int | None]:
    """The facts of ``body`` and the offset where its first output ends (the first token)."""
    facts: dict[str, Any] = dict(
        output_chars=0, finish_reason=None, prompt_tokens=None, completion_tokens=None, chunks=0, terminal=False
    )
    facts["error_type"] = None
    first = None
    for end, event in _events(body):
        facts["chunks"] += 1
        if event == "[DONE]":
            facts["terminal"] = True
            continue
        if not isinstance(event, dict):
            continue
        if facts["error_type"] is None:
            facts["error_type"] = error_type_of(event)
        chars = _OUTPUT[api](event, facts)
        facts["output_chars"] += chars
        if chars and first is None:
            first = end
    complete = facts.pop("terminal") or (facts["finish_reason"] is not None and api != "responses")
    facts["complete"] = complete
    return facts, first


def fast(api: str, pieces: list[bytes]) -> tuple[dict, int | None]:
    """AnswerReader's facts, fed ``pieces``, and the offset where the piece that first
    showed output ends (where the capture takes the first-token time)."""
    reader = AnswerReader(api, event_stream=True)
    first, offset = None, 0
    for piece in pieces:
        reader.feed(piece)
        offset += len(piece)
        if first is None and reader.output_chars:
            first = offset
    reader.end()
    facts = {
        "output_chars": reader.output_chars,
        "finish_reason": reader.finish_reason,
        "prompt_tokens": reader.prompt_tokens,
        "completion_tokens": reader.completion_tokens,
        "chunks": reader.chunks,
        "error_type": reader.error_type,
        "complete": reader.complete,
    }
    return facts, first


# -- streams: recordings, their output event repeated with any text ------------------


def stream(recording: tuple, texts: list[str], ascii_only: bool) -> bytes:
    name, _api, marker, put, separators = recording
    events = [e for e in (DATA / name).read_bytes().split(b"\n\n") if e.strip()]
    at = next(i for i, e in enumerate(events) if marker in e)
    repeated = []
    for text in texts:
        if put is None:
            repeated.append(events[at])
            continue
        head, _, data = events[at].rpartition(b"data: ")
        event = json.loads(data)
        put(event, text)
        repeated.append(head + b"data: " + json.dumps(event, separators=separators, ensure_ascii=ascii_only).encode())
    return b"".join(e + b"\n\n" for e in events[:at] + repeated + events[at + 1 :])


def _ends(body: bytes, ending: bytes) -> bytes:
    return body.replace(b"\n", ending)


def _split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({min(max(c, 0), len(data)) for c in cuts})
    return [data[a:b] for a, b in itertools.pairwise([0, *points, len(data)])]


_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)


@settings(max_examples=300, deadline=None)
@given(
    recording=st.sampled_from(RECORDINGS),
    texts=st.lists(_TEXT, min_size=1, max_size=150),
    ascii_only=st.booleans(),
    ending=st.sampled_from([b"\n", b"\r\n", b"\r"]),
    cuts=st.lists(st.integers(min_value=0, max_value=40_000), max_size=60),
)
def test_fast_reader_and_reference_read_the_same_facts(recording, texts, ascii_only, ending, cuts):
    api = recording[1]
    body = _ends(stream(recording, texts, ascii_only), ending)
    expected, first = reference(api, body)
    got, got_first = fast(api, _split(body, cuts))
    assert got == expected
    # The first output is seen in the piece that completes its line: not before, not later.
    assert first is not None
    assert got_first == min(end for end in itertools.accumulate(map(len, _split(body, cuts))) if end >= first)


def test_the_reference_reads_the_recordings_as_the_recorded_facts_say():
    # The yardstick itself checked against the facts test_llm_stream.py pins per recording.
    assert reference("chat.completions", (DATA / "openai_chat_stream.sse").read_bytes())[0] == dict(
        output_chars=24, finish_reason="stop", prompt_tokens=19, completion_tokens=7, chunks=7, error_type=None,
        complete=True,
    )  # fmt: skip
    assert reference("messages", (DATA / "anthropic_messages_stream.sse").read_bytes())[0]["output_chars"] == 23
    assert reference("generate_content", (DATA / "gemini_stream.sse").read_bytes())[0]["output_chars"] == 27
