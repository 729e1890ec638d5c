"""The emission path: envelope shape, tiers, switches, metadata rules, caps, queue, sinks."""

from __future__ import annotations

import json
import logging
import re
import threading

import orjson
import pytest
from emitkit import capture

import cvdiag
from cvdiag.contract.ids import new_test_id
from cvdiag.contract.schema import EDGE_HEADERS, ENVELOPE_FIELDS, SPAN_ID_RE, UUID7_RE, Tier
from cvdiag.testing import reset
from cvdiag.write import config
from cvdiag.write.emitter import CvdiagError, add_sink, remove_sink
from cvdiag.write.logcontext import CvdiagLogFilter, add_cvdiag_context

TS_RE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def test_envelope_has_every_field_in_wire_order():
    with capture() as cap, cvdiag.request_context(test_id="d4-agno-1234", slug="svc", demo="chat"):
        cvdiag.emit("backend.agent.enter", {"agent_name": "planner", "model_id": "gpt-4o-mini"})
    [env] = cap.events()
    assert list(env) == list(ENVELOPE_FIELDS)
    assert env["schema_version"] == 1
    assert env["test_id"] == env["trace_id"] == "d4-agno-1234"
    assert SPAN_ID_RE.match(env["span_id"]) and env["parent_span_id"] is None
    assert (env["layer"], env["slug"], env["demo"]) == ("backend", "svc", "chat")
    assert TS_RE.match(env["ts"]) and isinstance(env["mono_ns"], int)
    assert env["outcome"] == "info" and env["duration_ms"] is None
    assert env["edge_headers"] == dict.fromkeys(EDGE_HEADERS)
    assert env["metadata"] == {"agent_name": "planner", "model_id": "gpt-4o-mini"}
    assert env["_metadata_dropped"] is False and env["_truncated"] is False


def test_stdout_line_is_prefix_then_compact_json(capsys):
    with capture(stdout=True), cvdiag.request_context(test_id="t-1"):
        cvdiag.emit("backend.agent.enter", {"agent_name": "a", "model_id": None})
    out = [line for line in capsys.readouterr().out.splitlines() if line.startswith("CVDIAG ")]
    assert len(out) == 1
    body = out[0][len("CVDIAG ") :]
    assert body == orjson.dumps(json.loads(body)).decode()  # compact, no spaces
    assert json.loads(body)["test_id"] == "t-1"


def test_file_sink_appends_bare_ndjson(tmp_path):
    path = tmp_path / "logs" / "cvdiag.ndjson"
    with capture(file=str(path)), cvdiag.request_context(test_id="t-file"):
        cvdiag.emit("backend.agent.enter", {"agent_name": "a"})
        cvdiag.emit("backend.agent.exit", {"terminal_outcome": "ok", "total_duration_ms": 1}, outcome="ok")
    lines = path.read_text().splitlines()
    assert [json.loads(line)["boundary"] for line in lines] == ["backend.agent.enter", "backend.agent.exit"]
    assert not lines[0].startswith("CVDIAG")


def test_unknown_metadata_key_is_removed_flagged_and_reported_once():
    reset()  # no (boundary, key) reported yet, whatever earlier tests emitted
    with capture() as cap, cvdiag.request_context():
        for _ in range(3):
            cvdiag.emit("backend.agent.enter", {"agent_name": "a", "api_key": "sk-live-should-not-appear", "x": 1})
    events = cap.of("backend.agent.enter")
    assert all(e["metadata"] == {"agent_name": "a"} and e["_metadata_dropped"] for e in events)
    reports = [e["metadata"] for e in cap.all() if e["boundary"] == "cvdiag.metadata_dropped"]
    # once per (boundary, key) for the whole process: the first emit reports both keys,
    # the next two nothing (reset() above makes the first emit the process's first)
    assert reports == [{"boundary": "backend.agent.enter", "keys": ["api_key", "x"]}]
    assert "sk-live" not in json.dumps(cap.all())


