"""urllib3 (and so ``requests`` and botocore): propagation and LLM calls.

The hook is ``HTTPConnectionPool.urlopen``, the one method every request of ``requests``,
botocore and urllib3's own ``PoolManager`` goes through (OpenTelemetry's urllib3
instrumentation wraps the same method). It adds the allow-listed headers the request
lacks to a copy of its headers, and for a recognised LLM call (``llm_routes``, or a
Bedrock Runtime route, ``_bedrock``) opens an ``Exchange`` and watches the response.

Watching changes the class of that one ``HTTPResponse`` to ``_Watched``, a subclass with
no state of its own that sees the raw bytes where urllib3 takes them off the
connection: ``_raw_read`` (``read()``, ``stream()``, ``read1()``, ``raw.read``) and, for a
chunked body (``stream()`` over ``read_chunked``, which ``requests``' ``iter_content``
uses), ``_handle_chunk``; ``_update_chunk_length`` sees the last chunk and a broken one;
``close`` a body given up. The bytes, their order and the exceptions the caller gets
are urllib3's own. A request that urllib3 retries or redirects inside one ``urlopen`` is
one attempt; ``requests`` and botocore switch those off and retry above urllib3, where
each ``urlopen`` is an attempt (botocore numbers them: ``amz-sdk-request``).
"""

from __future__ import annotations

import email.message
import threading
from threading import get_ident
from typing import Any

from urllib3.connectionpool import HTTPConnectionPool
from urllib3.response import HTTPResponse
from urllib3.util.response import is_fp_closed
from urllib3.util.url import parse_url

from cvdiag.write import _bedrock, _llm_capture
from cvdiag.write._errors import CANCELLED
from cvdiag.write._outgoing import Outgoing, Reading, as_bytes, missing_headers
from cvdiag.write.emitter import note_internal_error
from cvdiag.write.hooks import Patch

__all__ = ["CLIENT", "install", "uninstall"]

CLIENT = "urllib3"
_KEY = "_cvdiag_exchange"
_BUSY = "_cvdiag_reading_in"
_RETRY_HEADER = "x-stainless-retry-count"


#: Set while a watched ``urlopen`` runs in this thread: urllib3's own retries and
#: redirects re-enter ``urlopen``, and they belong to the attempt already open.
_inside = threading.local()


def install(*, llm: bool, bedrock: bool) -> bool:
    """Wrap ``HTTPConnectionPool.urlopen`` (once); True when this call wrapped it."""
    reading.llm, reading.bedrock = llm, bedrock
    return state.install()


def uninstall() -> None:
    state.uninstall()


