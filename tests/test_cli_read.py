"""The read side end to end: the installed ``cvdiag`` on hand-made logs of every shape."""

from __future__ import annotations

import gzip
import json
import os
import random
import selectors
import subprocess
import sys
import time
import zlib
from pathlib import Path

import pytest
from cvdiag_cli import command, on_a_terminal, run
from logkit import (
    TID_ABORT,
    TID_ERROR,
    TID_HARNESS,
    TID_OK,
    aborted,
    compact,
    envelope,
    errored,
    every_shape,
    happy,
    write,
)

DATA = Path(__file__).parent / "data" / "logs"
ESC = "\x1b"


@pytest.fixture
def log(tmp_path: Path) -> Path:
    lines, _ = every_shape()
    return write(tmp_path / "app.log", lines)


def rows_of(*args: str | Path, stdin: bytes | None = None) -> dict[str, dict]:
    r = run("tests", "--json", *args, stdin=stdin)
    assert r.code == 0, r.err
    return {row["test_id"]: row for row in json.loads(r.out)}


def test_every_line_shape_is_read_and_joined_by_test_id(log: Path) -> None:
    _, counts = every_shape()
    rows = rows_of(log)
    assert {tid: row["events"] for tid, row in rows.items()} == counts


def test_terminal_and_status_follow_the_backend_terminal(log: Path) -> None:
    rows = rows_of(log)
    assert (rows[TID_OK]["terminal"], rows[TID_OK]["status"]) == ("complete", "ok")
    assert (rows[TID_ABORT]["terminal"], rows[TID_ABORT]["status"]) == ("aborted", "fail")
    assert (rows[TID_ERROR]["terminal"], rows[TID_ERROR]["status"]) == ("error", "fail")
    assert rows[TID_HARNESS]["layers"] == ["probe", "backend"]
    assert rows[TID_OK]["duration_ms"] == 610


def test_the_class_column_names_the_cause(log: Path) -> None:
    rows = rows_of(log)
    assert rows[TID_ABORT]["class"] == "client-disconnect"
    assert rows[TID_OK]["class"] == "ok"
    assert "class" not in rows_of("--no-class", log)[TID_OK]


def test_the_fast_path_and_the_full_parse_agree(log: Path) -> None:
    with_class = rows_of(log)
    for row in with_class.values():
        row.pop("class")
    assert rows_of("--no-class", log) == with_class


def test_malformed_lines_are_skipped_counted_and_located_once(log: Path) -> None:
    r = run("tests", log)
    assert r.code == 0
    assert "Traceback" not in r.err
    assert {line.split()[0] for line in r.out.splitlines()[1:-2]} == {TID_OK, TID_ABORT, TID_ERROR, TID_HARNESS}
    notes = r.err.strip().splitlines()
    assert len(notes) == 1
    assert "skipped 2 malformed CVDIAG lines" in notes[0]
    assert f"{log}:17" in notes[0]


def test_gzip_is_read_transparently(tmp_path: Path) -> None:
    lines, counts = every_shape()
    gz = write(tmp_path / "app.log.gz", lines, gz=True)
    assert {t: r["events"] for t, r in rows_of(gz).items()} == counts


def test_stdin_is_read_from_a_pipe_and_from_dash(log: Path) -> None:
    data = log.read_bytes()
    assert rows_of(stdin=data) == rows_of("-", stdin=data) == rows_of(log)


def test_gzip_on_stdin_is_read(log: Path) -> None:
    assert rows_of(stdin=gzip.compress(log.read_bytes())) == rows_of(log)


def test_directories_are_read_recursively_and_merged_by_time(tmp_path: Path) -> None:
    ok, ab = happy(), aborted()
    (tmp_path / "a" / "b").mkdir(parents=True)
    write(tmp_path / "a" / "backend.log", [f"CVDIAG {compact(e)}" for e in ok[::2] + ab])
    write(tmp_path / "a" / "b" / "worker.log", [f"CVDIAG {compact(e)}" for e in ok[1::2]])
    r = run("grep", "--test-id", TID_OK, tmp_path)
    assert r.code == 0, r.err
    got = [json.loads(line)["ts"] for line in r.out.splitlines()]
    assert got == [e["ts"] for e in ok]