def test_unregistered_boundary_writes_nothing_and_warns_once(caplog):
    reset()  # counts from zero, no name warned about yet
    with capture() as cap, caplog.at_level(logging.WARNING, logger="cvdiag"):
        cvdiag.emit("backend.not.a.boundary.zz", {"a": 1})
        cvdiag.emit("backend.not.a.boundary.zz", {"a": 1})
    assert cap.all() == []
    assert cvdiag.stats()["unknown_boundaries"] == 2
    assert sum("backend.not.a.boundary.zz" in r.getMessage() for r in caplog.records) == 1


def test_unregistered_boundary_raises_only_in_strict_mode():
    with capture(strict=True), pytest.raises(CvdiagError):
        cvdiag.emit("backend.strictly.unknown")


def test_registered_custom_boundary_is_emitted_with_its_keys():
    cvdiag.register_boundary("backend.tool.call", layer="backend", tier="default", metadata=["tool_name"])
    with capture("default") as cap, cvdiag.request_context():
        cvdiag.emit("backend.tool.call", {"tool_name": "search", "args": "secret stuff"})
    env = cap.one("backend.tool.call")
    assert env["metadata"] == {"tool_name": "search"} and env["_metadata_dropped"]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"name": "Backend.Bad", "layer": "backend", "tier": "default", "metadata": []},
        {"name": "backend.ok.name", "layer": "probe", "tier": "default", "metadata": []},
        {"name": "backend.ok.name", "layer": "backend", "tier": "loud", "metadata": []},
        {"name": "backend.ok.name", "layer": "backend", "tier": "default", "metadata": ["Bad Key"]},
        {"name": "backend.agent.enter", "layer": "backend", "tier": "debug", "metadata": ["x"]},
    ],
)
def test_register_boundary_rejects_bad_definitions(kwargs):
    name = kwargs.pop("name")
    with pytest.raises(ValueError):
        cvdiag.register_boundary(name, **kwargs)


def test_default_tier_writes_only_default_boundaries():
    with capture("default") as cap, cvdiag.request_context():
        cvdiag.emit("backend.llm.call.start", {"provider": "openai", "model": "m"})
        cvdiag.emit("backend.sse.event", {"event_type": "message"})
        cvdiag.emit("backend.agent.enter", {"agent_name": "a"})
    assert cap.boundaries() == ["backend.agent.enter"]


def test_disabled_emitter_writes_nothing():
    with capture() as cap, cvdiag.request_context():
        cvdiag.configure(enabled=False, environ={})
        cvdiag.emit("backend.agent.enter", {"agent_name": "a"})
    assert cap.events() == []


@pytest.mark.parametrize("label", ["production", "prod", "live", None, "weird"])
def test_debug_is_refused_outside_safe_labels_with_one_warning(label, caplog):
    environ = {"CVDIAG_ENABLED": "1", "CVDIAG_TIER": "debug"}
    if label:
        environ["CVDIAG_ENV"] = label
    with caplog.at_level(logging.WARNING, logger="cvdiag"):
        settings = config.build_settings(environ=environ)
    assert settings.tier is Tier.DEFAULT
    assert len([r for r in caplog.records if "debug tier refused" in r.getMessage()]) == 1


@pytest.mark.parametrize("label", ["development", "dev", "test", "Testing", " STAGING ", "local", "ci", "preview"])
def test_debug_is_armed_under_safe_labels(label):
    settings = config.build_settings(environ={"CVDIAG_ENABLED": "yes", "CVDIAG_DEBUG": "1", "CVDIAG_ENV": label})
    assert settings.tier is Tier.DEBUG


def test_env_label_falls_back_to_platform_variables():
    settings = config.build_settings(
        environ={"CVDIAG_ENABLED": "on", "CVDIAG_TIER": "debug", "RAILWAY_ENVIRONMENT_NAME": "staging"}
    )
    assert settings.tier is Tier.DEBUG and settings.env_label == "staging"


