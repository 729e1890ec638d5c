"""Read an LLM provider's answer as its bytes pass by: incremental, bounded, read-only.

An ``AnswerReader`` is fed the raw bytes of one HTTP response body (as the caller
consumes them, in whatever pieces the network delivered) and keeps a handful of facts:
how much text and tool-call argument the model produced, the finish reason, token
usage, stream events, the provider's error type, and whether the stream reached its
terminal event. It never holds the whole body: a server-sent-event stream is scanned
line block by line block with only the unfinished last line kept (capped); a JSON body
is kept up to ``JSON_CAP`` bytes and parsed once at the end.

The per-chunk path is the hot one (an SDK streams hundreds of events per answer, and a
bare client spends only a few µs on each). Until the first output is seen every chunk is
read at once (its time is the first-token time); after that a chunk is only appended to
a batch, and a batch of about 16 KiB is read in one go. A batch is read with C-level
``bytes`` operations over the whole block (``split`` on a key, ``map`` of ``find`` and
slices, one ``json.loads`` for all escaped strings at once): no Python loop runs per
event. Regexes and ``json.loads`` of whole events run only where a fact is (the final
event's finish reason and usage, errors, Gemini tool calls). Content-Encoding gzip and
deflate are inflated here, for reading only, in bounded steps.
"""

from __future__ import annotations

import json
import re
import zlib
from itertools import compress, repeat
from operator import itemgetter, methodcaller, not_
from typing import Any

from cvdiag.contract.schema import LLM_APIS
from cvdiag.write.dialects import BY_API
from cvdiag.write.dialects._base import OutputKey, StreamFacts
from cvdiag.write.dialects._json import ERROR_TYPE_MAX as _ERROR_TYPE_MAX

__all__ = ["API_NAMES", "JSON_CAP", "LINE_CAP", "AnswerReader", "error_type_of"]

#: The wire formats cvdiag reads (the ``api`` metadata key).
API_NAMES: tuple[str, ...] = tuple(api for api in LLM_APIS if api != "other")
#: A JSON (non-streamed) body is parsed when it is at most this big; beyond, facts stay unknown.
JSON_CAP = 1 << 20
#: An unfinished SSE line longer than this keeps only its head and its tail (``_CLIP`` each).
LINE_CAP = 1 << 16
_CLIP = 1 << 13
#: Inflate at most this much per step, so a small compressed chunk cannot balloon in memory.
_INFLATE_STEP = 1 << 16
#: Once output has begun, whole SSE lines are read in batches of about this many bytes.
_BATCH = 1 << 14

# A JSON string body after its opening quote.
_BODY = re.compile(rb'([^"\\]*(?:\\.[^"\\]*)*)"')
# Constant arguments for ``map`` over the pieces of a block (``repeat`` never runs out).
_QUOTE, _BACKSLASH = repeat(b'"'), repeat(b"\\")
_FIRST = itemgetter(0)
_DECODE = methodcaller("decode", "utf-8", "replace")


#: How each api's event stream says its facts (an unknown api is read as chat would be).
_STREAMS: dict[str, StreamFacts] = {api: d.stream for api, d in BY_API.items() if d.stream is not None}
_READ_JSON = {api: d.read_json for api, d in BY_API.items() if d.read_json is not None}


def error_type_of(body: Any) -> str | None:
    """The provider's error type or code in a parsed error body (any provider), or None.

    OpenAI ``{"error": {"code": "rate_limit_exceeded", "type": ...}}`` (the code is the
    more precise), Anthropic ``{"type": "error", "error": {"type": "overloaded_error"}}``,
    Gemini ``{"error": {"code": 429, "status": "RESOURCE_EXHAUSTED"}}``, a Responses
    ``response.failed`` event ``{"response": {"error": {"code": ...}}}``, and an error
    event ``{"type": "error", "code": ...}``.
    """
    if isinstance(body, list) and body:
        body = body[0]
    if not isinstance(body, dict):
        return None
    error = body.get("error")
    if error is None and isinstance(body.get("response"), dict):
        error = body["response"].get("error")
    if error is None and body.get("type") == "error":
        error = body
    if isinstance(error, dict):
        for key in ("code", "type", "status"):
            value = error.get(key)
            if isinstance(value, str) and value and value != "error":
                return value[:_ERROR_TYPE_MAX]
        return "error"
    if isinstance(error, str) and error:
        return error[:_ERROR_TYPE_MAX]
    return None


