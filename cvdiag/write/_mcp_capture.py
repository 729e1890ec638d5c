"""MCP tool calls: JSON-RPC ``tools/call`` over streamable HTTP, and the ``mcp`` SDK's session.

Two places see an MCP tool call, and each call is written once, as one pair of
backend.tool.call.start/response lines with ``source: mcp``:

* ``ClientSession.call_tool`` of the ``mcp`` SDK, wrapped by ``install_session()`` (from
  ``instrument_httpx()``): it writes the start in the caller's context (the request that
  runs the agent) and, for a session whose transport is not HTTP (stdio), the response
  when the call returns or raises: ``isError`` or an ``MCPError`` is ``protocol``, a
  closed stream or a lost process is ``transport``, a cancellation or time-out ``timeout``.
* An HTTP POST whose body is a JSON-RPC request, seen by the httpx capture (``begin``):
  ``tools/call`` (and a failed ``initialize`` or ``tools/list``). The exchange claims the
  session's open call of that tool, so it writes the response only (in the session call's
  context); without a session (another client) it writes both lines. The answer may be
  JSON or an event stream; a JSON-RPC error or ``isError`` is ``protocol``, a server that
  could not be reached or a stream that ended without the result ``transport``, a call
  the client gave up on ``timeout``.

* The stdio client's spawn (``mcp.client.stdio._create_platform_compatible_process``, which
  ``stdio_client`` looks up at each call): a server whose process could not start (a
  command that does not exist) fails before any session exists, and is written as an
  ``initialize`` that failed on its ``transport``, the server named after the command.

* The stdio server's start: the spawn and the session's ``initialize`` together are one
  ``backend.tool.server.start`` (its duration is the time to a ready server); one that
  starts and dies before answering is that line failed, with the real exception (never
  the ``ExceptionGroup`` around it) and the last lines of its stderr (``_stderr_tail``),
  and an ``initialize`` tool call that failed, as for a spawn that failed. The same
  stderr tail goes on a tool call the server failed (its SDK says only "Error executing
  tool …" to the client).

The server is the name its ``initialize`` answer gave (``serverInfo.name``), else its host.
Arguments and results are never kept: sizes, the hash, the scrubbed start of an error.
"""

from __future__ import annotations

import contextvars
import functools
import itertools
import json
import os
import re
import sys
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from cvdiag.contract.schema import TOOL_EXCERPT_MAX_CHARS
from cvdiag.contract.scrubber import scrub_clipped
from cvdiag.write import _calls_seen, _stderr_tail, hooks
from cvdiag.write._errors import is_cancelled
from cvdiag.write._tool_failures import HEAD_CHARS
from cvdiag.write._tool_wire import args_hash
from cvdiag.write.context import RequestContext, current_context, new_context
from cvdiag.write.emitter import emit_as, is_enabled, note_internal_error
from cvdiag.write.hooks import Hook, Patch

__all__ = ["McpExchange", "begin", "install_session", "uninstall_session"]

#: A JSON-RPC request body is parsed when it is at most this big.
REQUEST_MAX = 1 << 20
#: An MCP answer is kept for reading up to this many bytes (beyond: read as far as kept).
RESPONSE_MAX = 1 << 20
#: Server names remembered (by server URL), and session calls waiting for their POST.
_SERVERS_MAX = 256
_OPEN_MAX = 1024
#: ``server/discover`` is how the mcp SDK 2.x client opens a session (before or instead of
#: ``initialize``): a server that cannot be reached fails there.
_WATCHED = frozenset({"tools/call", "initialize", "server/discover", "tools/list"})
_NAME_MAX = 64
_DATA = re.compile(rb"^data:[ ]?(.*)$", re.MULTILINE)
_ids = itertools.count(1)
#: JSON-RPC error codes the mcp SDK raises for its own transport (mcp_types.jsonrpc): the
#: connection closed (the server died), the request timed out.
_RPC_KINDS = {-32000: "transport", -32001: "timeout", 408: "timeout"}


class _SessionCall:
    """A ``call_tool`` in flight: the HTTP exchange that carries it claims it."""

    __slots__ = ("call_id", "claimed", "ctx", "name", "server", "start_ns", "stdio")

    def __init__(self, name: str, server: str | None, ctx: RequestContext, stdio: _StdioServer | None = None) -> None:
        self.name = name
        self.server = server
        self.ctx = ctx
        self.stdio = stdio
        self.call_id = f"mcp-{next(_ids)}"
        self.claimed = False
        self.start_ns = time.monotonic_ns()


