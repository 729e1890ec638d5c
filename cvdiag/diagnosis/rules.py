"""The diagnosis rules: one small function per class, in precedence order.

A rule reads an ``Evidence`` and returns a ``Finding`` (confidence, reason) when it
matches, else None; ``classify`` takes the first match, and the class is the one the
rule was declared for. To add a class, write a rule under ``@_rule("the-class")`` and
put it at its place in ``RULES`` (``CLASSES`` follows). A rule that needs a layer must
check the layer is there: a class is never guessed from its absence.

Confidence is a fixed prior per rule (how directly the evidence names the cause),
lowered where the rule has to infer (a cut log, a missing layer, an unexplained
failure); it is for sorting and display, not a calibrated probability.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from cvdiag.contract.timestamps import key_seconds
from cvdiag.diagnosis._agentic import LOOP_REPEATS, Agentic
from cvdiag.diagnosis._causes import AUTH_STATUSES, CONFIG_STATUSES, LOCAL_CLIENT_CLASSES, finish_cause
from cvdiag.diagnosis._picks import value_of
from cvdiag.diagnosis._shapes import LLMFailures, Response
from cvdiag.diagnosis.evidence import Evidence
from cvdiag.diagnosis.result import Finding, Thresholds

#: What a rule tests: the evidence, the thresholds, the end of the log (epoch seconds, or
#: None) and the evidence's facts, to which it may add the ones it used.
Match = Callable[[Evidence, Thresholds, float | None, dict], Finding | None]


@dataclass(frozen=True, slots=True)
class Rule:
    """One class and the test that names it."""

    cls: str
    match: Match


def _rule(cls: str) -> Callable[[Match], Rule]:
    """Declare the function below as the rule that names ``cls``."""

    def declare(match: Match) -> Rule:
        return Rule(cls, match)

    return declare


def _s(ms: float | None) -> str:
    if ms is None:
        return "an unknown time"
    return f"{ms:.0f} ms" if ms < 1000.0 else f"{ms / 1000.0:.1f} s"


def _n(count: int | None, noun: str) -> str:
    if count is None:
        return f"an unknown number of {noun}s"
    return f"{count} {noun}" + ("" if count == 1 else "s")


def _call(provider: str | None, model: str | None) -> str:
    return f"{provider or '?'}/{model or '?'}"


# -- the rules, in precedence order ----------------------------------------------------------


@_rule("probe-runner-crash")
def probe_runner_crash(ev: Evidence, th: Thresholds, log_end: float | None, facts: dict) -> Finding | None:
    if not ev.probe_crash:
        return None
    boundary, text = ev.probe_crash.value
    facts["runner_error"] = text
    return Finding(0.95, f"The harness itself broke: {boundary} reported {text!r}.")


@_rule("edge-interference")
def edge_interference(ev: Evidence, th: Thresholds, log_end: float | None, facts: dict) -> Finding | None:
    if ev.edge_mitigated:
        layer, boundary, value = ev.edge_mitigated.value
        facts["edge_cause"] = "block" if value == "block" else "challenge"
        return Finding(0.95, f"The edge answered with cf-mitigated: {value} ({layer} layer, {boundary}).")
    # A status the backend itself answered is the app's (e.g. a relayed LLM-provider 429).
    relayed = ev.backend_statuses
    for status, pick in sorted(ev.edge_retry.items()) if ev.edge_retry else ():
        layer, retry_after = pick.value
        if status not in relayed:
            facts["edge_cause"] = "rate-limit"
            return Finding(
                0.9,
                f"The edge answered HTTP {status} with retry-after: {retry_after} ({layer} layer) "
                f"and the backend never answered {status} itself.",
            )
    # A proxy or a re-routed request is only a cause when something actually failed.
    if not _failed(ev):
        return None
    if ev.edge_proxy:
        layer, via = ev.edge_proxy.value
        facts["edge_cause"] = "proxy"
        return Finding(0.7, f"A proxy was in the path (via: {via!r}, {layer} layer) of a failed test.")
    rays = ev.distinct_rays()
    if rays:
        layer, first, second = rays
        facts["edge_cause"] = "multiple-cf-rays"
        return Finding(
            0.7,
            f"The {layer} layer saw more than one cf-ray ({first}, {second}): the edge retried or re-routed it.",
        )
    return None


# -- agent-level causes named by the provider (before the generic llm-error) -------------------


def _named(ev: Evidence, cls: str) -> str | None:
    """The text that named ``cls``: an exception anywhere, or a failed LLM attempt that
    no retry made good."""
    ag = ev.agentic
    found = ag.cause(cls) if ag is not None else None
    if found is None:
        return None
    text, from_llm = found
    return None if from_llm and ev.llm_recovered() else text


def _final(ev: Evidence) -> tuple[Response | None, str | None]:
    """The last LLM answer and the class its finish reason names (None: a normal stop)."""
    last = ev.llm_last_response
    finish = last.extra[0] if last is not None and last.extra else None
    return last, finish_cause(finish) if finish else None


def _quoted(text: str, limit: int = 120) -> str:
    return repr(text if len(text) <= limit else text[: limit - 1] + "…")


def _refused(ev: Evidence, cls: str, statuses: frozenset[int]) -> tuple[LLMFailures | None, str | None] | None:
    """(failed attempts, None) when every failed LLM attempt was answered with one of
    ``statuses``; (None, words) when no status says otherwise and words name ``cls``."""
    failures = ev.llm_failures
    if failures is not None and failures.statuses and not ev.llm_recovered():
        if failures.no_status or not set(failures.statuses) <= statuses:
            return None  # mixed with an outage or a broken connection: llm-error says it all
        return failures, None
    text = _named(ev, cls)
    return None if text is None else (None, text)


def _provider_said(ev: Evidence, failures: LLMFailures | None, text: str | None) -> str:
    """`` (openai/gpt-4o-mini answered HTTP 401 (invalid_api_key))``, and the words that
    named the cause when they add to it: from what the log has."""
    error = value_of(ev.llm_first_error)
    provider, model = (error[1], error[2]) if error else (ev.llm_last_start or (None, None))
    said = ""
    if failures is not None:
        kind = f" ({failures.error_type})" if failures.error_type else ""
        said = f" ({_call(provider, model)} answered HTTP {', '.join(map(str, failures.statuses))}{kind})"
    elif provider or model:
        said = f" ({_call(provider, model)})"
    if text and (failures is None or text != failures.error_type):
        said += f"; the error said {_quoted(text)}"
    return said


@_rule("context-overflow")
def context_overflow(ev: Evidence, th: Thresholds, log_end: float | None, facts: dict) -> Finding | None:
    text = _named(ev, "context-overflow")
    last, finish = _final(ev)
    if text is None and finish != "context-overflow":
        return None
    failures = ev.llm_failures if ev.llm_failures is not None and not ev.llm_recovered() else None
    said = _provider_said(ev, failures, text)
    if text is None:
        said += f"; the answer stopped with finish_reason {last.extra[0]}"  # type: ignore[union-attr]
    return Finding(0.9, f"The prompt did not fit the model's context window{said}.")


def _refusal(ev: Evidence, cls: str, statuses: frozenset[int], confidence: float, sentence: str) -> Finding | None:
    """``sentence`` with what the provider said in it (``{said}``), when it refused with ``statuses``."""
    refused = _refused(ev, cls, statuses)
    if refused is None:
        return None
    return Finding(confidence, sentence.format(said=_provider_said(ev, *refused)))


@_rule("llm-auth")
def llm_auth(ev: Evidence, th: Thresholds, log_end: float | None, facts: dict) -> Finding | None:
    return _refusal(
        ev,
        "llm-auth",
        AUTH_STATUSES,
        0.95,
        "The LLM provider refused the credentials{said}: check the API key and its permissions.",
    )


@_rule("llm-config")
def llm_config(ev: Evidence, th: Thresholds, log_end: float | None, facts: dict) -> Finding | None:
    return _refusal(
        ev, "llm-config", CONFIG_STATUSES, 0.9,
        "The LLM provider rejected the request{said}: check the model name and the request's parameters.",
    )  # fmt: skip


@_rule("llm-error")
def llm_error(ev: Evidence, th: Thresholds, log_end: float | None, facts: dict) -> Finding | None:
    if not ev.llm_first_error and ev.aimock_error is not None and not ev.llm_responses and not ev.aimock_decisions:
        # Only the LLM mock's side is on the record (the caller is a process cvdiag does
        # not run in, such as a coding agent's CLI): its error status is the provider's.
        return Finding(0.9, f"The LLM (its mock) answered HTTP {ev.aimock_error.value}; the caller logged no LLM call.")
    if not ev.llm_first_error or ev.llm_recovered():
        return None
    error_class, provider, model, latency, came = ev.llm_first_error.value
    failures = ev.llm_failures
    attempts = ev.failed_attempts()
    if error_class in LOCAL_CLIENT_CLASSES and (failures is None or not failures.statuses):
        return Finding(
            0.6,
            f"LLM call to {_call(provider, model)} never reached the provider: the app's own HTTP client raised "
            f"{error_class} (a client used after its event loop closed, shared across loops, or its pool "
            "exhausted). The app's fault, not the provider's.",
        )
    if failures is None or not failures.statuses:
        after = f" after {_s(latency)}" if latency is not None else ""
        tries = f" ({_n(attempts, 'attempt')})" if attempts > 1 else ""
        cut = _cut_mid_answer(came)
        if cut is not None:
            return Finding(
                0.95,
                f"The provider's stream broke off mid-answer: {_call(provider, model)} answered {cut}, then"
                f" the stream ended with {error_class}{after}{tries}.",
            )
        return Finding(0.95, f"LLM call to {_call(provider, model)} failed with {error_class}{after}{tries}.")
    return Finding(0.95, f"LLM call to {_call(provider, model)} failed: {_attempts(ev, failures, attempts)}.")


def _cut_mid_answer(came: tuple | None) -> str | None:
    """``HTTP 200 and 7 stream events (24 characters of text)``: an answer that had begun
    (a 2xx, and something of it read) when the call failed; None when none had."""
    if not came:
        return None
    status, output, chunks, tokens = came
    if status is None or not 200 <= status < 300 or not (chunks or output):
        return None
    parts = [f"HTTP {status}"]
    if chunks:
        parts.append(_n(chunks, "stream event"))
    got = [_n(output, "character") + " of text"] if output else []
    if tokens:
        got.append(_n(tokens, "token"))
    return " and ".join(parts) + (f" ({', '.join(got)})" if got else "")


def _attempts(ev: Evidence, failures: LLMFailures, attempts: int) -> str:
    """``3 attempts, all HTTP 500 (server_error); retry-after 1.0 s`` from the failed attempts."""
    statuses = failures.statuses
    if len(statuses) == 1 and not failures.no_status:
        if attempts == 1:
            said = f"HTTP {statuses[0]}"
        else:
            said = f"all HTTP {statuses[0]}" if ev.llm_errors >= attempts else f"the last HTTP {statuses[0]}"
    else:
        said = "HTTP " + ", ".join(map(str, statuses))
        if failures.no_status:
            said += f" and {_n(failures.no_status, 'broken connection')}"
    error_type = f" ({failures.error_type})" if failures.error_type else ""
    retry = f"; retry-after {_s(failures.retry_after_ms)}" if failures.retry_after_ms is not None else ""
    return f"{_n(attempts, 'attempt')}, {said}{error_type}{retry}"


# -- the final answer stopped short (after the provider's errors, before an empty answer) -----


def _stopped_short(ev: Evidence, cls: str, what: str) -> Finding | None:
    last, finish = _final(ev)
    text = _named(ev, cls)
    if finish != cls and text is None:
        return None
    if finish == cls and last is not None:
        tokens = last.completion_tokens if last.completion_tokens is not None else last.response_token_count
        count = f", {_n(tokens, 'completion token')}" if tokens is not None else ""
        return Finding(
            0.9,
            f"The final answer of {_call(last.provider, last.model)} {what} (finish_reason {last.extra[0]}{count}).",  # type: ignore[index]
        )
    return Finding(0.85, f"The answer {what}: the agent raised {_quoted(text or '')}.")


@_rule("content-filtered")
def content_filtered(ev: Evidence, th: Thresholds, log_end: float | None, facts: dict) -> Finding | None:
    return _stopped_short(ev, "content-filtered", "was refused or filtered by the provider")


@_rule("output-truncated")
def output_truncated(ev: Evidence, th: Thresholds, log_end: float | None, facts: dict) -> Finding | None:
    return _stopped_short(ev, "output-truncated", "stopped on the token limit")


@_rule("provider-empty")
def provider_empty(ev: Evidence, th: Thresholds, log_end: float | None, facts: dict) -> Finding | None:
    last = ev.llm_last_response
    if last is not None and last.empty:
        # The provider said ok and produced nothing: no text, no tool call, whatever tokens it claims.
        tokens = last.completion_tokens if last.completion_tokens is not None else last.response_token_count
        claimed = f" (the provider claimed {tokens} tokens)" if tokens else ""
        what = "0 characters of output" if last.output_chars == 0 else "a stream of 0 events"
        return Finding(
            0.9,
            f"LLM call to {_call(last.provider, last.model)} answered ok but produced {what}{claimed}.",
        )
    if not ev.llm_ok or ev.llm_ok_with_tokens or not ev.complete_ok_empty or ev.complete_ok_with_events:
        return None
    if ev.sse_events:
        return None
    # sse_event_count is 0 for every non-SSE response, and an app that never records
    # tokens reports null: then only an empty body proves the answer was empty.
    if not ev.llm_ok_zero_tokens and not ev.complete_ok_bodiless:
        return None
    tokens = facts["completion_tokens"] if facts["completion_tokens"] is not None else facts["response_token_count"]
    tokens = "null" if tokens is None else tokens
    return Finding(
        0.9,
        f"LLM call to {_call(facts['llm_provider'], facts['llm_model'])} answered ok with {tokens} tokens "
        f"and the response completed with HTTP {facts['http_status']} and 0 SSE events.",
    )


@_rule("aimock-fixture-mismatch")
def aimock_fixture_mismatch(ev: Evidence, th: Thresholds, log_end: float | None, facts: dict) -> Finding | None:
    if not ev.aimock_events or ev.aimock_matched:
        return None
    sent = ev.aimock_sent.value if ev.aimock_sent else ev.aimock_chunk_bytes
    if sent >= th.aimock_min_bytes:
        return None
    facts["aimock_bytes"] = sent
    why = f"; reject reasons: {ev.aimock_reject.value}" if ev.aimock_reject else ""
    decided = "matched no fixture" if ev.aimock_decisions else "logged no fixture match"
    return Finding(0.9, f"aimock {decided} (fixture_id null{why}) and sent back {sent} bytes.")


def _server_stopped(ev: Evidence) -> bool:
    """Did the backend end a request because its server was shutting down?

    The shutdown terminal is how the read side knows a process's log ends there: an
    LLM call or agent still open then was cut off, not stalled or failed.
    """
    return bool(ev.aborts and "shutdown" in ev.aborts)


#: The termination kinds of a client that hung up.
_HANG_UPS = ("rst", "fin_premature", "timeout")


def _hang_up(ev: Evidence) -> tuple[str, int] | None:
    """(termination_kind, key) of the client's first hang-up, if it hung up."""
    first = ev.earliest_abort(_HANG_UPS)
    return None if first is None or first[1].key is None else (first[0], first[1].key)


