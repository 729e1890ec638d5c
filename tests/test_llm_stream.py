"""AnswerReader on recorded provider wire formats: whatever the chunking, the same facts."""

from __future__ import annotations

import gzip
import itertools
import json
import zlib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cvdiag.write._llm_stream import LINE_CAP, AnswerReader, error_type_of

DATA = Path(__file__).parent / "data" / "llm"

# (recording, api, output_chars, finish_reason, prompt_tokens, completion_tokens, chunks)
RECORDED = [
    ("openai_chat_stream.sse", "chat.completions", 24, "stop", 19, 7, 7),
    ("openai_chat_tools_stream.sse", "chat.completions", 16, "tool_calls", None, None, 5),
    ("openai_responses_stream.sse", "responses", 8, "completed", 11, 3, 9),
    ("anthropic_messages_stream.sse", "messages", 23, "tool_use", 25, 15, 11),
    ("gemini_stream.sse", "generate_content", 27, "STOP", 8, 6, 3),
]


def _facts(reader: AnswerReader) -> tuple:
    return (
        reader.output_chars,
        reader.finish_reason,
        reader.prompt_tokens,
        reader.completion_tokens,
        reader.chunks,
        reader.complete,
        reader.error_type,
    )


def _read(api: str, pieces: list[bytes], *, event_stream: bool = True, encoding: str | None = None) -> AnswerReader:
    reader = AnswerReader(api, event_stream=event_stream, encoding=encoding)
    for piece in pieces:
        reader.feed(piece)
    reader.end()
    return reader


def _split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({min(max(c, 0), len(data)) for c in cuts})
    edges = [0, *points, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(edges)]


@pytest.mark.parametrize(("name", "api", "chars", "finish", "prompt", "completion", "chunks"), RECORDED)
def test_recorded_stream_in_one_piece(name, api, chars, finish, prompt, completion, chunks):
    reader = _read(api, [(DATA / name).read_bytes()])
    assert _facts(reader) == (chars, finish, prompt, completion, chunks, True, None)


@pytest.mark.parametrize(("name", "api", "chars", "finish", "prompt", "completion", "chunks"), RECORDED)
def test_recorded_stream_byte_by_byte(name, api, chars, finish, prompt, completion, chunks):
    data = (DATA / name).read_bytes()
    reader = _read(api, [data[i : i + 1] for i in range(len(data))])
    assert _facts(reader) == (chars, finish, prompt, completion, chunks, True, None)


def test_a_data_line_split_inside_its_json_and_its_prefix_still_counts():
    data = (DATA / "openai_chat_stream.sse").read_bytes()
    hello = data.index(b'"Hello"')
    second_data = data.index(b"data:", 10)
    pieces = _split(data, [second_data + 2, hello + 3, hello + 4])  # "da|ta:" and "He|l|lo"
    assert _facts(_read("chat.completions", pieces))[:5] == (24, "stop", 19, 7, 7)


def test_keep_alive_comments_and_crlf_line_ends_are_ignored():
    data = (DATA / "anthropic_messages_stream.sse").read_bytes().replace(b"\n", b"\r\n")
    data = b": ping\r\n\r\n" + data.replace(b"event: ping", b": keep-alive\r\nevent: ping")
    assert _facts(_read("messages", [data]))[:6] == (23, "tool_use", 25, 15, 11, True)


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "raw-deflate"])
def test_compressed_stream_is_read_in_pieces(encoding):
    data = (DATA / "openai_chat_stream.sse").read_bytes()
    if encoding == "gzip":
        packed = gzip.compress(data)
    else:
        wbits = -zlib.MAX_WBITS if encoding == "raw-deflate" else zlib.MAX_WBITS
        packer = zlib.compressobj(wbits=wbits)
        packed = packer.compress(data) + packer.flush()
    pieces = [packed[i : i + 7] for i in range(0, len(packed), 7)]
    reader = _read("chat.completions", pieces, encoding="deflate" if encoding != "gzip" else "gzip")
    assert _facts(reader)[:6] == (24, "stop", 19, 7, 7, True)


def test_unknown_encoding_reads_nothing_and_claims_nothing():
    reader = _read("chat.completions", [b"\x8b\x00garbage"], encoding="br")
    assert not reader.readable and reader.output_chars == 0 and reader.finish_reason is None


