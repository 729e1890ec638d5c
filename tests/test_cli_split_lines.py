"""Lines a container runtime split into several records, read back as one envelope.

Docker's json-file driver and Kubernetes CRI cut a line at 16 KiB; a debug-tier
envelope (up to 16,384 bytes, plus the ``CVDIAG `` prefix) gets cut. Every test runs
the installed ``cvdiag`` on files written here.
"""

from __future__ import annotations

import gzip
import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from cvdiag_cli import run
from logkit import TID_OK, compact, docker_line, envelope, happy, ts

TID_BIG = "0190a9c0-1a2b-7c3d-8e4f-5a6b7c8d9e10"
TID_BIG2 = "0190a9c0-1a2b-7c3d-8e4f-5a6b7c8d9e11"
DOCKER_SPLIT = 16 * 1024  # where Docker cuts: bytes of log text per record
INCOMPLETE = "split container record never completed"

# Every width of UTF-8 (and a surrogate pair in JSON's \u escapes): a cut can fall inside any.
BLOB = "trace é € 😀 " * 1100


def big(test_id: str = TID_BIG, at: float = 0.3, blob: str = BLOB) -> dict[str, Any]:
    """An envelope of a custom boundary, longer than one Docker record (about 20 KB)."""
    return envelope(test_id, "backend.debug.snapshot", at, metadata={"blob": blob})


def line_of(env: dict[str, Any]) -> bytes:
    return f"CVDIAG {compact(env)}".encode()


def cuts(data: bytes, *at: int) -> list[bytes]:
    edges = [0, *at, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(edges)]


def docker_records(text: bytes, parts: list[bytes] | None = None, *, stream: str = "stdout") -> list[bytes]:
    """Docker json-file records of one line: the JSON string body of ``text`` cut into
    ``parts`` (raw bytes of that body), only the last ending in ``\\n``."""
    parts = parts if parts is not None else cuts(text, DOCKER_SPLIT)
    out = []
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        body = _json_body(part) + (b"\\n" if last else b"")
        out.append(b'{"log":"' + body + f'","stream":"{stream}","time":"{ts(0.3)[:-1]}{i:06d}Z"}}'.encode())
    return out


def _json_body(raw: bytes) -> bytes:
    """``raw`` as the inside of a JSON string, non-ASCII left as UTF-8 bytes (as Docker writes it)."""
    out = bytearray()
    for b in raw:
        if b == 0x22 or b == 0x5C:
            out += b"\\" + bytes([b])
        elif b < 0x20:
            out += f"\\u{b:04x}".encode()
        else:
            out.append(b)
    return bytes(out)


def cri_records(data: bytes, parts: list[bytes] | None = None, *, stream: str = "stdout") -> list[bytes]:
    """CRI records of one line: raw bytes, tagged P up to the F one."""
    parts = parts if parts is not None else cuts(data, DOCKER_SPLIT)
    return [
        f"2026-11-21T10:00:00.{i:09d}Z {stream} {'F' if i == len(parts) - 1 else 'P'} ".encode() + part
        for i, part in enumerate(parts)
    ]


def write(path: Path, lines: list[bytes | str], *, gz: bool = False) -> Path:
    data = b"\n".join(x.encode() if isinstance(x, str) else x for x in lines) + b"\n"
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


def noise_and(*records: bytes | str) -> list[bytes | str]:
    """Records between ordinary lines and whole envelopes, as a real log has them."""
    ok = happy()
    return [
        "2026-11-21 10:00:00,000 INFO uvicorn: Started server process",
        docker_line(f"CVDIAG {compact(ok[0])}", 0.0),
        *records,
        docker_line(f"CVDIAG {compact(ok[1])}", 0.01),
        "2026-11-21 10:00:00,020 INFO app: done",
    ]


def grepped(*args: str | Path) -> list[dict[str, Any]]:
    r = run("grep", *args)
    assert r.code == 0, r.err
    assert r.err == ""
    return [json.loads(x) for x in r.out.splitlines()]


def blobs(envs: list[dict[str, Any]]) -> dict[str, str]:
    return {e["test_id"]: e["metadata"]["blob"] for e in envs if e["boundary"] == "backend.debug.snapshot"}


# -- the shapes of a split line ---------------------------------------------------------


