"""What reading an LLM answer's event stream costs per event, per provider, hooks aside.

Each provider's recorded stream (``tests/data/llm``) has the event that carries output
repeated to ``--events`` events and is fed one event per chunk, as a server flushes
them, to three readers in one run:

- ``bare loop``: iterating the chunks (the floor);
- ``cvdiag AnswerReader``: what cvdiag's capture reads per chunk (first output, finish
  reason, tokens, output characters, terminal event, tool calls);
- ``openai SDK SSE``: the openai SDK's own ``SSEDecoder`` and a ``json.loads`` per event,
  the part of an SDK's per-chunk work that is a parse like ours (the yardstick).

Time is CPU per event, the fit of a short and a long stream (per-call costs cancel),
best of ``--rounds``. ``--instructions`` counts instructions under valgrind instead
(repeatable on a loaded machine; the SDK row is left out there, its import alone takes
minutes under valgrind)::

    python tools/bench_llm_stream.py [--events 400] [--rounds 7]
    python tools/bench_llm_stream.py --instructions
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "llm"
#: provider: (recording, api, a byte string found only in the event that carries output)
STREAMS = {
    "openai chat": ("openai_chat_stream.sse", "chat.completions", b'"delta":{"content":"Hello"'),
    "openai responses": ("openai_responses_stream.sse", "responses", b'"delta":"Hi"'),
    "anthropic messages": ("anthropic_messages_stream.sse", "messages", b'"text":"Hello"'),
    "gemini": ("gemini_stream.sse", "generate_content", b'"text": "The sky"'),
}
READERS = ("bare loop", "cvdiag AnswerReader", "openai SDK SSE")
_SHORT = 20


def stream(provider: str, events: int) -> list[bytes]:
    """The recording as one chunk per event, its output event repeated ``events`` times."""
    name, _api, marker = STREAMS[provider]
    chunks = [e + b"\n\n" for e in (DATA / name).read_bytes().split(b"\n\n") if e.strip()]
    at = next(i for i, chunk in enumerate(chunks) if marker in chunk)
    return chunks[:at] + [chunks[at]] * events + chunks[at + 1 :]


def reader(kind: str, api: str) -> Callable[[list[bytes]], object]:
    if kind == "bare loop":

        def bare(chunks: list[bytes]) -> object:
            for _chunk in chunks:
                pass
            return None

        return bare
    if kind == "cvdiag AnswerReader":
        from cvdiag.write._llm_stream import AnswerReader

        def ours(chunks: list[bytes]) -> object:
            answer = AnswerReader(api, event_stream=True)
            for chunk in chunks:
                answer.feed(chunk)
            answer.end()
            return answer.output_chars

        return ours
    from openai._streaming import SSEDecoder

    def sdk(chunks: list[bytes]) -> object:
        for sse in SSEDecoder().iter_bytes(iter(chunks)):
            if sse.data.startswith("{"):
                json.loads(sse.data)
        return None

    return sdk


def _per_event(kind: str, provider: str, events: int, rounds: int) -> float:
    """Best CPU seconds per event over ``rounds``, short and long streams fitted."""
    read = reader(kind, STREAMS[provider][1])
    short, long_ = stream(provider, _SHORT), stream(provider, events)
    calls = max(1, 4000 // events)
    best = float("inf")
    for _ in range(rounds):
        times = []
        for chunks in (short, long_):
            start = time.process_time()
            for _ in range(calls):
                read(chunks)
            times.append((time.process_time() - start) / calls)
        best = min(best, (times[1] - times[0]) / (events - _SHORT))
    return best


def _run_inside(kind: str, provider: str, events: int, calls: int) -> None:
    read = reader(kind, STREAMS[provider][1])
    chunks = stream(provider, events)
    read(chunks)  # imports, caches
    for _ in range(calls):
        read(chunks)


def _instructions(kind: str, provider: str, events: int, calls: int) -> int:
    command = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, __file__,
               "--inside", kind, provider, str(events), str(calls)]  # fmt: skip
    out = subprocess.run(command, capture_output=True, check=True)
    found = re.search(rb"Collected\s*:\s*(\d+)", out.stderr)
    if found is None:
        raise RuntimeError(f"valgrind printed no total: {out.stderr[-500:]!r}")
    return int(found.group(1))


def _instructions_per_event(kind: str, provider: str, events: int) -> float:
    calls = 5
    return (_instructions(kind, provider, events, calls) - _instructions(kind, provider, _SHORT, calls)) / (
        calls * (events - _SHORT)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=400, help="output events in the long stream")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--instructions", action="store_true", help="count instructions under valgrind")
    parser.add_argument("--provider", action="append", choices=list(STREAMS), help="only these (repeatable)")
    parser.add_argument("--inside", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inside:
        kind, provider, events, calls = args.inside
        _run_inside(kind, provider, int(events), int(calls))
        return
    unit = "instructions" if args.instructions else "us"
    print(f"per event ({unit}), one event per chunk, {args.events} output events")
    readers = READERS[:2] if args.instructions else READERS
    print(f"| stream | {' | '.join(readers)} |" + ("" if args.instructions else " cvdiag / SDK SSE |"))
    print("|---|" + "---|" * (len(readers) + (not args.instructions)))
    for provider in args.provider or STREAMS:
        row = {}
        for kind in readers:
            if args.instructions:
                row[kind] = _instructions_per_event(kind, provider, args.events)
            else:
                row[kind] = _per_event(kind, provider, args.events, args.rounds) * 1e6
        cells = " | ".join(f"{row[k]:,.0f}" if args.instructions else f"{row[k]:.2f}" for k in readers)
        ratio = "" if args.instructions else f" {row['cvdiag AnswerReader'] / row['openai SDK SSE']:.2f} |"
        print(f"| {provider} | {cells} |{ratio}", flush=True)


if __name__ == "__main__":
    main()
