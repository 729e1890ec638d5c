"""Fields of any JSON type in any field, given to every command (issue 18, item 13).

Another emitter's bad field is read as null and counted in a note, or the line is
counted as malformed: never an internal error. Hypothesis drives every command
in-process through ``cli.main`` (fast); one real ``cvdiag`` process per command checks
the same on a log that holds every kind of bad field at once.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
from cvdiag_cli import run, run_in_process
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from logkit import TID_ABORT, TID_ERROR, TID_OK, aborted, errored, happy

from cvdiag.contract.schema import EDGE_HEADERS, ENVELOPE_FIELDS

CRASH = {"CVDIAG_TRACEBACK": "1"}
WRONG_TYPE = "with fields of the wrong type as null"
# Corpus cases with LLM calls, heartbeats, errors, probe lines and tool calls: the
# shapes the diagnosis reads most from.
_CORPUS = Path(__file__).parent / "corpus" / "hand.jsonl"
_CASES = ("llm-error", "llm-stalled", "llm-slow", "agent-error", "probe-runner-crash", "stream-error")


def _base() -> list[dict[str, Any]]:
    events = happy() + aborted() + errored()
    for line in _CORPUS.read_text().splitlines():
        case = json.loads(line)
        if case["label"] in _CASES and not any(e.get("test_id") == case["events"][0].get("test_id") for e in events):
            events += [e for e in case["events"] if isinstance(e, dict)]
    return events


BASE = _base()
CORPUS_ID = next(e["test_id"] for e in BASE if e["test_id"] not in (TID_OK, TID_ABORT, TID_ERROR))

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
    | st.sampled_from(["12 ms", "", "0000000000000001", "2026-11-21T10:00:00Z", "ok", "err"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6,
)


def _paths(env: dict[str, Any]) -> list[tuple[str, ...]]:
    """Every place a value can be replaced: top-level fields, edge headers, metadata at any depth."""
    out: list[tuple[str, ...]] = [(k,) for k in ENVELOPE_FIELDS]
    out += [("edge_headers", h) for h in EDGE_HEADERS]

    def walk(value: Any, path: tuple[str, ...]) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                out.append((*path, k))
                walk(v, (*path, k))

    walk(env.get("metadata"), ("metadata",))
    return out


@st.composite
def mutated_logs(draw: st.DrawFn) -> list[dict[str, Any]]:
    events = copy.deepcopy(BASE)
    for _ in range(draw(st.integers(1, 8))):
        env = events[draw(st.integers(0, len(events) - 1))]
        paths = _paths(env)  # the envelope's own fields first: every reader uses them
        path = draw(st.sampled_from(paths[: len(ENVELOPE_FIELDS)]) | st.sampled_from(paths))
        holder: Any = env
        for key in path[:-1]:
            holder = holder.get(key) if isinstance(holder, dict) else None
        if not isinstance(holder, dict):
            continue
        if draw(st.integers(0, 5)) == 0:
            holder.pop(path[-1], None)
        else:
            holder[path[-1]] = draw(json_values)
    return events


def _write(path: Path, events: list[dict[str, Any]]) -> Path:
    # json, not orjson: integers past 64 bits are valid JSON and must be written too.
    path.write_text("".join("CVDIAG " + json.dumps(e, separators=(",", ":")) + "\n" for e in events))
    return path


def _commands(log: Path, out: Path) -> list[list[str]]:
    return [
        ["tests", str(log)],
        ["tests", "--json", str(log)],
        ["tests", "--no-class", "--json", str(log)],
        ["tests", "--format", "junit", str(log)],
        ["tests", "--format", "github", str(log)],
        ["timeline", TID_OK, str(log)],
        ["timeline", "--json", "--with-logs", CORPUS_ID, str(log)],
        ["grep", "--boundary", "*", str(log)],
        ["grep", "--slug", "agno", "--since", "2026-01-01", str(log)],
        ["stats", str(log)],
        ["stats", "--json", str(log)],
        ["validate", str(log)],
        ["validate", "--json", str(log)],
        ["report", "--all", "-o", str(out), str(log)],
        ["report", "--compare", TID_OK, CORPUS_ID, "-o", str(out), str(log)],
        ["diagnose", CORPUS_ID, str(log)],
        ["diagnose", "--all", "--json", str(log)],
        ["diagnose", "--all", str(log)],
        ["compare", TID_OK, TID_ABORT, str(log)],
        ["compare", "--json", CORPUS_ID, TID_ERROR, str(log)],
    ]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(events=mutated_logs())
def test_every_command_reads_fields_of_any_json_type_without_an_internal_error(
    tmp_path: Path, events: list[dict[str, Any]]
) -> None:
    log = _write(tmp_path / "mutated.log", events)
    for argv in _commands(log, tmp_path / "report.html"):
        code, out, err = run_in_process(argv)
        assert code != 3 and "internal error" not in err, (argv, err)
        if argv[0] == "grep" and len(argv) == 4:  # nothing lost silently: each line read or counted
            skipped = re.search(r"skipped (\d+) malformed", err)
            assert len(out.split("\n")[:-1]) + (int(skipped.group(1)) if skipped else 0) == len(events), err


# -- the real process ---------------------------------------------------------------------


def _hostile_log(tmp_path: Path) -> Path:
    """The cases the issue names, and one bad value in every optional field."""
    ok, ab, er = happy(), aborted(), errored()
    ok[3]["duration_ms"] = "12 ms"  # timeline crashed formatting it
    ok[4]["span_id"] = {"id": 1}  # timeline/compare crashed hashing it
    ab[1]["span_id"] = None  # beside string ones: report crashed sorting them
    ab[0]["edge_headers"]["cf-ray"] = ["x"]
    er[0]["trace_id"] = 7
    er[1]["slug"] = ["agno"]
    er[1]["demo"] = {"x": None}
    ok[5]["parent_span_id"] = 1.5
    ok[6]["_truncated"] = "no"
    ok[2]["edge_headers"] = "none"
    return _write(tmp_path / "hostile.log", ok + ab + er)


@pytest.mark.parametrize(
    "cmd",
    ["tests", "timeline", "grep", "stats", "validate", "report", "diagnose", "compare"],
)
def test_the_real_cvdiag_reads_a_log_of_wrong_types_and_says_so(tmp_path: Path, cmd: str) -> None:
    log = _hostile_log(tmp_path)
    html = tmp_path / "r.html"
    argv = {
        "tests": ["tests", "--json", log],
        "timeline": ["timeline", TID_OK, log],
        "grep": ["grep", log],
        "stats": ["stats", "--json", log],
        "validate": ["validate", log],
        "report": ["report", "--all", "-o", html, log],
        "diagnose": ["diagnose", TID_ABORT, log],
        "compare": ["compare", TID_OK, TID_ABORT, log],
    }[cmd]
    r = run(*argv, env=CRASH)
    assert "Traceback" not in r.err and "internal error" not in r.err, r.err
    if cmd == "validate":  # strict: each bad field is a problem, reported as written
        assert r.code == 1
        assert f"{log}:4: duration_ms has the wrong type (str)" in r.out
        assert f"{log}:5: span_id has the wrong type (dict)" in r.out
        assert "edge_headers['cf-ray'] is not a string or null" in r.out
        assert "checked 12 envelopes: 9 invalid, 0 malformed lines" in r.out
        return
    assert WRONG_TYPE in r.err, r.err
    # A null span_id is read as it is (nothing relies on it); the other 8 are coerced:
    # 5 of them in the test a timeline reads, 1 in the one diagnosed.
    # diagnose ONE-ID reads the log as diagnose --all does (issue 35): its notes are the log's
    first = {"timeline": "5 envelopes", "compare": "5 envelopes"}.get(cmd, "8 envelopes")
    where = f"{log}:3: edge_headers is str"
    assert f"read {first} {WRONG_TYPE} (first at {where})" in r.err, r.err
    if cmd == "tests":
        rows = {row["test_id"]: row for row in json.loads(r.out)}
        assert (rows[TID_OK]["events"], rows[TID_ABORT]["events"], rows[TID_ERROR]["events"]) == (7, 3, 2)
        assert rows[TID_ABORT]["class"] == "client-disconnect"
    elif cmd == "timeline":
        assert "backend.llm.call.response" in r.out and "backend.sse.first_byte" in r.out
    elif cmd == "grep":
        envs = [json.loads(x) for x in r.out.split("\n") if x]
        assert len(envs) == 12
        assert envs[3]["duration_ms"] is None and envs[3]["_coerced"] == {"duration_ms": "12 ms"}
    elif cmd == "stats":
        rows = json.loads(r.out)["boundaries"]
        assert sum(row["count"] for row in rows) == 12
    elif cmd == "report":
        page = html.read_text()
        assert TID_OK in page and TID_ABORT in page
    elif cmd == "diagnose":
        assert "client-disconnect" in r.out
    elif cmd == "compare":
        assert "backend.sse.first_byte" in r.out
