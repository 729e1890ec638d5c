"""What cvdiag's span processor adds to a span, against a bare OpenTelemetry SDK provider.

Two real SDK ``TracerProvider``s in one process, timed in interleaved rounds: a bare one
(no processor: the floor any app with a provider pays) and one with cvdiag's ``SpanTap``
(``cvdiag.write._otel_spans``, what ``cvdiag.instrument()`` adds to the app's provider).
Each span is ``with tracer.start_as_current_span(...)`` with four attributes, in three
cases:

* ``on, no evidence``: inside a cvdiag request (cvdiag on, verbose tier, writing to
  ``/dev/null``), a span that is no evidence (an HTTP client's): tagged with the test id,
  read, nothing written. Most spans of a request are these.
* ``on, a tool call``: inside a request, an ``execute_tool`` span that ended with an
  error: read and written as one envelope (this case includes one ``emit``, see "One
  ``emit`` on the caller's thread" in docs/performance.md).
* ``off``: cvdiag disabled, no request bound (what the middleware does when off).

The figure is the median over rounds of (tapped - bare) per span, in µs, with the bare
span's own cost beside it for scale. Wall clock on a shared machine moves by tens of
percent; ``--instructions`` counts instructions under callgrind instead (repeatable; the
writer thread's share of an envelope included), as ``tools/bench_instructions.py`` does.

    python tools/bench_otel_spans.py [--spans 20000] [--rounds 7]
    python tools/bench_otel_spans.py --instructions [--spans 2000]   # needs valgrind
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

import cvdiag
from cvdiag.write import _otel_spans, _span_evidence
from cvdiag.write.context import request_context

PLAIN = {"http.request.method": "GET", "url.full": "http://orders/x", "server.address": "orders", "server.port": 80}
TOOL = {
    "gen_ai.operation.name": "execute_tool",
    "gen_ai.tool.name": "lookup_order",
    "gen_ai.tool.call.id": "call_1",
    "error.type": "KeyError",
}


def spans(tracer: trace.Tracer, name: str, attributes: dict, n: int, failed: bool) -> float:
    """Seconds for ``n`` spans."""
    error = trace.Status(trace.StatusCode.ERROR, "no such order") if failed else None
    start = time.perf_counter()
    for _ in range(n):
        with tracer.start_as_current_span(name, attributes=attributes) as span:
            if error is not None:
                span.set_status(error)
    return time.perf_counter() - start


def case(
    label: str, bare: trace.Tracer, tapped: trace.Tracer, run: Callable[[trace.Tracer], float], rounds: int, n: int
) -> None:
    added, floor = [], []
    for _ in range(rounds):
        b = run(bare)
        t = run(tapped)
        added.append((t - b) / n * 1e6)
        floor.append(b / n * 1e6)
    print(
        f"| {label} | {statistics.median(floor):.2f} | {statistics.median(added):+.2f} "
        f"| {min(added):+.2f} .. {max(added):+.2f} |"
    )


CASES = {
    "on, no evidence": ("GET", PLAIN, False, True),
    "on, a tool call (one emit)": ("execute_tool", TOOL, True, True),
    "off": ("GET", PLAIN, False, False),
}


def inside(label: str, provider: str, n: int) -> None:
    """One callgrind run: ``n`` spans of one case on one provider, counted alone."""
    name, attributes, failed, on = CASES[label]
    tracer_provider = TracerProvider()
    if provider == "tapped":
        tracer_provider.add_span_processor(_otel_spans.tap)
        _span_evidence.switch.on = True
    tracer = tracer_provider.get_tracer("bench")
    if on:
        cvdiag.configure(enabled=True, tier="verbose", stdout=False, file="/dev/null", environ={"CVDIAG_ENV": "test"})
    else:
        cvdiag.configure(enabled=False, environ={})
    with request_context(test_id="bench-otel") if on else _nothing():
        spans(tracer, name, attributes, 50, failed)
        cvdiag.flush()
        os.getppid()  # callgrind --zero-before=getppid: counting starts here
        spans(tracer, name, attributes, n, failed)
        cvdiag.flush()
    os._exit(0)


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def instructions(n: int) -> None:
    from bench_instructions import callgrind_total

    print(f"{n} spans a run; instructions per span (callgrind, all threads)")
    print("| case | bare SDK span | added by cvdiag | added / bare |")
    print("|---|---|---|---|")
    for label in CASES:
        bare, tapped = (
            callgrind_total(__file__, "--inside", label, provider, str(n)) / n for provider in ("bare", "tapped")
        )
        print(f"| {label} | {bare:,.0f} | {tapped - bare:+,.0f} | {(tapped - bare) / bare:+.1%} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--instructions", action="store_true")
    parser.add_argument("--inside", nargs=3, metavar=("CASE", "PROVIDER", "SPANS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inside:
        inside(args.inside[0], args.inside[1], int(args.inside[2]))
        return
    if args.instructions:
        instructions(args.spans)
        return
    n, rounds = args.spans, args.rounds

    bare = TracerProvider().get_tracer("bench")
    tapped_provider = TracerProvider()
    tapped_provider.add_span_processor(_otel_spans.tap)
    tapped = tapped_provider.get_tracer("bench")
    _span_evidence.switch.on = True

    print(f"{n} spans a round, {rounds} rounds; µs per span")
    print("| case | bare SDK span | added by cvdiag (median) | range |")
    print("|---|---|---|---|")
    cvdiag.configure(enabled=True, tier="verbose", stdout=False, file="/dev/null", environ={"CVDIAG_ENV": "test"})
    with request_context(test_id="bench-otel"):
        spans(tapped, "warm", TOOL, 200, True)
        case("on, no evidence", bare, tapped, lambda t: spans(t, "GET", PLAIN, n, False), rounds, n)
        case("on, a tool call (one emit)", bare, tapped, lambda t: spans(t, "execute_tool", TOOL, n, True), rounds, n)
    cvdiag.flush()
    cvdiag.configure(enabled=False, environ={})
    case("off", bare, tapped, lambda t: spans(t, "GET", PLAIN, n, False), rounds, n)


if __name__ == "__main__":
    main()
