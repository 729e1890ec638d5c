"""AWS Bedrock Runtime through boto3 (botocore over urllib3) after ``cvdiag.instrument()``,
against a local stand-in speaking Bedrock's routes and event-stream; and the
event-stream decoder against frames botocore's own decoder accepts."""

from __future__ import annotations

import json
import struct

import boto3
import botocore.config
import botocore.eventstream
import botocore.exceptions
import pytest
import urllib3.exceptions
from bedrock_stand_in import HAPPY, event, exception, frame, running
from emitkit import capture
from hypothesis import given, settings
from hypothesis import strategies as st

import cvdiag
from cvdiag.read.validate import problems
from cvdiag.testing import reset
from cvdiag.write._eventstream import FRAME_MAX, FrameDecoder

MODEL = "anthropic.claude-3-haiku-20240307-v1:0"


# -- the decoder -----------------------------------------------------------------------

_HEADERS = st.dictionaries(
    st.text(alphabet="abcdefghijklmnop:-", min_size=1, max_size=20), st.text(max_size=30), max_size=4
)


@settings(max_examples=200, deadline=None)
@given(
    frames=st.lists(st.tuples(_HEADERS, st.binary(max_size=300)), min_size=1, max_size=6),
    cuts=st.lists(st.integers(1, 97), max_size=30),
)
def test_frames_in_any_pieces_decode_as_botocore_decodes_them(frames, cuts):
    stream = b"".join(frame(h, p) for h, p in frames)
    reference = botocore.eventstream.EventStreamBuffer()
    reference.add_data(stream)
    expected = [(m.headers, m.payload) for m in reference]
    decoder, got, at = FrameDecoder(), [], 0
    for cut in cuts:
        got += decoder.feed(stream[at : at + cut])
        at += cut
    got += decoder.feed(stream[at:])
    assert got == expected == [(h, p) for h, p in frames]
    assert not decoder.broken and decoder.idle


def test_a_corrupt_frame_breaks_the_stream_and_a_huge_one_is_skipped_unbuffered():
    good = event("messageStop", {"stopReason": "end_turn"})
    bad = bytearray(good)
    bad[-1] ^= 0xFF
    decoder = FrameDecoder()
    assert decoder.feed(good) and decoder.feed(bytes(bad)) == [] and decoder.broken
    assert decoder.feed(good) == []  # unreadable from there on: unknown, never wrong

    huge = frame({":event-type": "chunk"}, b"x" * (FRAME_MAX + 10))
    decoder = FrameDecoder()
    for i in range(0, len(huge), 4096):
        assert decoder.feed(huge[i : i + 4096]) == []
        assert len(decoder._buffer) <= 4096 + 12
    assert decoder.skipped == 1 and decoder.feed(good) == [
        (
            {":event-type": "messageStop", ":content-type": "application/json", ":message-type": "event"},
            b'{"stopReason": "end_turn"}',
        )
    ]
    assert FrameDecoder().feed(struct.pack(">III", 10, 0, 0)) == []  # a prelude that lies


# -- boto3 against the stand-in --------------------------------------------------------


@pytest.fixture(scope="module")
def stand_in():
    with running() as server:
        yield server


@pytest.fixture(autouse=True)
def instrumented():
    cvdiag.instrument(heartbeat_s=10.0)
    reset()
    yield
    cvdiag.uninstrument()


def _client(stand_in, attempts: int = 3):
    config = botocore.config.Config(retries={"total_max_attempts": attempts, "mode": "standard"}, read_timeout=5)
    return boto3.client(
        "bedrock-runtime",
        region_name="us-east-1",
        endpoint_url=stand_in.url,
        aws_access_key_id="AKIDEXAMPLE",
        aws_secret_access_key="not-a-secret",
        config=config,
    )


def _messages(text: str) -> list[dict]:
    return [{"role": "user", "content": [{"text": text}]}]


def _calls(cap) -> list[dict]:
    for env in cap.all():
        assert problems(env) == [], (env, problems(env))
    return [e for e in cap.events() if e["boundary"] == "backend.llm.call.response"]


FACTS = (
    "outcome",
    "provider",
    "model",
    "stream",
    "http_status",
    "finish_reason",
    "prompt_tokens",
    "completion_tokens",
    "output_chars",
    "client",
)


def _facts(env: dict) -> tuple:
    return (env["outcome"], *(env["metadata"].get(k) for k in FACTS[1:]))