def test_a_docker_line_cut_in_two_records_is_one_envelope(tmp_path: Path) -> None:
    env = big()
    records = docker_records(line_of(env))
    assert len(records) == 2
    log = write(tmp_path / "app.log", noise_and(*records))
    found = grepped(log)
    assert [e["test_id"] for e in found] == [TID_OK, TID_BIG, TID_OK]
    assert found[1] == env


def test_a_docker_line_cut_in_three_records_is_one_envelope(tmp_path: Path) -> None:
    env = big()
    data = line_of(env)
    log = write(tmp_path / "app.log", noise_and(*docker_records(data, cuts(data, 6000, 12000))))
    assert blobs(grepped(log)) == {TID_BIG: BLOB}


def test_a_cri_line_tagged_p_p_f_is_one_envelope(tmp_path: Path) -> None:
    env = big()
    data = line_of(env)
    log = write(tmp_path / "app.log", noise_and(*cri_records(data, cuts(data, 5000, 10000))))
    assert [e for e in grepped(log) if e["test_id"] == TID_BIG] == [env]


@pytest.mark.parametrize("records", [docker_records, cri_records])
def test_interleaved_stdout_and_stderr_parts_are_joined_per_stream(tmp_path: Path, records: Any) -> None:
    out_env, err_env = big(TID_BIG), big(TID_BIG2, 0.4, blob=BLOB[::-1])
    out = records(line_of(out_env), stream="stdout")
    err = records(line_of(err_env), stream="stderr")
    # The runtime copies both streams into one file: their records interleave.
    log = write(tmp_path / "app.log", noise_and(out[0], err[0], out[1], err[1]))
    assert blobs(grepped(log)) == {TID_BIG: BLOB, TID_BIG2: BLOB[::-1]}
    raw = run("grep", "--raw", "--test-id", TID_BIG2, log).out.splitlines()
    assert len(raw) == 2  # its own records, not the other stream's
    assert all('"stream":"stderr"' in x or " stderr " in x for x in raw)


def _cut_inside_a_character(data: bytes, width: int) -> int:
    """An offset that falls inside a ``width``-byte UTF-8 character of ``data``."""
    probe = {2: "é", 3: "€", 4: "😀"}[width].encode()
    return data.index(probe, 9000) + 1


@pytest.mark.parametrize("width", [2, 3, 4])
@pytest.mark.parametrize("records", [docker_records, cri_records])
def test_a_character_cut_between_records_is_whole_again(tmp_path: Path, records: Any, width: int) -> None:
    env = big()
    data = line_of(env)
    cut = _cut_inside_a_character(data, width)
    log = write(tmp_path / "app.log", noise_and(*records(data, cuts(data, cut))))
    assert blobs(grepped(log)) == {TID_BIG: BLOB}


def test_a_surrogate_pair_cut_between_docker_records_is_whole_again(tmp_path: Path) -> None:
    """A Docker log written with \\u escapes (ASCII-only JSON) cut between the two
    halves of a surrogate pair: each record alone is not even valid JSON text."""
    env = big()
    text = line_of(env).decode()
    units = text.encode("utf-16-le", "surrogatepass")
    cut = len(text[: text.index("😀", 9000)].encode("utf-16-le")) + 2  # between the two halves
    halves = [units[:cut].decode("utf-16-le", "surrogatepass"), units[cut:].decode("utf-16-le", "surrogatepass")]
    assert halves[0].endswith("\ud83d") and halves[1].startswith("\ude00")
    records = [
        json.dumps({"log": h + ("\n" if i else ""), "stream": "stdout", "time": ts(0.3)}, separators=(",", ":"))
        for i, h in enumerate(halves)
    ]
    log = write(tmp_path / "app.log", noise_and(*records))
    assert blobs(grepped(log)) == {TID_BIG: BLOB}


# -- split lines that never complete ----------------------------------------------------


@pytest.mark.parametrize("records", [docker_records, cri_records])
def test_a_split_line_cut_at_the_end_of_the_file_is_counted_malformed(tmp_path: Path, records: Any) -> None:
    first = records(line_of(big()))[0]
    log = write(tmp_path / "app.log", [*noise_and(), first])
    r = run("grep", log)
    assert r.code == 0
    assert [json.loads(x)["test_id"] for x in r.out.splitlines()] == [TID_OK, TID_OK]
    assert f"skipped 1 malformed CVDIAG line (first at {log}:5: {INCOMPLETE}" in r.err
    v = run("validate", log)
    assert v.code == 1
    assert f"{log}:5: {INCOMPLETE}" in v.out
    assert "checked 2 envelopes: 0 invalid, 1 malformed line" in v.out


