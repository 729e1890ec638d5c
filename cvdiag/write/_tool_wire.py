"""Tool calls seen in LLM traffic: the answer that asks for them, the request that answers.

No framework hook is needed: the model's answer names every tool call it wants (Chat
Completions ``tool_calls``, Responses ``function_call`` items, Anthropic ``tool_use``
blocks, Gemini ``functionCall`` parts) and a later request of the same conversation
carries each result (``role: tool`` messages, ``function_call_output`` items,
``tool_result`` blocks, ``functionResponse`` parts). ``AnswerTools`` reads the first as
the answer passes by; ``AskedCalls.results`` reads the second from the request body, which
the HTTP client has already serialised (nothing on the wire changes). The two are paired
by call id (Gemini has none: by name, in order) and written as backend.tool.call.start
(when the answer asked) and backend.tool.call.response (when the result came back).

Request bodies grow with the conversation, so only what is new is read: per test, the
byte offset where the last request's message array ended is remembered with the bytes
just before it; a body that still has those bytes there is read from that offset on.
A body is not read at all while no asked call waits for its result, and never beyond
``NEW_BYTES_MAX`` bytes. Arguments and results are never kept: their sizes, a hash of
the arguments, and the scrubbed start of a failed result.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import re
import threading
import time
from collections import OrderedDict, deque
from typing import Any

from cvdiag.contract.schema import TOOL_EXCERPT_MAX_CHARS, TOOL_NAMES_MAX
from cvdiag.contract.scrubber import scrub_clipped
from cvdiag.write._output_schema import ANSWER_CAP, Schema, requested
from cvdiag.write.context import RequestContext
from cvdiag.write.dialects import BY_API
from cvdiag.write.dialects._base import ToolResult
from cvdiag.write.dialects._json import clip as _clip
from cvdiag.write.emitter import emit_as, note_internal_error

__all__ = [
    "NEW_BYTES_MAX",
    "AnswerTools",
    "Asked",
    "AskedCalls",
    "Watch",
    "args_hash",
    "asked_calls",
    "close_waiting",
    "watch_request",
]

#: Argument text kept per asked call, for its hash (beyond: the hash of this much, and the length).
ARGS_KEEP = 1 << 16
#: Tool calls read from one answer; more are counted, not remembered.
CALLS_PER_ANSWER = 256
#: Asked calls waiting for their result, over all tests (the oldest is forgotten first).
PENDING_MAX = 4096
#: Tests whose conversations are remembered, and conversations per test.
TESTS_MAX = 256
CONVERSATIONS_PER_TEST = 8
#: A request body is read for tool results only up to this many new bytes.
NEW_BYTES_MAX = 4 << 20
#: Elements of a message array and tool results read from one request, at most.
ELEMENTS_MAX = 20_000
RESULTS_MAX = 1024
#: Bytes compared to recognise the same conversation again.
_WINDOW = 64

#: The dialects with tool calls, and where each request body's growing array starts.
_TOOL_DIALECTS = {api: d for api, d in BY_API.items() if d.tool_array is not None}
_ARRAY_AT = {api: re.compile(rb'"' + d.tool_array + rb'"\s*:\s*\[') for api, d in _TOOL_DIALECTS.items()}  # type: ignore[operator]
_SKIP = re.compile(r"\s*,?\s*")
_unnamed = itertools.count(1)
_NEW: Any = object()
#: Keys of calls beyond CALLS_PER_ANSWER remembered (so each is counted once), at most.
_KEYS_MAX = 1 << 14
_DECODER = json.JSONDecoder()


def args_hash(text: str) -> str:
    """8 hex digits of the normalised arguments (JSON with sorted keys), whatever their spacing."""
    if len(text) <= ARGS_KEEP:
        with contextlib.suppress(ValueError, TypeError, RecursionError):
            text = json.dumps(json.loads(text), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    else:
        text = f"{len(text)}:{text[:ARGS_KEEP]}"
    return hashlib.blake2s(text.encode("utf-8", "replace"), digest_size=4).hexdigest()


class Asked:
    """One tool call an answer asked for: its id and name, and its arguments' size and hash."""

    __slots__ = ("_args", "_kept", "args_chars", "call_id", "name")

    def __init__(self, call_id: str | None, name: str | None) -> None:
        self.call_id = call_id
        self.name = name
        self._args: list[str] = []
        self._kept = 0
        self.args_chars = 0

    def add_args(self, piece: str, *, whole: bool = False) -> None:
        if whole:
            self._args, self._kept, self.args_chars = [], 0, 0
        if not piece:
            return
        self.args_chars += len(piece)
        if self._kept <= ARGS_KEEP:
            self._args.append(piece)
            self._kept += len(piece)

    def args_text(self) -> str:
        return "".join(self._args)

    def start_line(self) -> dict[str, Any]:
        text = self.args_text()
        if self.args_chars > len(text):  # more than was kept: say so in the hash
            text = f"{self.args_chars}:{text}"
        return {
            "tool_name": self.name,
            "call_id": _clip(self.call_id),
            "source": "wire",
            "server": None,
            "args_chars": self.args_chars,
            "args_hash": args_hash(text),
        }


