"""What reading tool results out of LLM request bodies costs, per call, against the SDK's own.

A conversation of 50 tool results grows to about 200 KB; every next request of it
carries one more assistant turn and one more result, and one asked call waits for it.
Measured in one run, on the very bodies the ``openai`` SDK serialised:

* the SDK's own per-call cost: ``chat.completions.create`` with that conversation,
  built and sent to a local uvicorn server (a child process, its CPU not counted),
  its short answer read: CPU of this process per call;
* cvdiag's reading of each request body (``_tool_wire.asked_calls.request``): incremental
  (the same conversation's last body remembered: only the new turn is parsed), fresh
  (nothing remembered: the whole array is parsed once), and with no call waiting (the
  body is not read at all); and ``json.loads`` of the whole body, for scale;
* giving up on the waiting calls at the end of a failed request (``memory.abandon``):
  nothing waiting, one call, one call among 4,095 of the same test from other requests.

Goal: the incremental read costs at most 5% of the SDK's per-call cost.

    python tools/bench_tool_wire.py [--turns 50] [--calls 20] [--rounds 5]
    python tools/bench_tool_wire.py --instructions   # repeatable: valgrind instruction counts
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

_RESULT = ("Sunny intervals, light wind from the west, 21 degrees; " * 70)[:3800]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "The weather in a city.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        },
    }
]


def conversation(turns: int) -> list[dict[str, Any]]:
    """A system prompt, a question, and ``turns`` tool calls each with its ~3.8 KB result."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a careful travel agent. " * 20},
        {"role": "user", "content": "Plan a week across Europe, checking the weather everywhere."},
    ]
    for n in range(turns):
        messages.extend(_turn(n))
    return messages


def _turn(n: int) -> list[dict[str, Any]]:
    call = {
        "id": f"call_{n:04d}",
        "type": "function",
        "function": {"name": "get_weather", "arguments": f'{{"city":"c{n}"}}'},
    }
    return [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"call_{n:04d}", "content": _RESULT},
    ]