def test_environment_switches_and_aliases(tmp_path):
    s = config.build_settings(
        environ={
            "CVDIAG_BACKEND_EMITTER": "TRUE",
            "CVDIAG_VERBOSE": "1",
            "CVDIAG_STDOUT": "0",
            "CVDIAG_FILE": str(tmp_path / "x.ndjson"),
            "CVDIAG_DEBUG_ALLOW_LIST": "a, b",
        }
    )
    assert s.enabled and s.tier is Tier.VERBOSE and not s.stdout
    assert s.file == str(tmp_path / "x.ndjson") and s.debug_allow_list == {"a", "b"}
    assert not config.build_settings(environ={}).enabled
    assert not config.build_settings(environ={"CVDIAG_ENABLED": "nope"}).enabled


def test_configure_replaces_the_whole_configuration():
    saved = config.get_settings()
    try:
        cvdiag.configure(enabled=True, tier="verbose", environ={}, file="/tmp/a.ndjson")
        s = cvdiag.configure(environ={"CVDIAG_ENABLED": "1"})
        assert s.enabled and s.tier is Tier.DEFAULT and s.file is None
        with pytest.raises(ValueError):
            cvdiag.configure(tier="chatty")
    finally:
        config.apply_settings(saved)


def test_debug_allow_list_gives_other_slugs_verbose():
    with capture(debug_allow_list="svc-a") as cap:
        for slug in ("svc-a", "svc-b"):
            with cvdiag.request_context(slug=slug):
                cvdiag.emit("backend.sse.event", {"event_type": "message", "payload_size_bytes": 1, "sequence_num": 0})
    assert [e["slug"] for e in cap.events()] == ["svc-a"]


def test_debug_disarms_itself_after_its_envelope_budget(monkeypatch, caplog):
    monkeypatch.setattr(config, "DEBUG_MAX_ENVELOPES", 5)
    with capture() as cap, cvdiag.request_context(), caplog.at_level(logging.WARNING, logger="cvdiag"):
        for _ in range(10):
            cvdiag.emit("backend.sse.event", {"event_type": "message", "payload_size_bytes": 1, "sequence_num": 0})
        assert config.get_settings().tier is Tier.DEFAULT
    assert len(cap.of("backend.sse.event")) == 6
    assert any("disarmed" in r.getMessage() for r in caplog.records)


def test_secrets_in_metadata_are_scrubbed_at_any_depth():
    cvdiag.register_boundary("backend.test.nested", layer="backend", tier="default", metadata=["info"])
    with capture() as cap, cvdiag.request_context():
        cvdiag.emit(
            "backend.test.nested",
            {"info": {"note": "Authorization: Bearer abc.def.ghi", "list": ["key sk-proj-abcdefghijklmnop1234"]}},
        )
    text = json.dumps(cap.events())
    assert "abc.def.ghi" not in text and "sk-proj-abcdefghijklmnop1234" not in text
    assert "[REDACTED]" in text


def test_oversized_envelope_is_shrunk_under_the_cap_and_flagged():
    cvdiag.register_boundary("backend.test.big", layer="backend", tier="default", metadata=["a", "b", "c"])
    with capture("default") as cap, cvdiag.request_context(test_id="big-1", slug="svc"):
        cvdiag.emit("backend.test.big", {"a": "x" * 1500, "b": "y" * 1500, "c": 7})
    env = cap.one("backend.test.big")
    assert len(orjson.dumps(env)) <= 2048  # orjson writes a decoded line back byte for byte
    assert env["_truncated"] is True
    assert env["test_id"] == "big-1" and env["slug"] == "svc" and env["metadata"]["c"] == 7
    assert env["metadata"]["a"] == "x" * 61 + "..."


def test_small_envelope_is_not_flagged_truncated():
    with capture("default") as cap, cvdiag.request_context():
        cvdiag.emit("backend.agent.enter", {"agent_name": "x" * 300})
    assert cap.one("backend.agent.enter")["_truncated"] is False


class _BlockingSink:
    def __init__(self) -> None:
        self.release = threading.Event()
        self.lines: list[bytes] = []

    def write(self, lines: list[bytes]) -> None:
        self.release.wait(10)
        self.lines.extend(lines)

    def close(self) -> None:
        pass