class AnswerTools:
    """The tool calls one LLM answer asks for, read as its body passes by (``AnswerReader``'s
    observer: ``block`` sees each block of whole SSE lines, ``body`` a parsed JSON body).
    Also keeps the answer's text when ``text_cap`` > 0, for structured-output checks."""

    __slots__ = ("_by_key", "_dialect", "_markers", "api", "calls", "dropped", "text", "text_cap", "text_size")
    _by_key: dict[Any, Asked | None]

    def __init__(self, api: str, text_cap: int = 0) -> None:
        self.api = api
        self._dialect = _TOOL_DIALECTS.get(api)
        self._markers = self._dialect.tool_markers if self._dialect is not None else ()
        self.calls: list[Asked] = []
        self._by_key = {}
        self.dropped = 0
        self.text_cap = text_cap
        self.text: list[str] | None = [] if text_cap > 0 else None
        self.text_size = 0

    # -- what was asked --------------------------------------------------------------

    def ask(self, key: Any, call_id: Any, name: Any) -> Asked | None:
        """The call under ``key`` (a stream's index, an id), new or seen before; None for a
        call beyond ``CALLS_PER_ANSWER``, which is counted once."""
        key = _key(key)
        found = self._by_key.get(key, _NEW)
        if found is None:  # counted already
            return None
        if found is not _NEW:
            if found.call_id is None and isinstance(call_id, str):
                found.call_id = call_id
            if found.name is None:
                found.name = _clip(name)
            return found
        if len(self.calls) >= CALLS_PER_ANSWER:
            self.dropped += 1
            if len(self._by_key) < _KEYS_MAX:
                self._by_key[key] = None
            return None
        asked = Asked(call_id if isinstance(call_id, str) else None, _clip(name))
        self.calls.append(asked)
        self._by_key[key] = asked
        return asked

    def seen(self, key: Any) -> bool:
        """Was a call under ``key`` read already (remembered or counted)?"""
        return _key(key) in self._by_key

    def asked_under(self, key: Any) -> Asked | None:
        """The call remembered under ``key``, if any."""
        return self._by_key.get(_key(key))

    def count(self) -> int:
        """Calls read so far, remembered or counted."""
        return len(self.calls) + self.dropped

    def said(self, piece: Any) -> None:
        """A piece of the answer's text (kept for the structured-output check)."""
        text = self.text
        if text is None or not isinstance(piece, str) or not piece:
            return
        self.text_size += len(piece)
        if self.text_size > self.text_cap:
            self.text = None  # too long to check: unknown
        else:
            text.append(piece)

    @property
    def answer_text(self) -> str | None:
        return "".join(self.text) if self.text is not None else None

    def names(self) -> list[str]:
        return [c.name or "" for c in self.calls[:TOOL_NAMES_MAX]]

    # -- event streams -----------------------------------------------------------------

    def block(self, block: bytes) -> None:
        """Read a block of whole SSE lines (only lines that can matter are parsed)."""
        markers = self._markers
        wanted = [m for m in markers if m in block]
        if not wanted and self.text is None:
            return
        read = self._dialect.tool_event if self._dialect is not None else None
        if read is None:
            return
        for line in block.split(b"\n"):
            if not line.startswith(b"data:"):
                continue
            if self.text is None and not any(m in line for m in wanted):
                continue
            try:
                event = json.loads(line[5:])
            except ValueError:
                continue
            if isinstance(event, dict):
                read(self, event)

    # -- JSON bodies ---------------------------------------------------------------------

    def body(self, body: Any) -> None:
        read = self._dialect.tool_body if self._dialect is not None else None
        if read is not None:
            for item in body if isinstance(body, list) else [body]:
                if isinstance(item, dict):
                    read(self, item)


