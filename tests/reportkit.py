"""A real browser for the HTML report's tests: Debian's chromium, driven headless by
Playwright, recording every request, console message and page error.

Without chromium or Playwright the tests skip, saying why; with ``CVDIAG_REQUIRE_E2E=1``
(CI) that is a failure instead.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from cvdiag.testing import envelope

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _required() -> bool:
    return os.environ.get("CVDIAG_REQUIRE_E2E", "").strip().lower() in ("1", "true", "yes", "on")


def _unavailable(reason: str) -> None:
    if _required():
        pytest.fail(f"browser tests required (CVDIAG_REQUIRE_E2E=1) but {reason}", pytrace=False)
    pytest.skip(f"browser tests skipped: {reason} (CVDIAG_REQUIRE_E2E=1 makes this a failure)")


def chromium() -> str | None:
    for name in ("/usr/bin/chromium", shutil.which("chromium"), shutil.which("chromium-browser")):
        if name and os.path.exists(name):
            return name
    return None


@contextmanager
def browser() -> Iterator[Any]:
    """A headless chromium, or a skip (a failure under CVDIAG_REQUIRE_E2E=1)."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("Playwright for Python is not installed (pip install -e '.[dev]')")
    path = chromium()
    if path is None:
        _unavailable("chromium is not installed (apt-get install chromium)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


@dataclass
class Visit:
    """One page of a report and what it did: requests, console errors, page errors."""

    page: Any
    requests: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def assert_clean(self) -> None:
        """No console error, no uncaught exception, and no request but the file itself."""
        assert self.errors == []
        assert [u for u in self.requests if not u.startswith("file://")] == []


@contextmanager
def visit(b: Any, report: Path, *, dark: bool = False, width: int = 1300, height: int = 900) -> Iterator[Visit]:
    context = b.new_context(viewport={"width": width, "height": height}, color_scheme="dark" if dark else "light")
    page = context.new_page()
    seen = Visit(page)
    page.on("request", lambda r: seen.requests.append(r.url))
    page.on("console", lambda m: seen.errors.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: seen.errors.append(f"page error: {e}"))
    try:
        page.goto(report.resolve().as_uri())
        page.wait_for_selector("#index, #detail")
        yield seen
    finally:
        context.close()


# -- a test with all three layers, retries, heartbeats and a silence -----------------------

_span = iter(range(1, 1 << 30))


def _env(tid: str, boundary: str, ms: int, outcome: str = "info", duration: int | None = None, **md: Any) -> dict:
    seconds, millis = divmod(ms, 1000)
    return envelope(
        boundary,
        test_id=tid,
        ts=f"2026-11-21T10:00:{seconds:02d}.{millis:03d}Z",
        span_id=f"{next(_span):016x}",
        slug="shop-agent",
        demo="chat",
        mono_ns=5_000_000_000 + ms * 1_000_000,
        duration_ms=duration,
        outcome=outcome,
        metadata=md,
    )


STORY_ID = "d4-shop-retry-story"


def story(tid: str = STORY_ID) -> list[dict]:
    """A failing test across probe, backend and aimock: a provider 500 then a retry that
    streams, heartbeats, a first token, a 1.6 s silence, and the client hanging up."""
    e = _env
    return [
        e(tid, "probe.start", 0, url="https://shop.example/chat", viewport="1280x720"),
        e(tid, "probe.message.send", 200, message_index=0, char_count=42, demo="chat"),
        e(tid, "backend.request.ingress", 250, method="POST", path="/chat", content_length=120),
        e(tid, "backend.agent.enter", 260, agent_name="shopper", model_id="gpt-4o-mini"),
        e(tid, "backend.llm.call.start", 270, provider="openai", model="gpt-4o-mini", attempt=0),
        e(tid, "aimock.request.ingress", 280, path="/v1/chat/completions", content_length=300, match_keys=None),
        e(tid, "aimock.response.complete", 330, "ok", 50, http_status=500, total_bytes=80, total_duration_ms=50),
        e(tid, "backend.llm.call.response", 340, "err", 70, provider="openai", model="gpt-4o-mini", attempt=0,
          http_status=500, error_class="InternalServerError", latency_ms=70),
        e(tid, "backend.llm.call.start", 900, provider="openai", model="gpt-4o-mini", attempt=1),
        e(tid, "aimock.request.ingress", 910, path="/v1/chat/completions", content_length=300, match_keys=None),
        e(tid, "backend.llm.call.heartbeat", 1400, elapsed_ms_since_start=500),
        e(tid, "backend.llm.call.heartbeat", 1900, elapsed_ms_since_start=1000),
        e(tid, "aimock.response.start", 2000, delta_ms_from_ingress=1090),
        e(tid, "backend.sse.first_byte", 2010, "ok", delta_ms_from_ingress=1760),
        e(tid, "backend.sse.event", 2020, event_type="message", payload_size_bytes=40, sequence_num=0),
        e(tid, "backend.sse.event", 2040, event_type="message", payload_size_bytes=40, sequence_num=1),
        e(tid, "probe.dom.firsttoken", 2060, delta_ms_from_start=2060, text_length=5),
        e(tid, "backend.sse.event", 3700, event_type="message", payload_size_bytes=40, sequence_num=2),
        e(tid, "backend.llm.call.response", 3710, "timeout", 2810, provider="openai", model="gpt-4o-mini",
          attempt=1, error_class="CancelledError", latency_ms=2810, ttft_ms=1100),
        e(tid, "aimock.response.aborted", 3715, "err", 2805, termination_kind="rst", bytes_before_abort=200),
        e(tid, "backend.agent.exit", 3720, "err", 3460, terminal_outcome="cancelled", total_duration_ms=3460),
        e(tid, "backend.sse.aborted", 3725, "err", 3475, termination_kind="rst", bytes_before_abort=84),
        e(tid, "probe.exit", 3800, "err", 3800, terminal_outcome="error", total_duration_ms=3800,
          sse_event_count=3, first_token_delta_ms=2060, failure_classifier="TimeoutError"),
    ]  # fmt: skip
