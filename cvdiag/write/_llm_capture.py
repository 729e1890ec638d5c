"""LLM calls seen at the HTTP client: each attempt is one ``backend.llm.call.*`` story.

``propagation.instrument_httpx`` hands every request to ``begin``; a request that
``llm_routes`` recognises becomes an ``Exchange``, which writes backend.llm.call.start,
heartbeats while the call is open, and exactly one backend.llm.call.response. The
response body is observed, never changed: its byte stream is swapped for an
``ObservedStream`` that passes every chunk through untouched and shows it to an
``llm_stream.AnswerReader`` on the way, however the caller reads the body (iterating,
``read()``, ``.json()``, an SDK's SSE decoder) and whenever it stops (end, close, error,
cancellation). Inside an open ``llm_call`` nothing is written: the exchange enriches
that call instead.

Outcome of one attempt: ``err`` for an HTTP status >= 400 (``HTTPStatusError``), an
error event in the stream (``ProviderError``), a transport error (its class name), or
a stream that ended without its terminal event (``IncompleteStream``); ``timeout`` with
``CancelledError`` when the caller was cancelled or closed the body before the answer
was complete; else ``ok``. Nothing here raises into the caller: a failure of cvdiag's
own is counted (``cvdiag.stats()["internal_errors"]``) and the bytes flow on.
"""

from __future__ import annotations

import contextvars
import email.utils
import functools
import importlib
import sys
import threading
import time
import weakref
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio

from cvdiag.contract.schema import LLM_TEXT_MAX_CHARS, Tier
from cvdiag.contract.scrubber import scrub_clipped
from cvdiag.write import _calls_seen, _mcp_capture
from cvdiag.write._errors import is_cancelled
from cvdiag.write._heartbeat import scheduler
from cvdiag.write._llm_stream import AnswerReader
from cvdiag.write._tool_wire import Watch, watch_request
from cvdiag.write.context import RequestContext, current_context, new_context
from cvdiag.write.emitter import active_tier, count_internal_error, emit_as, is_enabled, note_internal_error
from cvdiag.write.llm_routes import LLMRoute, recognise
from cvdiag.write.scopes import LLMCall, current_llm_call

__all__ = ["Exchange", "begin", "send_async", "send_sync", "set_heartbeat_s"]

#: Seconds between heartbeats of an open call (verbose tier and up), unless set.
DEFAULT_HEARTBEAT_S = 10.0
_RETRY_HEADER = "x-stainless-retry-count"
_REQUEST_ID_HEADERS = ("x-request-id", "request-id")
_TEXT_MAX = LLM_TEXT_MAX_CHARS
#: At most this much of an unread error body is read when the caller closes it.
_ERROR_BODY_MAX = 1 << 16
#: How long a close waits for the rest of an unread error body: what has arrived is read,
#: a body still on its way is not waited for (the SDK closing it is about to retry). Long
#: enough for a body sent just after its head (Nagle and a delayed ACK: ~40 ms on Linux),
#: a tenth of the shortest SDK backoff (0.5 s).
_ERROR_BODY_WAIT_S = 0.05
#: Attempts are counted per (test id, path, body) when the client sends no retry count.
_RETRY_MEMORY = 256

#: A retry key: (test id, path, hash of the body).
RetryKey = tuple[str, str, int]
#: True while an httpx client sends a recognised call: a transport underneath it that
#: is instrumented too (LiteLLM sends httpx requests through aiohttp) adds no second call.
_carried: contextvars.ContextVar[bool] = contextvars.ContextVar("cvdiag_llm_carried", default=False)
#: MCP over streamable HTTP is recognised on the httpx clients (the ``mcp`` SDK's transport) only.
_MCP_CLIENTS = (None, "httpx", "httpx2")