def test_a_split_line_broken_by_another_line_is_malformed_and_that_line_still_reads(tmp_path: Path) -> None:
    first = docker_records(line_of(big()))[0]
    plain = envelope(TID_BIG2, "backend.agent.enter", 0.5, metadata={"agent_name": "a", "model_id": "m"})
    log = write(tmp_path / "app.log", noise_and(first, f"CVDIAG {compact(plain)}"))
    r = run("grep", log)
    assert [json.loads(x)["test_id"] for x in r.out.splitlines()] == [TID_OK, TID_BIG2, TID_OK]
    assert f"(first at {log}:3: {INCOMPLETE}" in r.err


def test_a_last_record_without_newline_that_holds_a_whole_envelope_still_reads(tmp_path: Path) -> None:
    """A container that exits after a line without ``\\n``: Docker writes it like a
    partial record, but nothing is missing."""
    env = envelope(TID_BIG, "backend.agent.enter", 0.5, metadata={"agent_name": "a", "model_id": "m"})
    record = json.dumps({"log": f"CVDIAG {compact(env)}", "stream": "stdout", "time": ts(0.5)}, separators=(",", ":"))
    log = write(tmp_path / "app.log", [*noise_and(), record])
    assert grepped(log)[-1] == env


# -- every path of the reader -----------------------------------------------------------


def _split_log(path: Path, *, gz: bool = False) -> Path:
    docker_env, cri_env = big(TID_BIG), big(TID_BIG2, 0.4)
    data = line_of(cri_env)
    return write(
        path,
        noise_and(*docker_records(line_of(docker_env)), *cri_records(data, cuts(data, 4000, 9000))),
        gz=gz,
    )


@pytest.mark.parametrize("records", [docker_records, cri_records])
def test_a_report_shows_split_lines_whole_in_its_details(tmp_path: Path, records: Any) -> None:
    """The report reads a detailed test's envelopes again where the pass found them: a
    split line's place spans all its records, and the other stream's between them."""
    from test_report import embedded, rows_by_id

    out_env, err_env = big(TID_BIG), big(TID_BIG2, 0.4, blob=BLOB[::-1])
    out, err = records(line_of(out_env), stream="stdout"), records(line_of(err_env), stream="stderr")
    log = write(tmp_path / "app.log", [*noise_and(), out[0], err[0], out[1], err[1]])  # last: nothing after to read
    page = tmp_path / "report.html"

    r = run("report", "--all", log, "-o", page)

    assert r.code == 0, r.err
    index, details = embedded(page.read_text())
    rows = rows_by_id(index)
    shown = {tid: details[rows[tid]["detail"]]["events"] for tid in (TID_BIG, TID_BIG2)}
    assert {tid: [e[5]["blob"] for e in events] for tid, events in shown.items()} == {
        TID_BIG: [BLOB],
        TID_BIG2: [BLOB[::-1]],
    }
    assert [details[rows[tid]["detail"]]["more"] for tid in (TID_BIG, TID_BIG2)] == [0, 0]  # none unread


def test_timeline_reads_past_the_record_that_holds_the_id(tmp_path: Path) -> None:
    log = _split_log(tmp_path / "app.log")
    for tid in (TID_BIG, TID_BIG2):
        r = run("timeline", "--json", tid, log)
        assert r.code == 0, r.err
        assert r.err == ""
        assert [e["metadata"]["blob"] for e in json.loads(r.out)["events"]] == [BLOB]
    assert "backend.debug.snapshot" in run("timeline", TID_BIG2, log).out


def test_timeline_of_a_big_file_searched_by_two_processes(tmp_path: Path) -> None:
    """Over 64 MB the id search is split at a newline near the middle; here the middle
    falls inside the first record, so the rest of the line is in the other half."""
    env = big()
    records = docker_records(line_of(env))
    filler = b"2026-11-21 10:00:00,000 INFO app: an ordinary line of the application log\n" * 450_000
    data = filler + b"\n".join(records) + b"\n" + filler
    (tmp_path / "big.log").write_bytes(data)
    assert len(filler) < len(data) // 2 < len(filler) + len(records[0])
    r = run("timeline", "--json", TID_BIG, tmp_path / "big.log")
    assert r.code == 0, r.err
    assert json.loads(r.out)["events"] == [env]


