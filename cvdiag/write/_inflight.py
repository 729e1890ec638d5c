"""Requests in flight, so that each still gets its terminal when the server shuts down.

Where the ASGI server lets an application notice its end, the requests still running
are ended with backend.sse.aborted ``termination_kind`` ``shutdown`` (spec section 3)
and the queue is drained before the process can go:

- the lifespan ``lifespan.shutdown`` event (uvicorn sends it after cancelling the tasks
  its graceful timeout gave up on, and re-raises SIGTERM right after the application's
  shutdown completes, which kills the process before ``atexit`` could run);
- a cancellation the server names as a shutdown (uvicorn: "timeout graceful shutdown
  exceeded"), which ends a request on its own path;
- process exit (``atexit``), for anything still open then.
"""

from __future__ import annotations

import asyncio
import atexit
import time
import weakref
from collections.abc import Callable

from starlette.types import Message, Receive, Send

from cvdiag.write import config
from cvdiag.write.context import RequestContext, bind, unbind
from cvdiag.write.emitter import flush, note_internal_error

#: Ends one request: ``end(error, shutdown)``; a second call does nothing.
End = Callable[[BaseException | None, bool], None]

#: How long ``lifespan.shutdown`` lets requests cancelled by the server end on their own
#: path (with their LLM call and agent lines) before ending the rest itself.
UNWIND_SECONDS = 0.5
#: How long shutdown waits for the queue to reach the sinks.
FLUSH_SECONDS = 2.0


class InFlight:
    """The requests one middleware is serving, and whether its server is stopping.

    The middleware adds and removes ``requests`` entries itself (two dict operations
    per request; a method call each would cost more than both).
    """

    __slots__ = ("__weakref__", "requests", "stopping", "watched")

    def __init__(self) -> None:
        self.requests: dict[End, RequestContext] = {}
        self.stopping = False
        self.watched = False

    def watch(self) -> None:
        """Have ``atexit`` end what is still open; called at the first request, not at
        construction, so that a disabled application stays inert."""
        self.watched = True
        _watch(self)

    def is_shutdown(self, cancelled: BaseException) -> bool:
        """Was this cancellation the server shutting down (not a timeout or a hang-up)?"""
        return self.stopping or "shutdown" in str(cancelled)

    def end_all(self) -> None:
        """End every request still open with a ``shutdown`` terminal, in its own context."""
        while self.requests:
            end, ctx = self.requests.popitem()
            tokens = bind(ctx)
            try:
                end(None, True)
            except Exception:  # one request's bookkeeping must not cost the others theirs
                note_internal_error()
            finally:
                unbind(tokens)

    async def shutdown(self) -> None:
        """The server is stopping: let cancelled requests unwind, end the rest, drain."""
        self.stopping = True
        deadline = time.monotonic() + UNWIND_SECONDS
        while self.requests and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        self.end_all()
        await _drain()

    def receive(self, receive: Receive) -> Receive:
        """A lifespan ``receive`` that notices ``lifespan.shutdown``."""

        async def receive_lifespan() -> Message:
            message = await receive()
            kind = message.get("type")
            if kind == "lifespan.startup":  # an application can be started again (TestClient)
                self.stopping = False
            elif kind == "lifespan.shutdown":
                try:
                    await self.shutdown()
                except Exception:
                    note_internal_error()
            return message

        return receive_lifespan

    @staticmethod
    def send(send: Send) -> Send:
        """A lifespan ``send`` that drains the queue before reporting shutdown done: the
        server may end the process right after (uvicorn re-raises SIGTERM)."""

        async def send_lifespan(message: Message) -> None:
            if message.get("type") in ("lifespan.shutdown.complete", "lifespan.shutdown.failed"):
                try:
                    await _drain()
                except Exception:
                    note_internal_error()
            await send(message)

        return send_lifespan


async def _drain() -> None:
    if config.get_settings().enabled:
        await asyncio.to_thread(flush, FLUSH_SECONDS)


class _AtExit:
    """The middlewares whose open requests process exit ends; one ``atexit`` hook for all."""

    __slots__ = ("hooked", "watched")

    def __init__(self) -> None:
        self.watched: weakref.WeakSet[InFlight] = weakref.WeakSet()
        self.hooked = False


_at_exit_state = _AtExit()


def _watch(in_flight: InFlight) -> None:
    if not _at_exit_state.hooked:
        _at_exit_state.hooked = True
        atexit.register(_at_exit)
    _at_exit_state.watched.add(in_flight)


def _at_exit() -> None:
    """Process exit: requests still open get their terminal, then the queue drains."""
    for in_flight in list(_at_exit_state.watched):
        in_flight.stopping = True
        in_flight.end_all()
    try:
        flush(FLUSH_SECONDS)
    except Exception:  # strict mode's pending sink error: exit quietly all the same
        note_internal_error()