class _KeptBetweenCalls:
    """What HTTP-recognised calls keep between calls, in one place, so that ``reset()``
    can make a test start from nothing remembered."""

    __slots__ = ("failed_before", "heartbeat_s", "let_go_later", "lock")

    def __init__(self) -> None:
        self.heartbeat_s = DEFAULT_HEARTBEAT_S
        #: retry key -> failed attempts so far, oldest key first (at most _RETRY_MEMORY).
        self.failed_before: OrderedDict[RetryKey, int] = OrderedDict()
        self.lock = threading.Lock()
        #: Exchanges whose bodies the garbage collector found unclosed (see ``_let_go``).
        self.let_go_later: deque[Exchange] = deque()

    def reset(self) -> None:
        """End the calls the collector let go and forget failed attempts. The heartbeat
        interval is configuration (``instrument_httpx(heartbeat_s=)``): it stays."""
        _end_let_go()
        with self.lock:
            self.failed_before.clear()

    def attempt(self, key: RetryKey) -> int:
        """How many attempts of this request failed before (0 for the first)."""
        with self.lock:
            return self.failed_before.get(key, 0)

    def count(self, key: RetryKey, outcome: str, attempt: int) -> None:
        """Remember a failed attempt (the next one is ``attempt + 1``); forget on success."""
        failed = self.failed_before
        with self.lock:
            if outcome == "ok":
                failed.pop(key, None)
                return
            failed[key] = attempt + 1
            failed.move_to_end(key)
            while len(failed) > _RETRY_MEMORY:
                failed.popitem(last=False)


between_calls = _KeptBetweenCalls()


def set_heartbeat_s(seconds: float) -> None:
    """Heartbeat interval of HTTP-recognised calls (0 turns their heartbeats off)."""
    between_calls.heartbeat_s = float(seconds)


def _text(value: str | None) -> str | None:
    """A provider's short text (request id, finish reason), scrubbed before it is cut:
    a cut secret would no longer look like one to the emitter's scrubber."""
    return scrub_clipped(value, _TEXT_MAX) if value else None


def _retry_after_ms(headers: Any) -> int | None:
    """``retry-after-ms`` (OpenAI, Anthropic), else ``retry-after`` in seconds or as an HTTP date."""
    raw = headers.get("retry-after-ms")
    if raw:
        try:
            return max(0, int(float(raw)))
        except ValueError:
            pass
    raw = headers.get("retry-after")
    if not raw:
        return None
    try:
        return max(0, int(float(raw) * 1000))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError, IndexError):
        return None
    return max(0, int((when.timestamp() - time.time()) * 1000))


#: Emit bound to the call's context, whichever thread or task finishes the call.
_emit_as = emit_as