def test_full_queue_drops_oldest_and_reports_the_count_once():
    blocker = _BlockingSink()
    add_sink(blocker)
    try:
        with capture(queue_size=20) as cap, cvdiag.request_context():
            cvdiag.emit("backend.agent.enter", {"agent_name": "first"})  # the blocking sink holds the writer
            for i in range(200):
                cvdiag.emit("backend.agent.enter", {"agent_name": f"n{i}"})
            blocker.release.set()
            everything = cap.all()
    finally:
        blocker.release.set()
        remove_sink(blocker)
    reports = [e for e in everything if e["boundary"] == "cvdiag.queue_dropped"]
    assert len(reports) == 1 and reports[0]["slug"] == "cvdiag"
    names = [e["metadata"]["agent_name"] for e in everything if e["boundary"] == "backend.agent.enter"]
    assert names[-1] == "n199"  # the newest survive
    assert len(names) + reports[0]["metadata"]["_dropped_count"] == 201, (names, reports)


class _BrokenSink:
    def write(self, lines: list[bytes]) -> None:
        raise OSError("disk full")

    def close(self) -> None:
        pass


def test_failing_sink_is_counted_and_others_still_written():
    broken = _BrokenSink()
    add_sink(broken)
    try:
        reset()
        with capture() as cap, cvdiag.request_context():
            cvdiag.emit("backend.agent.enter", {"agent_name": "a"})
            assert cap.boundaries() == ["backend.agent.enter"]
        stats = cvdiag.stats()
        # one line is one batch: the broken sink fails once and loses it; capture's took it
        assert (stats["sink_errors"], stats["write_failed"], stats["written"]) == (1, 1, 0)
    finally:
        remove_sink(broken)


def test_failing_sink_raises_on_flush_in_strict_mode():
    broken = _BrokenSink()
    add_sink(broken)
    try:
        with capture(strict=True), cvdiag.request_context():
            cvdiag.emit("backend.agent.enter", {"agent_name": "a"})
            with pytest.raises(CvdiagError, match="disk full"):
                cvdiag.flush()
    finally:
        remove_sink(broken)


class _Hostile:
    def __str__(self) -> str:
        raise RuntimeError("boom")


def test_emit_never_raises_on_hostile_values():
    with capture() as cap, cvdiag.request_context():
        cvdiag.emit("backend.agent.enter", {"agent_name": _Hostile()})
        cvdiag.emit("backend.agent.enter", {"agent_name": "\x00\ud800" * 10, 3: "int key"})
        cvdiag.emit("backend.agent.enter", "not a mapping")  # type: ignore[arg-type]
        cvdiag.emit("backend.agent.exit", {"terminal_outcome": "ok"}, outcome="bogus", duration_ms="x")  # type: ignore[arg-type]
    exits = cap.of("backend.agent.exit")
    assert exits and exits[0]["outcome"] == "info" and exits[0]["duration_ms"] is None


def test_emit_outside_any_context_mints_an_id_per_envelope():
    import contextvars

    with capture() as cap:
        contextvars.Context().run(cvdiag.emit, "backend.agent.enter", {"agent_name": "a"})
        contextvars.Context().run(cvdiag.emit, "backend.agent.enter", {"agent_name": "b"})
    ids = [e["test_id"] for e in cap.events()]
    assert len(set(ids)) == 2 and all(UUID7_RE.match(i) for i in ids)


def test_log_filter_and_structlog_processor_carry_the_test_id():
    record = logging.LogRecord("app", logging.INFO, __file__, 1, "hello", None, None)
    with cvdiag.request_context(test_id="log-1", slug="svc"):
        assert CvdiagLogFilter().filter(record)
        event = add_cvdiag_context(None, "info", {"event": "hi"})
    assert (record.test_id, record.slug) == ("log-1", "svc")
    assert event == {"event": "hi", "test_id": "log-1", "slug": "svc"}