class _SessionsSeen:
    """Server names by URL and the session calls in flight, bounded; ``reset()`` forgets them."""

    __slots__ = ("lock", "open_calls", "servers")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.servers: OrderedDict[str, str] = OrderedDict()
        self.open_calls: OrderedDict[int, _SessionCall] = OrderedDict()

    def reset(self) -> None:
        with self.lock:
            self.servers.clear()
            self.open_calls.clear()

    def server_named(self, url: str, name: str) -> None:
        with self.lock:
            self.servers[url] = name[:_NAME_MAX]
            self.servers.move_to_end(url)
            while len(self.servers) > _SERVERS_MAX:
                self.servers.popitem(last=False)

    def opened(self, call: _SessionCall) -> None:
        with self.lock:
            self.open_calls[id(call)] = call
            while len(self.open_calls) > _OPEN_MAX:
                self.open_calls.popitem(last=False)

    def closed(self, call: _SessionCall) -> None:
        with self.lock:
            self.open_calls.pop(id(call), None)

    def watching(self, test_id: str, name: str | None) -> bool:
        """Whether a session call of this tool is in flight for this test."""
        with self.lock:
            return any(c.name == name and c.ctx.test_id == test_id for c in self.open_calls.values())

    def claim(self, name: str | None) -> _SessionCall | None:
        """The oldest unclaimed session call of this tool, now claimed by its HTTP exchange."""
        with self.lock:
            for call in self.open_calls.values():
                if not call.claimed and call.name == name:
                    call.claimed = True
                    return call
        return None


sessions_seen = _SessionsSeen()
watching = sessions_seen.watching


class _StdioServer:
    """A stdio server this context spawned: its program, when the spawn began, the tee of
    its stderr (None where there is none), and whether its start was written yet."""

    __slots__ = ("__weakref__", "command", "start_ns", "started", "tee")

    def __init__(self, command: str | None, start_ns: int, tee: _stderr_tail.Tee | None) -> None:
        self.command = command
        self.start_ns = start_ns
        self.tee = tee
        self.started = False

    def stderr_tail(self) -> str | None:
        return self.tee.tail() if self.tee is not None else None


#: The stdio server spawned last in this context (``stdio_client`` spawns it in the task
#: that then opens the session), and each session's server once it initialised.
_spawned: contextvars.ContextVar[_StdioServer | None] = contextvars.ContextVar("cvdiag_mcp_spawned", default=None)
_by_session: weakref.WeakKeyDictionary[Any, _StdioServer] = weakref.WeakKeyDictionary()


def _program(command: Any) -> str | None:
    """The program's name only (never its directory or arguments)."""
    if command is None:
        return None
    return os.path.basename(str(command).rstrip("/\\"))[:_NAME_MAX] or None