class Exchange:
    """One HTTP attempt of an LLM call: its facts, its reader and its single ending."""

    __slots__ = (
        "__weakref__",
        "_done",
        "_error_bytes",
        "_lock",
        "_retry_key",
        "attempt",
        "client",
        "ctx",
        "first_output_ns",
        "http_status",
        "reader",
        "request_id",
        "retry_after_ms",
        "route",
        "scope",
        "start_ns",
        "watch",
    )

    first_output_ns: int | None
    http_status: int | None
    retry_after_ms: int | None
    request_id: str | None
    reader: AnswerReader | None
    _retry_key: RetryKey | None

    def __init__(
        self, route: LLMRoute, ctx: RequestContext, scope: LLMCall | None, attempt: int, client: str | None = None
    ) -> None:
        self.route = route
        #: The HTTP client library that carried the call (``client`` on both lines).
        self.client = client
        self.ctx = ctx
        self.scope = scope
        self.attempt = attempt
        self.start_ns = time.monotonic_ns()
        # Unknown until the answer (and the retry count) say otherwise.
        self.first_output_ns = self.http_status = self.retry_after_ms = self.request_id = None
        self.reader = self._retry_key = None
        self._done = False
        self._error_bytes = 0
        self._lock = threading.Lock()
        #: Tool calls and structured output of this request and its answer (``_tool_wire``).
        self.watch: Watch | None = None

    # -- the start ---------------------------------------------------------------------

    def start(self) -> None:
        _end_let_go()
        if self.scope is not None and self.scope.closed:
            self.scope = None  # its block is over: this attempt is a call of its own
        if self.scope is not None:
            return
        route = self.route
        _emit_as(
            self.ctx,
            "backend.llm.call.start",
            {
                "provider": route.provider,
                "model": route.model,
                "attempt": self.attempt,
                "api": route.api,
                "stream": route.stream,
                "source": "http",
                "client": self.client,
                **(self.watch.start_fields() if self.watch is not None else {}),
            },
        )
        tier = active_tier(self.ctx.slug)
        heartbeat_s = between_calls.heartbeat_s
        if tier is not None and tier >= Tier.VERBOSE and heartbeat_s > 0:
            scheduler.add(heartbeat_s, functools.partial(_beat, weakref.ref(self)))

    def beat(self) -> bool:
        with self._lock:
            if self._done:
                return False
            elapsed = (time.monotonic_ns() - self.start_ns) // 1_000_000
            _emit_as(self.ctx, "backend.llm.call.heartbeat", {"elapsed_ms_since_start": elapsed})
            return True

    # -- the response --------------------------------------------------------------------

    def responded(self, response: Any, observed: type) -> None:
        """Read the status and headers, and put ``observed`` around the body's byte stream."""
        try:
            consumed = response.is_stream_consumed
            self.answered(response.status_code, response.headers, decoded=consumed)
            if consumed:
                # Built from bytes in memory (a mock transport, a cached answer): already
                # read and decoded, so there is no stream to watch; read the content.
                self.feed(response.content)
                self.ended()
                return
            response.stream = observed(response.stream, self, response.request)
        except Exception:
            note_internal_error()

    def answered(self, status: int, headers: Any, *, decoded: bool = False, reader: Any = None) -> None:
        """Status and headers of the response, from any client (``headers.get`` must be
        case-insensitive); ``decoded`` when the client hands over the body already
        inflated; ``reader`` replaces the ``AnswerReader`` for a format of its own."""
        self.http_status = status
        self.retry_after_ms = _retry_after_ms(headers)
        self.request_id = _text(headers.get("x-request-id") or headers.get("request-id"))
        if reader is None:
            event_stream = "text/event-stream" in (headers.get("content-type") or "")
            encoding = None if decoded else headers.get("content-encoding")
            reader = AnswerReader(self.route.api, event_stream=event_stream, encoding=encoding)
        self.reader = reader
        if self.watch is not None and isinstance(reader, AnswerReader) and status < 400:
            reader.observer = self.watch.tools  # the tool calls this answer asks for

    def feed(self, chunk: bytes) -> None:
        try:
            reader = self.reader
            if reader is not None:
                reader.feed(chunk)
                if self.first_output_ns is None and reader.output_chars:
                    self.first_output_ns = time.monotonic_ns()
        except Exception:
            if self.reader is not None:
                self.reader.readable = False  # a reader that broke knows nothing: unknown, not wrong
            note_internal_error()

    # -- the end: exactly one of these finishes the call ------------------------------

    def ended(self) -> None:
        """The body was read to its end."""
        reader = self.reader
        if reader is not None:
            try:
                reader.end()
            except Exception:
                note_internal_error()
        status = self.http_status or 0
        if status >= 400:
            self.finish("err", "HTTPStatusError")
        elif reader is not None and reader.error_type is not None:
            self.finish("err", "ProviderError")
        elif reader is not None and reader.readable and not reader.complete:
            self.finish("err", "IncompleteStream")
        else:
            self.finish("ok", None)

    def wants_error_body(self) -> bool:
        """An error response closed before any of its body was read: an SDK about to
        retry does that. Its small body is then read (the caller is done with it) for the
        provider's error type, ``error_piece`` by ``error_piece``."""
        reader = self.reader
        return not self._done and (self.http_status or 0) >= 400 and reader is not None and reader.untouched

    def error_piece(self, chunk: bytes, deadline: float) -> bool:
        """Read one piece of an error body; False once ``_ERROR_BODY_MAX`` or the deadline is reached."""
        self.feed(chunk)
        self._error_bytes += len(chunk)
        return self._error_bytes <= _ERROR_BODY_MAX and time.monotonic() < deadline

    def abandoned(self) -> None:
        """The caller closed the body, or let go of it, before its end. Never raises."""
        if self._done:
            return
        try:
            reader = self.reader
            if reader is not None and reader.complete:
                self.ended()  # the answer was whole; the caller just did not read the rest
            elif (self.http_status or 0) >= 400:
                self.finish("err", "HTTPStatusError")
            else:
                self.finish("timeout", "CancelledError")
        except Exception:
            note_internal_error()

    def failed(self, exc: BaseException) -> None:
        """Sending, or reading the body, raised ``exc`` (re-raised by the caller)."""
        if is_cancelled(exc):
            self.finish("timeout", "CancelledError")
        else:
            self.finish("err", type(exc).__name__)

    def finish(self, outcome: str, error_class: str | None) -> None:
        with self._lock:
            if self._done:
                return
            self._done = True
        try:
            if self.reader is not None:
                self.reader.flush()
            self._count_attempt(outcome)
            fields = self._fields(error_class)
            watch = self.watch
            if watch is not None:
                fields.update(
                    watch.response_fields(outcome == "ok" and self.reader is not None and self.reader.readable)
                )
            _calls_seen.note(self.ctx.test_id, "llm", None, self.start_ns)
            if self.scope is None or not self.scope.enrich(fields, self.first_output_ns):
                latency = fields["latency_ms"]
                _emit_as(self.ctx, "backend.llm.call.response", fields, outcome=outcome, duration_ms=latency)
            if watch is not None and outcome == "ok":
                for metadata in watch.asked(time.monotonic_ns(), self.ctx):
                    _emit_as(self.ctx, "backend.tool.call.start", metadata)
        except Exception:
            note_internal_error()

    def _fields(self, error_class: str | None) -> dict[str, Any]:
        route, reader = self.route, self.reader
        now = time.monotonic_ns()
        first = self.first_output_ns
        completion = reader.completion_tokens if reader is not None else None
        # In the order a timeline row shows them: which attempt, what came back, then detail.
        return {
            "provider": route.provider,
            "model": route.model,
            "attempt": self.attempt,
            "http_status": self.http_status,
            "error_class": error_class,
            "error_type": _text(reader.error_type) if reader is not None else None,
            "retry_after_ms": self.retry_after_ms,
            "latency_ms": (now - self.start_ns) // 1_000_000,
            "ttft_ms": (first - self.start_ns) // 1_000_000 if first is not None else None,
            "output_chars": reader.output_chars if reader is not None and reader.readable else None,
            "finish_reason": _text(reader.finish_reason) if reader is not None else None,
            "prompt_tokens": reader.prompt_tokens if reader is not None else None,
            "completion_tokens": completion,
            "response_token_count": completion,
            "chunks": reader.chunks if reader is not None and reader.event_stream else None,
            "api": route.api,
            "stream": route.stream,
            "source": "http",
            "client": self.client,
            "request_id": self.request_id,
        }

    def _count_attempt(self, outcome: str) -> None:
        if self._retry_key is not None:
            between_calls.count(self._retry_key, outcome, self.attempt)