# The face by job, written out again on purpose: it changes only when these lines do.
SET_UP = ["configure", "CvdiagMiddleware", "register_boundary", "register_llm_endpoint"]
OUTBOUND = ["instrument", "uninstrument", "instrument_httpx", "uninstrument_httpx", "wrap"]
RECORD = ["agent_scope", "llm_call", "emit", "request_context", "current_context"]
OPERATE = ["flush", "stats"]
PUBLIC_FACE = sorted(SET_UP + OUTBOUND + RECORD + OPERATE)


def test_package_face_is_the_calls_an_application_makes():
    """A name added to or removed from the face is a decision: change this list with it."""
    import cvdiag.write.emitter  # importing submodules must not shadow the API

    assert cvdiag.__all__ == PUBLIC_FACE
    for name in PUBLIC_FACE:
        value = getattr(cvdiag, name)
        assert callable(value) and value.__module__.startswith("cvdiag.") and value.__name__ == name
    assert set(PUBLIC_FACE) <= set(dir(cvdiag))
    with pytest.raises(AttributeError):
        cvdiag.copy_context  # noqa: B018 -- contextvars.copy_context does the job


def test_a_forked_child_gets_its_own_writer(tmp_path):
    import os

    path = tmp_path / "fork.ndjson"
    with capture(file=str(path)), cvdiag.request_context(test_id="parent"):
        cvdiag.emit("backend.agent.enter", {"agent_name": "parent"})
        cvdiag.flush()  # the writer thread is running now
        pid = os.fork()
        if pid == 0:  # the child: emit and flush through a writer of its own
            with cvdiag.request_context(test_id="child"):
                cvdiag.emit("backend.agent.enter", {"agent_name": "child"})
            os._exit(0 if cvdiag.flush(5) else 1)
        _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    ids = [json.loads(line)["test_id"] for line in path.read_text().splitlines()]
    assert sorted(ids) == ["child", "parent"]


def test_minted_test_ids_are_rfc9562_uuid7_with_the_current_time():
    import time
    import uuid

    import uuid6

    before = time.time_ns() // 1_000_000
    ids = [new_test_id() for _ in range(1000)]
    after = time.time_ns() // 1_000_000
    assert len(set(ids)) == 1000
    for tid in ids:
        assert UUID7_RE.match(tid) and str(uuid.UUID(tid)) == tid
        parsed = uuid6.UUID(tid)
        assert parsed.version == 7 and parsed.variant == uuid.RFC_4122
        assert before <= parsed.time <= after


def test_lines_waiting_behind_a_stalled_sink_cost_about_their_size():
    """orjson's bytes keep the buffer it grew (4 KB and more for a line of a few hundred
    bytes): a stalled stdout must not hold the queue's worth of those in the host."""
    import tracemalloc

    blocker = _BlockingSink()
    add_sink(blocker)
    try:
        with capture(queue_size=3000), cvdiag.request_context():
            cvdiag.emit("backend.agent.enter", {"agent_name": "first"})  # the blocking sink holds the writer
            tracemalloc.start()
            try:
                for i in range(2000):
                    cvdiag.emit("backend.agent.enter", {"agent_name": f"n{i}-" + "x" * 200})
                held = tracemalloc.get_traced_memory()[0]
            finally:
                tracemalloc.stop()
            blocker.release.set()
    finally:
        blocker.release.set()
        remove_sink(blocker)
    assert len(blocker.lines) == 2001 and len(blocker.lines[-1]) < 1000
    assert held < 2000 * 2500, held  # each line is under 1 KB: 3.4 MB in all, 17 MB when each kept its buffer


def test_configure_takes_the_settings_arguments_and_names_itself_for_a_wrong_one():
    import inspect

    from cvdiag.write.config import build_settings

    assert inspect.signature(cvdiag.configure) == inspect.signature(build_settings)
    with pytest.raises(TypeError, match=r"^configure\(\): got an unexpected keyword argument 'bogus'"):
        cvdiag.configure(bogus=1)
