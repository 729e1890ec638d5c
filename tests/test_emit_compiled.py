"""The compiled envelope (``cvdiag/write/_cemit.c``) writes what the Python steps write:
the same bytes for the same calls (hostile strings, lone surrogates, huge ints, secrets
to scrub, lines past the cap), the same counts and the same accounting lines. Only
what differs between any two lines is masked: the clocks, the span id and a minted id.
Its ``pick`` finds the headers the middleware's ``_pick`` finds.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Iterator
from types import MappingProxyType
from typing import Any

import linekit
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_emit_fused import BOUNDARIES, calls, leaves, texts, written

from cvdiag.contract.schema import lookup
from cvdiag.write import emitter, middleware

pytestmark = pytest.mark.skipif(emitter._line_compiled is None, reason="cvdiag.write._cemit is not built or is off")

#: What differs between any two lines: the rest must be the same bytes.
_VOLATILE = re.compile(rb'"(ts|mono_ns|span_id)":("[^"]*"|\d+)')


def _masked(line: bytes) -> bytes:
    return linekit._UUID.sub(b"<uuid>", _VOLATILE.sub(rb'"\1":0', line))


@pytest.fixture
def python_steps() -> Iterator[None]:
    """The emitter without its compiled line, for the length of a test."""
    compiled, pick = emitter._line_compiled, middleware._pick_headers
    emitter._line_compiled, middleware._pick_headers = None, middleware._pick
    try:
        yield
    finally:
        emitter._line_compiled, middleware._pick_headers = compiled, pick


def _written(call: dict[str, Any], compiled: bool) -> tuple[list[bytes], dict[str, int]]:
    """The lines (clocks masked) and the counts of one call, by one path or the other."""
    chosen = emitter._line_compiled if compiled else None
    # the second call after the first filled the per-boundary caches
    lines, stats = written(call, swap=("_line_compiled", chosen), slug="compiled", repeat=2)
    return [_masked(line) for line in lines], stats


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(calls())
def test_the_compiled_line_is_the_python_line(call: dict[str, Any]) -> None:
    assert _written(call, compiled=True) == _written(call, compiled=False)


@st.composite
def declared_calls(draw: st.DrawFn) -> dict[str, Any]:
    """Metadata under declared keys alone, of strings and numbers (secrets among them):
    the compiled line scrubs those itself."""
    name = draw(st.sampled_from(BOUNDARIES))
    keys = st.sampled_from(sorted(lookup(name).metadata or ()))
    return {
        "tier": "debug",
        "demo": draw(texts),
        "name": name,
        "metadata": draw(st.dictionaries(keys, st.one_of(texts, leaves), min_size=1, max_size=6)),
        "outcome": "err",
        "duration_ms": None,
        "edge_headers": None,
    }


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(declared_calls())
def test_strings_under_declared_keys_are_scrubbed_as_before(call: dict[str, Any]) -> None:
    assert _written(call, compiled=True) == _written(call, compiled=False)


@settings(max_examples=300, deadline=None)
@given(st.text(), st.text(alphabet=st.characters(max_codepoint=0x40)))
def test_strings_are_escaped_as_orjson_escapes_them(text: str, control: str) -> None:
    """Every code point, the control characters and quotes above all, as in orjson."""
    call = {
        "tier": "default",
        "demo": text,
        "name": "backend.agent.exit",
        "metadata": {"terminal_outcome": control + text, "total_duration_ms": 2**63},
        "outcome": "ok",
        "duration_ms": len(text),
        "edge_headers": None,
    }
    assert _written(call, compiled=True) == _written(call, compiled=False)


@pytest.mark.parametrize(
    "metadata",
    [
        MappingProxyType({"terminal_outcome": "ok", "total_duration_ms": 1}),
        OrderedDict(terminal_outcome="password=hunter2", total_duration_ms=2),
        {"terminal_outcome": "ok", 7: "not a str key"},
        {"terminal_outcome": "ok", "total_duration_ms": 1.5e16},
        {"terminal_outcome": ["nested", {"api_key": "sk-x"}], "total_duration_ms": -(2**63)},
    ],
    ids=["mapping", "dict-subclass", "int-key", "float", "nested"],
)
def test_other_metadata_kinds_are_written_as_before(metadata: Any) -> None:
    call = {
        "tier": "default",
        "demo": "d",
        "name": "backend.agent.exit",
        "metadata": metadata,
        "outcome": "ok",
        "duration_ms": True,
        "edge_headers": None,
    }
    compiled = _written(call, compiled=True)
    assert compiled[0] and compiled == _written(call, compiled=False)


@pytest.mark.parametrize("tier", ["default", "verbose", "debug"])
def test_a_line_past_its_cap_is_shrunk_as_before(tier: str) -> None:
    call = {
        "tier": tier,
        "demo": "d" * 300,
        "name": "backend.llm.call.response",
        "metadata": {"model": ["word " * 100] * 40, "finish_reason": "stop", "prompt_tokens": 5},
        "outcome": "err",  # written at every tier
        "duration_ms": 1,
        "edge_headers": None,
    }
    compiled = _written(call, compiled=True)
    assert compiled == _written(call, compiled=False)
    assert compiled[1]["truncated"] == 2 and b'"_truncated":true' in compiled[0][0]


def test_the_recorded_lines_by_the_python_steps(python_steps: None) -> None:
    """``test_emit_lines`` takes the compiled path when it is built; the Python steps (and
    the Python ``_pick``) must write the same 270 lines."""
    assert linekit.lines() == linekit.EXPECTED.read_bytes().splitlines()


def test_cvdiag_compiled_0_turns_it_off(monkeypatch: pytest.MonkeyPatch) -> None:
    from cvdiag.contract.compiled import compiled_module

    assert compiled_module("cvdiag.write._cemit") is not None
    monkeypatch.setenv("CVDIAG_COMPILED", "0")
    assert compiled_module("cvdiag.write._cemit") is None


#: Header names in both cases, an upper-case Z and A alone, and the bytes either side of A-Z.
_NAMES = (
    b"x-test-id",
    b"X-Test-Id",
    b"content-length",
    b"Content-Type",
    b"VIA",
    b"X-AZ@[",
    b"x-aZ@[",
    b"x-az@[",
    b"x-\xffA",
)
header_names = st.one_of(st.sampled_from(_NAMES), st.binary(max_size=12))
header_lists = st.lists(st.tuples(header_names, st.binary(max_size=8)), max_size=12)


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        header_lists,
        header_lists.map(tuple),
        header_lists.map(lambda pairs: [list(pair) for pair in pairs]),  # pairs as lists: to _pick
        header_lists.map(lambda pairs: [(k.decode("latin-1"), v) for k, v in pairs]),  # str names: to _pick
    ),
    st.frozensets(st.sampled_from(_NAMES).map(bytes.lower), max_size=5),
)
def test_pick_finds_what_the_python_pick_finds(headers: Any, wanted: frozenset[bytes]) -> None:
    assert middleware._pick_headers is not middleware._pick
    assert middleware._pick_headers(headers, wanted) == middleware._pick(headers, wanted)


def test_pick_never_changes_the_shared_one_byte_objects() -> None:
    """CPython shares one bytes object per byte value: lower-casing a one-byte name in
    place would turn every b"N" of the process into b"n" (it broke xdist's wire once)."""
    letters = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    middleware._pick_headers([(letters[i : i + 1], b"v") for i in range(26)], frozenset({b"q"}))
    assert [letters[i : i + 1][0] for i in range(26)] == list(range(ord("A"), ord("Z") + 1))