def _beat(ref: weakref.ref[Exchange]) -> bool:
    _end_let_go()
    exchange = ref()
    return exchange is not None and exchange.beat()


def _attempt(request: Any, test_id: str, path: str, content: bytes | None) -> tuple[int, Any]:
    """(attempt number, key to count failures under when the client sends no count)."""
    raw = request.headers.get(_RETRY_HEADER)
    if raw is not None:
        try:
            return max(0, int(raw)), None
        except ValueError:
            pass
    key = (test_id, path, hash(content))
    return between_calls.attempt(key), key


def _content(request: Any) -> bytes | None:
    try:
        return request.content
    except Exception:  # a streamed upload that was not read: no body to look at
        return None


def begin(request: Any, client: str | None = None, route: LLMRoute | None = None) -> Exchange | None:
    """An ``Exchange`` when ``request`` is an LLM call and cvdiag is on, else None. Never raises.

    ``request`` needs httpx's shape: ``method``, ``url.host``, ``url.path``, ``headers``
    (case-insensitive ``get``) and ``content``; ``client`` names the library that sends
    it; ``route`` skips recognition for a caller that recognised the request itself."""
    if not is_enabled() or _carried.get():
        return None
    try:
        url = request.url
        if route is None:
            route = recognise(request.method, url.host, url.path, functools.partial(_content, request))
        if route is None:
            if client not in _MCP_CLIENTS:
                return None
            return _mcp_capture.begin(request, functools.partial(_content, request))  # type: ignore[return-value]
        content = _content(request)
        ctx = current_context() or new_context()
        attempt, key = _attempt(request, ctx.test_id, url.path, content)
        exchange = Exchange(route, ctx, current_llm_call(), attempt, client)
        exchange._retry_key = key
        exchange.watch = watch = watch_request(ctx.test_id, route.api, content)
        for metadata, outcome, duration_ms in watch.results if watch is not None else ():
            _emit_as(ctx, "backend.tool.call.response", metadata, outcome=outcome, duration_ms=duration_ms)
        exchange.start()
        return exchange
    except Exception:
        note_internal_error()
        return None


