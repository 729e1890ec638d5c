"""Write a reproducible mixed log for the read-side benchmark (fixed seed, ~1 GB by default).

About half the lines are noise (access logs, app logs, stack traces, some naming a test
id); the rest are envelopes of thousands of interleaved tests in every line shape of
spec section 1, with a few legacy breadcrumbs and malformed lines.

    python tools/make_big_log.py /tmp/cvdiag-big.log --mb 1024
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from cvdiag.testing import envelope

SEED = 20261121
T0 = datetime(2026, 11, 21, 9, 0, 0, tzinfo=UTC)
SLUGS = ("agno", "langgraph", "crewai", "mastra", "pydantic-ai")
# (weight, shape) of envelope lines
SHAPES = (
    (70, "plain"),
    (8, "logging"),
    (5, "compose"),
    (5, "bare"),
    (4, "java"),
    (3, "docker"),
    (3, "cri"),
    (2, "ansi"),
)


def _ts(t: float) -> str:
    return (T0 + timedelta(seconds=t)).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _test_id(rng: random.Random, t: float) -> str:
    if rng.random() < 0.1:
        return f"d4-{rng.choice(SLUGS)}-{rng.randrange(10**6)}"
    ms = int((T0.timestamp() + t) * 1000)
    rand = rng.getrandbits(74)
    value = (ms << 80) | (0x7 << 76) | ((rand >> 62) << 64) | (0b10 << 62) | (rand & ((1 << 62) - 1))
    return str(uuid.UUID(int=value))


def _events(rng: random.Random, tid: str, slug: str, t: float) -> list[tuple[float, str, str, int | None, dict]]:
    """(time, boundary, outcome, duration_ms, metadata) of one test, by a random scenario."""
    ev: list[tuple[float, str, str, int | None, dict]] = []
    if rng.random() < 0.3:
        ev.append(
            (t - 0.05, "probe.message.send", "info", None, {"message_index": 0, "char_count": 40, "demo": "chat"})
        )
    ev.append((t, "backend.request.ingress", "info", None, {"method": "POST", "path": "/chat", "content_length": 200}))
    ev.append((t + 0.002, "backend.agent.enter", "info", None, {"agent_name": "planner", "model_id": "gpt-4o-mini"}))
    ev.append(
        (
            t + 0.004,
            "backend.llm.call.start",
            "info",
            None,
            {"provider": "openai", "model": "gpt-4o-mini", "prompt_token_count_estimate": 420},
        )
    )
    latency = rng.lognormvariate(0.0, 0.8)
    scenario = rng.random()
    for k in range(int(latency / 1.0)):
        ev.append(
            (
                t + 0.004 + k + 1.0,
                "backend.llm.call.heartbeat",
                "info",
                None,
                {"elapsed_ms_since_start": (k + 1) * 1000},
            )
        )
    llm_err = scenario < 0.03
    ev.append(
        (
            t + latency,
            "backend.llm.call.response",
            "err" if llm_err else "ok",
            int(latency * 1000),
            {
                "provider": "openai",
                "model": "gpt-4o-mini",
                "response_token_count": 0 if llm_err else rng.randrange(20, 400),
                "latency_ms": int(latency * 1000),
                "error_class": "RateLimitError" if llm_err else None,
            },
        )
    )
    if llm_err:
        ev.append(
            (
                t + latency + 0.01,
                "backend.error.caught",
                "err",
                int(latency * 1000) + 10,
                {
                    "exception_type": "RateLimitError",
                    "message_scrubbed": "rate limited",
                    "stack_brief": [{"file": "agent.py", "line": 88}],
                    "truncated": False,
                },
            )
        )
        return ev
    ttfb = latency + 0.01
    ev.append((t + ttfb, "backend.sse.first_byte", "ok", None, {"delta_ms_from_ingress": int(ttfb * 1000)}))
    n = rng.randrange(10, 60)
    for i in range(n):
        ev.append(
            (
                t + ttfb + i * 0.02,
                "backend.sse.event",
                "info",
                None,
                {"event_type": "message", "payload_size_bytes": rng.randrange(20, 300), "sequence_num": i},
            )
        )
    end = t + ttfb + n * 0.02
    if scenario < 0.08:
        ev.append(
            (
                end,
                "backend.sse.aborted",
                "err",
                int((end - t) * 1000),
                {"termination_kind": "rst", "bytes_before_abort": n * 120},
            )
        )
    else:
        ev.append(
            (
                end,
                "backend.agent.exit",
                "ok",
                int((end - t) * 1000),
                {"terminal_outcome": "ok", "total_duration_ms": int((end - t) * 1000)},
            )
        )
        ev.append(
            (
                end + 0.001,
                "backend.response.complete",
                "ok",
                int((end - t) * 1000),
                {
                    "http_status": 200,
                    "content_length": n * 120,
                    "total_duration_ms": int((end - t) * 1000),
                    "sse_event_count": n,
                },
            )
        )
    return ev  # fmt: skip


def _envelope(tid: str, slug: str, at: float, boundary: str, outcome: str, dur: int | None, md: dict, span: int) -> str:
    env = envelope(
        boundary,
        test_id=tid,
        ts=_ts(at),
        span_id=f"{span:016x}",
        slug=slug,
        demo="chat",
        mono_ns=int(at * 1e9) + 10**12,
        duration_ms=dur,
        outcome=outcome,
        metadata=md,
    )
    return json.dumps(env, separators=(",", ":"))


def _shape(rng: random.Random, body: str, at: float) -> str:
    shape = rng.choices([s for _, s in SHAPES], [w for w, _ in SHAPES])[0]
    stamp = _ts(at)
    if shape == "plain":
        return f"CVDIAG {body}"
    if shape == "logging":
        return f"{stamp[:10]} {stamp[11:23].replace('.', ',')} INFO cvdiag: CVDIAG {body}"
    if shape == "compose":
        return f"backend-1  | CVDIAG {body}"
    if shape == "bare":
        return body
    if shape == "java":
        return f"CVDIAG_EVENT {body}"
    if shape == "docker":
        return json.dumps(
            {"log": f"CVDIAG {body}\n", "stream": "stdout", "time": stamp[:-1] + "123456Z"}, separators=(",", ":")
        )
    if shape == "cri":
        return f"{stamp[:-1]}123456Z stdout F CVDIAG {body}"
    return f"\x1b[32mINFO\x1b[0m \x1b[2mCVDIAG {body}\x1b[0m"


def _noise(rng: random.Random, at: float, tid: str | None) -> str:
    stamp = _ts(at)
    kind = rng.random()
    if kind < 0.4:
        return f'INFO:     10.0.{rng.randrange(255)}.{rng.randrange(255)}:{rng.randrange(30000, 60000)} - "POST /chat HTTP/1.1" 200 OK'  # noqa: E501 - one literal log line
    if kind < 0.7 and tid:
        return f'{{"event": "agent step done", "level": "info", "timestamp": "{stamp}", "test_id": "{tid}", "step": {rng.randrange(9)}}}'  # noqa: E501 - one literal log line
    if kind < 0.85:
        return f'{stamp[:10]} {stamp[11:23].replace(".", ",")} DEBUG httpx: HTTP Request: POST https://api.openai.com/v1/chat/completions "HTTP/1.1 200 OK"'  # noqa: E501 - one literal log line
    return f'  File "/app/agent/tools.py", line {rng.randrange(900)}, in run_tool'  # fmt: skip


def generate(out: Any, target_bytes: int, seed: int = SEED) -> dict[str, Any]:
    """Write lines until ``target_bytes``; returns counts (and one test id to look up)."""
    rng = random.Random(seed)
    written = envelopes = noise = tests = 0
    span = 1
    t = 0.0
    pending: list[tuple[float, str, str, str, str, int | None, dict]] = []
    middle_id = ""
    while written < target_bytes:
        # Keep about 8 tests in flight, interleaved by time.
        while len({p[1] for p in pending}) < 8:
            tid, slug = _test_id(rng, t), rng.choice(SLUGS)
            tests += 1
            for at, b, o, d, md in _events(rng, tid, slug, t + rng.random()):
                pending.append((at, tid, slug, b, o, d, md))
            pending.sort(key=lambda p: p[0])
            if not middle_id and written > target_bytes // 2:
                middle_id = tid
        at, tid, slug, b, o, d, md = pending.pop(0)
        t = max(t, at)
        line = _shape(rng, _envelope(tid, slug, at, b, o, d, md, span), at)
        span += 1
        envelopes += 1
        r = rng.random()
        if r < 0.0005:
            line += f"\nCVDIAG component=backend boundary={b} run_id=r{span} slug={slug} header_present=true header_value_prefix={tid[:4]} hop=1 status=ok test_id={tid}"  # noqa: E501 - one literal log line
        elif r < 0.0006:
            line += "\n" + line[: len(line) // 2]  # a cut envelope
        lines = [line]
        for _ in range(rng.choice((0, 1, 1, 2))):
            lines.append(_noise(rng, t, tid if rng.random() < 0.5 else None))
            noise += 1
        chunk = "\n".join(lines) + "\n"
        out.write(chunk)
        written += len(chunk)
    return {"bytes": written, "envelopes": envelopes, "noise_lines": noise, "tests": tests, "middle_id": middle_id}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("path")
    p.add_argument("--mb", type=int, default=1024)
    p.add_argument("--seed", type=int, default=SEED)
    args = p.parse_args(argv)
    with open(args.path, "w", encoding="utf-8", buffering=1 << 20) as fh:
        info = generate(fh, args.mb << 20, args.seed)
    json.dump(info, sys.stdout)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