#: A sign of life this long after the client hung up is an orphan's: a heartbeat or a
#: cancellation in flight as the client left is not.
_ORPHAN_AFTER_S = 1.0


def _orphaned(ev: Evidence, th: Thresholds) -> float | None:
    """The LLM call the client left behind: it still showed signs of life (a heartbeat, an
    ok answer, a new call) a while after the client hung up, and it was younger than
    ``slow_s`` when that happened (a client that gave up on a slow call makes the call the
    cause). Its last heartbeat's elapsed ms (or 0.0)."""
    hang = _hang_up(ev)
    start = ev.llm_last_start_key
    if hang is None or start is None:
        return None
    _, at = hang
    after = key_seconds(at) + _ORPHAN_AFTER_S
    signs = [k for k in (ev.heartbeat_last_key, ev.llm_last_ok_key, start) if k is not None and key_seconds(k) >= after]
    if not signs or (start <= at and key_seconds(at) - key_seconds(start) >= th.slow_s):
        return None
    return ev.heartbeat_max or 0.0


@_rule("llm-stalled")
def llm_stalled(ev: Evidence, th: Thresholds, log_end: float | None, facts: dict) -> Finding | None:
    if ev.llm_starts <= ev.llm_responses:
        return None
    if _orphaned(ev, th) is not None:
        return None  # the client went first: the call it left behind is evidence, not the cause
    if _server_stopped(ev) and ev.llm_alive_at_shutdown(th.slow_s):
        return None  # cut off by the shutdown while still beating, not stalled
    last_beat = ev.heartbeat_last
    if last_beat is not None and last_beat >= th.slow_s * 1000.0:
        return None  # still beating at the threshold: slow, not stalled
    provider, model = ev.llm_last_start or (None, None)
    age = facts["open_llm_call_s"]
    started = f"started {age:.1f} s before the log ends" if age is not None else "started"
    beat = f"last heartbeat at {_s(last_beat)}" if last_beat is not None else "no heartbeat"
    return Finding(0.85, f"LLM call to {_call(provider, model)} {started}; {beat}; no response.")


