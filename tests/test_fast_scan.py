"""The real emitter's lines take the fast scan of ``tests``, and a line it refuses is read
by the general parser to the very same envelope.

The fast scan matches the emitter's layout (keys in schema order, compact JSON, the
``CVDIAG `` prefix) with a regex built from the schema. Should the emitter, the schema
or the scan drift apart, every line would quietly go the slow way: the rows would stay
right and only the speed would drop, so these tests count the slow lines.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from emitkit import capture
from hypothesis import example, given, settings
from hypothesis import strategies as st
from logkit import docker_line
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route
from starlette.testclient import TestClient

import cvdiag
from cvdiag.contract.schema import JAVA_PREFIX, PREFIX
from cvdiag.read.fold import Fold
from cvdiag.read.parsing import ENVELOPE, parse_line

TID = "d4-agno-1234"


async def _json(request: Request) -> JSONResponse:
    return JSONResponse({"ok": True}, headers={"via": "1.1 edge", "server": "uvicorn", "cf-ray": "8f1c-AMS"})


async def _stream(request: Request) -> StreamingResponse:
    async def body() -> Any:
        async with cvdiag.agent_scope("streamer"), cvdiag.llm_call("openai", "gpt-4o-mini", heartbeat_s=60):
            for i in range(3):
                yield f"event: token\ndata: {i} é 😀\n\n".encode()

    return StreamingResponse(body(), media_type="text/event-stream")


async def _raise(request: Request) -> JSONResponse:
    raise ValueError("bad input")


def _emitted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[bytes, bytes]:
    """(stdout, file sink) of a middleware and direct emits at the debug tier: envelopes
    of every tier, edge headers, an error, a scrubbed message, an accounting line."""
    out, sink = tmp_path / "stdout.log", tmp_path / "sink.ndjson"
    app = Starlette(routes=[Route("/json", _json), Route("/stream", _stream), Route("/raise", _raise)])
    app.add_middleware(cvdiag.CvdiagMiddleware, slug="svc")
    with out.open("w") as stdout:
        monkeypatch.setattr(sys, "stdout", stdout)
        with capture("debug", stdout=True, file=str(sink)):
            with TestClient(app, raise_server_exceptions=False) as client:
                for path in ("/json", "/stream", "/raise"):
                    client.get(path, headers={"x-test-id": TID})
            with cvdiag.request_context(test_id="direct-1", slug="agno"):
                cvdiag.emit("backend.agent.enter", {"agent_name": "a", "model_id": "m"})  # default tier
                cvdiag.emit("backend.llm.call.start", {"provider": "openai", "model": "m"})  # verbose
                cvdiag.emit("backend.sse.event", {"event_type": "token", "sequence_num": 1})  # debug
                cvdiag.emit("backend.agent.exit", {"terminal_outcome": "ok", "surprise": 1}, outcome="err")
            cvdiag.flush()
    return out.read_bytes(), sink.read_bytes()


def _fold(log: bytes, evidence_cls: Any = None) -> Fold:
    folder = Fold(evidence_cls)
    folder.buffer(log, "test.log")
    folder.finish()
    return folder


class Recorder:
    """Evidence that keeps every envelope it is given whole (no head-only shortcut)."""

    def __init__(self, test_id: str) -> None:
        self.envelopes: list[dict[str, Any]] = []

    def add(self, env: dict[str, Any]) -> None:
        self.envelopes.append(env)


@pytest.fixture
def emitted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[bytes, bytes]:
    return _emitted(tmp_path, monkeypatch)


def test_the_real_emitters_lines_all_take_the_fast_path(emitted: tuple[bytes, bytes]) -> None:
    stdout, bare = emitted
    lines = stdout.splitlines()
    envelopes = [orjson.loads(line.removeprefix(PREFIX.encode())) for line in lines]
    assert all(line.startswith(PREFIX.encode()) for line in lines)
    assert {e["boundary"] for e in envelopes} >= {
        "backend.request.ingress",  # verbose
        "backend.sse.event",  # debug
        "backend.response.complete",  # default
        "backend.error.caught",
        "backend.llm.call.response",
        "cvdiag.metadata_dropped",  # accounting
    }
    assert any(e["edge_headers"]["via"] == "1.1 edge" for e in envelopes)
    java = b"".join(JAVA_PREFIX.encode() + line + b"\n" for line in bare.splitlines())
    for log in (stdout, bare, java, b"noise before\n" + stdout + b"noise after\n"):
        for evidence_cls in (None, Recorder):
            folder = _fold(log, evidence_cls)
            assert folder.parsed == 0  # not one line read by the general parser
            assert folder.tally.count == 0
            assert {tid.decode(): agg.events for tid, agg in folder.aggs.items()} == {
                tid: sum(e["test_id"] == tid for e in envelopes) for tid in (TID, "direct-1")
            }
            if evidence_cls is Recorder:
                assert [e for ev in folder.evidence.values() for e in ev.envelopes] == sorted(
                    envelopes, key=lambda e: e["test_id"] != TID
                )


def _variants(line: bytes) -> dict[str, bytes]:
    """The same envelope in shapes the fast path leaves to the general parser."""
    env = orjson.loads(line)
    shuffled = dict(reversed(list(env.items())))
    escaped = line.replace(env["test_id"].encode(), env["test_id"].replace("d", "\\u0064").encode(), 1)
    return {
        "keys in another order": PREFIX.encode() + orjson.dumps(shuffled),
        "spaces after separators": PREFIX.encode() + json.dumps(env, ensure_ascii=False).encode(),
        "an escape in the test id": PREFIX.encode() + escaped,
        "docker json-file": docker_line(PREFIX + line.decode(), 0.0).encode(),
        "a trailing colour code": PREFIX.encode() + line + b"\x1b[0m",
        "a cut line": PREFIX.encode() + line[:-1],
    }


def test_a_line_the_fast_path_refuses_reads_to_the_same_envelope(emitted: tuple[bytes, bytes]) -> None:
    _, bare = emitted
    line = next(x for x in bare.splitlines() if b'"backend.response.complete"' in x)
    want = _fold(PREFIX.encode() + line, Recorder)
    assert want.parsed == 0
    (want_ev,) = want.evidence.values()
    for shape, variant in _variants(line).items():
        got = _fold(b"noise\n" + variant + b"\nmore noise\n", Recorder)
        assert got.parsed == 1, shape  # the general parser read it ...
        if shape == "a cut line":  # ... and counts what is not an envelope
            assert (got.aggs, got.tally.count, got.tally.first) == ({}, 1, "test.log:2: cut or not JSON")
            continue
        assert parse_line(variant) == (ENVELOPE, orjson.loads(line)), shape
        assert [ev.envelopes for ev in got.evidence.values()] == [want_ev.envelopes], shape
        assert {t: a.row(t) for t, a in got.aggs.items()} == {t: a.row(t) for t, a in want.aggs.items()}, shape


_OLD_TS_IN_LINE = re.compile(rb'\\?"ts\\?":\\?"(\d{4}-\d\d-\d\dT[0-9:.]+(?:Z|[+-]00:00))')
_TS_PIECES = [
    b'"ts":"',
    b'\\"ts\\":\\"',
    b'\\"ts":"',
    b'"ts\\":"',
    b"2026-11-21T10:00:0",
    b"1.5",
    b"Z",
    b"+00:00",
    b'"',
    b"\\",
    b"x",
    b"\n",
]


@given(st.lists(st.sampled_from(_TS_PIECES), max_size=40).map(b"".join))
@example(b'its":"2026-11-21T10:00:01.5Z "ts":"2026-11-21T10:00:02Z')
@example(b'\\"ts\\":\\"2026-11-21T10:00:01+00:00\\" \\"ts":"2026-11-21T10:00:03.25Z')
@settings(max_examples=500, deadline=None)
def test_the_end_of_a_log_finds_the_times_the_slower_pattern_found(text: bytes) -> None:
    """``tail_ts`` looks for times with a pattern that starts on a literal (ten times
    faster in ``re``); it must find the same times as the pattern with an optional
    backslash first, in plain and escaped JSON alike."""
    from cvdiag.read.scan import _TS_IN_LINE, tail_ts

    assert [m.group(1) for m in _TS_IN_LINE.finditer(text)] == [m.group(1) for m in _OLD_TS_IN_LINE.finditer(text)]
    escaped_later = b'{"ts":"2026-11-21T10:00:01.000Z"} \\"ts\\":\\"2026-11-21T10:00:02.500Z\\"'
    assert tail_ts(escaped_later) == 1795255202.5  # the later one, written escaped
