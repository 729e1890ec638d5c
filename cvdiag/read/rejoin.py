"""Rejoin log lines that a container runtime split into several records.

Docker's json-file driver and Kubernetes CRI cut a line longer than 16 KiB into
records: Docker leaves the ``\\n`` off the ``"log"`` text of every record but the
last, CRI tags them ``P`` (partial) up to the ``F`` (full) one. A debug-tier envelope
(16,384 bytes plus the ``CVDIAG `` prefix) is split that way, and only its first
record holds the markers and the test id the reader searches for. So the reader
finds that first record as usual and, when it is partial, reads forward here to the
record that completes it. The bulk paths ask only about a line that failed to parse
(a first record alone is a cut envelope), so lines that parse cost nothing more.

A split line is its first record plus the later records of the same stream (stdout
or stderr) and format, up to and including the first complete one; records of the
other stream in between are skipped (the runtime interleaves the two). Anything else
breaks the sequence (a line that is not a record of the same format, the end of the
input, more than ``MAX_SKIP`` records of the other stream in a row, or more than
``MAX_BYTES``): what was joined until then is parsed as it is, which makes a cut
envelope a malformed line.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

#: How far a split line may reach: far beyond any envelope (16 KiB), yet a bound on the
#: work a hostile input can cause.
MAX_BYTES = 1 << 20
#: Records of the other stream that may come between two parts of one line.
MAX_SKIP = 64

DOCKER = 1
CRI = 2

_DOCKER_HEAD = b'{"log":"'  # Docker json-file writes "log" first, then "stream", then "time"
_DOCKER_STREAM = b'","stream":"'
#: A Kubernetes CRI record: its time, stream, P(artial) or F(ull) tag, and the space
#: before its text (absent when it has none).
CRI_RECORD = re.compile(rb"(\d{4}-\d\d-\d\dT\S+) (stdout|stderr) ([PF])(?: |$)")
_STREAMS = (b"stdout", b"stderr")
_NEWLINE_ESCAPES = (b"\\u000a", b"\\u000A")
_DOCKER_TIME = re.compile(rb'"time":"([^"]*)"')

INCOMPLETE = "split container record never completed (cut, or broken by another line)"


def record(buf: Any, ls: int, le: int) -> tuple[int, bytes, bool, int] | None:
    """(format, stream, partial, content start) of the container record ``buf[ls:le]``,
    or None when that line is not a Docker json-file or CRI record.

    Bytes only, no JSON parsing: it runs on every line a forward read passes.
    """
    if ls >= le:
        return None
    c = buf[ls]
    if c == 123:  # "{"
        if buf[ls : ls + 8] != _DOCKER_HEAD:
            return None
        # A JSON string holds no bare `"`, so the first `","stream":"` ends the log text.
        i = buf.find(_DOCKER_STREAM, ls + 8, le)
        if i < 0:
            return None
        stream = buf[i + 12 : i + 18]
        if stream not in _STREAMS or buf[i + 18 : i + 19] != b'"':
            return None
        return DOCKER, stream, not _ends_in_newline(buf, ls + 8, i), ls + 8
    if 48 <= c <= 57:  # a digit: maybe a CRI timestamp
        m = CRI_RECORD.match(buf, ls, le)
        if m is None:
            return None
        return CRI, m.group(2), m.group(3) == b"P", m.end()
    return None


def _ends_in_newline(buf: Any, start: int, end: int) -> bool:
    """Whether the JSON string body ``buf[start:end]`` ends in an escaped newline."""
    if end - start >= 2 and buf[end - 2 : end] == b"\\n":
        k = end - 2
    elif end - start >= 6 and buf[end - 6 : end] in _NEWLINE_ESCAPES:
        k = end - 6
    else:
        return False
    # `\\n` is an escaped backslash then a plain "n": the backslash at k must not be escaped.
    run = 0
    while k - run - 1 >= start and buf[k - run - 1] == 92:
        run += 1
    return run % 2 == 0


def extent(buf: Any, ls: int, le: int, end: int) -> tuple[int, list[int]]:
    """Where the line starting at the physical line ``buf[ls:le]`` ends, and the starts
    of the later records joined to it (empty unless that line is a partial record).

    ``end`` bounds the read (the buffer's end): a line cut there is left cut.
    """
    first = record(buf, ls, le)
    if first is None or not first[2]:
        return le, []
    fmt, stream = first[0], first[1]
    joined: list[int] = []
    last, skipped, pos = le, 0, le + 1
    while pos < end and pos - ls <= MAX_BYTES:
        nl = buf.find(b"\n", pos, end)
        nl = end if nl < 0 else nl
        rec = record(buf, pos, nl)
        if rec is None or rec[0] != fmt:
            break
        if rec[1] != stream:
            skipped += 1
            if skipped > MAX_SKIP:
                break
        else:
            joined.append(pos)
            last, skipped = nl, 0
            if not rec[2]:
                break
        pos = nl + 1
    return last, joined


def held_back(buf: Any, end: int) -> int:
    """The start of the earliest split line still open at ``end`` (a line boundary),
    else ``end``: a streamed block must not end between the parts of one line."""
    opened: dict[bytes, int] = {}
    closed: set[bytes] = set()
    pos, quiet = end, 0
    while pos > 0 and quiet <= MAX_SKIP and end - pos <= MAX_BYTES:
        le = pos - 1
        ls = buf.rfind(b"\n", 0, le) + 1
        rec = record(buf, ls, le)
        if rec is None:
            break  # not a record: any sequence before it is broken there anyway
        stream, partial = rec[1], rec[2]
        if stream in closed:
            quiet += 1
        elif partial:
            opened[stream], quiet = ls, 0
        else:
            closed.add(stream)
            quiet += 1
        pos = ls
    return min(opened.values(), default=end)


def join(raw: bytes) -> tuple[bytes, str | None, bool, bytes]:
    """The parts of one split line, given the lines from its first record to its last
    (as ``extent`` found them): (payload, the first record's time, whether the line
    was completed, the line's own records as they were written)."""
    lines = raw.split(b"\n")
    first = record(lines[0], 0, len(lines[0]))
    if first is None:  # not a split line after all: leave it to the caller
        return raw, None, True, raw
    fmt, stream = first[0], first[1]
    parts: list[bytes] = []
    own: list[bytes] = []
    complete = False
    for line in lines:
        rec = record(line, 0, len(line))
        if rec is None or rec[0] != fmt:
            break
        if rec[1] != stream:
            continue
        own.append(line)
        if fmt == DOCKER:
            parts.append(line[rec[3] : line.find(_DOCKER_STREAM, rec[3])])
        else:
            parts.append(line[rec[3] :])
        if not rec[2]:
            complete = True
            break
    head = lines[0]
    if fmt == DOCKER:
        # Joined as JSON text, then decoded once: a character cut between two records
        # (UTF-8 bytes, or a surrogate pair of \u escapes) is whole again.
        try:
            text = orjson.loads(b'"' + b"".join(parts) + b'"')
            payload = text.encode("utf-8", "surrogatepass")
        except orjson.JSONDecodeError:
            payload = b"".join(parts)
        m = _DOCKER_TIME.search(head, head.find(_DOCKER_STREAM))
        ts = m.group(1).decode("ascii", "replace") if m else None
    else:
        payload = b"".join(parts)
        m = CRI_RECORD.match(head)
        ts = m.group(1).decode("ascii", "replace") if m else None
    return payload, ts, complete, b"\n".join(own)


class Joins:
    """The split lines of one buffer met so far: lines are visited in order, and a
    record joined to an earlier line must not be read again as a line of its own."""

    __slots__ = ("buf", "end", "joined")

    def __init__(self, buf: Any, end: int | None = None) -> None:
        self.buf = buf
        self.end = len(buf) if end is None else end
        self.joined: set[int] = set()

    def taken(self, ls: int) -> bool:
        """Whether the line at ``ls`` is a later record of a line already read."""
        joined = self.joined
        if ls in joined:
            joined.discard(ls)
            return True
        if len(joined) > 4096:  # records never visited (they hold no marker) pile up
            self.joined = {p for p in joined if p > ls}
        return False

    def extend(self, ls: int, le: int) -> int:
        """The end of the line whose first record is ``buf[ls:le]`` (``le`` unless split)."""
        last, parts = extent(self.buf, ls, le, self.end)
        self.joined.update(parts)
        return last