def _leaf(exc: BaseException) -> BaseException:
    """The first real exception inside (nested) exception groups: what went wrong."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _clip(value: Any) -> str | None:
    return str(value)[:_NAME_MAX] if value is not None else None


def _excerpt(text: str | None) -> str | None:
    return scrub_clipped(text[:HEAD_CHARS].strip(), TOOL_EXCERPT_MAX_CHARS) if text else None


def _args(arguments: Any) -> tuple[int, str]:
    text = json.dumps(arguments or {}, separators=(",", ":"), ensure_ascii=False, default=str)
    return len(text), args_hash(text)


def _result_text(result: Any) -> str:
    """The text parts of a ``tools/call`` result (a dict from the wire)."""
    parts = result.get("content") if isinstance(result, dict) else None
    texts = [p.get("text") for p in parts or () if isinstance(p, dict) and isinstance(p.get("text"), str)]
    if texts:
        return "\n".join(texts)
    structured = result.get("structuredContent") if isinstance(result, dict) else None
    return json.dumps(structured, separators=(",", ":"), default=str) if structured is not None else ""


def _start(ctx: RequestContext, tool: str | None, call_id: str, server: str | None, arguments: Any) -> None:
    chars, digest = _args(arguments)
    emit_as(
        ctx,
        "backend.tool.call.start",
        {
            "tool_name": _clip(tool),
            "call_id": call_id,
            "source": "mcp",
            "server": server,
            "args_chars": chars,
            "args_hash": digest,
        },
    )


def _response(
    ctx: RequestContext,
    tool: str | None,
    call_id: str,
    server: str | None,
    start_ns: int,
    *,
    result_chars: int | None,
    error_kind: str | None,
    excerpt: str | None,
    stderr_tail: str | None = None,
) -> None:
    outcome = "ok" if error_kind is None else "timeout" if error_kind == "timeout" else "err"
    _calls_seen.note(ctx.test_id, "tool", _clip(tool), start_ns)
    emit_as(
        ctx,
        "backend.tool.call.response",
        {
            "tool_name": _clip(tool),
            "call_id": call_id,
            "source": "mcp",
            "server": server,
            "result_chars": result_chars,
            "error_kind": error_kind,
            "error_excerpt": _excerpt(excerpt) if error_kind is not None else None,
            "stderr_tail": stderr_tail if error_kind is not None else None,
        },
        outcome=outcome,
        duration_ms=(time.monotonic_ns() - start_ns) // 1_000_000,
    )


def _server_start(
    ctx: RequestContext,
    server: str | None,
    command: str | None,
    start_ns: int,
    exc: BaseException | None,
    tail: str | None,
) -> None:
    """One ``backend.tool.server.start``: a stdio server spawned and initialised, or not."""
    leaf = _leaf(exc) if exc is not None else None
    emit_as(
        ctx,
        "backend.tool.server.start",
        {
            "server": server,
            "transport": "stdio",
            "command": command,
            "error_class": type(leaf).__name__ if leaf is not None else None,
            "error_excerpt": _excerpt(str(leaf)) if leaf is not None else None,
            "stderr_tail": tail if leaf is not None else None,
        },
        outcome="ok" if leaf is None else "timeout" if _failure_kind(leaf) == "timeout" else "err",
        duration_ms=(time.monotonic_ns() - start_ns) // 1_000_000,
    )


def _failure_kind(exc: BaseException) -> str:
    """How a call that raised failed: cancelled or timed out, the server's error, or its transport."""
    if is_cancelled(exc) or isinstance(exc, TimeoutError):
        return "timeout"
    names = {klass.__name__ for klass in type(exc).__mro__}
    if "MCPError" in names or "McpError" in names:
        code = getattr(getattr(exc, "error", None), "code", None)
        return _RPC_KINDS.get(code, "protocol")
    return "transport"


# -- streamable HTTP -------------------------------------------------------------------


