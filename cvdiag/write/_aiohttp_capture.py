"""aiohttp: propagation and LLM calls.

The hook is ``ClientSession._request``, wrapped on the class: every request of every
session goes through it (``get``, ``post``, ``request``, ``ws_connect`` aside), it gets
the request's URL, headers and ``json``/``data`` body, and returns the
``ClientResponse``. That is why sessions created before ``instrument()`` are covered as
well as later ones. OpenTelemetry and Sentry add a ``TraceConfig`` in
``ClientSession.__init__`` instead, which misses sessions that already exist, and the
trace signals never carry the request body (the model and the stream flag are in it)
nor the response body. ddtrace wraps ``_request`` as this module does.

The body is watched where aiohttp's parser hands it over: the response's
``StreamReader`` has its class changed to ``_Watched``, a subclass with no state of its
own whose ``feed_data``, ``feed_eof`` and ``set_exception`` show each piece, the end and
a broken connection to the exchange, then do aiohttp's own work. Every way of reading
(``read()``, ``json()``, ``text()``, ``content.iter_chunked``, ``iter_any``,
``readline``, ``async for``) takes from that one buffer, so all are covered by one hook
that never touches the read path. aiohttp inflates gzip before ``feed_data`` (unless the
session says ``auto_decompress=False``). A response released or closed before its end
is a body given up (``abandoned``); the caller's cancellation lands there too.
"""

from __future__ import annotations

import json
import weakref
from typing import Any

from aiohttp import ClientSession
from aiohttp.client_exceptions import ClientResponseError
from aiohttp.streams import StreamReader
from multidict import CIMultiDict
from yarl import URL

from cvdiag.write import _llm_capture
from cvdiag.write._outgoing import Outgoing, Reading, as_bytes, missing_headers
from cvdiag.write.emitter import note_internal_error
from cvdiag.write.hooks import Patch

__all__ = ["CLIENT", "install", "uninstall"]

CLIENT = "aiohttp"


#: id(StreamReader) -> its exchange, while the body is being received.
_watching: dict[int, Any] = {}


def install(*, llm: bool) -> bool:
    """Wrap ``ClientSession._request`` (once); True when this call wrapped it."""
    reading.llm = llm
    return state.install()


def uninstall() -> None:
    state.uninstall()


async def _request(self: Any, method: str, str_or_url: Any, **kwargs: Any) -> Any:
    original = state.original
    if not state.on:
        return await original(self, method, str_or_url, **kwargs)
    exchange = None
    try:
        headers = kwargs.get("headers")
        extra = missing_headers(_names(headers, self.headers))
        if extra:
            merged = CIMultiDict(headers or ())
            merged.extend(extra)
            kwargs["headers"] = merged
        if reading.llm:
            exchange = _begin(self, method, str_or_url, kwargs)
    except Exception:
        note_internal_error()
    if exchange is None:
        return await original(self, method, str_or_url, **kwargs)
    try:
        response = await original(self, method, str_or_url, **kwargs)
    except ClientResponseError as exc:  # raise_for_status: the response is gone already
        try:
            exchange.answered(exc.status, exc.headers or {}, decoded=True)
            exchange.finish("err", "HTTPStatusError")
        except Exception:
            note_internal_error()
        raise
    except BaseException as exc:
        exchange.failed(exc)
        raise
    _watch(response, exchange, self.auto_decompress)
    return response


state = Patch(ClientSession, "_request", _request)
reading = Reading()


def _names(headers: Any, defaults: Any) -> list[str]:
    names = list(defaults.keys()) if defaults else []
    if headers:
        items = headers.keys() if hasattr(headers, "keys") else (name for name, _ in headers)
        names.extend(str(name) for name in items)
    return names


def _begin(session: Any, method: str, str_or_url: Any, kwargs: dict[str, Any]) -> Any:
    url = URL(str_or_url)
    if not url.absolute:
        base = getattr(session, "_base_url", None)
        url = base.join(url) if base is not None else url
    headers = CIMultiDict(kwargs.get("headers") or ())
    request = Outgoing(method, url.host or "", url.path, headers, lambda: _body(kwargs))
    return _llm_capture.begin(request, CLIENT)


def _body(kwargs: dict[str, Any]) -> bytes | None:
    if kwargs.get("json") is not None:
        try:
            return json.dumps(kwargs["json"]).encode()
        except (TypeError, ValueError):
            return None
    return as_bytes(kwargs.get("data"))


def _watch(response: Any, exchange: Any, decompressed: bool) -> None:
    """Observe ``response``'s body for ``exchange``. Never raises."""
    try:
        exchange.answered(response.status, response.headers, decoded=decompressed)
        content = response.content
        if type(content) is not StreamReader:  # no body (EmptyStreamReader) or not aiohttp's
            exchange.ended()
            return
        for piece in content._buffer:  # what arrived with the headers, not read yet
            exchange.feed(piece)
        if content.exception() is not None:
            exchange.failed(content.exception())
            return
        if content.is_eof():
            exchange.ended()
            return
        key = id(content)
        _watching[key] = exchange
        content.__class__ = _Watched
        for name in ("release", "close"):
            setattr(response, name, _GivenUp(getattr(response, name), content, exchange))
        weakref.finalize(response, _let_go, key, exchange)
    except Exception:
        note_internal_error()


def _let_go(key: int, exchange: Any) -> None:
    """The response was collected unreleased: end its call later, off the collector."""
    if _watching.get(key) is exchange:
        del _watching[key]
    _llm_capture.let_go_when_collected(exchange)


class _GivenUp:
    """``release``/``close`` of a watched response: a body not received whole by then was
    given up (or broke: the stream's exception says so), before aiohttp marks it closed."""

    __slots__ = ("_content", "_exchange", "_method")

    def __init__(self, method: Any, content: StreamReader, exchange: Any) -> None:
        self._method = method
        self._content = content
        self._exchange = exchange

    def __call__(self) -> Any:
        content, exchange = self._content, self._exchange
        if _watching.get(id(content)) is exchange:
            del _watching[id(content)]
            try:
                error = content.exception()
                if error is not None:
                    exchange.failed(error)
                else:
                    exchange.abandoned()
            except Exception:
                note_internal_error()
        return self._method()


class _Watched(StreamReader):
    """aiohttp's ``StreamReader``, showing what it is fed to the response's exchange."""

    __slots__ = ()

    def feed_data(self, data: bytes, size: int = 0) -> bool:
        exchange = _watching.get(id(self))
        if exchange is not None:
            exchange.feed(data)
        return StreamReader.feed_data(self, data, size)

    def feed_eof(self) -> None:
        StreamReader.feed_eof(self)
        exchange = _watching.pop(id(self), None)
        if exchange is not None:
            exchange.ended()

    def set_exception(self, exc: BaseException, *args: Any) -> None:
        exchange = _watching.pop(id(self), None)
        if exchange is not None:
            exchange.failed(exc)
        StreamReader.set_exception(self, exc, *args)


_Watched.__name__ = _Watched.__qualname__ = "StreamReader"
