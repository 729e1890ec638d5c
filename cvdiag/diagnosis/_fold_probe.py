"""Folding the harness's lines (``probe.*``): network errors, the exit, console errors,
and whether the harness itself crashed (a browser, a page, a CDP session, memory)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cache
from typing import Any

from cvdiag.diagnosis._convert import as_float, as_text
from cvdiag.diagnosis._facts import Counting, Facts, Handler
from cvdiag.diagnosis._picks import earliest, latest


@cache
def _runner_crash() -> re.Pattern[str]:
    """Browser/page/context crashes, CDP protocol errors and OOM, as Playwright, Puppeteer
    and Chromium name them. A Chromium net error such as ERR_HTTP2_PROTOCOL_ERROR is a
    network failure, not a broken harness: the lookbehind keeps ``_protocol_error`` out.
    Compiled at its first use, not at import: most runs of the CLI never meet a probe
    line, and compiling it cost them about 1 ms of start-up."""
    return re.compile(
        r"(browser|page|context|target|renderer|tab)s?[\W_]*((has[\W_]*been|was|is|got)[\W_]*)?(crash|closed|disconnected)"
        r"|(?<![a-z0-9_])protocol[ ]?error"
        r"|out[\W_]*of[\W_]*memory|(?<![a-z])oom(?![a-z])|oomkill",
    )


def names_runner_crash(text: str) -> bool:
    """Does an error class or classifier name a crash of the harness itself?"""
    return bool(_runner_crash().search(text.lower()))


def _network_error(ev: Facts, md: Mapping, outcome: Any, key: Any, env: Mapping) -> None:
    ev.probe_network_errors += 1
    text = as_text(md.get("error_class"))
    if text and names_runner_crash(text):
        ev.probe_crash = earliest(ev.probe_crash, key, ("probe.network.error", text))


def _exit(ev: Facts, md: Mapping, outcome: Any, key: Any, env: Mapping) -> None:
    classifier = as_text(md.get("failure_classifier")) or as_text(md.get("error_class"))
    if classifier and names_runner_crash(classifier):
        ev.probe_crash = earliest(ev.probe_crash, key, ("probe.exit", classifier))
    ev.probe_exit = latest(
        ev.probe_exit, key, (as_text(md.get("terminal_outcome")), as_float(md.get("first_token_delta_ms")), classifier)
    )


def _console_error(ev: Facts, md: Mapping, outcome: Any, key: Any, env: Mapping) -> None:
    ev.probe_console_errors += 1
    ev.probe_console_first = earliest(ev.probe_console_first, key, as_text(md.get("message_scrubbed")) or "")


# Envelopes that only count: the count is all they say.
_first_token = Counting("probe_first_tokens")
_alternate_content = Counting("probe_alternate")

HANDLERS: dict[str, Handler] = {
    "probe.network.error": _network_error,
    "probe.exit": _exit,
    "probe.dom.firsttoken": _first_token,
    "probe.dom.alternate_content": _alternate_content,
    "probe.console.error": _console_error,
}