class McpExchange:
    """One JSON-RPC POST to an MCP server, with the same surface as an LLM ``Exchange``
    (``responded``, ``feed``, ``ended``, ``abandoned``, ``failed``), so the httpx capture
    observes its answer the same way. Never raises."""

    __slots__ = (
        "__weakref__",
        "_done",
        "_event_stream",
        "_kept",
        "_lock",
        "_message",
        "_overflow",
        "_pieces",
        "arguments",
        "call_id",
        "ctx",
        "http_status",
        "method",
        "rpc_id",
        "server",
        "server_url",
        "session_call",
        "start_ns",
        "tool",
    )

    def __init__(self, method: str, rpc_id: Any, params: dict, server_url: str, host: str) -> None:
        self.method = method
        self.rpc_id = rpc_id
        self.tool = params.get("name") if method == "tools/call" else method
        self.arguments = params.get("arguments")
        self.server_url = server_url
        self.server = sessions_seen.servers.get(server_url) or host
        self.session_call = sessions_seen.claim(self.tool) if method == "tools/call" else None
        call = self.session_call
        self.ctx = call.ctx if call is not None else current_context() or new_context()
        self.call_id = call.call_id if call is not None else f"mcp-{next(_ids)}"
        self.start_ns = time.monotonic_ns()
        self.http_status: int | None = None
        self._event_stream = False
        self._pieces: list[bytes] = []
        self._kept = 0
        self._message: dict | None = None
        self._overflow = False
        self._done = False
        self._lock = threading.Lock()

    def start(self) -> None:
        if self.method == "tools/call" and self.session_call is None:
            _start(self.ctx, self.tool, self.call_id, self.server, self.arguments)

    # -- what came back ----------------------------------------------------------------

    def responded(self, response: Any, observed: type) -> None:
        try:
            self.http_status = response.status_code
            self._event_stream = "text/event-stream" in (response.headers.get("content-type") or "")
            if response.is_stream_consumed:
                self.feed(response.content)
                self.ended()
                return
            response.stream = observed(response.stream, self)
        except Exception:
            note_internal_error()

    def feed(self, chunk: bytes) -> None:
        """Keep a JSON answer (up to ``RESPONSE_MAX``); read an event stream line by line,
        keeping only its unfinished last line."""
        if self._message is not None or self._overflow or not chunk:
            return
        self._pieces.append(chunk)
        self._kept += len(chunk)
        if self._event_stream and b"\n" in chunk:
            data = b"".join(self._pieces)
            cut = data.rfind(b"\n") + 1
            rest = data[cut:]
            self._pieces, self._kept = ([rest] if rest else []), len(rest)
            self._find_in_events(data[:cut])
        if self._kept > RESPONSE_MAX:  # too big to read: the result stays unknown, not failed
            self._overflow = True
            self._pieces, self._kept = [], 0

    def _find_in_events(self, lines: bytes) -> None:
        """Look for this request's answer among whole SSE lines."""
        for match in _DATA.finditer(lines):
            message = _loads(match.group(1))
            if self._answers(message):
                self._message = message
                self._pieces = []
                return

    def _answers(self, message: Any) -> bool:
        return (
            isinstance(message, dict)
            and message.get("id") == self.rpc_id
            and ("result" in message or "error" in message)
        )

    def wants_error_body(self) -> bool:
        return False

    def error_piece(self, chunk: bytes) -> bool:
        return False

    # -- the end: exactly one of these finishes ------------------------------------------

    def ended(self) -> None:
        self._read_rest()
        if self._message is not None:
            self._finish_with(self._message)
        elif self._overflow and (self.http_status or 0) < 400:
            self._finish(None, None, None)  # an answer too big to read: not a failure seen
        elif (self.http_status or 0) >= 400:
            self._finish("transport", f"HTTP {self.http_status} from the MCP server", None)
        else:
            self._finish("transport", "the MCP server's answer ended without a result", None)

    def abandoned(self) -> None:
        """The client closed the answer: with its result read (the SDK closes the stream
        once it has it), or before (it gave up: a time-out or cancellation)."""
        if self._done:
            return
        self._read_rest()
        if self._message is not None:
            self._finish_with(self._message)
        else:
            self._finish("timeout", "the MCP client gave up before the result", None)

    def failed(self, exc: BaseException) -> None:
        kind = "timeout" if is_cancelled(exc) else "transport"
        self._finish(kind, f"{type(exc).__name__}: {exc}", None)

    def _read_rest(self) -> None:
        try:
            if self._message is not None or not self._pieces:
                return
            if self._event_stream:
                self._find_in_events(b"".join(self._pieces))
                return
            message = _loads(b"".join(self._pieces))
            for item in message if isinstance(message, list) else [message]:
                if self._answers(item):
                    self._message = item
        except Exception:
            note_internal_error()

    def _finish_with(self, message: dict) -> None:
        error = message.get("error")
        if error is not None and self.method == "server/discover":
            self._finish(None, None, None)  # a server without discovery: the client falls back to initialize
            return
        if error is not None:
            text = error.get("message") if isinstance(error, dict) else str(error)
            code = error.get("code") if isinstance(error, dict) else None
            self._finish("protocol", f"{text} (JSON-RPC {code})" if code is not None else text, None)
            return
        result = message.get("result")
        if self.method == "initialize":
            name = result.get("serverInfo", {}).get("name") if isinstance(result, dict) else None
            if isinstance(name, str) and name:
                sessions_seen.server_named(self.server_url, name)
        text = _result_text(result) if self.method == "tools/call" else ""
        if isinstance(result, dict) and result.get("isError") is True:
            self._finish("protocol", text or f"tool {self.tool} returned an error", len(text))
        else:
            self._finish(None, None, len(text))

    def _finish(self, kind: str | None, excerpt: str | None, result_chars: int | None) -> None:
        with self._lock:
            if self._done:
                return
            self._done = True
        self._pieces = []
        try:
            call = self.session_call
            if call is not None:
                sessions_seen.closed(call)  # its session wrapper writes nothing more
            if self.method != "tools/call":
                if kind is None:
                    return  # a healthy initialize or tools/list is not a tool call
                _start(self.ctx, self.tool, self.call_id, self.server, None)
            _response(
                self.ctx,
                self.tool,
                self.call_id,
                call.server if call is not None and call.server else self.server,
                call.start_ns if call is not None else self.start_ns,
                result_chars=result_chars,
                error_kind=kind,
                excerpt=excerpt,
            )
        except Exception:
            note_internal_error()


def _loads(data: bytes) -> Any:
    try:
        return json.loads(data)
    except (ValueError, RecursionError):
        return None


_JSONRPC = b'"jsonrpc"'
_METHOD = re.compile(rb'"method"\s*:\s*"([a-z/_]{1,40})"')


