"""The compiled code proven against the Python path on what a fuzzing of both found
(issue 35): a time with a signed millisecond, metadata nested past what orjson writes or
reads inside an envelope, a line with several markers, a folder set up twice, a module
built from another source. Each runs the real ``cvdiag`` both ways
(``CVDIAG_COMPILED=0``) and asserts what a user sees, and that it is the same.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cvdiag_cli import run
from logkit import TID_ERROR, TID_OK, compact, envelope, errored, happy

from cvdiag.contract import compiled as switch
from cvdiag.read import fold
from cvdiag.read.jsonout import MAX_DEPTH, TOO_DEEP, dumps

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(
    fold._CFOLD is None and not os.environ.get("CVDIAG_REQUIRE_E2E"),
    reason="the compiled fold is not built (no C compiler at install)",
)
BOTH = ("1", "0")  # CVDIAG_COMPILED: the compiled path, then the Python path


def _lines(*envs: dict[str, Any], prefix: str = "CVDIAG ") -> list[str]:
    return [prefix + compact(e) for e in envs]


def _both(*args: str | Path) -> list[tuple[int, str, str]]:
    """``cvdiag ARGS`` on each path: (exit code, stdout, stderr), a report's generation time taken out."""
    out = []
    for on in BOTH:
        r = run(*args, env={"CVDIAG_COMPILED": on})
        out.append((r.code, r.out, r.err))
    return out


def _written(lines: list[str], tmp_path: Path) -> Path:
    """``lines`` as an app's log file."""
    log = tmp_path / "app.log"
    log.write_text("\n".join(lines) + "\n")
    return log


def _rows(said: dict[str, str]) -> dict[str, dict]:
    """``tests --json``'s rows by test id (its stderr note cut off)."""
    return {r["test_id"]: r for r in json.loads(said["tests --json"].split("\ncvdiag:")[0])}


def _same_everywhere(log: Path, tmp_path: Path) -> dict[str, str]:
    """tests, stats, diagnose --all, validate and report of ``log``, the same on both paths:
    what the compiled path printed, by command."""
    said = {}
    for cmd in (["tests"], ["stats"], ["diagnose", "--all"], ["validate"], ["tests", "--json"]):
        compiled, python = _both(*cmd, log)
        assert compiled == python, cmd
        said[" ".join(cmd)] = compiled[1] + compiled[2]
    pages = []
    for on in BOTH:
        page = tmp_path / f"report-{on}.html"
        r = run("report", log, "-o", page, env={"CVDIAG_COMPILED": on})
        assert r.code == 0 and page.exists(), r.err
        pages.append(re.sub(r'"generated":"[^"]*"', "", page.read_text()))
    assert pages[0] == pages[1]
    said["report"] = pages[0]
    return said


# -- a time with a signed millisecond ------------------------------------------------------


def test_a_signed_millisecond_is_no_time_on_either_path(tmp_path: Path) -> None:
    """``int`` reads "-12", so the Python checks took ``…:00.-12Z`` for a time that has no
    order key; the compiled fold then ordered the event by leftover stack memory. Now it is
    a malformed line to every reader."""
    lines = _lines(*happy(), *errored())
    # the LLM answer (its metadata read alone by the compiled fold) and a head-only line
    bad = [i for i, line in enumerate(lines) if "llm.call.response" in line or "agent.enter" in line]
    assert len(bad) == 2
    for i in bad:
        lines[i] = re.sub(r'"ts":"([^"]{19})\.\d{3}Z"', r'"ts":"\1.-12Z"', lines[i])
    said = _same_everywhere(_written(lines, tmp_path), tmp_path)
    assert "ts is not an RFC 3339 time" in said["validate"]
    assert "skipped 2 malformed CVDIAG lines" in said["tests"]
    rows = _rows(said)
    assert rows[TID_OK]["events"] == len(happy()) - 2


# -- metadata nested deep --------------------------------------------------------------------


@pytest.mark.parametrize("depth", [200, 300, 600, 1023, 1100])
def test_one_line_nested_deep_never_costs_the_page(tmp_path: Path, depth: int) -> None:
    """orjson writes 254 levels and reads 1024: the report drew nothing (exit 3) for one
    line nested 255-488 deep on the compiled path, and on both past 488. Now the page is
    written, the same on both paths, the line's event drawn with what is too deep left out
    (or, past what a line may hold, the line counted as malformed)."""
    deep = '{"a":' * depth + "1" + "}" * depth
    ingress = envelope(TID_ERROR, "backend.request.ingress", 2.5, metadata={"method": "POST", "path": "/chat"})
    line = _lines(ingress)[0].replace('"path":"/chat"', '"path":"/chat","deep":' + deep)
    log = tmp_path / "app.log"
    log.write_text("\n".join([*_lines(*happy(), *errored()), line]) + "\n")
    said = _same_everywhere(log, tmp_path)
    if depth < 1023:  # inside the envelope's object: 1024 levels and more are no JSON to orjson
        assert (TOO_DEEP in said["report"]) == (depth + 2 > MAX_DEPTH)
        assert "malformed" not in said["tests"]
    else:
        assert "skipped 1 malformed CVDIAG line" in said["tests"]


