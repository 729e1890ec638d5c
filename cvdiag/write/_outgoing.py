"""What the aiohttp and urllib3 hooks share: an outgoing request in the shape
``_llm_capture.begin`` reads (httpx's), and the allow-listed headers a request lacks.

``begin`` was written against httpx's ``Request``; rather than teach it every client's
types, each hook describes its request with ``Outgoing`` (method, host, path, the
headers it will send, and its body only when asked for: recognition reads the body of a
request to an LLM path only).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

from cvdiag.write.propagation import outbound_headers

__all__ = ["Outgoing", "Reading", "missing_headers"]


class Reading:
    """What a client's hook reads on every call: whether LLM calls are recognised
    (``llm``) and Bedrock's routes read (``bedrock``); set by its ``install``."""

    __slots__ = ("bedrock", "llm")

    def __init__(self) -> None:
        self.llm = False
        self.bedrock = True


class _URL(NamedTuple):
    host: str
    path: str


class Outgoing:
    """An outgoing request as ``_llm_capture.begin`` reads it; the body is read once, on demand."""

    __slots__ = ("_body", "_content", "_read", "headers", "method", "url")

    def __init__(self, method: str, host: str, path: str, headers: Any, body: Callable[[], bytes | None]) -> None:
        self.method = method.upper()
        self.url = _URL(host or "", path or "/")
        #: Anything with a case-insensitive ``get`` (the retry count header is read from it).
        self.headers = headers
        self._body = body
        self._read = False
        self._content: bytes | None = None

    @property
    def content(self) -> bytes | None:
        if not self._read:
            self._read = True
            self._content = self._body()
        return self._content


def missing_headers(present: Iterable[str]) -> dict[str, str]:
    """The allow-listed headers of the bound context whose names are not in ``present``
    (compared case-insensitively): a header the caller set always wins."""
    wanted = outbound_headers()
    if not wanted:
        return wanted
    taken = {name.lower() for name in present}
    return {name: value for name, value in wanted.items() if name.lower() not in taken}


def as_bytes(body: Any) -> bytes | None:
    """A request body that is already in memory, as bytes; None for a stream or a form."""
    if isinstance(body, bytes):
        return body
    if isinstance(body, (bytearray, memoryview)):
        return bytes(body)
    if isinstance(body, str):
        return body.encode("utf-8", "replace")
    return None
