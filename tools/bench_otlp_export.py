"""OTLP export's costs, in one run: the request path with export off and on, envelopes
per second exported by one process, and the drain thread's cost per envelope.

    python tools/bench_otlp_export.py [--requests 2000] [--rounds 5] [--envelopes 100000]

1. Request path: a default-tier request with an agent and an LLM call (the /agent endpoint
   of tools/bench_middleware.py), in-process ASGI, lines to /dev/null; the CPU time of
   the request's own thread (``time.thread_time``) while the writer thread is held (the
   lines wait in the queue), so the export's work, which runs on the writer's and the
   exporters' threads, is not in it (it is in 2 and 3). Variants: export off, logs on,
   logs and spans on.
2. Throughput: ``--envelopes`` verbose envelopes emitted as fast as one thread can, until
   every one is acknowledged by a collector in another process that keeps nothing (so
   the exporting process is measured), per protocol.
3. Drain thread: nanoseconds per envelope of the OTLP sink on the writer's thread (the
   lines handed over); the export thread's CPU per envelope beside it (line parsed,
   record made, encoded, posted).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
import bench_middleware

import cvdiag
from cvdiag.write import _otlp, emitter


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


#: A collector that takes every request and keeps nothing, in its own process: what is
#: measured is the exporting process, not a receiver's decoding.
DISCARD = """
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        self.rfile.read(int(self.headers["content-length"]))
        self.send_response(200); self.send_header("Content-Length", "0"); self.end_headers()
    def log_message(self, *a): pass