def begin(request: Any, read_body: Callable[[], bytes | None]) -> McpExchange | None:
    """An ``McpExchange`` for a JSON-RPC POST worth watching (``tools/call``, ``initialize``,
    ``tools/list``), else None. Cheap for every other request: one bounded byte search."""
    if request.method != "POST":
        return None
    content = read_body()
    if not content or content.find(_JSONRPC, 0, 256) < 0:
        return None
    method = _METHOD.search(content, 0, 4096)
    if method is None or method.group(1).decode() not in _WATCHED or len(content) > REQUEST_MAX:
        return None
    body = _loads(content)
    if not isinstance(body, dict) or body.get("method") not in _WATCHED or "id" not in body:
        return None
    url = request.url
    host = f"{url.host}:{url.port}" if url.port else url.host
    params = body.get("params") if isinstance(body.get("params"), dict) else {}
    exchange = McpExchange(body["method"], body["id"], params, f"{host}{url.path}", host)
    exchange.start()
    return exchange


# -- the mcp SDK's client session (stdio, and any other transport) ---------------------

#: The attributes of the ``mcp`` SDK wrapped so far (``uninstall_session`` takes them out).
_patches: list[Patch] = []


def _server_of(session: Any) -> str | None:
    try:
        info = session.server_info
        name = getattr(info, "name", None)
    except Exception:
        return None
    return name[:_NAME_MAX] if isinstance(name, str) and name else None


def _session_done(call: _SessionCall, result: Any, exc: BaseException | None) -> None:
    """Write the response of a session call that no HTTP exchange carried (stdio)."""
    sessions_seen.closed(call)
    if call.claimed:
        return
    if exc is not None:
        leaf = _leaf(exc)
        kind: str | None = _failure_kind(leaf)
        excerpt: str | None = f"{type(leaf).__name__}: {leaf}"
        chars = None
    else:
        wire = _wire_result(result)
        text = _result_text(wire)
        kind = "protocol" if wire.get("isError") is True else None
        excerpt = text or f"tool {call.name} returned an error"
        chars = len(text)
    _response(
        call.ctx,
        call.name,
        call.call_id,
        call.server,
        call.start_ns,
        result_chars=chars,
        error_kind=kind,
        excerpt=excerpt,
        stderr_tail=call.stdio.stderr_tail() if kind is not None and call.stdio is not None else None,
    )


def _wire_result(result: Any) -> dict:
    """A ``CallToolResult`` as the wire has it (camelCase keys), or an empty dict."""
    try:
        dumped = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    except Exception:
        return {}
    return dumped if isinstance(dumped, dict) else {}


def _wrap_call_tool(original: Any) -> Any:
    @functools.wraps(original)
    async def call_tool(self: Any, name: Any, arguments: Any = None, *args: Any, **kwargs: Any) -> Any:
        call = None
        if is_enabled():
            try:
                call = _SessionCall(
                    str(name), _server_of(self), current_context() or new_context(), _by_session.get(self)
                )
                sessions_seen.opened(call)
                _start(call.ctx, call.name, call.call_id, call.server, arguments)
            except Exception:
                note_internal_error()
                call = None
        try:
            result = await original(self, name, arguments, *args, **kwargs)
        except BaseException as exc:
            if call is not None:
                _quietly(_session_done, call, None, exc)
            raise
        if call is not None:
            _quietly(_session_done, call, result, None)
        return result

    return call_tool


def _quietly(fn: Any, *args: Any) -> None:
    try:
        fn(*args)
    except Exception:
        note_internal_error()


# -- a stdio server's start -------------------------------------------------------------


def _spawn_failed(command: Any, start_ns: int, exc: BaseException, tail: str | None) -> None:
    """A stdio server that could not start (its process could not be spawned, or it ended
    before its ``initialize`` answer): one ``initialize`` tool call that failed on its
    transport and a failed ``backend.tool.server.start``, named after the command (no
    session, so no server name, exists)."""
    call_id = f"mcp-{next(_ids)}"
    server = _program(command)
    ctx = current_context() or new_context()
    leaf = _leaf(exc)
    _start(ctx, "initialize", call_id, server, None)
    _response(
        ctx,
        "initialize",
        call_id,
        server,
        start_ns,
        result_chars=None,
        error_kind="transport",
        excerpt=f"{type(leaf).__name__}: {leaf}",
        stderr_tail=tail,
    )
    _server_start(ctx, server, server, start_ns, leaf, tail)


