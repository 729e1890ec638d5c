"""The cost of one ``emit`` on the caller's thread, scrubbing on, writer running.

    python tools/bench_emit.py [--calls 50000]

Times each call (perf_counter_ns) for three envelopes: an LLM response (short
strings), a request ingress with edge headers, and an error with a message and a
stack; prints median and p99 microseconds, and, as a yardstick from the same run,
what a ``json.dumps`` of the same envelope costs (a floor any Python emitter pays).
Lines go to a file sink on /dev/null through the real writer thread.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable

import cvdiag
from cvdiag.write.emitter import emit_edge

LLM = {
    "provider": "openai",
    "model": "gpt-4o-mini",
    "response_token_count": 42,
    "latency_ms": 1234,
    "error_class": None,
    "finish_reason": "stop",
}
INGRESS = {"method": "POST", "path": "/api/chat/completions", "content_length": 512, "inbound_test_id_adopted": True}
EDGE = {
    "cf-ray": "8c1f2a3b4c5d6e7f-SJC",
    "cf-mitigated": None,
    "cf-cache-status": "DYNAMIC",
    "x-railway-edge": "railway/us-west2",
    "x-railway-request-id": "Xk2mQ9aTRfGv0lYpBn4sWg",
    "x-hikari-trace": None,
    "retry-after": None,
    "via": "1.1 google",
    "server": "uvicorn",
}
ERROR = {
    "exception_type": "APIConnectionError",
    "message_scrubbed": "Connection error: upstream https://api.openai.com/v1/chat/completions reset by peer",
    "stack_brief": [{"file": "app/agent.py", "line": 88}, {"file": "openai/_base_client.py", "line": 1024}],
    "truncated": False,
}

CASES: dict[str, Callable[[], None]] = {
    "llm.call.response": lambda: cvdiag.emit("backend.llm.call.response", LLM, outcome="ok", duration_ms=1234),
    "request.ingress + edge": lambda: emit_edge(
        "backend.request.ingress", INGRESS, outcome="info", duration_ms=None, edge_headers=EDGE
    ),
    "error.caught": lambda: cvdiag.emit("backend.error.caught", ERROR, outcome="err", duration_ms=12),
}


def _times(fn: Callable[[], None], calls: int) -> list[int]:
    samples = []
    clock = time.perf_counter_ns
    for i in range(calls):
        start = clock()
        fn()
        samples.append(clock() - start)
        if i % 5000 == 4999:
            cvdiag.flush()  # keep the queue from overflowing: measure emit, not drops
    samples.sort()
    return samples


def _stats(samples: list[int]) -> tuple[float, float]:
    return samples[len(samples) // 2] / 1000, samples[int(len(samples) * 0.99)] / 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=50_000)
    args = parser.parse_args()
    cvdiag.configure(enabled=True, tier="verbose", environ={}, stdout=False, file="/dev/null")
    print("| envelope | median µs | p99 µs | json.dumps of it, median µs |")
    print("|---|---|---|---|")
    with cvdiag.request_context(test_id="bench-emit", slug="bench"):
        for name, fn in CASES.items():
            _times(fn, 2000)  # warm caches
            median, p99 = _stats(_times(fn, args.calls))
            metadata = LLM if "llm" in name else INGRESS if "ingress" in name else ERROR
            floor, _ = _stats(_times(lambda m=metadata: json.dumps({"metadata": m, "edge_headers": EDGE}), args.calls))
            print(f"| {name} | {median:.2f} | {p99:.2f} | {floor:.2f} |")
    cvdiag.flush()
    print(f"stats: {cvdiag.stats()}")


if __name__ == "__main__":
    main()
