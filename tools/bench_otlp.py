"""How fast ``cvdiag tests`` reads OpenTelemetry traces (OTLP JSON), and in how much memory.

    .venv/bin/python tools/bench_otlp.py [--mb 200] [--rounds 3] [--keep PATH]

Writes a Collector-file-exporter log (one ``ExportTraceServiceRequest`` of 64 spans per
line) of about ``--mb`` MB: traces of an agent backend, each a request with an agent run,
LLM calls carrying their prompts and completions (``gen_ai.input.messages`` and
``gen_ai.output.messages``, as instrumentations that record content write them, about
1.5 KB a span), tool calls (one in seven raises), one test id per trace. Then runs the
installed command on it, best of ``--rounds``, and prints MB/s of wall time and of CPU
time (all the command's processes: on a shared machine the wall clock says more of the
neighbours than of cvdiag) and the peak resident memory; a second file twice the size
says whether the memory stays flat.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import sys
import tempfile
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from cvdiag_cli import run_peak

_PROMPT = "You are a helpful travel assistant. " * 12
_ANSWER = "Here is the plan for your trip, day by day, with the trains and the hotels. " * 6
_TRACEBACK = 'Traceback (most recent call last):\n  File "app.py", line 12\n' * 4
_INPUT = json.dumps([{"role": "user", "parts": [{"type": "text", "content": _PROMPT}]}])
_OUTPUT = json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": _ANSWER}]}])


def _attrs(d: dict) -> list[dict]:
    out = []
    for k, v in d.items():
        if isinstance(v, bool):
            out.append({"key": k, "value": {"boolValue": v}})
        elif isinstance(v, int):
            out.append({"key": k, "value": {"intValue": str(v)}})
        else:
            out.append({"key": k, "value": {"stringValue": str(v)}})
    return out


def _trace(rng: random.Random, n: int, t0: int) -> list[dict]:
    """One request's spans: a server span, an agent run, LLM calls and tool calls."""
    trace = f"{rng.getrandbits(128):032x}"
    root = f"{rng.getrandbits(64):016x}"
    agent = f"{rng.getrandbits(64):016x}"
    test = {"test.id": f"bench-{n}"}
    spans = []

    def span(name: str, parent: str, start: int, ms: int, attrs: dict, error: tuple[str, str] | None = None) -> None:
        sid = f"{rng.getrandbits(64):016x}"
        events = []
        if error is not None:
            events = [{"timeUnixNano": str(start + ms * 1_000_000), "name": "exception", "attributes": _attrs(
                {"exception.type": error[0], "exception.message": error[1],
                 "exception.stacktrace": _TRACEBACK})}]  # fmt: skip
        spans.append({
            "traceId": trace, "spanId": sid if name != "POST /chat" else root,
            "parentSpanId": parent, "name": name, "kind": 2 if name == "POST /chat" else 1,
            "startTimeUnixNano": str(start), "endTimeUnixNano": str(start + ms * 1_000_000),
            "attributes": _attrs({**attrs, **test}), "events": events,
            "status": {"code": 2 if error else 0},
        })  # fmt: skip

    at = t0
    for turn in range(3):
        span("chat gpt-4o-mini", agent, at, 800, {
            "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "gpt-4o-mini",
            "gen_ai.response.model": "gpt-4o-mini-2024-07-18", "gen_ai.usage.input_tokens": 812,
            "gen_ai.usage.output_tokens": 96, "gen_ai.response.finish_reasons": "tool_calls",
            "gen_ai.input.messages": _INPUT, "gen_ai.output.messages": _OUTPUT,
        })  # fmt: skip
        at += 800 * 1_000_000
        failed = rng.random() < 1 / 7
        span("execute_tool search_trains", agent, at, 120, {
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search_trains",
            "gen_ai.tool.call.id": f"call_{n}_{turn}", "gen_ai.tool.call.arguments": '{"from": "Oslo", "to": "Bergen"}',
            "gen_ai.tool.call.result": _ANSWER[:300],
        }, ("ConnectionError", "rail api unreachable") if failed else None)  # fmt: skip
        at += 120 * 1_000_000
    span("invoke_agent planner", root, t0, (at - t0) // 1_000_000, {
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "planner"})  # fmt: skip
    span("POST /chat", "", t0 - 1_000_000, (at - t0) // 1_000_000 + 2, {
        "http.request.method": "POST", "http.route": "/chat", "http.response.status_code": 200})  # fmt: skip
    return spans


def write(path: Path, mb: int, seed: int = 7) -> int:
    """An OTLP JSON log of about ``mb`` MB; returns its spans."""
    rng = random.Random(seed)
    batch: list[dict] = []
    n = spans = 0
    t0 = 1_764_000_000_000_000_000
    with path.open("wb") as out:
        while out.tell() < mb << 20:
            batch += _trace(rng, n, t0 + n * 5_000_000_000)
            n += 1
            if len(batch) >= 64:
                doc = {"resourceSpans": [{"resource": {"attributes": _attrs({"service.name": "planner-api"})},
                                          "scopeSpans": [{"scope": {"name": "bench"}, "spans": batch}]}]}  # fmt: skip
                out.write(orjson.dumps(doc) + b"\n")
                spans += len(batch)
                batch = []
    return spans


def _cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def measure(path: Path, rounds: int) -> tuple[float, float, float, str]:
    """Best wall time, best CPU time (every process of the command), peak memory, the note."""
    best, cpu, peak, err = float("inf"), float("inf"), 0.0, ""
    for _ in range(rounds):
        start, used = time.perf_counter(), _cpu()
        r, mb = run_peak("tests", "--json", path, timeout=600)
        took, used = time.perf_counter() - start, _cpu() - used
        assert r.code in (0, 1), r.err
        best, cpu, peak, err = min(best, took), min(cpu, used), max(peak, mb), r.err.strip()
    return best, cpu, peak, err


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--keep", type=Path, help="write the log here and keep it")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for factor in (1, 2):
            path = (args.keep or Path(tmp) / "otlp.jsonl").with_suffix(f".{factor}x.jsonl")
            spans = write(path, args.mb * factor)
            size = path.stat().st_size / (1 << 20)
            took, cpu, peak, note = measure(path, args.rounds)
            print(
                f"{size:7.1f} MB, {spans:,} spans: wall {took:6.2f} s ({size / took:5.1f} MB/s), "
                f"CPU {cpu:6.2f} s ({size / cpu:5.1f} MB/s of CPU), peak {peak:4.0f} MB"
            )
            print(f"    {note}")


if __name__ == "__main__":
    main()