def send_sync(exchange: Exchange, original: Any, client: Any, request: Any, kwargs: dict[str, Any]) -> Any:
    """``Client.send`` with the body observed: sent as a stream, then read if the caller wanted it read."""
    stream = kwargs.pop("stream", False)
    carried = _carried.set(True)
    try:
        response = original(client, request, stream=True, **kwargs)
    except BaseException as exc:
        exchange.failed(exc)
        raise
    finally:
        _carried.reset(carried)
    exchange.responded(response, _observed_types(type(client))[0])
    if not stream:
        try:
            response.read()
        except BaseException:
            response.close()
            raise
    return response


async def send_async(exchange: Exchange, original: Any, client: Any, request: Any, kwargs: dict[str, Any]) -> Any:
    """``AsyncClient.send`` with the body observed, as ``send_sync``."""
    stream = kwargs.pop("stream", False)
    carried = _carried.set(True)
    try:
        response = await original(client, request, stream=True, **kwargs)
    except BaseException as exc:
        exchange.failed(exc)
        raise
    finally:
        _carried.reset(carried)
    exchange.responded(response, _observed_types(type(client))[1])
    if not stream:
        try:
            await response.aread()
        except BaseException:
            await response.aclose()
            raise
    return response


# -- the observed byte streams, one pair per client library (httpx, httpx2) ------------


def _hurry(request: Any) -> float:
    """Make the transport's next reads of ``request``'s response give up after
    ``_ERROR_BODY_WAIT_S`` (httpcore reads its read timeout from the request's
    extensions when the body is first read); the deadline of the whole error body."""
    try:
        extensions = request.extensions
        extensions["timeout"] = {**(extensions.get("timeout") or {}), "read": _ERROR_BODY_WAIT_S}
    except Exception:  # a request without extensions: the deadline still bounds the pieces
        pass
    return time.monotonic() + _ERROR_BODY_WAIT_S


def _note_unless_timeout(exc: Exception) -> None:
    """A read timeout is the error body given up (``_hurry``); anything else is cvdiag's own failure."""
    if not any(klass.__name__ == "TimeoutException" for klass in type(exc).__mro__):
        note_internal_error()


def _interrupted(exchange: Any, exc: BaseException) -> None:
    """Reading the body stopped on ``exc``: the caller let go of it (``GeneratorExit``), or it
    failed. ``exchange``: an ``Exchange`` or an MCP one (``_mcp_capture``)."""
    if isinstance(exc, GeneratorExit):
        exchange.abandoned()
    else:
        exchange.failed(exc)


class _Observed:
    """A response byte stream that shows each chunk to its exchange and passes it on."""

    def __init__(self, inner: Any, exchange: Exchange, request: Any = None) -> None:
        self._inner = inner
        self._exchange = exchange
        self._request = request

    def __del__(self) -> None:  # a body nobody closed: the call still gets its one ending
        _let_go(self)