def _urlopen(self: Any, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
    original = state.original
    if not state.on or getattr(_inside, "busy", False):
        return original(self, method, url, *args, **kwargs)
    exchange = operation = None
    try:
        body, headers = _body_and_headers(self, args, kwargs)
        extra = missing_headers(headers or ())
        if extra:
            headers = _with(headers, self.headers, extra)
            if len(args) >= 2:
                args = (args[0], headers, *args[2:])
            else:
                kwargs["headers"] = headers
        if reading.llm:
            exchange, operation = _begin(self, method, url, body, headers)
    except Exception:
        note_internal_error()
    if exchange is None:
        return original(self, method, url, *args, **kwargs)
    preload = args[10] if len(args) > 10 else kwargs.get("preload_content", True)
    _inside.busy = True
    try:
        response = original(self, method, url, *args, **kwargs)
    except BaseException as exc:
        exchange.failed(exc)
        raise
    finally:
        _inside.busy = False
    _watch(response, exchange, operation, preload)
    return response


state = Patch(HTTPConnectionPool, "urlopen", _urlopen)
reading = Reading()


def _body_and_headers(pool: Any, args: tuple, kwargs: dict[str, Any]) -> tuple[Any, Any]:
    body = args[0] if args else kwargs.get("body")
    headers = args[1] if len(args) >= 2 else kwargs.get("headers")
    return body, headers if headers is not None else pool.headers


def _with(headers: Any, defaults: Any, extra: dict[str, str]) -> Any:
    """A copy of the request's headers (urllib3 sends the pool's when there are none), of
    the same type, with ``extra`` appended: the caller's own mapping is never changed.
    botocore's ``HTTPHeaders`` is an email ``Message`` (repeatable, values may be bytes);
    dict, ``requests``' ``CaseInsensitiveDict`` and ``HTTPHeaderDict`` have ``copy``."""
    source = headers if headers is not None else defaults
    if isinstance(source, email.message.Message):
        merged = type(source)()
        for name, value in source.items():
            merged[name] = value
    else:
        merged = source.copy()
    for name, value in extra.items():
        merged[name] = value
    return merged


def _begin(pool: Any, method: str, url: str, body: Any, headers: Any) -> tuple[Any, str | None]:
    """(exchange or None, Bedrock operation or None)."""
    parsed = parse_url(url)
    host = parsed.host or pool.host or ""
    path = parsed.path or "/"
    get = headers.get if headers is not None else (lambda name, default=None: default)
    route = operation = None
    request_headers: Any = headers if headers is not None else {}
    if reading.bedrock:
        found = _bedrock.recognise_bedrock(method, path)
        if found is not None:
            route, operation = found
            attempt = _bedrock.attempt_of(_text(get("amz-sdk-request")))
            request_headers = {_RETRY_HEADER: str(attempt)} if attempt is not None else {}
    request = Outgoing(method, host, path, request_headers, lambda: as_bytes(body))
    return _llm_capture.begin(request, CLIENT, route), operation


def _text(value: Any) -> str | None:
    if isinstance(value, bytes):
        return value.decode("latin-1")
    return value if isinstance(value, str) else None


def _watch(response: Any, exchange: Any, operation: str | None, preloaded: bool) -> None:
    """Observe ``response``'s body for ``exchange``. Never raises."""
    try:
        headers = response.headers
        reader = None
        if operation is not None:
            encoding = None if preloaded else headers.get("content-encoding")
            reader = _bedrock.BedrockReader(operation, headers, encoding=encoding)
        exchange.answered(response.status, headers, decoded=preloaded, reader=reader)
        if operation is not None and exchange.request_id is None:
            exchange.request_id = _llm_capture._text(headers.get("x-amzn-requestid"))
        if preloaded or type(response) is not HTTPResponse:
            # Read already (``preload_content``), or a response class of someone else's.
            exchange.feed(response.data if preloaded else b"")
            exchange.ended()
            return
        _llm_capture.watch_response(response, exchange, _Watched, _KEY)
    except Exception:
        note_internal_error()
        exchange.ended()


def _caller_sees(exc: BaseException) -> str:
    """The class name urllib3's ``_error_catcher`` turns a low-level read error into."""
    if isinstance(exc, TimeoutError):
        return "ReadTimeoutError"
    import http.client

    if isinstance(exc, (http.client.HTTPException, OSError)):
        return "ProtocolError"
    return type(exc).__name__


class _Watched(HTTPResponse):
    """An ``HTTPResponse`` whose raw body bytes are shown to its exchange on the way.

    While ``_update_chunk_length`` runs, the instance notes the thread it runs in: urllib3
    closes the response itself there before it raises a broken chunk, and that ``close``
    must not read as a body the caller gave up, whereas a ``close`` from another thread
    (an app that gives up on a body a worker thread is still reading) is exactly that.
    A call already ended that way ignores the read error that follows."""

    def _raw_read(self, amt: int | None = None, *, read1: bool = False) -> bytes:
        state = self.__dict__
        exchange = state.get(_KEY)
        if exchange is None:
            return HTTPResponse._raw_read(self, amt, read1=read1)
        try:
            data = HTTPResponse._raw_read(self, amt, read1=read1)
        except BaseException as exc:
            state.pop(_KEY, None)
            exchange.failed(exc)
            raise
        if data:
            exchange.feed(data)
        if (not data and amt != 0) or is_fp_closed(self._fp) or _final(exchange):
            state.pop(_KEY, None)
            exchange.ended()
        return data

    def _handle_chunk(self, amt: int | None) -> bytes:
        state = self.__dict__
        exchange = state.get(_KEY)
        if exchange is None:
            return HTTPResponse._handle_chunk(self, amt)
        try:
            chunk = HTTPResponse._handle_chunk(self, amt)
        except BaseException as exc:
            state.pop(_KEY, None)
            _broken(exchange, exc)
            raise
        exchange.feed(chunk)
        if _final(exchange):
            state.pop(_KEY, None)
            exchange.ended()
        return chunk

    def _update_chunk_length(self) -> None:
        state = self.__dict__
        exchange = state.get(_KEY)
        if exchange is None:
            HTTPResponse._update_chunk_length(self)
            return
        state[_BUSY] = get_ident()
        try:
            HTTPResponse._update_chunk_length(self)
        except BaseException as exc:
            state.pop(_KEY, None)
            _broken(exchange, exc)
            raise
        finally:
            state.pop(_BUSY, None)
        if self.chunk_left == 0:  # the last chunk: the body is whole
            state.pop(_KEY, None)
            exchange.ended()

    def close(self) -> None:
        state = self.__dict__
        if state.get(_BUSY) != get_ident():
            exchange = state.pop(_KEY, None)
            if exchange is not None:
                exchange.abandoned()
        HTTPResponse.close(self)

    def __del__(self) -> None:
        # Collected unclosed: the finalizer queues the call; do not end it from here.
        self.__dict__.pop(_KEY, None)
        HTTPResponse.__del__(self)


def _final(exchange: Any) -> bool:
    """The answer's reader knows the answer is over before its body ends (Bedrock's
    exception frame, after which botocore raises and reads no further)."""
    return getattr(exchange.reader, "final", False)


def _broken(exchange: Any, exc: BaseException) -> None:
    if isinstance(exc, CANCELLED):
        exchange.failed(exc)
    else:
        exchange.finish("err", _caller_sees(exc))


_Watched.__name__ = _Watched.__qualname__ = "HTTPResponse"