def _key(value: Any) -> Any:
    """A call's key in an answer: its index or id as sent, or its repr when that is unhashable."""
    try:
        hash(value)
    except TypeError:
        return repr(value)[:256]
    return value


#: (metadata, outcome, duration_ms) of a backend.tool.call.response line to write.
_Line = tuple[dict[str, Any], str, int]


class _Pending:
    """An asked call waiting for its result; ``owner`` is the request context it was asked
    in (by identity), so that only the end of that request gives up on it."""

    __slots__ = ("asked_ns", "call_id", "name", "owner")

    def __init__(self, call_id: str | None, name: str | None, asked_ns: int, owner: object = None) -> None:
        self.call_id = call_id
        self.name = name
        self.asked_ns = asked_ns
        self.owner = owner


class _Conversation:
    """One conversation of a test, known by the first bytes of its message array: the
    structured output it asks for, and how long its array was in the last body read (with
    the bytes before its end), to read the next body from there. Lengths are kept
    relative to the array's start, which moves when a key before it changes."""

    __slots__ = ("head", "schema", "span", "tail")

    def __init__(self, body: bytes, start: int, schema: Schema | None) -> None:
        self.head = body[start : start + _WINDOW]
        self.schema = schema
        self.span: int | None = None
        self.tail = b""

    def is_in(self, body: bytes, start: int) -> bool:
        return body.startswith(self.head, start)

    def read_up_to(self, body: bytes, start: int, end: int) -> None:
        self.span = end - start
        self.tail = body[max(start, end - _WINDOW) : end]

    def end_in(self, body: bytes, start: int) -> int | None:
        """Where the last body's array ended in ``body``, if ``body`` still holds the same bytes there."""
        if self.span is None:
            return None
        end = start + self.span
        return end if len(body) > end and body[end - len(self.tail) : end] == self.tail else None


class Watch:
    """What one LLM request brings: the tool results it carries, the structured output it
    asks for, and the reader of the tool calls its answer will ask for."""

    __slots__ = ("results", "schema", "test_id", "tools")

    def __init__(self, test_id: str, api: str, schema: Schema | None) -> None:
        self.test_id = test_id
        self.schema = schema
        self.tools = AnswerTools(api, ANSWER_CAP if schema is not None else 0)
        #: (metadata, outcome, duration_ms) of the backend.tool.call.response lines to write.
        self.results: list[tuple[dict[str, Any], str, int]] = []

    def start_fields(self) -> dict[str, Any]:
        return {"output_schema": self.schema is not None}

    def response_fields(self, readable: bool) -> dict[str, Any]:
        """tool_calls, tool_names and output_valid of the answer (null when it was unreadable)."""
        tools = self.tools
        if not readable:
            return {"tool_calls": None, "tool_names": None, "output_valid": None}
        count = len(tools.calls) + tools.dropped
        valid = None
        if self.schema is not None:
            args = {c.name: c.args_text() for c in tools.calls if c.name == self.schema.tool}
            valid = self.schema.check(tools.answer_text, args)
        return {"tool_calls": count, "tool_names": tools.names() if count else None, "output_valid": valid}

    def asked(self, now_ns: int, owner: object = None) -> list[dict[str, Any]]:
        """The backend.tool.call.start lines of a complete answer; its calls wait for
        results (``owner``: the request context they were asked in)."""
        calls = self.tools.calls
        if not calls:
            return []
        asked_calls.asked(self.test_id, calls, now_ns, owner)
        return [call.start_line() for call in calls]