def _chars(raw: bytes) -> int:
    """Characters of a JSON string body (escapes decoded)."""
    if b"\\" not in raw:
        return len(raw) if raw.isascii() else len(raw.decode("utf-8", "replace"))
    try:
        return len(json.loads(b'"' + raw + b'"'))
    except ValueError:
        return len(raw)


def _all_chars(raws: list[bytes]) -> int:
    """``sum(map(_chars, raws))``, with one ``json.loads`` for all of them when they all parse."""
    try:
        return sum(map(len, json.loads(b'["' + b'","'.join(raws) + b'"]')))
    except (ValueError, TypeError):
        return sum(map(_chars, raws))


def _output_chars(block: bytes, key: OutputKey) -> int:
    """Characters of every string value of ``key`` in ``block`` (escapes decoded).

    When every value in the block has one of the key's two usual forms, the block is split
    there and each body cut at its closing quote by a ``map`` of ``partition``, and measured
    joined: all in C, no Python loop per event. Escaped bodies (where the cut may have
    stopped at ``\\"``) are read again by ``_BODY`` and decoded by one ``json.loads``. Any
    other mix (a value that is not a string, other spaces) sends the whole block through
    the key's pattern."""
    count = block.count(key.key)
    for form in key.forms:
        parts = block.split(form)
        if len(parts) == count + 1:
            break
    else:
        return _all_chars([m[1] for m in key.pattern.finditer(block)])
    del parts[0]
    if parts and b'"' not in parts[-1]:
        del parts[-1]  # no closing quote: not a string value
    values = list(map(_FIRST, map(bytes.partition, parts, _QUOTE)))
    joined = b"".join(values)
    odd: list[bytes] = []
    if b"\\" in joined:  # an escape, maybe an escaped quote the cut stopped at
        escaped = list(map(bytes.__contains__, values, _BACKSLASH))
        odd = [m[1] for m in map(_BODY.match, compress(parts, escaped)) if m]
        values = list(compress(values, map(not_, escaped)))
        joined = b"".join(values)
    total = len(joined) if joined.isascii() else sum(map(len, map(_DECODE, values)))
    return total + _all_chars(odd) if odd else total


def _last(pattern: re.Pattern[bytes], block: bytes) -> re.Match[bytes] | None:
    """The last match of ``pattern`` (which starts with a quoted key) in ``block``: tried at
    the key's last place first, so a fact every event repeats (Gemini's usage) costs one
    search from the end rather than a regex pass over the block."""
    key = pattern.pattern[: pattern.pattern.index(b'"', 1) + 1]
    match = pattern.match(block, max(block.rfind(key), 0))
    if match is None:
        for match in pattern.finditer(block):  # noqa: B007 - the last one is wanted
            pass
    return match


def _inflater(encoding: str | None) -> Any:
    """A zlib decompressor for the body's Content-Encoding; None when plain; False when unreadable."""
    enc = (encoding or "").strip().lower()
    if enc in ("", "identity"):
        return None
    if enc in ("gzip", "x-gzip"):
        return zlib.decompressobj(zlib.MAX_WBITS | 16)
    if enc == "deflate":
        return zlib.decompressobj(zlib.MAX_WBITS | 32)  # zlib or gzip header; raw deflate below
    return False