@_rule("llm-slow")
def llm_slow(ev: Evidence, th: Thresholds, log_end: float | None, facts: dict) -> Finding | None:
    if _orphaned(ev, th) is not None:
        return None  # slow only after the client had gone (see client-disconnect)
    limit_ms = th.slow_s * 1000.0
    if ev.llm_slowest is not None and ev.llm_slowest[0] >= limit_ms:
        latency, provider, model = ev.llm_slowest
        return Finding(0.9, f"LLM call to {_call(provider, model)} took {_s(latency)} ({_threshold(th)}).")
    if ev.heartbeat_max is not None and ev.heartbeat_max >= limit_ms:
        provider, model = ev.llm_last_start or (None, None)
        state = "no response" if ev.llm_starts > ev.llm_responses else "it did answer"
        return Finding(
            0.85,
            f"LLM call to {_call(provider, model)} was still running at {_s(ev.heartbeat_max)} "
            f"by its heartbeats ({_threshold(th)}); {state}.",
        )
    return None


def _threshold(th: Thresholds) -> str:
    return f"slow threshold {th.slow_s:g} s"


# -- tools, loops and structured output (after the LLM's own causes, before the endpoint's) ----


def _answered(ev: Evidence) -> str:
    status = ev.worst_status()
    return f"; the response still completed with HTTP {status}" if status is not None and status < 400 else ""