def test_validate_stats_and_diagnose_see_the_rejoined_envelopes(tmp_path: Path) -> None:
    log = _split_log(tmp_path / "app.log")
    v = run("validate", log)
    assert v.code == 0, v.out
    assert "checked 4 envelopes: 0 invalid, 0 malformed lines" in v.out
    s = run("stats", "--json", log)
    counts = {(b["slug"], b["boundary"]): b["count"] for b in json.loads(s.out)["boundaries"]}
    assert counts[("agno", "backend.debug.snapshot")] == 2
    d = run("diagnose", "--json", TID_BIG, log)
    assert d.code == 0, d.err
    assert d.err == ""
    assert [v["test_id"] for v in json.loads(d.out)] == [TID_BIG]


@pytest.mark.parametrize("no_class", [True, False])
def test_tests_counts_each_rejoined_envelope_once(tmp_path: Path, no_class: bool) -> None:
    log = _split_log(tmp_path / "app.log")
    r = run("tests", "--json", *(["--no-class"] if no_class else []), log)
    assert r.err == ""
    rows = {row["test_id"]: row["events"] for row in json.loads(r.out)}
    assert rows == {TID_OK: 2, TID_BIG: 1, TID_BIG2: 1}


def test_gzip_and_stdin_are_rejoined(tmp_path: Path) -> None:
    log = _split_log(tmp_path / "app.log.gz", gz=True)
    assert set(blobs(grepped(log))) == {TID_BIG, TID_BIG2}
    r = run("grep", "-", stdin=log.read_bytes())
    assert r.err == ""
    assert set(blobs([json.loads(x) for x in r.out.splitlines()])) == {TID_BIG, TID_BIG2}


def test_a_split_line_across_two_read_blocks_of_a_stream_is_rejoined(tmp_path: Path) -> None:
    """gzip and stdin are read 16 MiB at a time; the records of one line may sit on
    both sides of that boundary."""
    records = cri_records(line_of(big()))
    filler = b"2026-11-21T10:00:00.000000000Z stdout F an ordinary line of the application log\n"
    block = 16 << 20
    # The first record ends just before the block boundary; the second crosses it.
    head = filler * ((block - len(records[0]) - 100) // len(filler))
    pad = block - len(head) - len(records[0]) - 1 - 10
    data = head + b"x" * pad + b"\n" + records[0] + b"\n" + records[1] + b"\n" + filler
    assert len(head) + pad + 1 + len(records[0]) + 1 < block < len(data) - len(filler)
    log = tmp_path / "app.log.gz"
    log.write_bytes(gzip.compress(data, compresslevel=1))
    assert blobs(grepped(log)) == {TID_BIG: BLOB}


def test_a_real_debug_tier_envelope_cut_by_docker_reads_back(tmp_path: Path) -> None:
    """The emitter's own output just under the debug cap, cut where Docker cuts it."""
    from emitkit import capture

    import cvdiag

    cvdiag.register_boundary("backend.debug.chunks", layer="backend", tier="debug", metadata=("chunks",))
    sink = tmp_path / "sink.ndjson"
    chunk = "word é € 😀 " * 100  # the scrubber keeps strings up to 2,048 characters
    with capture(file=str(sink)), cvdiag.request_context(test_id=TID_BIG, slug="agno"):
        cvdiag.emit("backend.debug.chunks", {"chunks": []})
        cvdiag.flush()
        room = 16_380 - len(sink.read_bytes().strip())
        chunks = []
        while room > len(chunk.encode()) + 3 + 8:
            chunks.append(chunk)
            room -= len(chunk.encode()) + 2 + (len(chunks) > 1)
        chunks.append("x" * (room - 2 - (len(chunks) > 0)))
        cvdiag.emit("backend.debug.chunks", {"chunks": chunks})
    cvdiag.flush()
    env_line = sink.read_bytes().strip().splitlines()[-1]
    assert len(env_line) == 16_380  # under the emitter's cap: written whole
    assert json.loads(env_line)["metadata"]["chunks"] == chunks
    line = b"CVDIAG " + env_line  # the prefix tips it over Docker's 16 KiB
    log = write(tmp_path / "docker.log", noise_and(*docker_records(line)))
    assert grepped(log)[1] == json.loads(env_line)
    v = run("validate", log)
    assert (v.code, v.out) == (0, "checked 3 envelopes: 0 invalid, 0 malformed lines\n")