def test_binary_garbage_and_a_cut_file_never_crash(tmp_path: Path) -> None:
    rng = random.Random(7)
    good = "\n".join(f"CVDIAG {compact(e)}" for e in happy()).encode()
    junk = bytes(rng.randrange(256) for _ in range(20000)) + b"CVDIAG {\x00\xff\n"
    path = tmp_path / "mixed.bin"
    path.write_bytes(junk + good + b"\n" + good[: len(good) // 2])  # ends mid-envelope
    r = run("tests", "--json", path)
    assert r.code == 0
    assert "Traceback" not in r.err
    assert "malformed" in r.err
    assert json.loads(r.out)[0]["events"] >= len(happy())


def test_a_cut_gzip_still_yields_what_it_had(tmp_path: Path) -> None:
    data = gzip.compress(("\n".join(f"CVDIAG {compact(e)}" for e in happy() * 50) + "\n").encode())
    path = tmp_path / "cut.log.gz"
    cut = data[: len(data) * 2 // 3]
    path.write_bytes(cut)
    held = zlib.decompressobj(wbits=31).decompress(cut).decode().split("\n")[:-1]  # its whole lines
    assert 0 < len(held) < len(happy()) * 50
    r = run("tests", "--json", path)
    assert r.code == 0, r.err
    (row,) = json.loads(r.out)
    assert (row["test_id"], row["events"]) == (TID_OK, len(held))
    assert f"{path} is cut: read what it held" in r.err
    r = run("grep", "--test-id", TID_OK, path)
    assert [json.loads(line) for line in r.out.splitlines()] == [
        json.loads(line.removeprefix("CVDIAG ")) for line in held
    ]


def test_very_long_lines_up_to_the_8_mib_limit_are_read(tmp_path: Path) -> None:
    big = envelope(TID_OK, "backend.error.caught", 0.0, outcome="err", metadata={"message_scrubbed": "x" * 300_000})
    path = write(tmp_path / "long.log", ["y" * 5_000_000, f"CVDIAG {compact(big)}"])
    assert rows_of(path)[TID_OK]["terminal"] == "error"
    assert rows_of(stdin=path.read_bytes())[TID_OK]["terminal"] == "error"


def test_timeline_orders_layers_and_files_and_calls_out_silences(tmp_path: Path) -> None:
    ab = aborted()
    write(tmp_path / "one.log", [f"CVDIAG {compact(ab[2])}"])
    write(tmp_path / "two.log", [f"CVDIAG {compact(e)}" for e in ab[:2]])
    r = run("timeline", TID_ABORT, tmp_path / "one.log", tmp_path / "two.log")
    assert r.code == 0, r.err
    out = r.out
    assert out.index("backend.request.ingress") < out.index("backend.sse.first_byte") < out.index("backend.sse.aborted")
    assert "no event for 5.2 s" in out
    assert "verdict: client-disconnect" in out


def test_timeline_accepts_a_unique_prefix_and_any_adopted_id(log: Path) -> None:
    r = run("timeline", TID_ERROR, log)
    assert r.code == 0, r.err
    assert r.out.startswith(f"test {TID_ERROR}  slug agno  {len(errored())} events\n")
    assert "verdict: server-error" in r.out
    r = run("timeline", "d4-agno", log)
    assert r.code == 0
    assert r.out.startswith(f"test {TID_HARNESS}  slug agno  ")
    assert "probe.message.send" in r.out


def test_timeline_refuses_an_ambiguous_prefix_naming_the_candidates(log: Path) -> None:
    r = run("timeline", "0190a9c0", log)
    assert r.code == 1
    assert TID_OK in r.err and TID_ABORT in r.err


def test_timeline_of_an_unknown_id_exits_1_naming_the_closest(log: Path) -> None:
    r = run("timeline", TID_OK[:-2] + "99", log)
    assert r.code == 1
    assert "closest" in r.err and TID_OK in r.err
    assert r.out == ""


def test_timeline_json_lists_the_envelopes_in_order(log: Path) -> None:
    r = run("timeline", "--json", TID_OK, log)
    doc = json.loads(r.out)
    assert doc["test_id"] == TID_OK
    assert [e["boundary"] for e in doc["events"]] == [e["boundary"] for e in happy()]
    assert doc["diagnosis"]["class"] == "ok"


def test_breadcrumbs_show_on_the_timeline_but_never_count_as_envelopes(log: Path) -> None:
    r = run("timeline", TID_ERROR, log)
    assert "breadcrumb ingress" in r.out
    assert rows_of(log)[TID_ERROR]["events"] == len(errored())
    doc = json.loads(run("timeline", "--json", TID_ERROR, log).out)
    assert len(doc["events"]) == len(errored()) and doc["breadcrumbs"][0]["run_id"] == "r1"


def test_with_logs_places_the_apps_own_lines_by_their_time(log: Path) -> None:
    assert "request failed" not in run("timeline", TID_ERROR, log).out
    out = run("timeline", TID_ERROR, log, "--with-logs", env={"COLUMNS": "200"}).out  # the log line whole
    assert out.index("backend.error.caught") < out.index("request failed")


def test_grep_streams_matching_envelopes_as_ndjson(log: Path) -> None:
    r = run("grep", "--boundary", "backend.sse.*", "--outcome", "err", log)
    assert r.code == 0
    lines = [json.loads(line) for line in r.out.splitlines()]
    assert [(e["test_id"], e["boundary"]) for e in lines] == [(TID_ABORT, "backend.sse.aborted")]


def test_grep_raw_prints_the_original_lines(log: Path) -> None:
    r = run("grep", "--raw", "--test-id", TID_ABORT, "--layer", "backend", log)
    assert r.out.splitlines()[0].startswith("2026-11-21T10:00:01.000000000Z stdout F CVDIAG {")


def test_grep_time_window(log: Path) -> None:
    r = run("grep", "--since", "2026-11-21T10:00:02Z", "--until", "2026-11-21T10:00:02.999Z", log)
    assert {json.loads(line)["test_id"] for line in r.out.splitlines()} == {TID_ERROR}


def test_grep_exits_1_when_nothing_matches(log: Path) -> None:
    r = run("grep", "--slug", "nobody", log)
    assert (r.code, r.out) == (1, "")


def test_stats_reports_outcomes_and_percentiles(log: Path) -> None:
    doc = json.loads(run("stats", "--json", log).out)
    rows = {(r["slug"], r["boundary"]): r for r in doc["boundaries"]}
    assert rows[("agno", "backend.sse.aborted")]["err"] == 1
    latency = {r["metric"]: r for r in doc["latency"]}
    assert latency["llm_latency_ms"]["count"] == 2
    assert latency["llm_latency_ms"]["max"] == 480


def test_validate_passes_a_clean_log(tmp_path: Path) -> None:
    path = write(tmp_path / "clean.log", [f"CVDIAG {compact(e)}" for e in happy() + aborted()])
    r = run("validate", path)
    assert r.code == 0, r.out
    assert "checked 10 envelopes: 0 invalid" in r.out


def test_validate_reports_each_problem_with_file_line_and_reason(tmp_path: Path) -> None:
    bad = happy()[3]
    bad["metadata"]["api_key"] = "x"
    bad["span_id"] = "XYZ"
    del bad["edge_headers"]["via"]
    path = write(tmp_path / "bad.log", [f"CVDIAG {compact(happy()[0])}", f"CVDIAG {compact(bad)}", "CVDIAG {cut"])
    r = run("validate", path)
    assert r.code == 1
    assert f"{path}:2: span_id is not 16 lowercase hex" in r.out
    assert "api_key" in r.out and "edge_headers keys differ" in r.out
    assert f"{path}:3: cut or not JSON" in r.out
    doc = json.loads(run("validate", "--json", path).out)
    assert (doc["checked"], doc["invalid"], doc["malformed"]) == (2, 1, 1)


def test_diagnose_prints_the_verdict_as_json(log: Path) -> None:
    r = run("diagnose", "--json", TID_ERROR, log)
    assert r.code == 0, r.err
    (verdict,) = json.loads(r.out)
    assert set(verdict) == {"test_id", "class", "confidence", "reason", "evidence"}
    assert verdict["class"] == "server-error"
    every = json.loads(run("diagnose", "--all", "--json", log).out)
    assert {v["test_id"] for v in every} == {TID_OK, TID_ABORT, TID_ERROR, TID_HARNESS}


def test_tests_filters(log: Path) -> None:
    assert set(rows_of("--failed", log)) == {TID_ABORT, TID_ERROR}
    assert set(rows_of("--since", "2026-11-21T10:00:02.5Z", log)) == {TID_HARNESS}
    r = run("tests", "--slug", "nobody", log)
    assert (r.code, r.out) == (1, "no test matches the filters\n")


def test_piped_output_has_no_escape_codes(log: Path) -> None:
    for args in (("tests",), ("timeline", TID_ABORT), ("stats",), ("validate",)):
        r = run(*args, log)
        assert ESC not in r.out and ESC not in r.err


def test_no_color_is_respected_on_a_terminal(log: Path) -> None:
    pytest.importorskip("pty")
    env = {**os.environ, "NO_COLOR": "1", "TERM": "xterm-256color"}
    code, out = on_a_terminal("tests", log, env=env)
    assert code == 0
    assert TID_ABORT.encode() in out and b"\x1b[" not in out
    assert b"4 tests, 2 failed, on 2026-11-21 (UTC)\n" in out


def test_usage_errors_exit_2_and_missing_files_exit_1(tmp_path: Path) -> None:
    r = run("tests", "--no-such-flag")
    assert (r.code, r.out) == (2, "")
    assert r.err.startswith("usage: cvdiag tests ")
    assert r.err.endswith("cvdiag tests: error: unrecognized arguments: --no-such-flag\n")
    r = run("grep", "--since", "yesterday-ish", tmp_path)
    assert r.code == 2
    assert "cvdiag grep: error: argument --since: not a time: 'yesterday-ish'" in r.err
    r = run()
    assert (r.code, r.out) == (2, "")
    assert (
        r.err.startswith("usage: cvdiag [-h] [--version] COMMAND ...") and "  compare   two tests side by side" in r.err
    )
    r = run("tests", tmp_path / "nope.log")
    assert (r.code, r.out) == (1, "")
    assert r.err.startswith("cvdiag: ") and "nope.log" in r.err and "Traceback" not in r.err


def test_an_input_without_cvdiag_lines_exits_1(tmp_path: Path) -> None:
    path = write(tmp_path / "plain.log", ["hello", "world"])
    said = {
        "tests": "no tests found\n",
        "stats": "no envelopes found\n",
        "validate": "checked 0 envelopes: 0 invalid, 0 malformed lines\n",
        "grep": "",
    }
    for cmd, out in said.items():
        r = run(cmd, path)
        assert (r.code, r.out) == (1, out), cmd
        # an empty answer says what was read and why (test_first_hour.py pins the words)
        assert ("no CVDIAG line among them" in r.err) == (cmd in ("tests", "stats")), cmd


def test_demo_is_dispatched_lazily() -> None:
    r = run("demo", "--help")
    assert r.code == 0, r.err
    assert r.out.startswith("usage: cvdiag demo [-h] [--log LOG]")


def test_grep_follow_prints_lines_appended_later(tmp_path: Path) -> None:
    path = write(tmp_path / "live.log", [f"CVDIAG {compact(e)}" for e in happy()[:2]])
    proc = subprocess.Popen([*command(), "grep", "--follow", "--test-id", TID_ABORT, str(path)], stdout=subprocess.PIPE)
    try:
        time.sleep(0.5)
        with path.open("a") as fh:
            fh.write(f"noise\nCVDIAG {compact(aborted()[2])}\n")
        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ)
        assert sel.select(timeout=30), "no output from --follow"
        line = proc.stdout.readline()
        assert json.loads(line)["boundary"] == "backend.sse.aborted"
    finally:
        proc.kill()
        proc.wait()


def test_static_fixture_of_every_shape_reads(tmp_path: Path) -> None:
    rows = rows_of(DATA / "every-shape.log")
    assert rows[TID_ABORT]["status"] == "fail"
    assert rows_of(DATA / "every-shape.log.gz") == rows


@pytest.mark.parametrize("mode", [(), ("--no-class",)])
def test_two_worker_processes_give_the_same_rows_as_one(tmp_path: Path, mode: tuple[str, ...]) -> None:
    lines, _ = every_shape()
    path = write(tmp_path / "app.log", lines * 3)
    force = {"CVDIAG_PARALLEL_MIN_BYTES": "0"}
    one = run("tests", "--json", "-j", "1", *mode, path, env=force)
    two = run("tests", "--json", "-j", "2", *mode, path, env=force)
    assert one.code == two.code == 0
    assert json.loads(one.out) == json.loads(two.out)
    assert one.err == two.err  # the same malformed-line note, counted once


def test_a_small_evidence_budget_takes_more_passes_not_other_answers(log: Path) -> None:
    tight = {"CVDIAG_EVIDENCE_BUDGET": "1"}
    assert json.loads(run("tests", "--json", log, env=tight).out) == json.loads(run("tests", "--json", log).out)
    every = run("diagnose", "--all", "--json", env=tight, stdin=log.read_bytes())
    assert {v["test_id"]: v["class"] for v in json.loads(every.out)}[TID_ABORT] == "client-disconnect"


@pytest.mark.parametrize("budget", ["0", "-5", "many"])
def test_an_evidence_budget_below_one_or_not_a_number_still_answers(log: Path, budget: str) -> None:
    # A budget of 0 used to pass over the log forever; "many" crashed at import.
    r = run("tests", "--json", log, env={"CVDIAG_EVIDENCE_BUDGET": budget}, timeout=60)
    assert r.code == 0, r.err
    assert json.loads(r.out) == json.loads(run("tests", "--json", log).out)


def test_a_directory_of_many_files_is_read_without_holding_them_all_open(tmp_path: Path) -> None:
    envs = happy()
    for i in range(80):
        write(tmp_path / f"part-{i:03d}.log", [f"CVDIAG {compact(envs[i % len(envs)])}"])
    r = run("grep", tmp_path)
    assert r.code == 0, r.err
    assert len(r.out.splitlines()) == 80
    assert rows_of(tmp_path)[TID_OK]["events"] == 80


def test_the_read_side_imports_neither_starlette_nor_structlog_nor_rich() -> None:
    code = (
        "import sys, cvdiag.face.cli; print(sorted(m for m in ('starlette', 'structlog', 'rich') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


@pytest.mark.parametrize("command", [["tests"], ["report", "-o", "page.html"], ["stats"]])
def test_a_command_in_one_process_never_loads_the_process_pool(tmp_path: Path, command: list[str]) -> None:
    """``multiprocessing`` and ``pickle`` cost a one-process command 25 M instructions of
    start-up (a tenth of it): only a command that forks workers loads them."""
    log = write(tmp_path / "app.log", [f"CVDIAG {compact(e)}" for e in (*happy(), *aborted())])
    code = (
        "import sys\nfrom cvdiag.face.cli import main\n"
        f"code = main([*{command!r}, '-j', '1', {str(log)!r}])\n"
        "print(code, sorted(m for m in ('multiprocessing', 'pickle') if m in sys.modules), file=sys.stderr)"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, check=True)
    assert r.stderr.splitlines()[-1] == "0 []", r.stderr[-2000:]


def test_sse_events_read_from_their_head_give_the_verdict_a_full_parse_gives(tmp_path: Path) -> None:
    events = [envelope(TID_OK, "backend.sse.event", 0.6 + i / 100, metadata={"sequence_num": i}) for i in range(5)]
    envs = [*happy(), *events, *aborted()]
    plain = write(tmp_path / "plain.log", [f"CVDIAG {compact(e)}" for e in envs])
    # Docker json-file lines always take the general parser: every envelope JSON-parsed.
    parsed = write(tmp_path / "docker.log", [json.dumps({"log": f"CVDIAG {compact(e)}\n"}) for e in envs])
    assert {e["boundary"] for e in envs} >= {"backend.sse.event", "backend.request.ingress"}
    verdicts = [json.loads(run("diagnose", "--all", "--json", path).out) for path in (plain, parsed)]
    assert verdicts[0] == verdicts[1]


def test_a_canonical_line_whose_metadata_is_not_json_is_malformed_not_folded(tmp_path: Path) -> None:
    envs = [*happy(), envelope(TID_OK, "backend.sse.event", 0.6, metadata={"sequence_num": 0})]
    lines = [f"CVDIAG {compact(e)}" for e in envs]
    sse = next(i for i, e in enumerate(envs) if e["boundary"] == "backend.sse.event")
    lines[sse] = lines[sse].replace('"metadata":{', '"metadata":{,', 1)
    r = run("tests", "--json", write(tmp_path / "app.log", lines))
    assert r.code == 0
    assert "malformed" in r.err
    assert {row["test_id"]: row for row in json.loads(r.out)}[TID_OK]["events"] == len(envs) - 1