@_rule("tool-error")
def tool_error(ev: Evidence, th: Thresholds, log_end: float | None, facts: dict) -> Finding | None:
    ag = ev.agentic
    if ag is None:
        return None
    failed = ag.tool_failed
    if failed is not None:
        facts["tool_failed"] = failed.name
        kind = f" ({failed.error_kind})" if failed.error_kind else ""
        raised = f", raising {failed.error_class}" if failed.error_class else ""
        excerpt = f": {_quoted(failed.excerpt)}" if failed.excerpt else ""
        _, answered, errors = ag.calls()
        count = f"; {errors} of {_n(answered, 'tool call')} failed" if answered > 1 else ""
        back = "; the framework handed the error back to the model" if failed.handed_back else ""
        return Finding(0.9, f"Tool {failed.where()} failed{kind}{raised}{excerpt}{count}{back}{_answered(ev)}.")
    opened = ag.tool_open_last
    if ag.tool_open > 0 and opened is not None and (not ev.completes or ev.aborts) and not _server_stopped(ev):
        facts["tool_failed"] = opened.name
        return Finding(0.8, f"Tool {opened.where()} was called and never answered.")
    return None


@_rule("agent-loop")
def agent_loop(ev: Evidence, th: Thresholds, log_end: float | None, facts: dict) -> Finding | None:
    ag = ev.agentic
    if ag is None:
        return None
    text = _named(ev, "agent-loop")
    repeated = ag.most_repeated()
    calls = ""
    if repeated is not None and repeated[1] > 1:
        calls = f"; it called {repeated[0]} {repeated[1]} times with the same arguments"
    limit = value_of(ag.limit)
    if limit is not None:
        name, value, error_class = limit
        said = f"{name}={value:g}" if value is not None else name
        raised = f" ({error_class})" if error_class else ""
        return Finding(0.95, f"The agent hit its framework's own limit {said}{raised}{calls}.")
    if ag.output is not None and not ag.output[0]:
        return None  # an output that never validated: the retries were the framework's, not a loop
    if text is not None:
        return Finding(0.9, f"The agent hit its framework's limit: {_quoted(text)}{calls}.")
    if repeated is None or repeated[1] < LOOP_REPEATS or not _no_final_answer(ev, ag):
        return None
    name, count = repeated
    return Finding(
        0.85, f"The model called {name} {count} times with the same arguments and never gave a final answer."
    )