def test_corrupt_gzip_turns_unreadable_instead_of_raising():
    reader = _read("chat.completions", [b"not gzip at all"], encoding="gzip")
    assert not reader.readable


def test_stream_without_terminal_event_is_not_complete():
    data = (DATA / "openai_responses_stream.sse").read_bytes()
    cut = data.index(b"event: response.output_text.done")
    reader = _read("responses", [data[:cut]])
    assert reader.output_chars == 8 and not reader.complete


def test_chat_stream_cut_before_finish_is_not_complete():
    data = (DATA / "openai_chat_stream.sse").read_bytes()
    reader = _read("chat.completions", [data[: data.index(b'"finish_reason":"stop"')]])
    assert not reader.complete and reader.output_chars == 24


def test_responses_incomplete_names_its_reason():
    event = (
        b"event: response.incomplete\n"
        b'data: {"type":"response.incomplete","response":{"status":"incomplete",'
        b'"incomplete_details":{"reason":"max_output_tokens"},"usage":{"input_tokens":5,"output_tokens":64}}}\n\n'
    )
    reader = _read("responses", [event])
    assert (reader.finish_reason, reader.completion_tokens, reader.complete) == ("max_output_tokens", 64, True)


@pytest.mark.parametrize(
    ("api", "stream", "error_type"),
    [
        (
            "messages",
            b'event: message_start\ndata: {"type":"message_start","message":{"usage":{"input_tokens":3}}}\n\n'
            b'event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}\n\n',
            "overloaded_error",
        ),
        (
            "chat.completions",
            b'data: {"error":{"message":"The server had an error","type":"server_error","code":null}}\n\n',
            "server_error",
        ),
        (
            "responses",
            b'event: response.failed\ndata: {"type":"response.failed","response":{"status":"failed",'
            b'"error":{"code":"server_error","message":"x"}}}\n\n',
            "server_error",
        ),
    ],
)
def test_error_event_in_stream_names_the_provider_error_type(api, stream, error_type):
    assert _read(api, [stream]).error_type == error_type


def test_text_that_mentions_error_is_not_an_error():
    line = b'data: {"choices":[{"delta":{"content":"an \\"error\\": none"},"finish_reason":null}]}\n\n'
    reader = _read("chat.completions", [line, b"data: [DONE]\n\n"])
    assert reader.error_type is None and reader.output_chars == len('an "error": none')


def test_overlong_line_is_clipped_not_buffered():
    huge = b'data: {"type":"response.output_text.done","text":"' + b"x" * (LINE_CAP * 4) + b'"}'
    reader = AnswerReader("responses", event_stream=True)
    for i in range(0, len(huge), 4096):
        reader.feed(huge[i : i + 4096])
        assert len(reader._tail) <= LINE_CAP + 1
    reader.feed(b"\n\n")
    reader.end()
    assert reader.clipped_lines > 0 and reader.chunks == 1


# -- JSON (non-streamed) bodies --------------------------------------------------------

JSON_BODIES = [
    (
        "chat.completions",
        {
            "choices": [
                {
                    "message": {
                        "content": "Hi!",
                        "tool_calls": [{"function": {"name": "f", "arguments": '{"a":1}'}}],
                    },
                    "finish_reason": "tool_calls",
                }
            ],
            "usage": {"prompt_tokens": 9, "completion_tokens": 4},
        },
        (10, "tool_calls", 9, 4),
    ),
    (
        "responses",
        {
            "status": "incomplete",
            "incomplete_details": {"reason": "max_output_tokens"},
            "output": [
                {"type": "message", "content": [{"type": "output_text", "text": "Hello"}]},
                {"type": "function_call", "arguments": "{}"},
            ],
            "usage": {"input_tokens": 3, "output_tokens": 7},
        },
        (7, "max_output_tokens", 3, 7),
    ),
    (
        "messages",
        {
            "content": [{"type": "text", "text": "Hey"}, {"type": "tool_use", "input": {"q": 1}}],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 12, "output_tokens": 5},
        },
        (10, "end_turn", 12, 5),
    ),
    (
        "generate_content",
        [
            {"candidates": [{"content": {"parts": [{"text": "ab"}]}}]},
            {
                "candidates": [{"content": {"parts": [{"text": "c"}]}, "finishReason": "MAX_TOKENS"}],
                "usageMetadata": {"promptTokenCount": 2, "candidatesTokenCount": 3},
            },
        ],
        (3, "MAX_TOKENS", 2, 3),
    ),
    ("embeddings", {"data": [{"embedding": [0.1]}], "usage": {"prompt_tokens": 5}}, (None, None, 5, None)),
]