server = http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H)
print("up", flush=True)
server.serve_forever()
"""


def _collector() -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-c", DISCARD, str(port)], stdout=subprocess.PIPE)
    assert proc.stdout is not None
    proc.stdout.readline()
    return proc, f"http://127.0.0.1:{port}"


class _Paused:
    """A sink that holds the writer thread while the requests are timed: the request path
    alone is measured (the lines wait in cvdiag's queue, written after)."""

    def __init__(self) -> None:
        self.go = threading.Event()

    def write(self, lines: list[bytes]) -> None:
        self.go.wait()

    def close(self) -> None:
        pass


def _configure(otlp: bool, spans: bool, tier: str = "default") -> None:
    cvdiag.configure(
        enabled=True,
        tier=tier,
        environ={},
        stdout=False,
        file=os.devnull,
        otlp=otlp,
        otlp_spans=spans,
        queue_size=400_000,
    )


async def _thread_cpu_per_request(app: Any, requests: int) -> float:
    start = time.thread_time()
    for n in range(requests):
        await bench_middleware._one(app, "/agent", n)
    return (time.thread_time() - start) / requests * 1e6


def request_path(requests: int, rounds: int) -> dict[str, float]:
    app = bench_middleware._cvdiag_app()
    variants = _VARIANTS
    costs: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(rounds):
        for name, (otlp, spans) in variants.items():
            _configure(otlp, spans)
            paused = _Paused()
            emitter.add_sink(paused)
            cvdiag.emit("backend.agent.enter", {"agent_name": "warm", "model_id": None})  # the writer is now held
            time.sleep(0.05)
            costs[name].append(asyncio.run(_thread_cpu_per_request(app, requests)))
            paused.go.set()
            cvdiag.flush(120)
            emitter.remove_sink(paused)
            _otlp.flush(60)
    return {name: statistics.median(v) for name, v in costs.items()}


_VARIANTS = {"export off": (False, False), "logs on": (True, False), "logs + spans on": (True, True)}


def _inside(variant: str, count: int) -> None:
    """Under callgrind: ``count`` /agent requests with the writer held, then leave unwritten:
    the instructions counted are the request path's alone (``bench_instructions``' method)."""
    otlp, spans = _VARIANTS[variant]
    _configure(otlp, spans)
    app = bench_middleware._cvdiag_app()
    paused = _Paused()
    emitter.add_sink(paused)
    asyncio.run(_thread_cpu_per_request(app, 50))  # warm up
    os.getppid()  # callgrind --zero-before=getppid: counting starts here
    asyncio.run(_thread_cpu_per_request(app, count))
    os._exit(0)


def instructions(count: int) -> dict[str, float]:
    """Instructions per request of each variant's request path (valgrind's callgrind)."""
    import bench_instructions

    return {
        name: bench_instructions.callgrind_total(__file__, "--inside", name, str(count)) / count for name in _VARIANTS
    }


def throughput(envelopes: int, protocol: str | None) -> tuple[float, dict[str, int], float]:
    """(envelopes/s, the export's counts, the emitting thread's CPU µs per envelope);
    ``protocol`` None: export off (the log alone)."""
    os.environ["OTEL_EXPORTER_OTLP_PROTOCOL"] = protocol or "http/protobuf"
    os.environ["CVDIAG_OTLP_QUEUE_SIZE"] = str(envelopes + 10)
    _otlp.reset()
    _configure(protocol is not None, False, "verbose")
    metadata = {
        "provider": "openai",
        "model": "gpt-4o-mini",
        "http_status": 200,
        "attempt": 0,
        "latency_ms": 812,
        "finish_reason": "stop",
        "prompt_tokens": 120,
        "completion_tokens": 48,
    }
    start, cpu = time.perf_counter(), time.thread_time()
    with cvdiag.request_context(test_id="bench-throughput", slug="bench"):
        for _ in range(envelopes):
            cvdiag.emit("backend.llm.call.response", metadata, outcome="ok", duration_ms=812)
    cpu = time.thread_time() - cpu
    cvdiag.flush(600)
    _otlp.flush(600)
    elapsed = time.perf_counter() - start
    stats = {k: v for k, v in cvdiag.stats().items() if k.startswith("otlp_logs")}
    return envelopes / elapsed, stats, cpu / envelopes * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--envelopes", type=int, default=100_000)
    parser.add_argument("--inside", nargs=2, metavar=("VARIANT", "COUNT"), help=argparse.SUPPRESS)
    parser.add_argument("--no-valgrind", action="store_true", help="skip the instruction counts")
    args = parser.parse_args()
    if args.inside:
        _inside(args.inside[0], int(args.inside[1]))
    proc, endpoint = _collector()
    try:
        os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = endpoint
        path = request_path(args.requests, args.rounds)
        off = path["export off"]
        print(f"request path, default tier, /agent (CPU µs of the request's thread, median of {args.rounds}):")
        for name, cost in path.items():
            print(f"  {name:<16} {cost:7.2f} µs  ({cost - off:+.2f} µs, x{cost / off:.3f})")
        if not args.no_valgrind:
            counted = instructions(500)
            rate = counted["export off"] / off  # instructions per µs, by this run's own clock
            print("request path in instructions (callgrind; µs at this run's rate):")
            for name, n in counted.items():
                added = n - counted["export off"]
                print(f"  {name:<16} {n:,.0f}  ({added:+,.0f}, {added / rate:+.3f} µs)")
        base, _, emit_us = throughput(args.envelopes, None)
        print(f"log alone (export off): {base:,.0f} envelopes/s written; emitting {emit_us:.1f} µs CPU each")
        for protocol in ("http/protobuf", "http/json"):
            rate, stats, _ = throughput(args.envelopes, protocol)
            sink = _otlp._sink
            assert sink is not None
            exporter = sink.exporters["logs"]
            assert exporter is not None
            drain_us = sink.convert_ns / max(sink.converted, 1) / 1000
            export_us = exporter.cpu_ns / max(exporter.cpu_records, 1) / 1000
            print(
                f"{protocol}: {rate:,.0f} envelopes/s exported ({stats['otlp_logs_exported']:,} exported, "
                f"{stats['otlp_logs_dropped_queue_full']:,} dropped), x{rate / base:.2f} of the log alone; "
                f"CPU per envelope: drain thread {drain_us * 1000:.0f} ns, export thread {export_us:.1f} µs "
                f"(one core does {1e6 / (drain_us + export_us):,.0f}/s of export work)"
            )
        print(f"load average: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    finally:
        cvdiag.configure(enabled=False, environ={})
        proc.terminate()
        proc.wait(10)


if __name__ == "__main__":
    main()