def _no_final_answer(ev: Evidence, ag: Agentic) -> bool:
    """Did the run end without an answer that asked for no more tools?"""
    last = ev.llm_last_response
    asked_more = last is not None and last.extra is not None and bool(last.extra[1])
    tools_after = ag.tool_last_key is not None and (ev.llm_last_ok_key is None or ag.tool_last_key > ev.llm_last_ok_key)
    return asked_more or tools_after or ev.agent_failed is not None


@_rule("output-invalid")
def output_invalid(ev: Evidence, th: Thresholds, log_end: float | None, facts: dict) -> Finding | None:
    checked = ev.agentic.output if ev.agentic is not None else None
    if checked is not None and not checked[0]:
        _, schema, attempts, error_class, excerpt, agent = checked
        whose = f"Agent {agent}'s" if agent else "The agent's"
        what = f" {schema}" if schema else ""
        tries = f" after {_n(attempts, 'attempt')}" if attempts else ""
        raised = f" ({error_class})" if error_class else ""
        said = f": {_quoted(excerpt)}" if excerpt else ""
        return Finding(0.9, f"{whose} structured output{what} failed its schema{tries}{raised}{said}{_answered(ev)}.")
    last = ev.llm_last_response
    if last is not None and last.extra is not None and last.extra[2] is False:
        return Finding(
            0.9,
            f"The final answer of {_call(last.provider, last.model)} did not hold its output schema's "
            f"required keys (output_valid false){_answered(ev)}.",
        )
    text = _named(ev, "output-invalid")
    if text is None:
        return None
    return Finding(0.85, f"The agent gave up on its structured output: {_quoted(text)}.")


