"""cvdiag.testing: capture() collects what a block emits and leaves the host as it was;
reset() makes a test count from zero."""

from __future__ import annotations

import subprocess
import sys
import threading

import pytest

import cvdiag
from cvdiag.contract.schema import ENVELOPE_FIELDS
from cvdiag.testing import capture, reset
from cvdiag.write import config


@pytest.fixture
def host(tmp_path):
    """An application's own configuration: on, writing to a file, not to stdout."""
    saved = config.get_settings()
    log = tmp_path / "host.ndjson"
    cvdiag.configure(enabled=True, tier="default", environ={}, stdout=False, file=str(log))
    try:
        yield log
    finally:
        cvdiag.flush()
        config.apply_settings(saved)


def test_capture_collects_the_blocks_envelopes_as_wire_dicts(host):
    with cvdiag.request_context(test_id="before"):
        cvdiag.emit("backend.agent.enter", {"agent_name": "host"})
    with capture() as envelopes, cvdiag.request_context(test_id="inside", slug="svc"):
        cvdiag.emit("backend.agent.enter", {"agent_name": "a"})
        cvdiag.emit("backend.agent.exit", {"terminal_outcome": "ok", "total_duration_ms": 2}, outcome="ok")
    with cvdiag.request_context(test_id="after"):
        cvdiag.emit("backend.agent.enter", {"agent_name": "host"})
    cvdiag.flush()
    assert [(e["test_id"], e["boundary"], e["slug"]) for e in envelopes] == [
        ("inside", "backend.agent.enter", "svc"),
        ("inside", "backend.agent.exit", "svc"),
    ]
    assert all(list(e) == list(ENVELOPE_FIELDS) for e in envelopes)
    assert envelopes[1]["metadata"] == {"terminal_outcome": "ok", "total_duration_ms": 2}


def test_capture_writes_nothing_to_the_hosts_sinks_and_restores_its_settings(host, capsys):
    before = config.get_settings()
    with capture() as envelopes, cvdiag.request_context(test_id="inside"):
        assert config.get_settings().tier.name == "DEBUG"  # debug-only boundaries are captured too
        cvdiag.emit("backend.agent.enter", {"agent_name": "a"})
    assert config.get_settings() == before
    with cvdiag.request_context(test_id="after"):
        cvdiag.emit("backend.agent.enter", {"agent_name": "b"})
    cvdiag.flush()
    assert [e["test_id"] for e in envelopes] == ["inside"]
    assert [line for line in host.read_text().splitlines() if '"inside"' in line] == []
    assert '"test_id":"after"' in host.read_text()
    assert "CVDIAG" not in capsys.readouterr().out


def test_capture_takes_configure_arguments_or_whole_settings(tmp_path):
    with capture(tier="default") as envelopes, cvdiag.request_context(test_id="t"):
        cvdiag.emit("backend.sse.event", {"seq": 1, "event_type": "delta", "bytes": 3, "delta_ms": 1})  # verbose
        cvdiag.emit("backend.agent.enter", {"agent_name": "a"})
    assert [e["boundary"] for e in envelopes] == ["backend.agent.enter"]
    whole = config.build_settings(enabled=True, tier="verbose", environ={}, stdout=False)
    with capture(settings=whole) as envelopes, cvdiag.request_context(test_id="t"):
        assert config.get_settings() == whole
    with pytest.raises(TypeError), capture(settings=whole, tier="debug"):
        pass


def test_capture_restores_the_host_when_the_block_raises(host):
    before = config.get_settings()
    with pytest.raises(KeyError), capture() as envelopes, cvdiag.request_context(test_id="boom"):
        cvdiag.emit("backend.agent.enter", {"agent_name": "a"})
        raise KeyError("the code under test failed")
    assert config.get_settings() == before
    assert [e["test_id"] for e in envelopes] == ["boom"]  # what it wrote before failing is there