def test_dumps_writes_any_depth_orjson_can_read() -> None:
    value: Any = "leaf"
    for _ in range(1023):
        value = [value]
    text = dumps(value)
    assert text.startswith(b"[" * MAX_DEPTH + b'"' + TOO_DEEP.encode())
    shallow: Any = "leaf"
    for _ in range(MAX_DEPTH):
        shallow = [shallow]
    assert dumps(shallow) == json.dumps(shallow, separators=(",", ":")).encode()


# -- several markers on one line ---------------------------------------------------------------


def test_a_line_with_several_markers_reads_alike_in_every_command_and_path(tmp_path: Path) -> None:
    """The first marker of a line decides (the general parser's rule): `CVDIAG {"x":1}
    CVDIAG {…}` is malformed to ``tests`` and ``stats`` alike (``stats`` counted it on the
    compiled path, ``tests`` on both); a marker that starts nothing (``CVDIAG:``) is skipped."""
    happy_lines, error_lines = _lines(*happy()), _lines(*errored())
    lines = [
        *['CVDIAG {"x":1} ' + line for line in happy_lines[:3]],  # malformed: the first is no envelope
        *["app CVDIAG: ready " + line for line in happy_lines[3:]],  # the second marker is the first to start one
        *[line[len("CVDIAG ") :] + " CVDIAG {}" for line in error_lines[:1]],  # bare, then a marker: the marker's
        *error_lines[1:],
        "CVDIAG_EVENT " + happy_lines[0][len("CVDIAG ") :] + " " + error_lines[0],  # the Java marker comes first
    ]
    said = _same_everywhere(_written(lines, tmp_path), tmp_path)
    assert "skipped 5 malformed CVDIAG lines" in said["tests"]
    assert "skipped 5 malformed CVDIAG lines" in said["stats"]
    rows = _rows(said)
    assert rows[TID_OK]["events"] == len(happy_lines) - 3
    assert rows[TID_ERROR]["events"] == len(error_lines) - 1
    boundaries = said["stats"].split("\n\n")[0].splitlines()[1:]  # the first table: envelopes per boundary
    counted = sum(int(row.split()[2]) for row in boundaries)
    assert counted == len(happy_lines) - 3 + len(error_lines) - 1


# -- a folder set up twice, or not at all -----------------------------------------------------


def test_a_folder_is_set_up_once() -> None:
    """A second ``__init__`` appended the head fields past the folder's 32 slots."""
    reader = fold.line_reader()
    with pytest.raises(RuntimeError, match="initialised once"):
        reader.__init__(**_folder_arguments())
    bare = fold._CFOLD.Folder.__new__(fold._CFOLD.Folder)
    with pytest.raises(RuntimeError, match="not set up"):
        bare.fold_env({"test_id": "t", "boundary": "b", "ts": "x"}, 0, 0, 1)
    with pytest.raises(RuntimeError, match="not set up"):
        bare.buffer(b"CVDIAG {}\n", 0, 10, 0, None, None, None, None, [])
    with pytest.raises(ValueError):
        bare.event(b"", 0, 0, 0, b"", {})


def _folder_arguments() -> dict[str, Any]:
    captured: dict[str, Any] = {}

    class Spy:
        def __init__(self, **kw: Any) -> None:
            captured.update(kw)

    real, fold._CFOLD = fold._CFOLD, type("M", (), {"Folder": Spy})
    try:
        fold.line_reader()
    finally:
        fold._CFOLD = real
    return captured


# -- a module built from another source ---------------------------------------------------------


def test_the_modules_here_were_built_from_the_sources_beside_them() -> None:
    """What CI checks first: a checkout whose .c changed since the build runs no stale C."""
    from cvdiag.write import _cemit

    for module in (fold._CFOLD, _cemit):
        assert switch.stale(module) is None
        source = Path(module.__file__).with_name(module.__name__.rpartition(".")[2] + ".c")
        assert switch.source_hash(source) == module.SOURCE_HASH


def test_a_module_older_than_its_source_refuses_to_load_and_says_so(tmp_path: Path) -> None:
    copy = tmp_path / "cvdiag"
    shutil.copytree(ROOT / "cvdiag", copy, ignore=shutil.ignore_patterns("__pycache__"))
    with (copy / "read" / "_cfold.c").open("a") as f:
        f.write("/* changed after the build */\n")
    probe = (
        "from cvdiag.read import fold; from cvdiag.write import emitter;"
        " print(fold.compiled(), emitter._line_compiled is not None)"
    )
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    env.pop("CVDIAG_COMPILED", None)
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert proc.stdout.split() == ["False", "True"]  # the fold refused; the writer, unchanged, runs
    assert "cvdiag.read._cfold was built from another _cfold.c than the one beside it" in proc.stderr
    assert "rebuild it" in proc.stderr and proc.stderr.count("RuntimeWarning") == 1
