"""What recognising LLM calls at the HTTP client adds, per streamed chunk and per call.

The real ``openai`` SDK streams chat completions from a local uvicorn server (a child
process, so its CPU is not counted) in four variants, interleaved round by round in one
run: the bare SDK; cvdiag's ``instrument_httpx()`` at the default tier (the stream is
read, only failures are written) and at the verbose tier (start and response written,
to a file sink on /dev/null, so the writer thread's cost is in); and the SDK under
OpenTelemetry's OpenAI instrumentation (``opentelemetry-instrumentation-openai``, SDK
tracer, batch span processor, an exporter that drops the spans).

Each variant streams answers of ``--short`` and ``--long`` events; the CPU time of this
process per answer is fitted as ``per_call + chunks * per_chunk``. The SDK's own
per-chunk cost is the bare per-chunk figure; what a variant adds is its difference
from bare. Goal: cvdiag adds under 5% of the SDK's per-chunk cost and under half of
what OpenTelemetry adds.

    python tools/bench_llm_http.py [--calls 40] [--rounds 7] [--short 10] [--long 210]
    python tools/bench_llm_http.py --instructions --calls 5   # repeatable: valgrind counts

Wall-clock and CPU numbers on a shared machine move by tens of percent; ``--instructions``
runs the same SDK path (body from memory, no sockets) under valgrind's callgrind and
prints instruction counts, which do not.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

_WORD = " lorem"


def _event(i: int, last: bool) -> bytes:
    delta = {} if last else {"content": _WORD}
    chunk = {
        "id": "chatcmpl-bench",
        "object": "chat.completion.chunk",
        "created": 1732000000,
        "model": "gpt-4o-mini-2024-07-18",
        "system_fingerprint": "fp_bench",
        "choices": [
            {"index": 0, "delta": delta, "logprobs": None, "finish_reason": "stop" if last else None},
        ],
        "usage": None,
    }
    return b"data: " + json.dumps(chunk, separators=(",", ":")).encode() + b"\n\n"


async def _app(scope: dict, receive: Callable, send: Callable) -> None:
    """Answer ``model: "n-<N>"`` with a stream of N chat-completion chunks and [DONE]."""
    if scope["type"] != "http":
        return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    count = int(json.loads(body)["model"].split("-", 1)[1])
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
    for i in range(count):
        await send({"type": "http.response.body", "body": _event(i, i == count - 1), "more_body": True})
    await send({"type": "http.response.body", "body": b"data: [DONE]\n\n", "more_body": False})


def _serve(fd: int) -> None:
    import uvicorn

    uvicorn.run(_app, fd=fd, log_level="warning", interface="asgi3", access_log=False)


@contextlib.contextmanager
def _server() -> Iterator[str]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    port = sock.getsockname()[1]
    proc = subprocess.Popen([sys.executable, __file__, "--serve-fd", str(sock.fileno())], pass_fds=(sock.fileno(),))
    sock.close()
    url = f"http://127.0.0.1:{port}/v1"
    try:
        import httpx2

        deadline = time.monotonic() + 20
        while True:
            try:
                httpx2.post(url + "/chat/completions", json={"model": "n-1"}, timeout=1).read()
                break
            except httpx2.TransportError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


# -- the variants: each is (enter, exit) around a batch of calls ------------------------


class _DropSpans:
    """A span exporter that keeps nothing (the export path runs, the memory does not grow)."""

    def export(self, spans: Any) -> Any:
        from opentelemetry.sdk.trace.export import SpanExportResult

        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 0) -> bool:
        return True


def _variants() -> dict[str, tuple[Callable[[], None], Callable[[], None]]]:
    import cvdiag
    from cvdiag.write.propagation import instrument_httpx, uninstrument_httpx

    def cvdiag_on(tier: str) -> Callable[[], None]:
        def enter() -> None:
            cvdiag.configure(enabled=True, tier=tier, stdout=False, file=os.devnull, environ={})
            instrument_httpx(llm=True)

        return enter

    def cvdiag_off() -> None:
        cvdiag.flush()
        uninstrument_httpx()
        cvdiag.configure(enabled=False, environ={})

    variants: dict[str, tuple[Callable[[], None], Callable[[], None]]] = {
        "bare SDK": (lambda: None, lambda: None),
        "cvdiag default tier": (cvdiag_on("default"), cvdiag_off),
        "cvdiag verbose tier": (cvdiag_on("verbose"), cvdiag_off),
    }
    try:
        from opentelemetry.instrumentation.openai import OpenAIInstrumentor
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        print("(opentelemetry-instrumentation-openai is not installed: no OTel row)")
        return variants
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(_DropSpans()))  # type: ignore[arg-type]
    instrumentor = OpenAIInstrumentor()
    variants["OpenTelemetry openai"] = (
        lambda: instrumentor.instrument(tracer_provider=provider),
        lambda: (provider.force_flush(), instrumentor.uninstrument()),  # type: ignore[func-returns-value]
    )
    return variants


def _cpu_per_call(client: Any, chunks: int, calls: int) -> float:
    """Seconds of this process's CPU per streamed answer of ``chunks`` events."""
    start = time.process_time()
    for _ in range(calls):
        stream = client.chat.completions.create(model=f"n-{chunks}", messages=[], stream=True)
        for _chunk in stream:
            pass
    return (time.process_time() - start) / calls