def test_reset_counts_from_zero_and_reports_once_more():
    keys = {"agent_name": "a", "not_declared": 1}
    with capture(), cvdiag.request_context():
        cvdiag.emit("backend.agent.enter", keys)
    reset()
    assert set(cvdiag.stats().values()) == {0}
    with capture() as envelopes, cvdiag.request_context():
        cvdiag.emit("backend.agent.enter", keys)
        cvdiag.emit("backend.agent.enter", keys)
    reports = [e["metadata"]["keys"] for e in envelopes if e["boundary"] == "cvdiag.metadata_dropped"]
    assert reports == [["not_declared"]]  # reported again after the reset, once
    stats = cvdiag.stats()
    assert (stats["emitted"], stats["written"], stats["metadata_dropped"]) == (3, 3, 2)


def test_reset_stops_the_heartbeat_thread_and_the_next_call_starts_one():
    def heartbeat_threads() -> list[threading.Thread]:
        return [t for t in threading.enumerate() if t.name == "cvdiag-heartbeat"]

    with capture(tier="verbose"), cvdiag.llm_call("openai", "m", heartbeat_s=0.01):
        assert len(heartbeat_threads()) == 1
    reset()
    assert heartbeat_threads() == []
    with capture(tier="verbose") as envelopes, cvdiag.llm_call("openai", "m", heartbeat_s=0.01):
        threading.Event().wait(0.05)
    assert len(heartbeat_threads()) == 1
    assert any(e["boundary"] == "backend.llm.call.heartbeat" for e in envelopes)


def test_reset_counts_from_zero_even_when_a_call_the_collector_let_go_ends_during_it():
    """A body the previous test never closed is ended by ``reset()``: its line is counted
    before the zeroing, so the next test still starts at zero."""
    import gc

    import httpx

    from cvdiag.write import _llm_capture as llm_capture
    from cvdiag.write.context import new_context
    from cvdiag.write.llm_routes import LLMRoute

    with capture(tier="verbose"):
        lost = llm_capture.Exchange(
            LLMRoute("openai", "chat.completions", "m", True), new_context(test_id="t"), None, 0
        )
        lost.start()
        body = llm_capture._observed_types(httpx.Client)[0](object(), lost)
        body.cycle = body  # only the cyclic collector finds it, unclosed
        del body, lost
        gc.collect()
        reset()
        cvdiag.flush()
        assert {k: v for k, v in cvdiag.stats().items() if v} == {}


def test_reset_keeps_the_llm_heartbeat_interval_the_app_configured():
    from cvdiag.write import _llm_capture as llm_capture

    cvdiag.instrument_httpx(heartbeat_s=2)
    try:
        reset()
        assert llm_capture.between_calls.heartbeat_s == 2.0
    finally:
        cvdiag.uninstrument_httpx()


_RACE = """
import itertools, threading, time
import cvdiag
from cvdiag.write import emitter
from cvdiag.write.sinks import MemorySink

sink = MemorySink()
emitter.add_sink(sink)
cvdiag.configure(enabled=True, tier="default", stdout=False, environ={})
made = (f"proc-{i}" for i in itertools.count(1))

def slow_new_test_id():  # a thread switch while the id is being made
    value = next(made)
    time.sleep(0.05)
    return value

emitter.new_test_id = slow_new_test_id
threads = [threading.Thread(target=cvdiag.emit, args=("cvdiag.queue_dropped", {"_dropped_count": 1})) for _ in range(2)]
[t.start() for t in threads]
[t.join() for t in threads]
cvdiag.emit("cvdiag.queue_dropped", {"_dropped_count": 1})
cvdiag.flush()
print(sorted(e["test_id"] for e in sink.envelopes()))
"""


def test_two_threads_agree_on_the_process_test_id_of_accounting_lines():
    # A fresh process: outside pytest, where the plugin binds each test's own context.
    out = subprocess.run([sys.executable, "-c", _RACE], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['proc-1', 'proc-1', 'proc-1']"