class AskedCalls:
    """Asked calls waiting for their results and each test's conversations, bounded, in
    one place so that ``reset()`` forgets them for the next test."""

    __slots__ = (
        "by_name",
        "claimed",
        "conversations",
        "lock",
        "pending",
        "skipped_bodies",
        "skipped_bytes",
        "unpaired",
        "waiting",
    )

    def __init__(self) -> None:
        self.lock = threading.Lock()
        #: (test id, call id) -> the asked call, oldest first.
        self.pending: OrderedDict[tuple[str, str], _Pending] = OrderedDict()
        #: (test id, tool name) -> asked calls without an id (Gemini), oldest first.
        self.by_name: OrderedDict[tuple[str, str], deque[_Pending]] = OrderedDict()
        #: test id -> how many asked calls wait for a result.
        self.waiting: dict[str, int] = {}
        #: test id -> its conversations, most recent last.
        self.conversations: OrderedDict[str, list[_Conversation]] = OrderedDict()
        #: (test id, call id) of asked calls a span wrote the response of (``claim``).
        self.claimed: OrderedDict[tuple[str, str], None] = OrderedDict()
        #: Request bodies not read (too big, malformed), bytes not read again, results of no known call.
        self.skipped_bodies = 0
        self.skipped_bytes = 0
        self.unpaired = 0

    def reset(self) -> None:
        with self.lock:
            self.pending.clear()
            self.by_name.clear()
            self.waiting.clear()
            self.conversations.clear()
            self.claimed.clear()
            self.skipped_bodies = self.skipped_bytes = self.unpaired = 0

    # -- the answer asked --------------------------------------------------------------

    def asked(self, test_id: str, calls: list[Asked], now_ns: int, owner: object = None) -> None:
        """Remember calls an answer asked for, to pair with their results later."""
        with self.lock:
            for call in calls:
                pending = _Pending(call.call_id, call.name, now_ns, owner)
                if call.call_id is not None:
                    key = (test_id, call.call_id)
                    if key not in self.pending:
                        self._wait(test_id, 1)
                    self.pending[key] = pending
                    self.pending.move_to_end(key)
                elif call.name is not None:
                    # No id (Gemini): paired by name in order; the lines get an id of cvdiag's.
                    call.call_id = pending.call_id = f"{call.name[:40]}#{next(_unnamed)}"
                    queue = self.by_name.setdefault((test_id, call.name), deque())
                    queue.append(pending)
                    self._wait(test_id, 1)
            self._bound()

    def _wait(self, test_id: str, delta: int) -> None:
        left = self.waiting.get(test_id, 0) + delta
        if left > 0:
            self.waiting[test_id] = left
        else:
            self.waiting.pop(test_id, None)

    def _bound(self) -> None:
        while len(self.pending) > PENDING_MAX:
            (test_id, _), _ = self.pending.popitem(last=False)
            self._wait(test_id, -1)
        while len(self.by_name) > PENDING_MAX:
            (test_id, _), queue = self.by_name.popitem(last=False)
            self._wait(test_id, -len(queue))

    def _take(self, test_id: str, result: ToolResult) -> _Pending | None:
        if result.call_id is not None:
            found = self.pending.pop((test_id, result.call_id), None)
            if found is not None:
                self._wait(test_id, -1)
                return found
        if result.name is not None:
            queue = self.by_name.get((test_id, result.name))
            if queue:
                self._wait(test_id, -1)
                found = queue.popleft()
                if not queue:
                    del self.by_name[(test_id, result.name)]
                return found
        return None

    def claim(self, test_id: str, call_id: str | None, name: str | None) -> str | None:
        """An asked call whose tool a span saw end (by call id, else the oldest of that
        name): its call id, and the span writes its response, so the result that comes
        back later writes none. None when no asked call of this test matches."""
        if not self.waiting.get(test_id):
            return None
        with self.lock:
            found = self.pending.pop((test_id, call_id), None) if call_id is not None else None
            if found is None and name is not None:
                key = next((k for k, p in self.pending.items() if k[0] == test_id and p.name == name), None)
                found = self.pending.pop(key) if key is not None else None
                if found is None:
                    found = self._take(test_id, ToolResult(None, name, None))
                    if found is not None:
                        return found.call_id
            if found is None or found.call_id is None:
                return None
            self._wait(test_id, -1)
            self.claimed[(test_id, found.call_id)] = None
            while len(self.claimed) > PENDING_MAX:
                self.claimed.popitem(last=False)
            return found.call_id

    def abandon(self, test_id: str, owner: object, error_kind: str, now_ns: int) -> list[_Line]:
        """The backend.tool.call.response lines (outcome ``timeout``) of the calls asked in
        the request context ``owner`` that still wait, forgotten. Nothing to scan (O(1))
        while no call of the test waits; else one pass over the bounded waiting calls."""
        if owner is None or not self.waiting.get(test_id):
            return []
        lines = []
        with self.lock:
            for key in [k for k, p in self.pending.items() if k[0] == test_id and p.owner is owner]:
                lines.append(_abandoned(self.pending.pop(key), error_kind, now_ns))
                self._wait(test_id, -1)
            for key in [k for k in self.by_name if k[0] == test_id]:
                queue = self.by_name[key]
                kept = deque(p for p in queue if p.owner is not owner)
                lines.extend(_abandoned(p, error_kind, now_ns) for p in queue if p.owner is owner)
                self._wait(test_id, len(kept) - len(queue))
                if kept:
                    self.by_name[key] = kept
                else:
                    del self.by_name[key]
        lines.sort(key=lambda line: -line[2])  # in the order they were asked
        return lines

    # -- a request -----------------------------------------------------------------------

    def request(self, test_id: str, api: str, body: bytes | None) -> Watch | None:
        """The ``Watch`` of an LLM request: its tool results paired with the calls that
        asked for them, its structured output. None for an api without tools. Never raises."""
        if api not in _TOOL_DIALECTS:
            return None
        at = _ARRAY_AT[api].search(body) if body else None
        if body is None or at is None:
            return Watch(test_id, api, requested(body))
        start = at.end() - 1  # the "["
        with self.lock:
            known = self.conversations.get(test_id) or []
            conversation = next((c for c in reversed(known) if c.is_in(body, start)), None)
        if conversation is None:
            conversation = _Conversation(body, start, requested(body))
            self._remember(test_id, conversation)
        watch = Watch(test_id, api, conversation.schema)
        if self.waiting.get(test_id):
            watch.results = self._results(test_id, api, body, conversation, start)
        return watch

    def _results(
        self, test_id: str, api: str, body: bytes, conversation: _Conversation, start: int
    ) -> list[tuple[dict[str, Any], str, int]]:
        reader = _TOOL_DIALECTS[api].tool_results
        results: list[ToolResult] = []
        for element in self._new_elements(api, body, conversation, start):
            if len(results) >= RESULTS_MAX:
                break
            if isinstance(element, dict):
                reader(element, results)  # type: ignore[misc]
        now = time.monotonic_ns()
        lines = []
        # When a history repeats a call id (a mock's fixed ids), the newest result answers.
        last = {result.call_id: n for n, result in enumerate(results) if result.call_id is not None}
        with self.lock:
            for n, result in enumerate(results):
                pending = self._take(test_id, result) if last.get(result.call_id, n) == n else None
                if pending is None:
                    if self.claimed.pop((test_id, result.call_id or ""), False) is False:
                        self.unpaired += 1  # neither an asked call nor a span's answered it
                    continue
                lines.append(result_line(pending, result, now))
        return lines

    def _new_elements(self, api: str, body: bytes, conversation: _Conversation, start: int) -> list[Any]:
        """The array elements of ``body`` after the last turn boundary, read from where the
        conversation's last body ended when it still holds the same bytes. Bounded."""
        end = conversation.end_in(body, start)
        fresh = end is None
        offset = start if end is None else end
        if len(body) - offset > NEW_BYTES_MAX:
            self.skipped_bodies += 1
            self.skipped_bytes += len(body) - offset
            return []
        self.skipped_bytes += offset - start  # read before: not read again
        try:
            text = body[offset:].decode("utf-8")
            elements, array_end = _elements(text, fresh=fresh)
        except (ValueError, RecursionError, IndexError):
            self.skipped_bodies += 1
            return []
        if array_end is not None:
            conversation.read_up_to(body, start, len(body) - len(text[array_end:].encode("utf-8")))
        if not fresh:
            return elements
        turn = _TOOL_DIALECTS[api].turn_boundary
        boundaries = [i for i, e in enumerate(elements) if isinstance(e, dict) and turn(e)]  # type: ignore[misc]
        return elements[boundaries[-1] + 1 :] if boundaries else elements

    def _remember(self, test_id: str, conversation: _Conversation) -> None:
        with self.lock:
            known = self.conversations.setdefault(test_id, [])
            known.append(conversation)
            del known[:-CONVERSATIONS_PER_TEST]
            self.conversations.move_to_end(test_id)
            while len(self.conversations) > TESTS_MAX:
                self.conversations.popitem(last=False)