@_rule("tool-slow")
def tool_slow(ev: Evidence, th: Thresholds, log_end: float | None, facts: dict) -> Finding | None:
    cut = _tool_cut(ev)
    if cut is not None:
        return cut
    slowest = ev.agentic.tool_slowest if ev.agentic is not None else None
    if slowest is None or slowest.ms is None or slowest.ms < th.slow_s * 1000.0:
        return None
    facts["tool_slow"] = slowest.name
    return Finding(0.85, f"Tool {slowest.where()} took {_s(slowest.ms)} (slow threshold {th.slow_s:g} s).")


def _tool_cut(ev: Evidence) -> Finding | None:
    """A tool that was still running when the client gave up (it hung up during the call,
    or the call was cancelled with its request): the slow tool is the cause, the hang-up
    its effect."""
    ag = ev.agentic
    first = ev.earliest_abort(_HANG_UPS)
    if ag is None or first is None:
        return None
    kind, pick = first
    call = ag.running_at(pick.key >> 64) if pick.key is not None else None
    call = call or ag.tool_cancelled
    if call is None:
        return None
    took = f" ({_s(call.ms)} in)" if call.ms is not None else ""
    return Finding(0.85, f"Tool {call.where()} was still running{took} when the client gave up ({kind}).")


@_rule("server-error")
def server_error(ev: Evidence, th: Thresholds, log_end: float | None, facts: dict) -> Finding | None:
    exc, message = value_of(ev.error_first) or (None, None)
    said = f": {message!r}" if message else ""
    if ev.complete_5xx:
        status, _ = ev.complete_5xx.value
        raised = f" after raising {exc}{said}" if exc else ""
        return Finding(0.9, f"The backend answered HTTP {status}{raised}.")
    if ev.errors and not ev.aborts and not ev.saw_first_byte():
        return Finding(0.9, f"The backend raised {exc} before its response started{said}.")
    return None


@_rule("stream-error")
def stream_error(ev: Evidence, th: Thresholds, log_end: float | None, facts: dict) -> Finding | None:
    if not ev.aborts or "chunk_error" not in ev.aborts:
        return None
    sent, duration = ev.abort_first["chunk_error"].value
    exc, message = value_of(ev.error_first) or (None, None)
    raised = f"; {exc}" + (f": {message!r}" if message else "") if exc else ""
    return Finding(
        0.9,
        f"The stream broke off with chunk_error after {_n(sent, 'byte')} and {_s(duration)}{raised}.",
    )


