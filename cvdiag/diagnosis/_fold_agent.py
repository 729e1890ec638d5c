"""Folding the agent's lines (``backend.agent.*``, ``backend.tool.call.*``): which agent
ran, how the first failed one ended, its tool calls, and the causes its errors name."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cvdiag.diagnosis._causes import MATCH_CHARS, cause_of
from cvdiag.diagnosis._convert import as_float, as_name, as_text
from cvdiag.diagnosis._facts import Facts, Handler
from cvdiag.diagnosis._picks import earlier, earliest, later


def name_cause(ev: Facts, error_class: Any, message: Any, key: Any) -> None:
    """Keep the cause an exception names (``Class: message``), if it names one."""
    parts = [p for p in (error_class, message) if isinstance(p, str) and p]
    if not parts:
        return
    text = ": ".join(parts)[:MATCH_CHARS]
    cls = cause_of(text)
    if cls is not None:
        ev.agent().named(cls, text, key)


def _enter(ev: Facts, md: Mapping, outcome: Any, key: Any, env: Mapping) -> None:
    if later(ev.agent_name, ev.agent_name_key, key):
        ev.agent_name_key, ev.agent_name = key, as_name(md.get("agent_name")) or "?"


def _exit(ev: Facts, md: Mapping, outcome: Any, key: Any, env: Mapping) -> None:
    ev.agent_exits += 1
    if md.get("limit_name") is not None:
        ev.agent().exited(md, key)
    terminal = as_text(md.get("terminal_outcome"))
    if terminal in ("error", "cancelled"):
        if earlier(ev.agent_failed, ev.agent_failed.key if ev.agent_failed else None, key):
            ev.agent_error_class = as_name(md.get("error_class")) if terminal == "error" else None
        ev.agent_failed = earliest(ev.agent_failed, key, terminal)
        message = as_text(md.get("error_message"))
        if message:
            agent = ev.agent()
            agent.agent_message = earliest(agent.agent_message, key, message)
        name_cause(ev, md.get("error_class"), md.get("error_message"), key)


def _tool_start(ev: Facts, md: Mapping, outcome: Any, key: Any, env: Mapping) -> None:
    ev.agent().tool_start(md, key)


def _tool_response(ev: Facts, md: Mapping, outcome: Any, key: Any, env: Mapping) -> None:
    ev.agent().tool_response(md, outcome, key, as_float(env.get("duration_ms")))


def _output(ev: Facts, md: Mapping, outcome: Any, key: Any, env: Mapping) -> None:
    ev.agent().checked_output(md, outcome, key)


HANDLERS: dict[str, Handler] = {
    "backend.agent.enter": _enter,
    "backend.agent.exit": _exit,
    "backend.tool.call.start": _tool_start,
    "backend.tool.call.response": _tool_response,
    "backend.agent.output": _output,
}