def sdk_bodies(turns: int, calls: int) -> list[bytes]:
    """The bodies the openai SDK sends for ``calls`` requests of a conversation growing from
    ``turns`` results by one result per request (recorded from an in-memory transport)."""
    import httpx2
    import openai

    sent: list[bytes] = []

    def handler(request: Any) -> Any:
        sent.append(request.content)
        return httpx2.Response(200, json={"choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}}]})

    client = openai.OpenAI(
        base_url="http://llm.local/v1",
        api_key="sk-bench",
        max_retries=0,
        http_client=httpx2.Client(transport=httpx2.MockTransport(handler)),
    )
    messages = conversation(turns)
    for n in range(turns, turns + calls):
        client.chat.completions.create(model="n-1", messages=messages, tools=TOOLS)  # type: ignore[arg-type]
        messages.extend(_turn(n))
    return sent


def sdk_cpu_per_call(url: str, turns: int, calls: int) -> float:
    """CPU seconds of this process per ``create`` of the grown conversation, to a real server."""
    import openai

    client = openai.OpenAI(base_url=url, api_key="sk-bench", max_retries=0)
    messages = conversation(turns)
    client.chat.completions.create(model="n-1", messages=messages, tools=TOOLS, stream=True).close()  # warm
    start = time.process_time()
    for n in range(turns, turns + calls):
        for _chunk in client.chat.completions.create(model="n-1", messages=messages, tools=TOOLS, stream=True):  # type: ignore[arg-type]
            pass
        messages.extend(_turn(n))
    spent = time.process_time() - start
    client.close()
    return spent / calls


def _asked(n: int) -> list[Any]:
    from cvdiag.write._tool_wire import Asked

    return [Asked(f"call_{n:04d}", "get_weather")]


def read_per_call(bodies: list[bytes], turns: int, mode: str) -> float:
    """Seconds per ``memory.request`` over ``bodies`` (all but the first), in one mode."""
    from cvdiag.write._tool_wire import AskedCalls

    memory = AskedCalls()
    memory.request("bench", "chat.completions", bodies[0])  # the conversation, first seen
    spent = 0.0
    for k, body in enumerate(bodies[1:]):
        if mode != "idle":
            memory.asked("bench", _asked(turns + k), 0)
        if mode == "fresh":
            memory.conversations.clear()
        start = time.perf_counter()
        if mode == "json.loads":
            json.loads(body)
        else:
            watch = memory.request("bench", "chat.completions", body)
            assert mode == "idle" or (watch is not None and len(watch.results) == 1), mode
        spent += time.perf_counter() - start
    return spent / (len(bodies) - 1)


MODES = ("incremental", "fresh", "idle", "json.loads")


def end_per_request(waiting: int, mine: int, repeat: int = 50) -> float:
    """Seconds of ``memory.abandon`` at the end of a request that failed, with ``waiting``
    calls of the same test asked in another request and ``mine`` asked in this one."""
    from cvdiag.write._tool_wire import Asked, AskedCalls
    from cvdiag.write.context import new_context

    this, other = new_context(test_id="bench"), new_context(test_id="bench")
    spent = 0.0
    for _ in range(repeat):
        memory = AskedCalls()
        memory.asked("bench", [Asked(f"o{i}", "get_weather") for i in range(waiting)], 0, other)
        memory.asked("bench", [Asked(f"m{i}", "get_weather") for i in range(mine)], 0, this)
        start = time.perf_counter()
        given_up = memory.abandon("bench", this, "timeout", 1)
        spent += time.perf_counter() - start
        assert len(given_up) == mine
    return spent / repeat


#: (label, calls of the test waiting from another request, calls of this request waiting)
ENDS = (
    ("request ends, nothing waiting", 0, 0),
    ("request ends, 1 call given up", 0, 1),
    ("request ends, 4,095 others scanned", 4095, 1),
)


def _timed(args: argparse.Namespace) -> None:
    from bench_llm_http import _server

    bodies = sdk_bodies(args.turns, args.calls)
    sizes = f"{len(bodies[0]) // 1000}-{len(bodies[-1]) // 1000} KB"
    sdk: list[float] = []
    reads: dict[str, list[float]] = {mode: [] for mode in MODES}
    with _server() as url:
        for _ in range(args.rounds):
            sdk.append(sdk_cpu_per_call(url, args.turns, args.calls))
            for mode in MODES:
                reads[mode].append(read_per_call(bodies, args.turns, mode))
    base = statistics.median(sdk)
    print(f"openai SDK, chat.completions with {args.turns}+ tool results ({sizes} per body), {args.calls} calls")
    print(f"x {args.rounds} rounds; medians. SDK: CPU of this process per call (local uvicorn server)\n")
    print(f"{'per call':<34} {'us':>10} {'% of SDK':>9}")
    print(f"{'SDK builds, sends, reads':<34} {base * 1e6:>10,.0f} {100.0:>8.1f}%")
    for mode in MODES:
        value = statistics.median(reads[mode])
        print(f"{'cvdiag reads the body: ' + mode:<34} {value * 1e6:>10,.1f} {100 * value / base:>8.2f}%")
    for label, waiting, mine in ENDS:
        value = end_per_request(waiting, mine)
        print(f"{label:<34} {value * 1e6:>10,.1f} {100 * value / base:>8.2f}%")


# -- repeatable: instruction counts under valgrind ---------------------------------------


def _inside(what: str, calls: int, turns: int) -> None:
    """The measured program under callgrind."""
    bodies = sdk_bodies(turns, calls + 1)
    if what == "sdk":
        sdk_bodies(turns, calls)  # the SDK again: build and send ``calls`` requests from memory
    else:
        read_per_call(bodies, turns, what)


def _instructions(what: str, calls: int, turns: int) -> int:
    from bench_instructions import callgrind_total

    return callgrind_total(__file__, "--inside", what, str(calls), str(turns))


def _count_instructions(args: argparse.Namespace) -> None:
    few, many = args.calls, 2 * args.calls
    base_few, base_many = (_instructions("none", n, args.turns) for n in (few, many))
    per_call = {}
    for what in ("sdk", "incremental", "fresh"):
        a, b = _instructions(what, few, args.turns), _instructions(what, many, args.turns)
        per_call[what] = ((b - base_many) - (a - base_few)) / (many - few)
        print(f"  {what}: {per_call[what]:,.0f} instructions per call", flush=True)
    sdk = per_call["sdk"]
    print(f"\nopenai SDK building and sending one request (in-memory transport): {sdk:,.0f} instructions")
    for what in ("incremental", "fresh"):
        print(f"cvdiag reads the body, {what}: {per_call[what]:,.0f} = {100 * per_call[what] / sdk:.2f}% of the SDK's")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=50, help="tool results already in the conversation")
    parser.add_argument("--calls", type=int, default=20, help="requests measured per round (one more result each)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--instructions", action="store_true", help="count instructions under valgrind instead")
    parser.add_argument("--inside", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.inside:
        what, calls, turns = args.inside
        if what != "none":
            _inside(what, int(calls), int(turns))
        else:
            sdk_bodies(int(turns), int(calls) + 1)
        return
    if args.instructions:
        _count_instructions(args)
    else:
        _timed(args)


if __name__ == "__main__":
    main()
