"""Folding the LLM call lines (``backend.llm.call.*``): calls started and answered, the
first failure and every failed attempt, the last answer's numbers, the heartbeats of a
call still open, and the agent-level causes an answer names."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cvdiag.diagnosis._causes import MATCH_CHARS, cause_of, finish_cause
from cvdiag.diagnosis._convert import as_float, as_int, as_name, as_text
from cvdiag.diagnosis._facts import Facts, Handler
from cvdiag.diagnosis._picks import earliest, later, latest_key
from cvdiag.diagnosis._shapes import LLMFailures, Response


def _start(ev: Facts, md: Mapping, outcome: Any, key: Any, env: Mapping) -> None:
    ev.llm_starts += 1
    if later(ev.llm_last_start, ev.llm_last_start_key, key):
        ev.llm_last_start_key, ev.llm_last_start = key, (as_name(md.get("provider")), as_name(md.get("model")))


def _heartbeat(ev: Facts, md: Mapping, outcome: Any, key: Any, env: Mapping) -> None:
    ev.heartbeats += 1
    elapsed = as_float(md.get("elapsed_ms_since_start"))
    if elapsed is None:
        return
    if later(ev.heartbeat_last, ev.heartbeat_last_key, key):
        ev.heartbeat_last_key, ev.heartbeat_last = key, elapsed
    if ev.heartbeat_max is None or elapsed > ev.heartbeat_max:
        ev.heartbeat_max = elapsed


def _response(ev: Facts, md: Mapping, outcome: Any, key: Any, env: Mapping) -> None:
    ev.llm_responses += 1
    provider, model = as_name(md.get("provider")), as_name(md.get("model"))
    latency = as_float(md.get("latency_ms"))
    if latency is None:
        latency = as_float(env.get("duration_ms"))
    tokens = as_int(md.get("response_token_count"))
    completion = as_int(md.get("completion_tokens"))
    output = as_int(md.get("output_chars"))
    empty = False
    if outcome == "err":
        ev.llm_errors += 1
        # what had come when it failed: a stream cut mid-answer is told by these
        came = (as_int(md.get("http_status")), output, as_int(md.get("chunks")), completion)
        error_class = as_text(md.get("error_class")) or "an unnamed error"
        ev.llm_first_error = earliest(ev.llm_first_error, key, (error_class, provider, model, latency, came))
        if ev.llm_failures is None:
            ev.llm_failures = LLMFailures()
        ev.llm_failures.add(md, key)
    elif outcome == "timeout":
        ev.llm_timeouts += 1
    elif outcome == "ok":
        ev.llm_ok += 1
        ev.llm_last_ok_key = latest_key(ev.llm_last_ok_key, key)
        status = as_int(md.get("http_status"))
        # No output is no output, whatever the token count says; so is a 2xx stream of no events.
        empty = output == 0 or (
            md.get("stream") is True and as_int(md.get("chunks")) == 0 and status is not None and 200 <= status < 300
        )
        if empty:
            pass
        elif (tokens or 0) > 0 or (completion or 0) > 0 or (output or 0) > 0:
            ev.llm_ok_with_tokens += 1
        elif tokens == 0 or completion == 0:
            ev.llm_ok_zero_tokens += 1
    if latency is not None:
        candidate = (latency, provider or "?", model or "?")
        if ev.llm_slowest is None or candidate > ev.llm_slowest:
            ev.llm_slowest = candidate
    extra = _answer_extra(ev, md, outcome, key)
    response = Response(
        provider, model, latency, tokens, as_int(md.get("prompt_tokens")), completion, output, empty, extra
    )
    if later(ev.llm_last_response, ev.llm_last_response_key, key):
        ev.llm_last_response_key, ev.llm_last_response = key, response
    ev.answered(response, env.get("duration_ms"))


def _answer_extra(ev: Facts, md: Mapping, outcome: Any, key: Any) -> tuple | None:
    """(finish reason, tool calls, output valid) of an answer that has more to say than a
    plain stop; the causes its error names. None for a plain answer (most of them)."""
    if outcome == "err":
        for field in ("error_type", "error_class"):
            text = md.get(field)
            cls = cause_of(text, from_llm=True) if isinstance(text, str) else None
            if cls is not None:
                ev.agent().named(cls, text[:MATCH_CHARS], key, from_llm=True)
                break
    finish = as_name(md.get("finish_reason"))
    unusual = finish is not None and finish_cause(finish) is not None
    if unusual:
        ev.agent().finished(finish)  # type: ignore[arg-type]
    calls = as_int(md.get("tool_calls"))
    valid = md.get("output_valid")
    valid = valid if isinstance(valid, bool) else None
    if not unusual and not calls and valid is None:
        return None
    return (finish if unusual else None, calls, valid)


HANDLERS: dict[str, Handler] = {
    "backend.llm.call.start": _start,
    "backend.llm.call.heartbeat": _heartbeat,
    "backend.llm.call.response": _response,
}