@_rule("client-disconnect")
def client_disconnect(ev: Evidence, th: Thresholds, log_end: float | None, facts: dict) -> Finding | None:
    first = ev.earliest_abort(_HANG_UPS)
    if first is None:
        return None
    kind, (sent, duration) = first[0], first[1].value
    after = sent > 0 if sent is not None else ev.saw_first_byte()
    facts["disconnect"] = "after-first-byte" if after else "before-first-byte"
    when = "after" if after else "before"
    llm = ""
    if ev.llm_timeouts:
        llm = "; its LLM call was cancelled"
    orphan = _orphaned(ev, th)
    if orphan is not None:
        facts["orphaned_llm_call"] = True
        beats = f" (heartbeats to {_s(orphan)})" if orphan else ""
        llm = f"; its LLM call was left running after the client had gone{beats}"
    return Finding(
        0.9,
        f"The client went away ({kind}) {when} the first byte, after {_n(sent, 'byte')} and {_s(duration)}{llm}.",
    )


@_rule("agent-error")
def agent_error(ev: Evidence, th: Thresholds, log_end: float | None, facts: dict) -> Finding | None:
    if not ev.agent_failed or (ev.agent_failed.value == "cancelled" and _server_stopped(ev)):
        return None
    name = ev.agent_name or "?"
    status = facts["http_status"]
    answered = f"; the response still completed with HTTP {status}" if status is not None else ""
    raised = f", raising {ev.agent_error_class}" if ev.agent_error_class else ""
    message = value_of(ev.agentic.agent_message) if ev.agentic is not None else None
    if message:
        raised += f" ({_quoted(message)})"
    return Finding(0.85, f"Agent {name} exited with terminal_outcome {ev.agent_failed.value}{raised}{answered}.")


@_rule("incomplete")
def incomplete(ev: Evidence, th: Thresholds, log_end: float | None, facts: dict) -> Finding | None:
    if not ev.backend_events:
        return None
    if _server_stopped(ev):
        return _stopped_finding(ev)
    ended = ev.terminals()
    if ended and ev.ingress <= ended:
        return None
    ts, boundary = ev.last_backend_ts, ev.last_backend_boundary or "?"
    tail = ""
    seconds = ev.last_backend_seconds
    if log_end is not None and seconds is not None:
        tail = f", {_s((log_end - seconds) * 1000.0)} before the log ends"
    if ended:
        what = f"{ev.ingress} requests arrived but only {ended} ended"
    else:
        what = f"{_n(ev.backend_events, 'backend event')} but no terminal"
    return Finding(0.8, f"{what}; the last boundary was {boundary} at {ts}{tail}.")


def _stopped_finding(ev: Evidence) -> Finding:
    sent, duration = ev.abort_first["shutdown"].value
    requests = ev.aborts["shutdown"]
    what = "a request" if requests == 1 else f"{requests} requests"
    beats = f"; last heartbeat at {_s(ev.heartbeat_last)}" if ev.heartbeats else ""
    cut = "; its LLM call was cut off" if ev.llm_timeouts or ev.llm_starts > ev.llm_responses else ""
    return Finding(
        0.85,
        f"The server stopped (shutdown) with {what} in flight, after {_n(sent, 'byte')} and {_s(duration)}"
        f"{cut}{beats}.",
    )


@_rule("no-backend")
def no_backend(ev: Evidence, th: Thresholds, log_end: float | None, facts: dict) -> Finding | None:
    probe = ev.probe_events
    if not probe or ev.backend_events:
        return None
    return Finding(
        0.75,
        f"The harness logged {probe} events for this id but no backend event carries it: "
        "x-test-id propagation is broken or the request never arrived.",
    )


def _harness_missed_first_token(ev: Evidence) -> bool:
    if not ev.probe_events or ev.probe_first_tokens:
        return False
    exit_ = value_of(ev.probe_exit)
    return not (exit_ and exit_[1] is not None)


def _backend_streamed(ev: Evidence) -> int:
    return ev.complete_ok_with_events + (ev.sse_events if ev.completes else 0)


@_rule("strict-harness")
def strict_harness(ev: Evidence, th: Thresholds, log_end: float | None, facts: dict) -> Finding | None:
    if not ev.probe_alternate or not _harness_missed_first_token(ev) or not _backend_streamed(ev):
        return None
    return Finding(
        0.8,
        f"The backend completed with {facts['sse_event_count']} SSE events but the harness saw no first token "
        f"and reported alternate content ({_n(ev.probe_alternate, 'time')}).",
    )


