"""The standard library's client (``http.client``, and so ``urllib.request``):
propagation and LLM calls.

The hooks are ``HTTPConnection.request``, which every request of ``urllib.request``
(``urlopen``, its handlers) and of code that uses ``http.client`` directly goes through,
and ``HTTPConnection.getresponse``. ``request`` adds the allow-listed headers the request
lacks (the test id first) to a copy of its headers and, for a recognised LLM call
(``llm_routes``), opens an ``Exchange``, kept on the connection until its response.
urllib3's connection is a subclass with a ``request`` of its own, so requests sent
through urllib3 never meet this hook (``_urllib3_capture`` sees them).

Watching changes the class of that one ``HTTPResponse`` to ``_Watched``, a subclass
with no state of its own that sees the bytes the caller reads (``read``, ``read1``,
``readinto``, ``readline``; one read inside another is seen once), and ``close``: a
body given up. The bytes, their order and the exceptions the caller gets are the
standard library's own.
"""

from __future__ import annotations

import http.client
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from cvdiag.write import _llm_capture
from cvdiag.write._outgoing import Outgoing, Reading, as_bytes, missing_headers
from cvdiag.write.emitter import note_internal_error
from cvdiag.write.hooks import Patch

__all__ = ["CLIENT", "install", "uninstall"]

CLIENT = "http.client"
_KEY = "_cvdiag_exchange"
_DEPTH = "_cvdiag_depth"


def install(*, llm: bool) -> bool:
    """Wrap ``HTTPConnection.request`` and ``getresponse`` (once); True when this call wrapped them."""
    reading.llm = llm
    wrapped = sending.install()
    answering.install()
    return wrapped


def uninstall() -> None:
    sending.uninstall()
    answering.uninstall()


def _request(self: Any, method: str, url: str, body: Any = None, headers: Any = None, **kwargs: Any) -> Any:
    original = sending.original
    if not sending.on:
        return original(self, method, url, body, {} if headers is None else headers, **kwargs)
    exchange = None
    try:
        headers = {} if headers is None else headers
        extra = missing_headers(headers)
        if extra:
            headers = {**headers, **extra}  # a copy: the caller's mapping is never changed
        if reading.llm:
            exchange = _begin(self, method, url, body, headers)
    except Exception:
        note_internal_error()
    if exchange is None:
        return original(self, method, url, body, headers, **kwargs)
    try:
        result = original(self, method, url, body, headers, **kwargs)
    except BaseException as exc:
        exchange.failed(exc)
        raise
    self.__dict__[_KEY] = exchange
    return result


sending = Patch(http.client.HTTPConnection, "request", _request)


def _getresponse(self: Any) -> Any:
    exchange = self.__dict__.pop(_KEY, None) if answering.on else None
    if exchange is None:
        return answering.original(self)
    try:
        response = answering.original(self)
    except BaseException as exc:
        exchange.failed(exc)
        raise
    _watch(response, exchange)
    return response


answering = Patch(http.client.HTTPConnection, "getresponse", _getresponse)
reading = Reading()


def _begin(conn: Any, method: str, url: str, body: Any, headers: Any) -> Any:
    path = urlsplit(url).path if "://" in url else url.split("?", 1)[0]
    lowered = {str(k).lower(): v for k, v in headers.items()}  # ``get`` must be case-insensitive
    request = Outgoing(method, conn.host or "", path or "/", lowered, lambda: as_bytes(body))
    return _llm_capture.begin(request, CLIENT, None)


def _watch(response: Any, exchange: Any) -> None:
    """Observe ``response``'s body for ``exchange``. Never raises."""
    try:
        exchange.answered(response.status, response.headers, decoded=False)
        if type(response) is not http.client.HTTPResponse or response.isclosed():
            exchange.feed(b"")
            exchange.ended()  # a HEAD, a 204: no body to watch; or someone else's class
            return
        _llm_capture.watch_response(response, exchange, _Watched, _KEY)
    except Exception:
        note_internal_error()
        exchange.ended()


def _seen(read: Callable[..., Any], consumed: Callable[[Any, Any, tuple[Any, ...]], bytes]) -> Callable[..., Any]:
    """``read`` with the bytes it took shown to the response's exchange; ``consumed``
    gives them from (result, buffer argument, args)."""

    def method(self: Any, *args: Any) -> Any:
        state = self.__dict__
        exchange = state.get(_KEY)
        if exchange is None or state.get(_DEPTH):
            return read(self, *args)
        state[_DEPTH] = 1
        try:
            result = read(self, *args)
        except BaseException as exc:
            state.pop(_KEY, None)
            exchange.failed(exc)
            raise
        finally:
            state.pop(_DEPTH, None)
        try:
            data = consumed(result, args[0] if args else None, args)
            if data:
                exchange.feed(data)
            asked = args[0] if args and not isinstance(args[0], (bytearray, memoryview)) else None
            if self.fp is None or (not data and asked != 0):
                state.pop(_KEY, None)
                exchange.ended()
        except Exception:
            note_internal_error()
        return result

    return method


def _returned(result: Any, _buffer: Any, _args: tuple[Any, ...]) -> bytes:
    return bytes(result or b"")


def _filled(result: Any, buffer: Any, _args: tuple[Any, ...]) -> bytes:
    return bytes(memoryview(buffer)[: result or 0])


class _Watched(http.client.HTTPResponse):
    """An ``HTTPResponse`` whose body bytes are shown to its exchange as the caller reads them."""

    read = _seen(http.client.HTTPResponse.read, _returned)
    read1 = _seen(http.client.HTTPResponse.read1, _returned)
    readline = _seen(http.client.HTTPResponse.readline, _returned)
    readinto = _seen(http.client.HTTPResponse.readinto, _filled)

    def close(self) -> None:
        exchange = self.__dict__.pop(_KEY, None)
        if exchange is not None and not self.__dict__.get(_DEPTH):
            exchange.abandoned()
        elif exchange is not None:
            self.__dict__[_KEY] = exchange  # closed by the library at the body's end, mid-read
        http.client.HTTPResponse.close(self)


_Watched.__name__ = _Watched.__qualname__ = "HTTPResponse"