def _wrap_spawn(original: Any) -> Any:
    """``stdio_client`` spawns the server through this module function, looked up at each
    call, so wrapping it reaches every ``stdio_client`` however it was imported. While
    cvdiag is on, the server's stderr passes through a ``Tee`` on its way to the app's
    ``errlog``."""

    @functools.wraps(original)
    async def spawn(*args: Any, **kwargs: Any) -> Any:
        start_ns = time.monotonic_ns()
        tee = _tee(args, kwargs) if is_enabled() else None
        if tee is not None:
            if len(args) >= 4:
                args = (*args[:3], tee.errlog, *args[4:])
            else:
                kwargs["errlog"] = tee.errlog
        try:
            process = await original(*args, **kwargs)
        except Exception as exc:  # a cancellation is not a spawn failure
            if is_enabled():
                _quietly(_spawn_failed, kwargs.get("command", args[0] if args else None), start_ns, exc, None)
            raise
        finally:
            if tee is not None:
                tee.started()
        if is_enabled():
            _spawned.set(_StdioServer(_program(kwargs.get("command", args[0] if args else None)), start_ns, tee))
        return process

    return spawn


def _tee(args: tuple, kwargs: dict) -> _stderr_tail.Tee | None:
    """A tee of the ``errlog`` the SDK was given (its default: ``sys.stderr``), or None
    where there can be none (not POSIX, an errlog without a file descriptor)."""
    if os.name != "posix":
        return None
    errlog = args[3] if len(args) >= 4 else kwargs.get("errlog", sys.stderr)
    try:
        return _stderr_tail.Tee(errlog)
    except Exception:
        return None


def _wrap_initialize(original: Any) -> Any:
    """The session's ``initialize``: with the spawn before it, a stdio server's start."""

    @functools.wraps(original)
    async def initialize(self: Any, *args: Any, **kwargs: Any) -> Any:
        server = _spawned.get()
        if server is None or server.started or not is_enabled():
            return await original(self, *args, **kwargs)
        server.started = True
        try:
            result = await original(self, *args, **kwargs)
        except BaseException as exc:
            if not is_cancelled(exc):
                _quietly(_spawn_failed, server.command, server.start_ns, exc, server.stderr_tail())
            raise
        _by_session[self] = server
        _quietly(_initialized, self, server)
        return result

    return initialize


def _initialized(session: Any, server: _StdioServer) -> None:
    ctx = current_context() or new_context()
    _server_start(ctx, _server_of(session) or server.command, server.command, server.start_ns, None, None)


# -- installing the wrappers -------------------------------------------------------------

_SESSION_MODULE = "mcp.client.session"
_STDIO_MODULE = "mcp.client.stdio"


def _wrap_session() -> None:
    session = getattr(sys.modules[_SESSION_MODULE], "ClientSession", None)
    _patch(session, "initialize", _wrap_initialize)
    _patch(session, "call_tool", _wrap_call_tool)


def _wrap_stdio() -> None:
    _patch(sys.modules[_STDIO_MODULE], "_create_platform_compatible_process", _wrap_spawn)


def _patch(owner: Any, attr: str, around: Callable[[Any], Any]) -> None:
    """Put ``around(original)`` in place of ``owner.attr``, once."""
    if owner is None or any(p.owner is owner and p.attr == attr for p in _patches):
        return
    patch = Patch(owner, attr, around=around)
    patch.install()
    _patches.append(patch)


def _unpatch() -> None:
    while _patches:
        _patches.pop().uninstall()


#: The ``mcp`` SDK's modules wrapped, each once the app imports it (importing ``mcp`` here
#: would add a second or more to every app's start-up), in the versions known to work.
SESSION_HOOK = Hook("mcp", _SESSION_MODULE, _wrap_session, _unpatch, "mcp", ">=1.2,<3")
STDIO_HOOK = Hook("mcp.client.stdio", _STDIO_MODULE, _wrap_stdio, _unpatch, "mcp", ">=1.6,<3")


def install_session() -> bool:
    """Wrap ``mcp.ClientSession.call_tool`` and the stdio client's spawn: now for the
    modules the app has imported already, the others as soon as it does. Idempotent;
    True when the session's wrapper is in place."""
    hooks.enable(SESSION_HOOK)
    hooks.enable(STDIO_HOOK)
    return any(p.attr == "call_tool" for p in _patches)


def uninstall_session() -> None:
    """Undo ``install_session`` (a wrapper someone put over ours stays, passing through)."""
    hooks.disable(SESSION_HOOK)
    hooks.disable(STDIO_HOOK)