def _fit(samples: dict[int, list[float]], short: int, long_: int) -> tuple[float, float]:
    """(per call, per chunk) from the medians of answers of ``short`` and ``long_`` events."""
    a, b = statistics.median(samples[short]), statistics.median(samples[long_])
    per_chunk = (b - a) / (long_ - short)
    return a - per_chunk * short, per_chunk


def _in_process(variants: dict[str, Any], short: int, long_: int, rounds: int) -> dict[str, tuple[float, float]]:
    """cvdiag's own cost without sockets or SDK: an httpx2 client whose transport hands
    back the same event stream from memory, its body read chunk by chunk."""
    import httpx2

    bodies = {n: [_event(i, i == n - 1) for i in range(n)] + [b"data: [DONE]\n\n"] for n in (short, long_)}

    def handler(request: Any) -> Any:
        n = int(json.loads(request.content)["model"].split("-", 1)[1])
        stream = type("Chunks", (_Chunks, httpx2.SyncByteStream), {})(bodies[n])
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, stream=stream)

    client = httpx2.Client(transport=httpx2.MockTransport(handler))
    calls = 200
    samples: dict[str, dict[int, list[float]]] = {name: {short: [], long_: []} for name in variants}
    for _ in range(rounds):
        for name, (enter, leave) in variants.items():
            enter()
            try:
                for n in (short, long_):
                    body = {"model": f"n-{n}", "stream": True, "messages": []}
                    start = time.process_time()
                    for _ in range(calls):
                        with client.stream("POST", "http://llm.local/v1/chat/completions", json=body) as response:
                            for _chunk in response.iter_raw():
                                pass
                    samples[name][n].append((time.process_time() - start) / calls)
            finally:
                leave()
    client.close()
    return {name: _fit(by_length, short, long_) for name, by_length in samples.items()}


class _Chunks:
    """An in-memory response byte stream (httpx2's SyncByteStream protocol)."""

    def __init__(self, chunks: list[bytes]) -> None:
        self._chunks = chunks

    def __iter__(self) -> Iterator[bytes]:
        return iter(self._chunks)

    def close(self) -> None:
        pass


def _table(fitted: dict[str, tuple[float, float]]) -> None:
    base_call, base_chunk = fitted["bare SDK" if "bare SDK" in fitted else "bare client"]
    print(f"{'variant':<22} {'per chunk':>10} {'adds/chunk':>11} {'% of base':>9} {'per call':>10} {'adds/call':>10}")
    for name, (per_call, per_chunk) in fitted.items():
        added_chunk, added_call = per_chunk - base_chunk, per_call - base_call
        share = 100.0 * added_chunk / base_chunk if base_chunk > 0 else float("nan")
        print(
            f"{name:<22} {per_chunk * 1e6:>8.2f}us {added_chunk * 1e6:>9.2f}us {share:>8.1f}% "
            f"{per_call * 1e6:>8.0f}us {added_call * 1e6:>8.0f}us"
        )


# -- instruction counts (valgrind): the same SDK path from memory, repeatable ----------


def _sdk_from_memory(variant: str, chunks: int, calls: int) -> None:
    """The measured program under callgrind: ``calls`` answers of ``chunks`` events
    streamed by the openai SDK from an in-memory transport, under one variant."""
    import httpx2
    import openai

    body = [_event(i, i == chunks - 1) for i in range(chunks)] + [b"data: [DONE]\n\n"]
    stream_type = type("Chunks", (_Chunks, httpx2.SyncByteStream), {})

    def handler(request: Any) -> Any:
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, stream=stream_type(body))

    enter, leave = _variants()[variant]
    client = openai.OpenAI(
        base_url="http://llm.local/v1",
        api_key="sk-bench",
        max_retries=0,
        http_client=httpx2.Client(transport=httpx2.MockTransport(handler)),
    )
    client.chat.completions.create(model="m", messages=[], stream=True).close()  # imports, caches
    enter()
    for _ in range(calls):
        for _chunk in client.chat.completions.create(model="m", messages=[], stream=True):
            pass
    leave()


def _instructions(variant: str, chunks: int, calls: int) -> int:
    import re

    out = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, __file__,
         "--inside", variant, str(chunks), str(calls)],
        capture_output=True,
        check=True,
    )  # fmt: skip
    found = re.search(rb"Collected\s*:\s*(\d+)", out.stderr)
    if found is None:
        raise RuntimeError(f"valgrind printed no total for {variant!r}: {out.stderr[-500:]!r}")
    return int(found.group(1))


