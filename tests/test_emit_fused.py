"""While ``PROCESSORS`` is cvdiag's own list the steps run in one frame (``_process``);
with a user's step in it they run in the loop. Both must write the same bytes, count
the same and ask for the same accounting lines."""

from __future__ import annotations

from typing import Any

import linekit
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cvdiag
from cvdiag.contract.schema import EDGE_HEADERS, lookup
from cvdiag.testing import reset
from cvdiag.write import config, emitter

BOUNDARIES = (
    "backend.agent.exit",
    "backend.agent.enter",
    "backend.request.ingress",
    "backend.response.complete",
    "backend.llm.call.response",
    "backend.sse.event",
    "backend.tool.call.response",
)
SECRETS = (
    "sk-proj-Zx9QabcdefghijklmnopqrstuvWXYZ012345",
    "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl",
    "alice@example.com",
    "password=hunter2",
    "ok\ud800",
)
texts = st.one_of(st.text(max_size=300), st.sampled_from(SECRETS), st.just("word " * 120))
leaves = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70), st.floats(allow_nan=False), texts
)
values = st.recursive(
    leaves, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3), max_leaves=8
)


@st.composite
def calls(draw: st.DrawFn) -> dict[str, Any]:
    name = draw(st.sampled_from(BOUNDARIES))
    declared = sorted(lookup(name).metadata or ())
    keys = st.one_of(st.sampled_from(declared), st.sampled_from(("api_key", "password", "extra")), st.text(max_size=8))
    return {
        "tier": draw(st.sampled_from(("default", "verbose", "debug"))),
        "demo": draw(st.one_of(st.just("default"), texts)),
        "name": name,
        "metadata": draw(st.one_of(st.none(), st.dictionaries(keys, values, max_size=6))),
        "outcome": draw(st.sampled_from((None, "ok", "err", "timeout", "info", "weird"))),
        "duration_ms": draw(st.one_of(st.none(), st.booleans(), st.integers(min_value=-5, max_value=2**40))),
        "edge_headers": draw(
            st.one_of(st.none(), st.fixed_dictionaries({k: st.one_of(st.none(), texts) for k in EDGE_HEADERS}))
        ),
    }


def _noop(logger: Any, method_name: str, event_dict: dict[str, Any]) -> dict[str, Any]:
    return event_dict


def written(
    call: dict[str, Any], *, swap: tuple[str, Any], slug: str = "fused", repeat: int = 1
) -> tuple[list[bytes], dict[str, int]]:
    """The raw lines and the counts of one call, made ``repeat`` times while ``emitter``'s
    attribute ``swap[0]`` is ``swap[1]`` (the processors, the compiled line)."""
    sink = linekit.RawSink()
    name, value = swap
    previous, saved = config.get_settings(), getattr(emitter, name)
    emitter.add_sink(sink)
    try:
        cvdiag.configure(enabled=True, tier=call["tier"], environ={"CVDIAG_ENV": "test"}, stdout=False)
        reset()
        setattr(emitter, name, value)
        with cvdiag.request_context(test_id=f"t-{slug}", slug=slug, demo=call["demo"]):
            for _ in range(repeat):
                emitter.emit_edge(
                    call["name"],
                    call["metadata"],
                    outcome=call["outcome"],
                    duration_ms=call["duration_ms"],
                    edge_headers=call["edge_headers"],
                )
        emitter.flush()
    finally:
        setattr(emitter, name, saved)
        emitter.remove_sink(sink)
        config.apply_settings(previous)
    return sink.lines, cvdiag.stats()


def _written(call: dict[str, Any], processors: list[Any]) -> tuple[list[bytes], dict[str, int]]:
    """The masked lines and the counts of one call through ``processors``."""
    lines, stats = written(call, swap=("PROCESSORS", processors))
    return [linekit.mask(line) for line in lines], stats


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(calls())
def test_the_fused_steps_write_what_the_loop_writes(call: dict[str, Any]) -> None:
    assert emitter.PROCESSORS == emitter._DEFAULT_PROCESSORS
    fused = _written(call, emitter.PROCESSORS)
    looped = _written(call, [_noop, *emitter.PROCESSORS])
    assert fused == looped


def test_a_step_added_in_place_leaves_the_fused_path() -> None:
    """``PROCESSORS.insert`` (what the configuration guide shows) is honoured too."""
    seen: list[str] = []

    def note(logger: Any, method_name: str, event_dict: dict[str, Any]) -> dict[str, Any]:
        seen.append(event_dict["envelope"]["boundary"])
        return event_dict

    emitter.PROCESSORS.insert(0, note)
    try:
        call = {"tier": "default", "demo": "d", "name": "backend.agent.exit", "metadata": {"terminal_outcome": "ok"}}
        _written(call | {"outcome": "ok", "duration_ms": 1, "edge_headers": None}, emitter.PROCESSORS)
    finally:
        emitter.PROCESSORS.remove(note)
    assert seen == ["backend.agent.exit"]