@pytest.mark.parametrize(("api", "body", "expected"), JSON_BODIES)
def test_json_body_facts(api, body, expected):
    raw = json.dumps(body, indent=2).encode()
    reader = _read(api, [raw[i : i + 5] for i in range(0, len(raw), 5)], event_stream=False)
    assert (reader.output_chars, reader.finish_reason, reader.prompt_tokens, reader.completion_tokens) == expected
    assert reader.complete


@pytest.mark.parametrize(
    ("body", "error_type"),
    [
        ({"error": {"message": "Slow", "type": "requests", "code": "rate_limit_exceeded"}}, "rate_limit_exceeded"),
        ({"error": {"message": "boom", "type": "server_error", "code": None}}, "server_error"),
        ({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}, "overloaded_error"),
        ({"error": {"code": 429, "message": "quota", "status": "RESOURCE_EXHAUSTED"}}, "RESOURCE_EXHAUSTED"),
        ([{"error": {"code": 500, "status": "INTERNAL"}}], "INTERNAL"),
        ({"error": "x" * 1000}, "x" * 512),  # bounded here; the capture scrubs it, then cuts to 64
        ({"choices": []}, None),
    ],
)
def test_error_type_of_each_provider(body, error_type):
    assert error_type_of(body) == error_type
    assert _read("chat.completions", [json.dumps(body).encode()], event_stream=False).error_type == error_type


def test_json_body_over_the_cap_is_unknown_not_wrong():
    reader = AnswerReader("chat.completions", event_stream=False)
    block = b" " * 65536
    for _ in range(20):
        reader.feed(block)
    reader.end()
    assert not reader.readable and reader.output_chars is None and reader._json is None


# -- property: any chunking gives the facts of one chunk ------------------------------


@settings(max_examples=150, deadline=None)
@given(
    recording=st.sampled_from(RECORDED),
    cuts=st.lists(st.integers(min_value=0, max_value=2200), max_size=40),
    compressed=st.booleans(),
)
def test_any_chunking_reads_the_same_as_one_chunk(recording, cuts, compressed):
    name, api = recording[0], recording[1]
    data = (DATA / name).read_bytes()
    encoding = None
    if compressed:
        data, encoding = gzip.compress(data), "gzip"
    whole = _facts(_read(api, [data], encoding=encoding))
    assert _facts(_read(api, _split(data, cuts), encoding=encoding)) == whole


@settings(max_examples=200, deadline=None)
@given(junk=st.binary(max_size=3000), cuts=st.lists(st.integers(min_value=0, max_value=3000), max_size=20))
def test_arbitrary_bytes_never_raise_and_stay_bounded(junk, cuts):
    for api in ("chat.completions", "messages", "responses", "generate_content"):
        reader = AnswerReader(api, event_stream=True)
        for piece in _split(junk, cuts):
            reader.feed(piece)
            assert len(reader._tail) <= LINE_CAP + 1
        reader.end()
        assert reader.output_chars is not None and reader.output_chars >= 0


def test_long_stream_read_in_batches_counts_every_event():
    event = b'data: {"choices":[{"index":0,"delta":{"content":"ab\\n"},"finish_reason":null}]}\n\n'
    data = event * 1000 + b'data: {"choices":[{"delta":{},"finish_reason":"length"}]}\n\ndata: [DONE]\n\n'
    for size in (1, 97, 4096, len(data)):
        reader = _read("chat.completions", [data[i : i + size] for i in range(0, len(data), size)])
        assert _facts(reader) == (3000, "length", None, None, 1002, True, None)
    reader = AnswerReader("chat.completions", event_stream=True)
    for i in range(0, len(data), 512):
        reader.feed(data[i : i + 512])
        assert reader._pending_size < (1 << 14) + 512  # batches stay bounded
