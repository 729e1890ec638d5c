"""The real ``cvdiag`` on logs that change under it or explode (issue 18, items 10-15).

A log truncated while it is read, hostile inputs that are small compressed and huge
once read, fields of any JSON type, a byte-order mark, the earlier emitters' envelopes:
each is read with a plain note or counted as malformed, never a crash, a hang or
unbounded memory.
"""

from __future__ import annotations

import json
from pathlib import Path

from cvdiag_cli import run
from logkit import TID_ABORT, TID_OK, aborted, compact, happy

CRASH = {"CVDIAG_TRACEBACK": "1"}


def clean(err: str) -> str:
    assert "Traceback" not in err and "internal error" not in err, err
    return err


# -- item 14: a byte-order mark ----------------------------------------------------------


def test_a_byte_order_mark_before_a_bare_ndjson_file_hides_no_envelope(tmp_path: Path) -> None:
    envs = happy() + aborted()
    path = tmp_path / "bom.ndjson"
    path.write_bytes(b"\xef\xbb\xbf" + "".join(compact(e) + "\n" for e in envs).encode())
    grep = run("grep", path, env=CRASH)
    assert [json.loads(x)["span_id"] for x in grep.out.splitlines()] == [e["span_id"] for e in envs]
    for flags in ([], ["--no-class"]):
        rows = {row["test_id"]: row for row in json.loads(run("tests", "--json", *flags, path, env=CRASH).out)}
        assert rows[TID_OK]["events"] == len(happy())
        assert rows[TID_ABORT]["events"] == len(aborted())
    v = run("validate", path, env=CRASH)
    assert f"checked {len(envs)} envelopes: 0 invalid, 0 malformed lines" in v.out, v.out + clean(v.err)


# -- item 15: the optional flags ---------------------------------------------------------


def test_validate_reads_an_absent_optional_flag_as_false(tmp_path: Path) -> None:
    """Spec section 2: a reader, ``validate`` included, treats an absent
    ``_metadata_dropped``/``_truncated`` as false (earlier emitters never wrote them)."""
    envs = happy()
    for i, env in enumerate(envs):
        if i % 3 != 1:
            del env["_metadata_dropped"]
        if i % 3 != 2:
            del env["_truncated"]
    path = tmp_path / "old.log"
    path.write_text("".join(f"CVDIAG {compact(e)}\n" for e in envs))
    r = run("validate", path, env=CRASH)
    assert r.code == 0, r.out
    assert f"checked {len(envs)} envelopes: 0 invalid" in r.out
    rows = {row["test_id"]: row for row in json.loads(run("tests", "--json", path, env=CRASH).out)}
    assert rows[TID_OK]["events"] == len(envs)
    # Still strict on the required fields and on the flags' type when present.
    del envs[0]["span_id"]
    envs[1]["_truncated"] = "no"
    path.write_text("".join(f"CVDIAG {compact(e)}\n" for e in envs))
    r = run("validate", path, env=CRASH)
    assert r.code == 1
    assert f"{path}:1: missing fields: span_id" in r.out
    assert f"{path}:2: _truncated has the wrong type (str)" in r.out
