"""Logs of whole CI runs for the history tests, and the two real backends to keep them in.

A run's log holds, per test, the pytest plugin's ``probe.start`` line (its node id, the
test's stable name) and the envelopes of one outcome: ``pass``, ``server-error``,
``client-disconnect`` or ``llm-error`` (a provider's 429), each with a test id unique to
the run, as in CI where every run mints new ids.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import cvdiag_cli
import logkit
import pgkit

KINDS = ("pass", "server-error", "client-disconnect", "llm-error")


def _llm_error(test_id: str, start: float) -> list[dict[str, Any]]:
    envs = logkit.happy(test_id, start)
    response = envs[3]
    response["outcome"] = "err"
    response["metadata"] = {**response["metadata"], "http_status": 429, "error_class": "RateLimitError"}
    envs[4:] = [
        logkit.envelope(test_id, "backend.tool.call.response", start + 0.55, outcome="err",
                        metadata={"tool_name": "search", "error_kind": "raised"}),
        logkit.envelope(test_id, "backend.agent.exit", start + 0.6, outcome="err",
                        metadata={"terminal_outcome": "error", "error_class": "RateLimitError"}),
    ]  # fmt: skip
    return envs


_SHAPES = {
    "pass": logkit.happy,
    "server-error": logkit.errored,
    "client-disconnect": logkit.aborted,
    "llm-error": _llm_error,
}


def run_log(path: Path, tests: Mapping[str, str], run: str, *, day: int = 0, scale_s: float = 0.0) -> Path:
    """A log of one run: ``tests`` maps node id -> kind; ``day`` shifts it in time;
    ``scale_s`` stretches the passing test's timings (to make it slower)."""
    lines = []
    for i, (node, kind) in enumerate(tests.items()):
        tid = f"{run}-{i:04d}"
        start = day * 86400 + i * 10.0
        envs = [logkit.envelope(tid, "probe.start", start, metadata={"url": node, "viewport": None})]
        envs += _SHAPES[kind](tid, start + 0.01)
        if scale_s:
            envs.append(logkit.envelope(tid, "backend.agent.enter", start + scale_s, metadata={}))
        lines += [logkit.compact(e) for e in envs]
    path.write_text("\n".join(lines) + "\n")
    return path


_count = iter(range(1, 1 << 30))


def new_db(kind: str, tmp_path: Path, server: str | None) -> str:
    """A new, empty history: a DuckDB file's path, or a database on the PostgreSQL ``server``."""
    if kind == "duckdb":
        return str(tmp_path / f"history{next(_count)}.duckdb")
    assert server is not None
    return pgkit.fresh_database(server, f"cvdiag_h{os.getpid()}_{next(_count)}")


def cli(*args: Any, env: dict[str, str] | None = None) -> cvdiag_cli.Result:
    """``cvdiag ARGS`` in a subprocess, at a terminal 80 columns wide."""
    return cvdiag_cli.run(*args, env={"COLUMNS": "80", **(env or {})})


def js(*args: Any) -> Any:
    """``cvdiag ARGS --json``'s answer, which must succeed."""
    done = cli(*args, "--json")
    assert done.code == 0, done.err
    return json.loads(done.out)
