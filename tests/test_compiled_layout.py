"""The compiled parts held to the one declared envelope layout (``contract/layout.py``):
the fold configured from it (each head field's kind and role handed in, its head-only
counters a size handed in), the writer refused when it writes other fields, and a head
field added in the table alone read alike by both paths.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from test_compiled_proven import _folder_arguments

from cvdiag.contract import layout
from cvdiag.contract.schema import ENVELOPE_FIELDS
from cvdiag.read import fold

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(
    fold._CFOLD is None and not os.environ.get("CVDIAG_REQUIRE_E2E"),
    reason="the compiled fold is not built (no C compiler at install)",
)


def test_the_modules_keep_the_layouts_roles_and_write_its_fields() -> None:
    from cvdiag.write import _cemit

    assert fold._CFOLD.ROLES == layout.ROLES
    assert _cemit.FIELDS == ENVELOPE_FIELDS


def _folder(**kw: Any) -> Any:
    """A line reader's folder with some of the layout's arguments replaced."""
    return fold._CFOLD.Folder(**{**_folder_arguments(), **kw})


def test_a_layout_that_does_not_fit_is_refused() -> None:
    good = fold._C_FIELDS
    no_duration = tuple((*f[:3], -1 if f[3] == layout.ROLES.index("duration") else f[3]) for f in good)
    with pytest.raises(ValueError, match="no head field has the role duration"):
        _folder(fields=no_duration)
    ts = layout.ROLES.index("ts")
    twice = tuple((*f[:3], ts) if f[0] == b',"slug":' else f for f in good)
    with pytest.raises(ValueError, match="is there twice"):
        _folder(fields=twice)
    with pytest.raises(ValueError, match="room for 16"):
        _folder(counters=17)


def test_a_fifth_counted_boundary_is_counted_not_a_pass_turned_off(tmp_path: Path) -> None:
    """The counters were a constant (4): a fifth counted boundary turned the compiled pass
    off in silence. Now their number is handed in."""
    from cvdiag.testing import envelope

    counted = {b"backend.sse.event": 4, b"backend.request.ingress": 0}
    tids: list[bytes] = []

    def admit(tid: bytes, full: bool) -> int:
        tids.append(tid)
        return 3  # a row and evidence

    folder = fold.compiled_folder(
        admit=admit,
        boundary_info=lambda b: (True, counted.get(b, -1)),
        fold_aggs=True,
        keep_lines=0,
        max_tests=10,
        counters=5,
    )
    lines = [envelope("backend.request.ingress", test_id="t-1"), *[envelope("backend.sse.event", test_id="t-1")] * 3]
    buf = b"".join(b"CVDIAG " + fold.orjson.dumps(e) + b"\n" for e in lines)

    def refuse(*a: Any) -> None:
        raise AssertionError(f"a plain line handed to Python: {a}")

    folder.buffer(buf, 0, len(buf), 0, refuse, refuse, True, refuse, [None])
    head = folder.take(0).head
    assert tids == [b"t-1"] and head.counters == (1, 0, 0, 0, 3)


def test_a_module_that_disagrees_with_the_layout_is_refused_saying_why() -> None:
    """Other roles, results named otherwise, or no room for the declared counters: the
    module is refused at start-up with the reason (``_compiled._disagreement``), never a
    pass that reads wrong fields or turns itself off in silence."""
    from types import SimpleNamespace

    from cvdiag.read import _compiled

    good = {"ROLES": layout.ROLES, "RESULTS": layout.RESULTS, "COUNTERS": fold._CFOLD.COUNTERS}
    assert _compiled._disagreement(SimpleNamespace(**good)) is None
    assert fold._CFOLD.RESULTS == layout.RESULTS
    renamed = {**layout.RESULTS, "Head": ("events", *layout.RESULTS["Head"][2:])}
    assert "names its results" in _compiled._disagreement(SimpleNamespace(**{**good, "RESULTS": renamed}))
    few = _compiled._disagreement(SimpleNamespace(**{**good, "COUNTERS": 3}))
    assert few == "has room for 3 head-only counters, contract.layout.COUNTED needs 4"


def test_the_folds_results_are_read_by_name() -> None:
    from cvdiag.testing import envelope

    folder = fold.compiled_folder(
        admit=lambda tid, full: 3, boundary_info=lambda b: (True, -1), fold_aggs=True, keep_lines=1, max_tests=10,
        counters=4,
    )  # fmt: skip
    buf = b"CVDIAG " + fold.orjson.dumps(envelope("backend.sse.event", test_id="t-1")) + b"\n"
    folder.buffer(buf, 0, len(buf), 0, print, print, True, print, [None])
    taken = folder.take(0)
    assert type(taken).__name__ == "Taken" and taken.agg.events == 1 and taken.head.backend_events == 1
    assert taken.head.last_boundary == "backend.sse.event" and taken.kept.more == 0
    assert {name: type(getattr(fold._CFOLD, name)).__name__ for name in layout.RESULTS} == dict.fromkeys(
        layout.RESULTS, "type"
    )


def test_a_head_field_and_a_counted_boundary_added_in_the_table_alone_are_read_alike_by_both_paths(
    tmp_path: Path,
) -> None:
    """A scratch copy of cvdiag whose schema and layout gain a head field (``region``,
    before ``ts``) and a counted boundary (``backend.sse.keepalive``, a fifth counter): the
    compiled fold reads the new envelopes and counts the new boundary as the Python fold
    does, without a change in C (the module is the one built from the same ``.c``: its
    fields, roles and counters are handed in at start-up); the compiled writer, whose
    fields are built in, is refused."""
    copy = tmp_path / "cvdiag"
    shutil.copytree(ROOT / "cvdiag", copy, ignore=shutil.ignore_patterns("__pycache__"))
    schema = copy / "contract" / "schema.py"
    schema.write_text(schema.read_text().replace('    "demo",\n', '    "demo",\n    "region",\n', 1))
    table = copy / "contract" / "layout.py"
    demo = '    HeadField("demo", STR),\n'
    counted = '    "backend.sse.event": "sse_events",\n'
    text = table.read_text().replace(demo, demo + '    HeadField("region", STR),\n', 1)
    table.write_text(text.replace(counted, counted + '    "backend.sse.keepalive": "sse_keepalives",\n', 1))
    program = r"""