@_rule("frontend-hydration")
def frontend_hydration(ev: Evidence, th: Thresholds, log_end: float | None, facts: dict) -> Finding | None:
    if not ev.probe_console_errors or not _harness_missed_first_token(ev) or not _backend_streamed(ev):
        return None
    first = value_of(ev.probe_console_first)
    return Finding(
        0.8,
        f"The backend completed with {facts['sse_event_count']} SSE events but the harness saw no first token "
        f"and {_n(ev.probe_console_errors, 'console error')} (first: {first!r}).",
    )


@_rule("ok")
def ok(ev: Evidence, th: Thresholds, log_end: float | None, facts: dict) -> Finding:
    if not ev.events:
        return Finding(0.1, "No usable envelope for this test id; nothing to diagnose.")
    status = ev.worst_status()
    recovered = ev.llm_errors if ev.llm_recovered() else 0  # failed attempts a retry made good
    if _failed(ev, recovered):
        exit_ = value_of(ev.probe_exit)
        seen = (
            f"probe.exit {exit_[0]}"
            if exit_ and exit_[0] not in (None, "ok")
            else _n(ev.failures - recovered, "failed envelope")
        )
        hint = _agent_hint(ev)
        also = f"; {hint}" if hint else ""
        return Finding(0.4, f"No rule matched although the test shows a failure ({seen}); status {status}{also}.")
    if ev.complete_ok_bodiless and not ev.complete_ok_with_events and not ev.sse_events:
        # A 2xx that sent nothing at all is not a healthy answer, even with no rule to name it.
        return Finding(0.3, f"No rule matched, but the response completed with HTTP {status} and sent nothing.")
    answered = (
        f"HTTP {status}"
        if status is not None
        else "the traced work ended"
        if ev.completes
        else "no backend response in the log"
    )
    retried = f"; {_n(recovered, 'failed LLM attempt')} recovered by a retry" if recovered else ""
    hint = _agent_hint(ev)
    if hint:  # healthy HTTP, but an agent-level sign no rule made the cause: never sure it is fine
        return Finding(0.6, f"No failure found ({_n(ev.events, 'event')}; {answered}{retried}), but {hint}.")
    return Finding(0.9, f"No failure found ({_n(ev.events, 'event')}; {answered}{retried}).")


def _agent_hint(ev: Evidence) -> str | None:
    """An agent-level sign that names no cause on its own: an earlier answer that stopped
    short, structured output that failed once, a tool called twice with the same arguments."""
    ag = ev.agentic
    if ag is None:
        return None
    if ag.finish_unusual:
        return f"an earlier answer stopped with finish_reason {ag.finish_unusual}"
    failed = ag.tool_output_failed
    if failed is not None:
        return f"the structured output tool {failed.name} failed once before it validated"
    repeated = ag.most_repeated()
    if repeated is not None and repeated[1] > 1:
        return f"the model called {repeated[0]} {repeated[1]} times with the same arguments"
    return None


def _failed(ev: Evidence, forgiven: int = 0) -> bool:
    """Did anything go wrong at all (for the weak edge signals and the ``ok`` confidence)?

    ``forgiven`` failed envelopes are not counted (LLM attempts a retry recovered).
    """
    exit_ = value_of(ev.probe_exit)
    return bool(
        ev.failures > forgiven
        or ev.probe_network_errors
        or (exit_ and exit_[0] not in (None, "ok"))
        or (ev.worst_status() or 0) >= 400
    )


#: The classifier, in precedence order: the first rule that matches names the class.
RULES: tuple[Rule, ...] = (
    probe_runner_crash,
    edge_interference,
    context_overflow,
    llm_auth,
    llm_config,
    llm_error,
    content_filtered,
    output_truncated,
    provider_empty,
    aimock_fixture_mismatch,
    llm_stalled,
    llm_slow,
    tool_error,
    agent_loop,
    output_invalid,
    tool_slow,
    server_error,
    stream_error,
    client_disconnect,
    agent_error,
    incomplete,
    no_backend,
    strict_harness,
    frontend_hydration,
    ok,
)

__all__ = ["RULES", "Match", "Rule"]