class _ObservedSync(_Observed):
    """The observed stream of a sync client."""

    def __iter__(self) -> Iterator[bytes]:
        exchange = self._exchange
        feed = exchange.feed
        try:
            for chunk in self._inner:
                feed(chunk)
                yield chunk
        except BaseException as exc:
            _interrupted(exchange, exc)
            raise
        exchange.ended()

    def close(self) -> None:
        exchange = self._exchange
        try:
            # An SDK closes an error body unread before it retries: read at most 64 KiB of
            # it for the provider's error type, as much as arrives within _ERROR_BODY_WAIT_S.
            if exchange.wants_error_body():
                deadline = _hurry(self._request)
                for chunk in self._inner:
                    if not exchange.error_piece(chunk, deadline):
                        break
                exchange.ended()
        except Exception as exc:
            _note_unless_timeout(exc)
        finally:  # whatever happened above, the call ends and the connection goes back
            exchange.abandoned()
            self._inner.close()


class _ObservedAsync(_Observed):
    """The async twin of ``_ObservedSync``."""

    async def __aiter__(self) -> AsyncIterator[bytes]:
        exchange = self._exchange
        feed = exchange.feed
        try:
            async for chunk in self._inner:
                feed(chunk)
                yield chunk
        except BaseException as exc:
            _interrupted(exchange, exc)
            raise
        exchange.ended()

    async def aclose(self) -> None:
        exchange = self._exchange
        try:
            if exchange.wants_error_body():  # as in ``close``; anyio: any loop (asyncio, trio)
                with anyio.move_on_after(_ERROR_BODY_WAIT_S * 2):  # a transport deaf to the timeout
                    await self._read_error_body(_hurry(self._request))
        except Exception as exc:
            _note_unless_timeout(exc)
        finally:  # a cancelled close still ends the call and releases the connection
            exchange.abandoned()
            await self._inner.aclose()

    async def _read_error_body(self, deadline: float) -> None:
        exchange = self._exchange
        async for chunk in self._inner:
            if not exchange.error_piece(chunk, deadline):
                break
        exchange.ended()


# Bodies nobody closed, found by the garbage collector. The collector runs at any
# allocation on any thread, possibly one holding a lock that ending a call takes, or
# during interpreter shutdown: ``__del__`` only queues the exchange (a deque append is
# atomic and takes no lock) and the next call's start or end, or a heartbeat, ends it.
def _let_go(stream: Any) -> None:
    exchange = stream.__dict__.get("_exchange")
    if exchange is not None and not exchange._done and not sys.is_finalizing():
        between_calls.let_go_later.append(exchange)


def let_go_when_collected(exchange: Exchange) -> None:
    """A response object's finalizer: its call is ended later, off the collector (as above)."""
    if not exchange._done:
        between_calls.let_go_later.append(exchange)


def watch_response(response: Any, exchange: Exchange, watched: type, key: str) -> None:
    """Give one response of a client the class that shows its bytes to ``exchange``
    (``watched``, a subclass with no state of its own), and end the call if the response
    is collected unread."""
    response.__dict__[key] = exchange
    response.__class__ = watched
    weakref.finalize(response, let_go_when_collected, exchange)


def _end_let_go() -> None:
    """End the calls whose bodies were collected unclosed. Never raises."""
    let_go_later = between_calls.let_go_later
    while let_go_later:
        try:
            let_go_later.popleft().abandoned()
        except IndexError:  # another thread took the last one
            return
        except Exception:
            count_internal_error()


_observed_cache: dict[str, tuple[type, type]] = {}


def _observed_types(client_type: type) -> tuple[type, type]:
    """The observed stream classes for a client's library: they must subclass that
    library's ``SyncByteStream``/``AsyncByteStream``, which ``Response`` checks for."""
    library = client_type.__module__.split(".", 1)[0]
    for klass in client_type.__mro__:
        if klass.__module__.split(".", 1)[0] in ("httpx", "httpx2"):
            library = klass.__module__.split(".", 1)[0]
            break
    found = _observed_cache.get(library)
    if found is None:
        module = importlib.import_module(library)
        found = (
            type("ObservedSyncStream", (_ObservedSync, module.SyncByteStream), {}),
            type("ObservedAsyncStream", (_ObservedAsync, module.AsyncByteStream), {}),
        )
        _observed_cache[library] = found
    return found
