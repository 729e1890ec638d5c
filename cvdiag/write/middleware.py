"""The ASGI middleware: ingress, first byte, SSE events and exactly one terminal.

A pure ASGI middleware in the style of Starlette's ``gzip.py``: everything about one
request lives in locals of ``__call__`` and its ``send``/``receive`` wrappers.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Mapping

from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from cvdiag.contract.ids import demo_from_path, new_test_id, sanitize_slug, sanitize_test_id
from cvdiag.contract.schema import EDGE_HEADERS, OUTBOUND_ALLOW_LIST, SLUG_HEADER, TEST_ID_HEADER, Tier
from cvdiag.write import config
from cvdiag.write._errors import error_metadata
from cvdiag.write._inflight import InFlight
from cvdiag.write.context import EMPTY_FORWARD, RequestContext, bind, resolve_slug, unbind
from cvdiag.write.emitter import NO_EDGE_HEADERS, active_tier, elapsed_ms, emit_edge, note_internal_error
from cvdiag.write.scrubber import SCAN_LIMIT, scrub_clipped

_EDGE = frozenset(h.encode() for h in EDGE_HEADERS)
_FORWARD = tuple(h.encode() for h in OUTBOUND_ALLOW_LIST if h not in (TEST_ID_HEADER, SLUG_HEADER))
_CONTENT_LENGTH = b"content-length"
_CONTENT_TYPE = b"content-type"
_EVENT_STREAM = b"text/event-stream"
_CANCELLED = (asyncio.CancelledError, GeneratorExit)
#: Set in the scope of a request an outer CvdiagMiddleware observes: an inner one (a
#: mounted sub-application with its own middleware) joins that request instead.
_SCOPE_MARK = "cvdiag.request"


def _header_text(raw: bytes) -> str:
    # Not cut to its written length here: the emitter scrubs first, then cuts.
    return raw[: SCAN_LIMIT + 1].decode("latin-1")


def _edge_headers(found: Mapping[bytes, bytes]) -> Mapping[str, str | None]:
    """Exactly the 9 edge keys; the NO_EDGE_HEADERS constant when none was sent."""
    if found.keys().isdisjoint(_EDGE):
        return NO_EDGE_HEADERS
    return {name: (_header_text(found[key]) if (key := name.encode()) in found else None) for name in EDGE_HEADERS}


def _pick(headers: Iterable[tuple[bytes, bytes]], wanted: frozenset[bytes]) -> dict[bytes, bytes]:
    """One pass over raw headers keeping the first value of each wanted name.

    Cheaper than Starlette's ``Headers.get`` per name, which rescans the list each time.
    """
    found: dict[bytes, bytes] = {}
    for key, value in headers:
        key = key.lower()
        if key in wanted and key not in found:
            found[key] = value
    return found


def _content_length(raw: bytes | None) -> int | None:
    if raw is None or not raw.strip().isdigit() or len(raw) > 19:
        return None
    return int(raw)


def _event_type(chunk: bytes) -> str:
    """The SSE event name of the first event in ``chunk``; ``message`` when unnamed."""
    for line in chunk.split(b"\n", 16)[:16]:
        line = line.rstrip(b"\r")
        if not line:
            break
        if line.startswith(b"event:"):
            name = line[6:].strip().decode("utf-8", "replace")
            return scrub_clipped(name, 64) or "message"  # scrub first, cut after
    return "message"


class CvdiagMiddleware:
    """Writes the backend boundaries of every HTTP request (spec sections 3 and 8).

    Use as ``app.add_middleware(CvdiagMiddleware, slug="my-service")`` or wrap an app:
    ``app = CvdiagMiddleware(app, slug="my-service")``. Other scopes pass through, and so
    does everything while cvdiag is disabled.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        slug: str | None = None,
        test_id_header: str = TEST_ID_HEADER,
        slug_header: str = SLUG_HEADER,
        echo_test_id: bool = True,
        exclude_paths: Iterable[str] = (),
    ) -> None:
        self.app = app
        self.slug = sanitize_slug(slug) if slug else None
        self.test_id_header = test_id_header.lower().encode("latin-1")
        self.slug_header = slug_header.lower().encode("latin-1")
        self.echo_test_id = echo_test_id
        self.exclude_paths = frozenset(p.rstrip("/") or "/" for p in exclude_paths)
        self._wanted = frozenset({self.test_id_header, self.slug_header, _CONTENT_LENGTH, *_FORWARD, *_EDGE})
        self._wanted_response = frozenset({_CONTENT_LENGTH, _CONTENT_TYPE, self.test_id_header, *_EDGE})
        self._in_flight = InFlight()

    def _excluded(self, path: str) -> bool:
        if not self.exclude_paths:
            return False
        path = path.rstrip("/") or "/"
        return path in self.exclude_paths or any(path.startswith(p + "/") for p in self.exclude_paths if p != "/")

    def _adopt(self, scope: Scope) -> tuple[RequestContext, bool, dict[bytes, bytes]]:
        """The request's context from its headers (spec section 5), whether the test id
        was adopted, and the request headers cvdiag reads."""
        found = _pick(scope.get("headers") or (), self._wanted)
        adopted = sanitize_test_id(found.get(self.test_id_header))
        test_id = adopted or new_test_id()
        slug_raw = found.get(self.slug_header)
        forward = (
            EMPTY_FORWARD
            if found.keys().isdisjoint(_FORWARD)
            else {k.decode(): v.decode("latin-1")[:256] for k in _FORWARD if (v := found.get(k)) is not None}
        )
        ctx = RequestContext(
            test_id,
            test_id,
            resolve_slug(slug_raw, self.slug) if slug_raw else self.slug or resolve_slug(),
            demo_from_path(scope.get("path") or "/"),
            forward,
        )
        return ctx, adopted is not None, found

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan" and _SCOPE_MARK not in scope:
            scope[_SCOPE_MARK] = True
            await self.app(scope, self._in_flight.receive(receive), self._in_flight.send(send))
            return
        if (
            scope["type"] != "http"
            or not config.get_settings().enabled
            or _SCOPE_MARK in scope
            or self._excluded(scope.get("path", ""))
        ):
            await self.app(scope, receive, send)
            return

        start_ns = time.monotonic_ns()
        try:
            ctx, adopted, found = self._adopt(scope)
        except Exception:  # a malformed scope: serve the request as if cvdiag were absent
            note_internal_error()
            await self.app(scope, receive, send)
            return
        test_id = ctx.test_id
        scope[_SCOPE_MARK] = True
        tokens = bind(ctx)
        # Resolved once per request: the per-chunk path must stay a counter unless
        # debug is on. The emitter re-checks every envelope, so lowering the tier still
        # takes effect at once; raising it applies from the next request.
        tier = active_tier(ctx.slug) or Tier.DEFAULT
        if tier is not Tier.DEFAULT:
            emit_edge(
                "backend.request.ingress",
                {
                    "method": scope.get("method"),
                    "path": scope.get("path"),
                    "content_length": _content_length(found.get(_CONTENT_LENGTH)),
                    "inbound_test_id_adopted": adopted,
                },
                outcome="info",
                duration_ms=None,
                edge_headers=_edge_headers(found),
            )

        echo = (self.test_id_header, test_id.encode()) if self.echo_test_id else None
        status = 0
        declared_length: int | None = None
        is_sse = False
        response_edge: Mapping[str, str | None] = NO_EDGE_HEADERS
        started = finished = first_byte = disconnected = False
        bytes_sent = sse_events = sse_sequence = 0

        async def receive_wrapper() -> Message:
            nonlocal disconnected
            message = await receive()
            if message.get("type") == "http.disconnect" and not finished:
                disconnected = True
            return message

        async def send_wrapper(message: Message) -> None:
            nonlocal started, finished, disconnected, bytes_sent, sse_events
            kind = message.get("type")
            original = message
            try:
                message = observe(message)
            except Exception:  # cvdiag's bookkeeping must never break the response
                note_internal_error()
                message = original
            try:
                await send(message)
            except OSError:  # ASGI spec 2.4 servers: the client is gone (the app's own OSErrors are not)
                disconnected = True
                raise
            if kind == "http.response.start":
                started = True
            elif kind == "http.response.body":
                body = message.get("body") or b""
                bytes_sent += len(body)
                if body and is_sse:
                    sse_events += 1
                if not message.get("more_body", False):
                    finished = True

        def observe(message: Message) -> Message:
            """Note what is being sent; return the message to send (with the id echoed)."""
            nonlocal status, declared_length, is_sse, response_edge, first_byte, sse_sequence
            kind = message.get("type")
            if kind == "http.response.start":
                status = message.get("status", 0)
                headers = list(message.get("headers") or ())
                picked = _pick(headers, self._wanted_response)
                declared_length = _content_length(picked.get(_CONTENT_LENGTH))
                is_sse = picked.get(_CONTENT_TYPE, b"").startswith(_EVENT_STREAM)
                response_edge = _edge_headers(picked)
                if echo is not None and self.test_id_header not in picked:
                    headers.append(echo)
                    message = {**message, "headers": headers}
            elif kind == "http.response.body":
                body = message.get("body", b"")
                if body and not first_byte:
                    first_byte = True
                    if tier is not Tier.DEFAULT:
                        emit_edge(
                            "backend.sse.first_byte",
                            {"delta_ms_from_ingress": elapsed_ms(start_ns)},
                            outcome="ok",
                            duration_ms=None,
                            edge_headers=response_edge,
                        )
                if body and tier is Tier.DEBUG:
                    emit_edge(
                        "backend.sse.event",
                        {
                            "event_type": _event_type(body) if is_sse else "chunk",
                            "payload_size_bytes": len(body),
                            "sequence_num": sse_sequence,
                        },
                        outcome="info",
                        duration_ms=None,
                        edge_headers=None,
                    )
                    sse_sequence += 1
            return message

        ended = False

        def end(error: BaseException | None, shutdown: bool) -> None:
            """This request's terminal: from its own ``finally``, or from ``InFlight``
            when the server shuts down with the request still open; once either way."""
            nonlocal ended
            if ended:
                return
            ended = True
            self._terminal(
                error,
                start_ns=start_ns,
                status=status,
                length=declared_length if declared_length is not None else bytes_sent,
                bytes_sent=bytes_sent,
                sse_events=sse_events,
                started=started,
                finished=finished,
                disconnected=disconnected,
                shutdown=shutdown or (isinstance(error, _CANCELLED) and self._in_flight.is_shutdown(error)),
                edge=response_edge,
            )

        in_flight = self._in_flight
        if not in_flight.watched:
            in_flight.watch()
        in_flight.requests[end] = ctx
        error: BaseException | None = None
        try:
            await self.app(scope, receive_wrapper, send_wrapper)
        except BaseException as exc:
            error = exc
            raise
        finally:
            in_flight.requests.pop(end, None)
            try:
                end(error, False)
            except Exception:  # never replace the app's own exception with ours
                note_internal_error()
            finally:
                unbind(tokens)

    @staticmethod
    def _terminal(
        error: BaseException | None,
        *,
        start_ns: int,
        status: int,
        length: int,
        bytes_sent: int,
        sse_events: int,
        started: bool,
        finished: bool,
        disconnected: bool,
        shutdown: bool,
        edge: Mapping[str, str | None],
    ) -> None:
        """Exactly one terminal envelope (spec section 8), then error.caught if an
        exception must be explained."""
        elapsed = elapsed_ms(start_ns)
        cancelled = isinstance(error, _CANCELLED)
        # Only the server can say the client left: http.disconnect, its send failing, or
        # Starlette's ClientDisconnect. An OSError of the app's own (a provider dropping
        # its upstream connection) is the app's failure: chunk_error.
        gone = disconnected or isinstance(error, ClientDisconnect)
        explain = error is not None and not cancelled and not gone and isinstance(error, Exception)
        if finished:
            emit_edge(
                "backend.response.complete",
                {
                    "http_status": status,
                    "content_length": length,
                    "total_duration_ms": elapsed,
                    "sse_event_count": sse_events,
                },
                outcome="ok" if status < 500 else "err",
                duration_ms=elapsed,
                edge_headers=edge,
            )
        elif explain and not started:
            _emit_error(error, elapsed)
            return
        else:
            if shutdown:
                kind = "shutdown"
            elif cancelled:
                kind = "timeout"
            elif gone:
                kind = "rst"
            elif error is not None:
                kind = "chunk_error"
            else:
                kind = "fin_premature"
            emit_edge(
                "backend.sse.aborted",
                {"termination_kind": kind, "bytes_before_abort": bytes_sent},
                outcome="err",
                duration_ms=elapsed,
                edge_headers=edge,
            )
        if explain:
            _emit_error(error, elapsed)


def _emit_error(error: BaseException | None, elapsed: int) -> None:
    if error is None:
        return
    emit_edge("backend.error.caught", error_metadata(error), outcome="err", duration_ms=elapsed, edge_headers=None)