def _count_instructions(short: int, long_: int, calls: int) -> None:
    """Instructions per chunk and per call for each variant, from three runs each:
    (calls, short), (calls, long) and (2 * calls, short)."""
    rows = {}
    for variant in _variants():
        a = _instructions(variant, short, calls)
        b = _instructions(variant, long_, calls)
        c = _instructions(variant, short, 2 * calls)
        per_chunk = (b - a) / (calls * (long_ - short))
        per_call = (c - a) / calls - short * per_chunk
        rows[variant] = (per_call, per_chunk)
        print(f"  {variant}: {per_chunk:,.0f} instructions per chunk, {per_call:,.0f} per call", flush=True)
    base_call, base_chunk = rows["bare SDK"]
    print(f"\n{'variant':<22} {'instr/chunk':>12} {'adds/chunk':>11} {'% of SDK':>9} {'adds/call':>11}")
    for variant, (per_call, per_chunk) in rows.items():
        added = per_chunk - base_chunk
        print(
            f"{variant:<22} {per_chunk:>12,.0f} {added:>11,.0f} {100 * added / base_chunk:>8.1f}% "
            f"{per_call - base_call:>11,.0f}"
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=40, help="answers per variant, length and round")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--short", type=int, default=10, help="events in a short answer")
    parser.add_argument("--long", type=int, default=210, help="events in a long answer")
    parser.add_argument(
        "--instructions", action="store_true", help="count instructions under valgrind instead (repeatable)"
    )
    parser.add_argument("--sockets", action="store_true", help="stream from a local uvicorn server instead")
    parser.add_argument("--serve-fd", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--inside", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve_fd is not None:
        _serve(args.serve_fd)
        return
    if args.inside:
        _sdk_from_memory(args.inside[0], int(args.inside[1]), int(args.inside[2]))
        return
    if args.instructions:
        print(f"instructions (valgrind callgrind), openai SDK streaming from memory, {args.short}/{args.long} events")
        _count_instructions(args.short, args.long, args.calls)
        return

    import openai

    variants = _variants()
    samples: dict[str, dict[int, list[float]]] = {name: {args.short: [], args.long: []} for name in variants}
    with contextlib.ExitStack() as stack:
        if args.sockets:
            url = stack.enter_context(_server())
            client = openai.OpenAI(base_url=url, api_key="sk-bench", max_retries=0)
            where = "a local uvicorn server (its CPU not counted)"
        else:
            client = _memory_client()
            where = "memory (an httpx2 transport, no sockets)"
        for enter, leave in variants.values():  # warm every path once
            enter()
            _cpu_per_call(client, args.short, 3)
            leave()
        for _ in range(args.rounds):
            for name, (enter, leave) in variants.items():
                enter()
                try:
                    for chunks in (args.short, args.long):
                        samples[name][chunks].append(_cpu_per_call(client, chunks, args.calls))
                finally:
                    leave()
        client.close()

    fitted = {name: _fit(by_length, args.short, args.long) for name, by_length in samples.items()}
    base_chunk = fitted["bare SDK"][1]
    print(f"openai SDK streaming chat completions from {where}; {args.rounds} rounds x {args.calls} answers")
    print(f"of {args.short} and {args.long} events per variant; CPU of this process (median of rounds)\n")
    _table(fitted)

    cvdiag_only = {k: v for k, v in variants.items() if not k.startswith("OpenTelemetry")}
    cvdiag_only = {"bare client": cvdiag_only.pop("bare SDK"), **cvdiag_only}
    direct = _in_process(cvdiag_only, args.short, args.long, args.rounds)
    print("\nthe same events through a bare httpx2 client, no SDK (body from memory): cvdiag's own cost")
    _table(direct)

    print()
    otel = fitted.get("OpenTelemetry openai")
    otel_added = otel[1] - base_chunk if otel is not None else None
    for name in ("cvdiag default tier", "cvdiag verbose tier"):
        ours = direct[name][1] - direct["bare client"][1]
        line = f"{name}: adds {ours * 1e6:.2f}us per chunk = {100.0 * ours / base_chunk:.1f}% of the SDK's own"
        if otel_added:
            line += f", {ours / otel_added:.2f}x what OpenTelemetry adds ({otel_added * 1e6:.2f}us)"
        print(line)


def _memory_client() -> Any:
    """An openai client whose transport answers ``model: "n-<N>"`` from memory."""
    import httpx2
    import openai

    cache: dict[int, list[bytes]] = {}
    stream_type = type("Chunks", (_Chunks, httpx2.SyncByteStream), {})

    def handler(request: Any) -> Any:
        n = int(json.loads(request.content)["model"].split("-", 1)[1])
        if n not in cache:
            cache[n] = [_event(i, i == n - 1) for i in range(n)] + [b"data: [DONE]\n\n"]
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, stream=stream_type(cache[n]))

    http_client = httpx2.Client(transport=httpx2.MockTransport(handler))
    return openai.OpenAI(base_url="http://llm.local/v1", api_key="sk-bench", max_retries=0, http_client=http_client)


if __name__ == "__main__":
    main()