def _elements(text: str, *, fresh: bool) -> tuple[list[Any], int | None]:
    """The JSON values of an array in ``text`` (from its ``[``, or from just after an
    element already read: ``,`` and more elements), and the index of its ``]``.

    One ``raw_decode`` of the whole (rest of the) array, so the parsing runs in the json
    module's C scanner, not element by element in Python. Raises ValueError when it is
    not a JSON array, RecursionError when it nests too deep."""
    shift = 0
    if not fresh:
        gap = _SKIP.match(text)
        i = gap.end()  # type: ignore[union-attr]
        if "," not in gap.group():  # type: ignore[union-attr]
            return [], (i if text[i : i + 1] == "]" else None)  # nothing new (or not an array)
        text, shift = "[" + text[i:], i - 1
    value, end = _DECODER.raw_decode(text)
    if not isinstance(value, list):
        raise ValueError("not an array")
    return value[:ELEMENTS_MAX], end - 1 + shift


def result_line(pending: _Pending, result: ToolResult, now_ns: int) -> tuple[dict[str, Any], str, int]:
    """The backend.tool.call.response line of an asked call and its result."""
    failed = result.error_kind is not None
    metadata = {
        "tool_name": pending.name or result.name,
        "call_id": _clip(pending.call_id or result.call_id),
        "source": "wire",
        "server": None,
        "result_chars": result.result_chars,
        "error_kind": result.error_kind,
        "error_excerpt": scrub_clipped(result.excerpt, TOOL_EXCERPT_MAX_CHARS) if failed and result.excerpt else None,
    }
    return metadata, "err" if failed else "ok", max(0, (now_ns - pending.asked_ns) // 1_000_000)


def _abandoned(pending: _Pending, error_kind: str, now_ns: int) -> tuple[dict[str, Any], str, int]:
    """The line of a call whose result never came back: outcome timeout, ``error_kind`` as
    the request ended (``raised`` or ``timeout``), its duration up to that end."""
    metadata = {
        "tool_name": pending.name,
        "call_id": _clip(pending.call_id),
        "source": "wire",
        "server": None,
        "result_chars": None,
        "error_kind": error_kind,
        "error_excerpt": None,
    }
    return metadata, "timeout", max(0, (now_ns - pending.asked_ns) // 1_000_000)


asked_calls = AskedCalls()


def watch_request(test_id: str, api: str, body: bytes | None) -> Watch | None:
    """``asked_calls.request``, with a failure of cvdiag's own counted, never raised (but in strict mode)."""
    try:
        return asked_calls.request(test_id, api, body)
    except Exception:
        note_internal_error()
        return None


def close_waiting(ctx: RequestContext | None, *, raised: bool) -> None:
    """Give up on the wire calls asked in request ``ctx`` that still wait for their result,
    when the request ends abnormally (the middleware's terminal, or the outermost
    ``agent_scope``): one backend.tool.call.response each, outcome ``timeout``,
    ``error_kind`` ``raised`` when the app's own exception ended it, else ``timeout``.
    Never raises (but in strict mode)."""
    if ctx is None:
        return
    try:
        lines = asked_calls.abandon(ctx.test_id, ctx, "raised" if raised else "timeout", time.monotonic_ns())
        for metadata, outcome, duration_ms in lines:
            emit_as(ctx, "backend.tool.call.response", metadata, outcome=outcome, duration_ms=duration_ms)
    except Exception:
        note_internal_error()