def test_converse_and_converse_stream(stand_in):
    client = _client(stand_in)
    with capture("verbose") as cap, cvdiag.request_context(test_id="t-bedrock"):
        answer = client.converse(modelId=MODEL, messages=_messages("where is my parcel?"))
        streamed = client.converse_stream(modelId=MODEL, messages=_messages("where is my parcel?"))
        text = "".join(e["contentBlockDelta"]["delta"]["text"] for e in streamed["stream"] if "contentBlockDelta" in e)
    assert answer["output"]["message"]["content"][0]["text"] == HAPPY == text
    plain, stream = _calls(cap)
    assert _facts(plain) == ("ok", "aws-bedrock", MODEL, False, 200, "end_turn", 21, 13, len(HAPPY), "urllib3")
    assert _facts(stream) == ("ok", "aws-bedrock", MODEL, True, 200, "end_turn", 21, 13, len(HAPPY), "urllib3")
    assert plain["metadata"]["request_id"] == "req-bedrock-1"
    assert stream["metadata"]["chunks"] == 10 and stream["metadata"]["ttft_ms"] is not None
    assert {e["test_id"] for e in cap.events()} == {"t-bedrock"}


def test_invoke_model_and_its_response_stream(stand_in):
    client = _client(stand_in)
    body = json.dumps(
        {"anthropic_version": "bedrock-2023-05-31", "max_tokens": 100, "messages": _messages("where is my parcel?")}
    )
    with capture("verbose") as cap:
        answer = json.loads(client.invoke_model(modelId=MODEL, body=body)["body"].read())
        streamed = client.invoke_model_with_response_stream(modelId=MODEL, body=body)
        chunks = [json.loads(e["chunk"]["bytes"]) for e in streamed["body"]]
    assert answer["content"][0]["text"] == HAPPY
    assert "".join(c["delta"].get("text", "") for c in chunks if c["type"] == "content_block_delta") == HAPPY
    plain, stream = _calls(cap)
    assert _facts(plain) == ("ok", "aws-bedrock", MODEL, False, 200, "end_turn", 21, 13, len(HAPPY), "urllib3")
    assert _facts(stream) == ("ok", "aws-bedrock", MODEL, True, 200, "end_turn", 21, 13, len(HAPPY), "urllib3")


def test_throttling_is_retried_by_botocore_and_each_attempt_is_a_call(stand_in):
    client = _client(stand_in, attempts=2)
    with capture("verbose") as cap, pytest.raises(client.exceptions.ThrottlingException):
        client.converse(modelId=MODEL, messages=_messages("too many requests"))
    got = [
        (c["outcome"], *(c["metadata"][k] for k in ("attempt", "http_status", "error_type", "retry_after_ms")))
        for c in _calls(cap)
    ]
    assert got == [("err", 0, 429, "ThrottlingException", 1000), ("err", 1, 429, "ThrottlingException", 1000)]


def test_validation_error_and_an_exception_frame_mid_stream(stand_in):
    client = _client(stand_in)
    with capture("verbose") as cap:
        with pytest.raises(client.exceptions.ValidationException):
            client.converse(modelId=MODEL, messages=_messages("an invalid request"))
        streamed = client.converse_stream(modelId=MODEL, messages=_messages("throttled mid-stream"))
        with pytest.raises(botocore.exceptions.EventStreamError, match="throttlingException"):
            list(streamed["stream"])
    invalid, mid_stream = _calls(cap)
    assert (invalid["outcome"], invalid["metadata"]["http_status"], invalid["metadata"]["error_type"]) == (
        "err",
        400,
        "ValidationException",
    )
    assert (mid_stream["outcome"], mid_stream["metadata"]["error_class"], mid_stream["metadata"]["error_type"]) == (
        "err",
        "ProviderError",
        "throttlingException",
    )


def test_a_stream_cut_mid_frame_is_err_and_one_given_up_is_timeout(stand_in):
    client = _client(stand_in, attempts=1)
    with capture("verbose") as cap:
        streamed = client.converse_stream(modelId=MODEL, messages=_messages("the provider cuts me off"))
        with pytest.raises(urllib3.exceptions.ProtocolError):  # botocore's EventStream lets it through
            list(streamed["stream"])
        streamed = client.converse_stream(modelId=MODEL, messages=_messages("tell me a very long tale"))
        for e in streamed["stream"]:
            if "contentBlockDelta" in e:
                break
        streamed["stream"].close()
    cut, given_up = _calls(cap)
    assert (cut["outcome"], cut["metadata"]["error_class"]) == ("err", "ProtocolError")
    assert cut["metadata"]["output_chars"] > 0 and cut["metadata"]["finish_reason"] is None
    assert (given_up["outcome"], given_up["metadata"]["error_class"]) == ("timeout", "CancelledError")


def test_botocore_false_leaves_bedrock_unread(stand_in):
    cvdiag.instrument(botocore=False)
    with capture("verbose") as cap:
        _client(stand_in).converse(modelId=MODEL, messages=_messages("where is my parcel?"))
    assert _calls(cap) == []


def test_exception_frames_name_their_type():
    decoder = FrameDecoder()
    ((headers, payload),) = decoder.feed(exception("modelStreamErrorException", "oops"))
    assert headers[":exception-type"] == "modelStreamErrorException" and json.loads(payload) == {"message": "oops"}
