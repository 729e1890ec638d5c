"""``agent_scope`` and ``llm_call``: sync and async context managers around the agent
and its LLM calls. They observe exceptions and cancellation, never swallow them.

Outside any request they bind a fresh context for their duration, so their
envelopes still share one test id.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import sys
import threading
import time
from types import TracebackType
from typing import Any

from cvdiag.contract.schema import AGENT_ERROR_MESSAGE_MAX_CHARS, Tier
from cvdiag.contract.scrubber import scrub_clipped
from cvdiag.write._errors import is_cancelled
from cvdiag.write._heartbeat import scheduler
from cvdiag.write.context import bind, current_context, new_context, unbind
from cvdiag.write.emitter import active_tier, elapsed_ms, emit, is_enabled

#: The ``LLMCall`` of the innermost open ``llm_call``: an HTTP exchange recognised as an
#: LLM call inside it enriches it instead of writing a call of its own.
_open_call: contextvars.ContextVar[LLMCall | None] = contextvars.ContextVar("cvdiag_llm_call", default=None)


def current_llm_call() -> LLMCall | None:
    """The handle of the innermost open ``llm_call`` in this context, or None."""
    return _open_call.get()


class _Scope:
    """Shared enter/exit plumbing: bind a context if none is bound, time the block."""

    __slots__ = ("_start_ns", "_tokens")

    def __init__(self) -> None:
        self._tokens: Any = None
        self._start_ns = 0

    def _open(self) -> None:
        # Disabled: bind nothing (minting an id is the costly part of a scope).
        self._tokens = bind(new_context()) if current_context() is None and is_enabled() else None
        self._start_ns = time.monotonic_ns()

    def _close(self) -> None:
        if self._tokens is not None:
            unbind(self._tokens)
            self._tokens = None


class agent_scope(_Scope):
    """``with agent_scope("planner", model_id="gpt-4o-mini"):`` (or ``async with``).

    backend.agent.enter on entry; backend.agent.exit with terminal_outcome ``ok``,
    ``error`` (an exception escaped: its class and scrubbed message) or ``cancelled`` on exit.
    """

    __slots__ = ("agent_name", "model_id")

    def __init__(self, agent_name: str, *, model_id: str | None = None) -> None:
        super().__init__()
        self.agent_name = agent_name
        self.model_id = model_id

    def __enter__(self) -> agent_scope:
        self._open()
        emit("backend.agent.enter", {"agent_name": self.agent_name, "model_id": self.model_id})
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            if exc is None:
                terminal = "ok"
            elif is_cancelled(exc):
                terminal = "cancelled"
            else:
                terminal = "error"
            if self._tokens is not None and terminal != "ok":
                _close_tool_calls(terminal == "error")
            elapsed = elapsed_ms(self._start_ns)
            emit(
                "backend.agent.exit",
                {
                    "terminal_outcome": terminal,
                    "total_duration_ms": elapsed,
                    "error_class": type(exc).__name__ if terminal == "error" else None,
                    "error_message": _error_message(exc) if terminal == "error" else None,
                },
                outcome="ok" if terminal == "ok" else "err",
                duration_ms=elapsed,
            )
        finally:
            self._close()

    async def __aenter__(self) -> agent_scope:
        return self.__enter__()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.__exit__(exc_type, exc, tb)


def _close_tool_calls(raised: bool) -> None:
    """An outermost scope (it bound the context: no middleware) that failed gives up on
    the tool calls asked in it and never answered (see ``_tool_wire.close_waiting``)."""
    tool_wire = sys.modules.get("cvdiag.write._tool_wire")
    if tool_wire is not None:
        tool_wire.close_waiting(current_context(), raised=raised)


def _error_message(exc: BaseException | None) -> str | None:
    """The exception's message, scrubbed, then cut. An exception group (anyio's task group,
    Starlette streaming a response) says nothing itself: its first leaf speaks, by name."""
    if exc is None:
        return None
    try:
        leaf = exc
        while isinstance(leaf, BaseExceptionGroup) and leaf.exceptions:
            leaf = leaf.exceptions[0]
        text = str(leaf)
        if leaf is not exc:
            text = f"{type(leaf).__name__}: {text}" if text else type(leaf).__name__
    except Exception:  # a __str__ that raises: the class says enough
        return None
    return scrub_clipped(text, AGENT_ERROR_MESSAGE_MAX_CHARS) if text else None


class LLMCall:
    """The handle ``llm_call`` yields: record what the provider answered."""

    __slots__ = ("_closed", "_fields", "_lock", "_start_ns")

    def __init__(self, start_ns: int) -> None:
        self._start_ns = start_ns
        self._fields: dict[str, Any] = {"source": "scope"}
        # An HTTP exchange may end on another thread, or after the block has closed (a
        # stream returned from inside it and read later): it must not enrich a call whose
        # response line is already written, nor change the fields while they are.
        self._lock = threading.Lock()
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    def seal(self) -> dict[str, Any]:
        """Close the call to enrichment; the fields its response line carries."""
        with self._lock:
            self._closed = True
            return dict(self._fields)

    def record(
        self,
        response_token_count: int | None = None,
        *,
        prompt_tokens: int | None = None,
        completion_tokens: int | None = None,
        finish_reason: str | None = None,
        ttft_ms: int | None = None,
    ) -> None:
        """Set what is known; arguments left as None keep their earlier value."""
        given = {
            "response_token_count": response_token_count,
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "finish_reason": finish_reason,
            "ttft_ms": ttft_ms,
        }
        self._fields.update((k, v) for k, v in given.items() if v is not None)

    def first_token(self) -> None:
        """Mark the first streamed token now (sets ttft_ms once)."""
        self._fields.setdefault("ttft_ms", elapsed_ms(self._start_ns))

    def enrich(self, fields: dict[str, Any], first_output_ns: int | None) -> bool:
        """What an HTTP exchange inside this call saw (the last attempt's answer wins);
        False when the call has already written its response (the exchange then writes
        its own).

        What the application recorded itself is kept; ttft counts from the call's start.
        """
        with self._lock:
            if self._closed:
                return False
            mine = self._fields
            for key, value in fields.items():
                if value is not None and key not in _SCOPE_OWN and (key not in _RECORDED or key not in mine):
                    mine[key] = value
            if first_output_ns is not None and "ttft_ms" not in mine:
                mine["ttft_ms"] = max(0, (first_output_ns - self._start_ns) // 1_000_000)
        return True


#: Fields the scope itself decides: its own provider and model, timing and outcome.
_SCOPE_OWN = frozenset({"provider", "model", "latency_ms", "error_class", "source"})
#: Fields ``LLMCall.record`` sets: an application's own numbers win over the HTTP's.
_RECORDED = frozenset({"response_token_count", "prompt_tokens", "completion_tokens", "finish_reason", "ttft_ms"})


class llm_call(_Scope):
    """``async with llm_call("openai", "gpt-4o-mini") as call: ...; call.record(...)``.

    backend.llm.call.start on entry; a heartbeat every ``heartbeat_s`` while open (an
    asyncio task under ``async with`` on asyncio, else cvdiag's one heartbeat thread); on exit
    backend.llm.call.response: ``err`` with the exception's class name, ``timeout``
    with ``CancelledError`` when cancelled, else ``ok``. No heartbeat follows it.
    """

    __slots__ = (
        "_call",
        "_call_token",
        "_closed",
        "_lock",
        "_task",
        "heartbeat_s",
        "model",
        "prompt_estimate",
        "provider",
    )

    def __init__(
        self,
        provider: str,
        model: str,
        *,
        heartbeat_s: float = 10.0,
        prompt_token_count_estimate: int | None = None,
    ) -> None:
        super().__init__()
        self.provider = provider
        self.model = model
        self.heartbeat_s = heartbeat_s
        self.prompt_estimate = prompt_token_count_estimate
        self._call: LLMCall | None = None
        self._call_token: contextvars.Token[LLMCall | None] | None = None
        self._task: asyncio.Task[None] | None = None
        self._lock = threading.Lock()
        self._closed = False

    def _start(self) -> LLMCall:
        self._open()
        self._closed = False
        self._call = LLMCall(self._start_ns)
        self._call_token = _open_call.set(self._call)
        emit(
            "backend.llm.call.start",
            {
                "provider": self.provider,
                "model": self.model,
                "prompt_token_count_estimate": self.prompt_estimate,
                "source": "scope",
            },
        )
        return self._call

    def _wants_heartbeat(self) -> bool:
        tier = active_tier()
        return tier is not None and tier >= Tier.VERBOSE and self.heartbeat_s > 0

    def _beat(self) -> bool:
        """One heartbeat unless the call has closed; True while it is still open."""
        with self._lock:
            if self._closed:
                return False
            emit("backend.llm.call.heartbeat", {"elapsed_ms_since_start": elapsed_ms(self._start_ns)})
            return True

    def _finish(self, exc: BaseException | None) -> None:
        with self._lock:  # after this no heartbeat can be written
            self._closed = True
        if self._call_token is not None:
            with contextlib.suppress(ValueError, RuntimeError):  # reset from another context
                _open_call.reset(self._call_token)
            self._call_token = None
        try:
            latency = elapsed_ms(self._start_ns)
            if exc is None:
                outcome, error_class = "ok", None
            elif is_cancelled(exc):
                outcome, error_class = "timeout", "CancelledError"
            else:
                outcome, error_class = "err", type(exc).__name__
            fields = self._call.seal() if self._call is not None else {}
            emit(
                "backend.llm.call.response",
                {
                    "provider": self.provider,
                    "model": self.model,
                    "response_token_count": fields.get("response_token_count"),
                    "latency_ms": latency,
                    "error_class": error_class,
                    **{k: v for k, v in fields.items() if k != "response_token_count"},
                },
                outcome=outcome,
                duration_ms=latency,
            )
        finally:
            self._close()

    # -- sync: the shared heartbeat thread beats in a copy of the caller's context ----

    def __enter__(self) -> LLMCall:
        call = self._start()
        if self._wants_heartbeat():
            self._beat_in_thread()
        return call

    def _beat_in_thread(self) -> None:
        ctx = contextvars.copy_context()
        scheduler.add(self.heartbeat_s, lambda: ctx.run(self._beat))

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._finish(exc)  # closes the call: its next beat drops it from the scheduler

    # -- async: a heartbeat task on the running loop (it copies the context itself) --

    async def __aenter__(self) -> LLMCall:
        call = self._start()
        if self._wants_heartbeat():
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:  # trio, or another loop anyio runs on: the heartbeat thread
                self._beat_in_thread()
            else:
                self._task = loop.create_task(self._aheartbeat(), name="cvdiag-heartbeat")
        return call

    async def _aheartbeat(self) -> None:
        while True:
            await asyncio.sleep(self.heartbeat_s)
            self._beat()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._task is not None:
            self._task.cancel()  # it can only resume into CancelledError: no more beats
            self._task = None
        self._finish(exc)
