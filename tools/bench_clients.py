"""What ``cvdiag.instrument()`` adds per streamed chunk on aiohttp and on urllib3 (``requests``).

A local uvicorn server (a child process, so its CPU is not counted; the same one as
``bench_llm_http.py``) streams chat-completion answers of ``--short`` and ``--long``
events. Each client reads them as an application would (aiohttp: ``async for line in
response.content``; requests: ``iter_lines``) in four variants, interleaved round by
round in one run: the bare client; ``cvdiag.instrument()`` at the default tier (the
stream is read, only failures are written) and at the verbose tier (start and response
written to a file sink on /dev/null); and OpenTelemetry's instrumentation of the same
client (``opentelemetry-instrumentation-aiohttp-client`` / ``-urllib3``, SDK tracer,
batch span processor, an exporter that drops the spans).

The CPU time of this process per answer is fitted as ``per_call + chunks * per_chunk``;
what a variant adds is its difference from bare. Goal: cvdiag adds at most 5% of the
client's own per-chunk cost.

    python tools/bench_clients.py [--calls 30] [--rounds 5] [--short 10] [--long 210]
    python tools/bench_clients.py --otel-path /tmp/otel-extra   # OTel packages kept aside
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_llm_http import _DropSpans, _fit, _server

Variant = tuple[Callable[[], None], Callable[[], None]]


def _variants(client: str) -> dict[str, Variant]:
    import cvdiag

    def cvdiag_on(tier: str) -> Callable[[], None]:
        def enter() -> None:
            cvdiag.configure(enabled=True, tier=tier, stdout=False, file=os.devnull, environ={})
            cvdiag.instrument(httpx=False)

        return enter

    def cvdiag_off() -> None:
        cvdiag.flush()
        cvdiag.uninstrument()
        cvdiag.configure(enabled=False, environ={})

    variants: dict[str, Variant] = {
        "bare client": (lambda: None, lambda: None),
        "cvdiag default tier": (cvdiag_on("default"), cvdiag_off),
        "cvdiag verbose tier": (cvdiag_on("verbose"), cvdiag_off),
    }
    try:
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        if client == "aiohttp":
            from opentelemetry.instrumentation.aiohttp_client import AioHttpClientInstrumentor as Instrumentor
        else:
            from opentelemetry.instrumentation.urllib3 import URLLib3Instrumentor as Instrumentor
    except ImportError as exc:
        print(f"(no OpenTelemetry row for {client}: {exc})")
        return variants
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(_DropSpans()))  # type: ignore[arg-type]
    instrumentor = Instrumentor()
    variants[f"OpenTelemetry {client}"] = (
        lambda: instrumentor.instrument(tracer_provider=provider),
        lambda: (provider.force_flush(), instrumentor.uninstrument()),  # type: ignore[func-returns-value]
    )
    return variants


def _body(chunks: int) -> dict[str, Any]:
    return {"model": f"n-{chunks}", "stream": True, "messages": []}


def _aiohttp_cpu(url: str, chunks: int, calls: int) -> float:
    import aiohttp

    async def run() -> float:
        async with aiohttp.ClientSession() as session:
            start = time.process_time()
            for _ in range(calls):
                async with session.post(url + "/chat/completions", json=_body(chunks)) as response:
                    async for _line in response.content:
                        pass
            return (time.process_time() - start) / calls

    return asyncio.run(run())


def _requests_cpu(url: str, chunks: int, calls: int) -> float:
    import requests

    with requests.Session() as session:
        start = time.process_time()
        for _ in range(calls):
            with session.post(url + "/chat/completions", json=_body(chunks), stream=True) as response:
                for _line in response.iter_lines():
                    pass
        return (time.process_time() - start) / calls


READERS = {"aiohttp": _aiohttp_cpu, "urllib3": _requests_cpu}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--short", type=int, default=10)
    parser.add_argument("--long", type=int, default=210)
    parser.add_argument("--otel-path", help="a directory holding the OpenTelemetry client instrumentations")
    args = parser.parse_args()
    if args.otel_path:
        sys.path.append(args.otel_path)
    with _server() as url:
        for client, read in READERS.items():
            variants = _variants(client)
            samples: dict[str, dict[int, list[float]]] = {n: {args.short: [], args.long: []} for n in variants}
            read(url, args.short, 3)  # warm up the connection pool and the imports
            for _ in range(args.rounds):
                for name, (enter, leave) in variants.items():
                    enter()
                    try:
                        for chunks in (args.short, args.long):
                            samples[name][chunks].append(read(url, chunks, args.calls))
                    finally:
                        leave()
            fits = {name: _fit(s, args.short, args.long) for name, s in samples.items()}
            _report(client, fits)


def _report(client: str, fits: dict[str, tuple[float, float]]) -> None:
    bare_call, bare_chunk = fits["bare client"]
    print(f"\n{client}: the bare client costs {bare_chunk * 1e6:.2f} us per chunk, {bare_call * 1e6:.0f} us per call")
    print(f"  {'variant':<28} {'adds per chunk':>15} {'of the client':>14} {'adds per call':>14}")
    for name, (per_call, per_chunk) in fits.items():
        if name == "bare client":
            continue
        added = per_chunk - bare_chunk
        share = added / bare_chunk * 100 if bare_chunk > 0 else float("nan")
        print(f"  {name:<28} {added * 1e6:>12.3f} us {share:>13.1f}% {(per_call - bare_call) * 1e6:>11.0f} us")


if __name__ == "__main__":
    main()