class AnswerReader:
    """What one LLM response body said, read incrementally. ``feed`` never raises.

    ``event_stream`` selects SSE scanning (``text/event-stream``) over a JSON body.
    ``readable`` turns False when the body cannot be read (an unknown encoding, a
    corrupt gzip): then the facts stay unknown rather than wrong.
    """

    __slots__ = (
        "_batching",
        "_cr",
        "_dialect",
        "_inflate",
        "_json",
        "_json_size",
        "_pending",
        "_pending_size",
        "_raw_deflate",
        "_tail",
        "api",
        "chunks",
        "clipped_lines",
        "completion_tokens",
        "error_type",
        "event_stream",
        "finish_reason",
        "observer",
        "output_chars",
        "prompt_tokens",
        "readable",
        "terminal",
    )

    def __init__(self, api: str, *, event_stream: bool, encoding: str | None = None) -> None:
        self.api = api
        self.event_stream = event_stream
        self._dialect = _STREAMS.get(api) or _STREAMS["chat.completions"]
        inflate = _inflater(encoding)
        self.readable = inflate is not False
        self._inflate = inflate or None
        self._raw_deflate = (encoding or "").strip().lower() == "deflate"
        self._tail = b""
        self._cr = False
        self._batching = False
        self._pending: list[bytes] = []
        self._pending_size = 0
        self._json: list[bytes] | None = [] if not event_stream else None
        self._json_size = 0
        self.chunks = 0
        self.output_chars: int | None = 0 if event_stream and api != "embeddings" else None
        self.finish_reason: str | None = None
        self.prompt_tokens: int | None = None
        self.completion_tokens: int | None = None
        self.error_type: str | None = None
        self.terminal = False
        self.clipped_lines = 0
        #: Shown every block of whole SSE lines and the parsed JSON body (tool calls, text).
        self.observer: Any = None

    # -- input -------------------------------------------------------------------------

    def feed(self, data: bytes) -> None:
        """Read the next raw bytes of the body (still content-encoded)."""
        if self._batching:
            # The hot path: a plain event stream whose output has begun (the first-token
            # time is taken). Bytes wait in a batch, so the fixed cost of reading is paid
            # per batch, not per event.
            self._pending.append(data)
            self._pending_size += len(data)
            if self._pending_size >= _BATCH:
                self.flush()
            return
        if not self.readable or not data:
            return
        if self._inflate is None:
            self._take(data)
            return
        try:
            inflate = self._inflate
            self._take(inflate.decompress(data, _INFLATE_STEP))
            while inflate.unconsumed_tail:
                self._take(inflate.decompress(inflate.unconsumed_tail, _INFLATE_STEP))
        except zlib.error:
            if self._raw_deflate:  # some servers send deflate without the zlib header
                self._raw_deflate = False
                self._inflate = zlib.decompressobj(-zlib.MAX_WBITS)
                self.feed(data)
            else:
                self.readable = False
        self._raw_deflate = False

    def end(self) -> None:
        """The body ended (cleanly): read what is still buffered."""
        if not self.readable:
            return
        if self._inflate is not None:
            try:
                self._take(self._inflate.flush())
            except zlib.error:
                self.readable = False
                return
        if self.event_stream:
            self.flush()
            if self._tail:
                tail, self._tail = self._tail, b""
                self._scan(tail + b"\n")
            return
        pieces, self._json = self._json, None
        if pieces is None:
            return
        try:
            body = json.loads(b"".join(pieces))
        except ValueError:
            self.readable = False
            return
        self._read_json(body)

    @property
    def untouched(self) -> bool:
        """Nothing of the body has been read yet."""
        return (
            self._json_size == 0
            and self.chunks == 0
            and not self._tail
            and not self._pending
            and self.output_chars in (0, None)
        )

    @property
    def complete(self) -> bool:
        """Did the body say it was whole (its terminal event, or a parsed JSON body)?"""
        self.flush()
        if not self.event_stream:
            return self._json is None and self.readable
        return self.terminal or (self.finish_reason is not None and self.api != "responses")

    # -- event streams -------------------------------------------------------------------

    def _take(self, data: bytes) -> None:
        if not data:
            return
        if not self.event_stream:
            pieces = self._json
            if pieces is not None:
                self._json_size += len(data)
                if self._json_size > JSON_CAP:
                    self._json = None
                    self.readable = False  # too big to read: unknown, not wrong
                else:
                    pieces.append(data)
            return
        self._lines(data)

    def _lines(self, data: bytes) -> None:
        """Read the whole lines of ``data`` (after the unfinished line kept from before)."""
        if self._cr or b"\r" in data:
            data = self._lf(data)
        tail = self._tail
        if tail:
            data = tail + data
        cut = data.rfind(b"\n") + 1
        if cut == 0:
            self._tail = data if len(data) <= LINE_CAP else self._clip(data)
            return
        if cut == len(data):
            self._tail = b""
        else:
            rest = data[cut:]
            self._tail = rest if len(rest) <= LINE_CAP else self._clip(rest)
            data = data[:cut]
        self._scan(data)

    def _lf(self, data: bytes) -> bytes:
        """CR and CRLF line ends as LF (the SSE spec allows all three); a CRLF cut
        between two chunks stays one line end."""
        if self._cr and data.startswith(b"\n"):
            data = data[1:]
        self._cr = data.endswith(b"\r")
        return data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")

    def flush(self) -> None:
        """Read the bytes still waiting in the batch (before the facts are looked at)."""
        if self._pending:
            data = b"".join(self._pending)
            self._pending = []
            self._pending_size = 0
            if self.readable:
                self._lines(data)

    def _clip(self, line: bytes) -> bytes:
        """An over-long unfinished line keeps its head and tail, a newline between them."""
        self.clipped_lines += 1
        return line[:_CLIP] + b"\n" + line[-_CLIP:]

    def _scan(self, block: bytes) -> None:
        """Read a block of whole SSE lines."""
        d = self._dialect
        self.chunks += block.count(b"\ndata:") + block.startswith(b"data:")
        total = 0
        for key in d.output:
            if key.key in block:
                total += _output_chars(block, key)
        if total:
            self.output_chars = (self.output_chars or 0) + total
            self._batching = self._inflate is None and self.readable
        if d.finish is not None and d.finish_key in block:
            if block.count(d.finish_key) != block.count(d.finish_null):  # a reason, not only nulls
                match = _last(d.finish, block)
                if match is not None:
                    self.finish_reason = match.group(1).decode("ascii")
            if d.finish_ends:
                self.terminal = True
        if d.usage_key in block:
            self._usage(block)
        for marker, finish in d.terminals:
            if marker in block:
                self.terminal = True
                if finish is not None:
                    self.finish_reason = finish
                    if finish == "incomplete" and d.incomplete_reason is not None:
                        reason = d.incomplete_reason.search(block)
                        if reason:
                            self.finish_reason = reason.group(1).decode("ascii")
                    elif finish == "failed":
                        self._error_events(block)
        if b'"error"' in block and self.error_type is None:
            self._error_events(block)
        if d.object_calls is not None and d.object_calls in block:
            self._object_calls(block)
        if self.observer is not None:
            self.observer.block(block)

    def _usage(self, block: bytes) -> None:
        d = self._dialect
        match = _last(d.prompt_tokens, block)
        if match is not None:
            self.prompt_tokens = int(match.group(1))
        match = _last(d.completion_tokens, block)
        if match is not None:
            self.completion_tokens = int(match.group(1))

    def _data_lines(self, block: bytes) -> list[Any]:
        """The parsed JSON of every ``data:`` line in ``block`` (the slow path, for rare events)."""
        parsed = []
        for line in block.split(b"\n"):
            if line.startswith(b"data:"):
                try:
                    parsed.append(json.loads(line[5:]))
                except ValueError:
                    continue
        return parsed

    def _error_events(self, block: bytes) -> None:
        for event in self._data_lines(block):
            found = error_type_of(event)
            if found is not None:
                self.error_type = found
                return

    def _object_calls(self, block: bytes) -> None:
        count = self._dialect.object_call_chars
        calls = 0
        for event in self._data_lines(block) if count is not None else ():
            calls += count(event)
        if calls:
            self.output_chars = (self.output_chars or 0) + calls

    # -- JSON bodies ---------------------------------------------------------------------

    def _read_json(self, body: Any) -> None:
        self.error_type = error_type_of(body)
        reader = _READ_JSON.get(self.api)
        if reader is not None and self.error_type is None:
            reader(self, body)
            if self.observer is not None:
                self.observer.body(body)