import sys, orjson
from cvdiag.contract.schema import ENVELOPE_FIELDS, EDGE_HEADERS
from cvdiag.read import fold
from cvdiag.diagnosis import Evidence
from cvdiag.write import emitter
assert "region" in ENVELOPE_FIELDS and fold.compiled() and Evidence.head_counters == 5
def env(i, boundary, outcome="ok"):
    e = dict.fromkeys(ENVELOPE_FIELDS)
    e.update(schema_version=1, test_id=f"t-{i % 3}", trace_id="x", span_id=f"{i:016x}", layer="backend",
             boundary=boundary, slug="s", demo="chat", region="eu-west", ts=f"2026-11-21T10:00:0{i % 10}.000Z",
             mono_ns=i, duration_ms=5, outcome=outcome, edge_headers=dict.fromkeys(EDGE_HEADERS), metadata={},
             _metadata_dropped=False, _truncated=False)
    return e
names = ["backend.request.ingress", "backend.sse.event", "backend.sse.keepalive", "backend.response.complete",
         "backend.error.caught"]
lines = [orjson.dumps(env(i, names[i % 5], "err" if i % 5 == 4 else "ok")) for i in range(50)]
buf = b"".join(b"CVDIAG " + line + b"\n" for line in lines)
def rows(compiled):
    if not compiled:
        fold._CFOLD = None
    f = fold.Fold(Evidence)
    f.read([(buf, "t.log", 0, len(buf), 1, 0)], count=True)
    facts = {t: (e.events, e.failures, e.sse_events, e.sse_keepalives) for t, e in f.evidence.items()}
    return ({t: a.row(t) for t, a in f.aggs.items()}, facts, f.tally.count, f.parsed)
c, p = rows(True), rows(False)
assert c[:3] == p[:3], (c, p)
assert c[3] == 0 and sum(r["events"] for r in c[0].values()) == 50, c  # every line read in C
print("alike", sum(f[3] for f in c[1].values()), emitter._line_compiled is None)
"""
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    env.pop("CVDIAG_COMPILED", None)
    proc = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert proc.stdout.split() == ["alike", "10", "True"], proc.stderr
    assert "cvdiag.write._cemit writes other fields than contract.schema.ENVELOPE_FIELDS" in proc.stderr
