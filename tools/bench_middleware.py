"""Per-request cost of the middleware, side by side with its peers, in one run.

In-process ASGI (no sockets, so the numbers are the middleware's own cost): a bare
Starlette app, a do-nothing pure ASGI middleware that wraps send and receive (the
floor any such middleware pays), then the same app under cvdiag off / default / verbose,
asgi-correlation-id, and OpenTelemetry's ASGI middleware with the SDK tracer and a
batch span processor. Three endpoints: JSON, a 100-chunk SSE stream, and an agent
that makes one LLM call (cvdiag scopes; OTel spans for the OTel row).

    python tools/bench_middleware.py [--requests 2000] [--rounds 7]

Prints the median microseconds per request and what each variant adds to bare.
cvdiag's lines go to a file sink on /dev/null, so the writer thread's cost is in.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

import cvdiag

CHUNKS = 100


def _agent_endpoint(span: Callable[[str], Any]) -> Callable[[Request], Any]:
    async def agent(request: Request) -> JSONResponse:
        async with span("agent"), span("llm"):
            await asyncio.sleep(0)
        return JSONResponse({"answer": "ok"})

    return agent


async def json_endpoint(request: Request) -> JSONResponse:
    return JSONResponse({"ok": True, "items": [1, 2, 3]})


async def sse_endpoint(request: Request) -> StreamingResponse:
    async def body() -> AsyncIterator[bytes]:
        for i in range(CHUNKS):
            yield b"event: token\ndata: %d\n\n" % i

    return StreamingResponse(body(), media_type="text/event-stream")


def _cvdiag_span(name: str) -> Any:
    return cvdiag.agent_scope("bench-agent") if name == "agent" else cvdiag.llm_call("openai", "gpt-4o-mini")


def _no_span(name: str) -> Any:
    return contextlib.nullcontext()


@contextlib.asynccontextmanager
async def _otel_span(tracer: Any, name: str) -> AsyncIterator[None]:
    with tracer.start_as_current_span(name):
        yield


def make_app(middleware: list[Middleware], span: Callable[[str], Any]) -> Starlette:
    routes = [Route("/json", json_endpoint), Route("/sse", sse_endpoint), Route("/agent", _agent_endpoint(span))]
    return Starlette(routes=routes, middleware=middleware)


class PassThrough:
    """The floor: a pure ASGI middleware that wraps send and receive and does nothing."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        async def receive_wrapper() -> Any:
            return await receive()

        async def send_wrapper(message: Any) -> None:
            await send(message)

        await self.app(scope, receive_wrapper, send_wrapper)


def _otel() -> tuple[list[Middleware], Callable[[str], Any]]:
    from opentelemetry.instrumentation.asgi import OpenTelemetryMiddleware
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

    class Discard(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(Discard()))
    tracer = provider.get_tracer("bench")
    return [Middleware(OpenTelemetryMiddleware, tracer_provider=provider)], lambda name: _otel_span(tracer, name)


def _correlation_id() -> list[Middleware]:
    from asgi_correlation_id import CorrelationIdMiddleware

    return [Middleware(CorrelationIdMiddleware)]


def _cvdiag(enabled: bool, tier: str = "default") -> Callable[[], None]:
    return lambda: cvdiag.configure(enabled=enabled, tier=tier, environ={}, stdout=False, file="/dev/null")


def _cvdiag_app() -> Starlette:
    return make_app([Middleware(cvdiag.CvdiagMiddleware, slug="bench")], _cvdiag_span)


def _otel_app() -> Starlette:
    return make_app(*_otel())


_OFF = _cvdiag(False)
#: Each variant's setup and how to build its app (built on demand: OpenTelemetry's SDK
#: alone takes a long time to import under valgrind).
_VARIANTS: dict[str, tuple[Callable[[], None], Callable[[], Starlette]]] = {
    "bare starlette": (_OFF, lambda: make_app([], _no_span)),
    "pass-through wrapper": (_OFF, lambda: make_app([Middleware(PassThrough)], _no_span)),
    "cvdiag off": (_OFF, _cvdiag_app),
    "cvdiag default": (_cvdiag(True), _cvdiag_app),
    "cvdiag verbose": (_cvdiag(True, "verbose"), _cvdiag_app),
    "asgi-correlation-id": (_OFF, lambda: make_app(_correlation_id(), _no_span)),
    "opentelemetry asgi": (_OFF, _otel_app),
}


def variant(name: str) -> tuple[Callable[[], None], Starlette]:
    """One variant's setup and app."""
    setup, build = _VARIANTS[name]
    return setup, build()


def variants() -> dict[str, tuple[Callable[[], None], Starlette]]:
    return {name: variant(name) for name in _VARIANTS}


def _scope(path: str, n: int) -> dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"bench"), (b"x-test-id", f"bench-{n}".encode()), (b"user-agent", b"bench")],
        "client": ("127.0.0.1", 5000),
        "server": ("127.0.0.1", 8000),
    }


async def _one(app: Starlette, path: str, n: int) -> None:
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await asyncio.sleep(3600)
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        pass

    await app(_scope(path, n), receive, send)


async def _round(app: Starlette, path: str, requests: int) -> float:
    start = time.perf_counter()
    for n in range(requests):
        await _one(app, path, n)
    return (time.perf_counter() - start) / requests * 1e6


def measure(requests: int, rounds: int) -> dict[str, dict[str, float]]:
    table: dict[str, dict[str, list[float]]] = {}
    built = variants()
    for path in ("/json", "/sse", "/agent"):
        for _ in range(rounds):  # interleave variants so drift hits all alike
            for name, (setup, app) in built.items():
                setup()
                cost = asyncio.run(_round(app, path, requests))
                cvdiag.flush()
                table.setdefault(name, {}).setdefault(path, []).append(cost)
    cvdiag.configure(enabled=False, environ={})
    return {name: {path: statistics.median(v) for path, v in paths.items()} for name, paths in table.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    result = measure(args.requests, args.rounds)
    bare = result["bare starlette"]
    print(f"median µs per request ({args.requests} requests x {args.rounds} rounds); (+added vs bare)")
    print(f"| variant | JSON | SSE {CHUNKS} chunks | agent + LLM |")
    print("|---|---|---|---|")
    for name, paths in result.items():
        cells = [f"{paths[p]:.1f} (+{paths[p] - bare[p]:.1f})" for p in ("/json", "/sse", "/agent")]
        print(f"| {name} | " + " | ".join(cells) + " |")
    otel = result["opentelemetry asgi"]
    default = result["cvdiag default"]
    for p in ("/json", "/sse", "/agent"):
        ratio = (default[p] - bare[p]) / max(otel[p] - bare[p], 1e-9)
        print(f"cvdiag default adds {ratio:.2f}x what OpenTelemetry adds on {p}")


if __name__ == "__main__":
    main()
