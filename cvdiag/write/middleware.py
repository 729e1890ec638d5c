"""The ASGI middleware: ingress, first byte, SSE events and exactly one terminal.

Shaped like Starlette's ``middleware/gzip.py``: ``CvdiagMiddleware`` holds the options
and decides whether a request is observed; each observed request gets a ``_Responder``
that keeps that request's state as attributes and gives the app its ``receive`` and
``send``, and whose ``end`` writes the request's one terminal.
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Callable, Iterable, Mapping

from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from cvdiag.contract.compiled import compiled_module
from cvdiag.contract.ids import demo_from_path, new_test_id, sanitize_slug, sanitize_test_id
from cvdiag.contract.schema import EDGE_HEADERS, OUTBOUND_ALLOW_LIST, SLUG_HEADER, TEST_ID_HEADER, Tier
from cvdiag.contract.scrubber import SCAN_LIMIT, scrub_clipped
from cvdiag.contract.trace_context import trace_headers_test_id
from cvdiag.write import _otlp_link, config
from cvdiag.write._errors import error_metadata, is_cancelled
from cvdiag.write._inflight import InFlight
from cvdiag.write.context import EMPTY_FORWARD, RequestContext, bind_now, make_context, resolve_slug, unbind
from cvdiag.write.emitter import NO_EDGE_HEADERS, elapsed_ms, emit_edge, note_internal_error

#: The defaults of ``CvdiagMiddleware``'s options.
DEFAULT_TEST_ID_HEADER = TEST_ID_HEADER
DEFAULT_SLUG_HEADER = SLUG_HEADER
DEFAULT_ECHO_TEST_ID = True
DEFAULT_EXCLUDE_PATHS: tuple[str, ...] = ()
DEFAULT_LAYER = "backend"
#: The layers a middleware can write as: the service under test, or the LLM mock.
LAYERS = ("backend", "aimock")

#: Longest forwarded header value kept in the request context.
FORWARD_VALUE_LIMIT = 256
#: Lines of a chunk searched for its SSE ``event:`` name, and the longest name written.
EVENT_LINES_SCANNED = 16
EVENT_NAME_LIMIT = 64
#: Digits in the largest content-length read (an int64 has 19).
CONTENT_LENGTH_DIGITS = 19

_EDGE = frozenset(h.encode() for h in EDGE_HEADERS)
_FORWARD = tuple(h.encode() for h in OUTBOUND_ALLOW_LIST if h not in (TEST_ID_HEADER, SLUG_HEADER))
_CONTENT_LENGTH = b"content-length"
#: W3C trace context: a test id when no ``x-test-id`` came (spec section 9).
_TRACEPARENT = b"traceparent"
_BAGGAGE = b"baggage"
_CONTENT_TYPE = b"content-type"
_EVENT_STREAM = b"text/event-stream"
#: SSE lines end in CRLF, LF or CR.
_LINE_END = re.compile(rb"\r\n|\r|\n")
#: ASGI extensions by which the server sends a file itself; each ends the body or adds to it.
_PATHSEND = "http.response.pathsend"
_FILE_SENDS = frozenset({_PATHSEND, "http.response.zerocopy"})
#: Set in the scope of a request an outer CvdiagMiddleware observes: an inner one (a
#: mounted sub-application with its own middleware) joins that request instead.
_SCOPE_MARK = "cvdiag.request"
#: Paths whose demo a middleware remembers (then it starts over: a crawler's random paths).
_DEMOS_KEPT = 1024
#: ... and the longest path remembered, so that the memory stays small whatever comes.
_DEMO_PATH_MAX = 256


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
        # ``wanted`` holds lower-case names: a name already in it needs no ``lower()``.
        if (key in wanted or (key := key.lower()) in wanted) and key not in found:
            found[key] = value
    return found


def _compiled_pick() -> Callable[[Iterable[tuple[bytes, bytes]], frozenset[bytes]], dict[bytes, bytes]]:
    """``_pick`` in C where it is built (``_cemit.pick``, which hands headers of another
    shape to ``_pick``): the loop over each request's and each response's headers."""
    module = compiled_module("cvdiag.write._cemit")
    if module is None:
        return _pick
    module.set_pick_fallback(_pick)
    return module.pick  # type: ignore[no-any-return]


#: What the middleware picks headers with; a module global, so that tests can compare both.
_pick_headers = _compiled_pick()


def _client_left(receive: Receive) -> bool:
    """True when the server already knows that the client left.

    uvicorn (ASGI spec 2.3) drops a send after a hang-up without a word; the app hears of
    it from ``receive`` (Starlette's disconnect listener), which on a busy loop can run
    after the stream's last send, so the hang-up read as complete. Only the server's
    request cycle knows at once: the owner of the ``receive`` it handed over (Starlette's
    error middleware wraps ``send``, never ``receive``), whose ``disconnected`` says so.
    """
    owner = getattr(receive, "__self__", None)
    return owner is not None and getattr(owner, "disconnected", False) is True


def _content_length(raw: bytes | None) -> int | None:
    if raw is None or not raw.strip().isdigit() or len(raw) > CONTENT_LENGTH_DIGITS:
        return None
    return int(raw)


def _event_type(chunk: bytes) -> str:
    """The SSE event name of the first event in ``chunk``; ``message`` when unnamed."""
    for line in _LINE_END.split(chunk, EVENT_LINES_SCANNED)[:EVENT_LINES_SCANNED]:
        if not line:
            break
        if line.startswith(b"event:"):
            name = line[6:].strip().decode("utf-8", "replace")
            return scrub_clipped(name, EVENT_NAME_LIMIT) or "message"  # scrub first, cut after
    return "message"


def _emit_ingress(scope: Scope, found: Mapping[bytes, bytes], adopted: bool) -> None:
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


def _emit_mock_ingress(scope: Scope, found: Mapping[bytes, bytes], adopted: bool) -> None:
    emit_edge(
        "aimock.request.ingress",
        {"path": scope.get("path"), "content_length": _content_length(found.get(_CONTENT_LENGTH)), "match_keys": None},
        outcome="info",
        duration_ms=None,
        edge_headers=None,
    )


def _emit_error(error: BaseException, elapsed: int) -> None:
    emit_edge("backend.error.caught", error_metadata(error), outcome="err", duration_ms=elapsed, edge_headers=None)


def _close_tool_calls(ctx: RequestContext, *, raised: bool) -> None:
    """The tool calls this request asked for on the wire and never answered get their
    response line before the terminal (only when LLM capture is loaded: no import here)."""
    tool_wire = sys.modules.get("cvdiag.write._tool_wire")
    if tool_wire is not None:
        tool_wire.close_waiting(ctx, raised=raised)


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
        test_id_header: str = DEFAULT_TEST_ID_HEADER,
        slug_header: str = DEFAULT_SLUG_HEADER,
        echo_test_id: bool = DEFAULT_ECHO_TEST_ID,
        exclude_paths: Iterable[str] = DEFAULT_EXCLUDE_PATHS,
        layer: str = DEFAULT_LAYER,
    ) -> None:
        if layer not in LAYERS:
            raise ValueError(f"layer must be one of {', '.join(LAYERS)}, got {layer!r}")
        self.app = app
        #: ``aimock``: this app is the LLM's stand-in (a mock provider): its lines are the
        #: LLM mock's (``aimock.*``), so its 500 reads as the provider's error.
        self.mock = layer == "aimock"
        self.slug = sanitize_slug(slug) if slug else None
        self.test_id_header = test_id_header.lower().encode("latin-1")
        self.slug_header = slug_header.lower().encode("latin-1")
        self.echo_test_id = echo_test_id
        self.exclude_paths = frozenset(p.rstrip("/") or "/" for p in exclude_paths)
        self._wanted = frozenset(
            {self.test_id_header, self.slug_header, _CONTENT_LENGTH, _TRACEPARENT, _BAGGAGE, *_FORWARD, *_EDGE}
        )
        self._wanted_response = frozenset({_CONTENT_LENGTH, _CONTENT_TYPE, self.test_id_header, *_EDGE})
        self._in_flight = InFlight()
        #: path -> its demo: a service serves few paths, and a lookup costs a fifth of the parse.
        self._demos: dict[str, str] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "lifespan" and _SCOPE_MARK not in scope:
            scope[_SCOPE_MARK] = True
            await self.app(scope, self._in_flight.receive(receive), self._in_flight.send(send))
            return
        settings = config.current.settings
        if (
            kind != "http"
            or not settings.enabled
            or _SCOPE_MARK in scope
            or (self.exclude_paths and self._excluded(scope.get("path", "")))
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
        scope[_SCOPE_MARK] = True
        if settings.otlp or settings.otlp_spans:
            _otlp_link.note_request(ctx.test_id, found.get(_TRACEPARENT))
        tokens = bind_now(ctx)
        try:
            # Resolved once per request: the per-chunk path must stay a counter unless
            # debug is on. The emitter re-checks every envelope, so lowering the tier
            # still takes effect at once; raising it applies from the next request.
            tier = settings.tier
            if tier is Tier.DEBUG:  # only debug differs per slug
                tier = settings.tier_for(ctx.slug)
            if tier is not Tier.DEFAULT:
                (_emit_mock_ingress if self.mock else _emit_ingress)(scope, found, adopted)
            await _Responder(self, ctx, tier, start_ns)(scope, receive, send)
        finally:
            unbind(tokens)

    def _excluded(self, path: str) -> bool:
        path = path.rstrip("/") or "/"
        return path in self.exclude_paths or any(path.startswith(p + "/") for p in self.exclude_paths if p != "/")

    def _adopt(self, scope: Scope) -> tuple[RequestContext, bool, dict[bytes, bytes]]:
        """The request's context from its headers (spec section 5), whether the test id
        was adopted, and the request headers cvdiag reads."""
        found = _pick_headers(scope.get("headers") or (), self._wanted)
        adopted = sanitize_test_id(found.get(self.test_id_header))
        if adopted is None and self.test_id_header not in found and (_TRACEPARENT in found or _BAGGAGE in found):
            adopted = trace_headers_test_id(found.get(_TRACEPARENT), found.get(_BAGGAGE))
        test_id = adopted or new_test_id()
        slug_raw = found.get(self.slug_header)
        forward = (
            EMPTY_FORWARD
            if found.keys().isdisjoint(_FORWARD)
            else {
                k.decode(): v.decode("latin-1")[:FORWARD_VALUE_LIMIT]
                for k in _FORWARD
                if (v := found.get(k)) is not None
            }
        )
        path = scope.get("path") or "/"
        demos = self._demos
        demo = demos.get(path)
        if demo is None:
            demo = demo_from_path(path)
            if len(path) <= _DEMO_PATH_MAX:
                if len(demos) >= _DEMOS_KEPT:
                    demos.clear()
                demos[path] = demo
        ctx = make_context(
            test_id, resolve_slug(slug_raw, self.slug) if slug_raw else self.slug or resolve_slug(), demo, forward
        )
        return ctx, adopted is not None, found


class _Responder:
    """One observed request: what was sent, whether the client left, and its terminal.

    The app is served with this object's ``receive`` and ``send``; ``end`` writes the one
    terminal, from the request's own ``finally`` or from ``InFlight`` when the server
    shuts down with the request still open.
    """

    __slots__ = (
        "bytes_sent",
        "ctx",
        "declared_length",
        "disconnected",
        "edge",
        "ended",
        "finished",
        "finished_ms",
        "first_byte",
        "is_sse",
        "middleware",
        "server_receive",
        "server_send",
        "sse_events",
        "sse_sequence",
        "start_ns",
        "started",
        "status",
        "streaming",
        "tier",
    )

    def __init__(self, middleware: CvdiagMiddleware, ctx: RequestContext, tier: Tier, start_ns: int) -> None:
        self.middleware = middleware
        self.ctx = ctx
        self.tier = tier
        self.start_ns = start_ns
        self.status = 0
        self.declared_length: int | None = None
        self.is_sse = False
        self.edge: Mapping[str, str | None] = NO_EDGE_HEADERS
        self.started = self.first_byte = self.finished = self.disconnected = self.ended = self.streaming = False
        self.bytes_sent = self.sse_events = self.sse_sequence = 0
        #: When the client had the whole response (a background task may run after it).
        self.finished_ms = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.server_receive = receive
        self.server_send = send
        in_flight = self.middleware._in_flight
        if not in_flight.watched:
            in_flight.watch()
        end = self.end
        in_flight.requests[end] = self.ctx
        error: BaseException | None = None
        try:
            await self.middleware.app(scope, self.receive, self.send)
        except BaseException as exc:
            error = exc
            raise
        finally:
            in_flight.requests.pop(end, None)
            try:
                end(error, False)
            except Exception:  # never replace the app's own exception with ours
                note_internal_error()

    async def receive(self) -> Message:
        message = await self.server_receive()
        if message.get("type") == "http.disconnect" and not self.finished:
            self.disconnected = True
        return message

    async def send(self, message: Message) -> None:
        kind = message.get("type")
        if not (self.streaming and kind == "http.response.body"):
            # Observed in full (in this frame: one more coroutine per message costs). A body
            # at a tier that writes nothing per chunk (default; verbose after the first byte)
            # is only counted below, the last one included.
            original = message
            try:
                message = self._observe(message)
            except Exception:  # cvdiag's bookkeeping must never break the response
                note_internal_error()
                message = original
        try:
            await self.server_send(message)
        except OSError:  # ASGI spec 2.4 servers: the client is gone (the app's own OSErrors are not)
            self.disconnected = True
            raise
        if kind == "http.response.body":
            body = message.get("body") or b""
            self.bytes_sent += len(body)
            if body and self.is_sse:
                self.sse_events += 1
            if not message.get("more_body", False):
                if _client_left(self.server_receive):  # the server dropped this last send
                    self.disconnected = True
                self._finish()
        elif kind == "http.response.start":
            self.started = True
        elif kind in _FILE_SENDS:
            self._sent_file(message)

    def _sent_file(self, message: Message) -> None:
        """A file the server sends itself: pathsend (all of it) or zerocopy (``count`` bytes, else the rest)."""
        count = message.get("count")
        if isinstance(count, int) and count >= 0:
            self.bytes_sent += count
        elif self.declared_length is not None:
            self.bytes_sent = self.declared_length
        if message["type"] == _PATHSEND or not message.get("more_body", False):
            self._finish()

    def _finish(self) -> None:
        self.finished = True
        self.finished_ms = (time.monotonic_ns() - self.start_ns) // 1_000_000  # elapsed_ms, without its frame

    def _observe(self, message: Message) -> Message:
        """Note what is being sent; return the message to send (with the id echoed)."""
        kind = message.get("type")
        if kind == "http.response.start":
            middleware = self.middleware
            self.status = message.get("status", 0)
            given = message.get("headers") or ()
            # The spec allows any iterable: read once, the list (not the spent iterator) goes on.
            headers = list(given)
            picked = _pick_headers(headers, middleware._wanted_response)
            self.declared_length = _content_length(picked.get(_CONTENT_LENGTH))
            self.is_sse = picked.get(_CONTENT_TYPE, b"").startswith(_EVENT_STREAM)
            self.edge = NO_EDGE_HEADERS if picked.keys().isdisjoint(_EDGE) else _edge_headers(picked)
            self.streaming = self.tier is Tier.DEFAULT  # no first_byte line to write
            if middleware.echo_test_id and middleware.test_id_header not in picked:
                headers.append((middleware.test_id_header, self.ctx.test_id.encode()))
                message = {**message, "headers": headers}
            elif not isinstance(given, list | tuple):
                message = {**message, "headers": headers}
        elif kind == "http.response.body" or kind in _FILE_SENDS:
            body = message.get("body", b"") if kind == "http.response.body" else b"file"
            if body and not self.first_byte:
                self.first_byte = True
                self.streaming = self.tier is not Tier.DEBUG  # debug writes an event per chunk
                if self.tier is not Tier.DEFAULT:
                    emit_edge(
                        "aimock.response.start" if self.middleware.mock else "backend.sse.first_byte",
                        {"delta_ms_from_ingress": elapsed_ms(self.start_ns)},
                        outcome="ok",
                        duration_ms=None,
                        edge_headers=self.edge,
                    )
            if body and self.tier is Tier.DEBUG and kind == "http.response.body" and self.middleware.mock:
                emit_edge(
                    "aimock.sse.chunk",
                    {"chunk_size_bytes": len(body), "sequence_num": self.sse_sequence},
                    outcome="info",
                    duration_ms=None,
                    edge_headers=None,
                )
                self.sse_sequence += 1
            elif body and self.tier is Tier.DEBUG and kind == "http.response.body":
                emit_edge(
                    "backend.sse.event",
                    {
                        "event_type": _event_type(body) if self.is_sse else "chunk",
                        "payload_size_bytes": len(body),
                        "sequence_num": self.sse_sequence,
                    },
                    outcome="info",
                    duration_ms=None,
                    edge_headers=None,
                )
                self.sse_sequence += 1
        return message

    def end(self, error: BaseException | None, shutdown: bool) -> None:
        """Exactly one terminal envelope (spec section 8), then error.caught if an
        exception must be explained; a second call does nothing."""
        if self.ended:
            return
        self.ended = True
        # Only a request that did not end well writes a line that needs the time now.
        elapsed = 0 if error is None and self.finished and not self.disconnected else elapsed_ms(self.start_ns)
        cancelled = error is not None and is_cancelled(error)
        # Only the server can say the client left: http.disconnect, its send failing, or
        # Starlette's ClientDisconnect. An OSError of the app's own (a provider dropping
        # its upstream connection) is the app's failure: chunk_error.
        gone = self.disconnected or (error is not None and isinstance(error, ClientDisconnect))
        # The app's own exception, which backend.error.caught explains.
        caught = error if isinstance(error, Exception) and not gone else None
        if error is not None or gone or not self.finished or self.status >= 500:
            _close_tool_calls(self.ctx, raised=caught is not None)
        # Finished after the client left: a middleware between (BaseHTTPMiddleware) ended
        # the body of a stream that the client no longer read.
        if self.finished and not self.disconnected and self.middleware.mock:
            emit_edge(
                "aimock.response.complete",
                {
                    "http_status": self.status,
                    "total_bytes": self.bytes_sent,
                    "total_duration_ms": self.finished_ms,
                    "chunk_count": self.sse_events,
                },
                outcome="ok" if self.status < 500 else "err",
                duration_ms=self.finished_ms,
                edge_headers=self.edge,
            )
        elif self.finished and not self.disconnected:
            done = self.finished_ms
            emit_edge(
                "backend.response.complete",
                {
                    "http_status": self.status,
                    "content_length": self.bytes_sent if self.declared_length is None else self.declared_length,
                    "total_duration_ms": done,
                    "sse_event_count": self.sse_events,
                },
                outcome="ok" if self.status < 500 else "err",
                duration_ms=done,
                edge_headers=self.edge,
            )
        elif caught is not None and not self.started:
            _emit_error(caught, elapsed)
            return
        else:
            if shutdown or (cancelled and self.middleware._in_flight.is_shutdown(error)):
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
                "aimock.response.aborted" if self.middleware.mock else "backend.sse.aborted",
                {"termination_kind": kind, "bytes_before_abort": self.bytes_sent},
                outcome="err",
                duration_ms=elapsed,
                edge_headers=self.edge,
            )
        if caught is not None:
            _emit_error(caught, elapsed)
