"""One CVDIAG line (or the records of one split container line) to an envelope.

A line is an envelope, a legacy breadcrumb, a malformed line (with the reason) or not
CVDIAG output at all. Any wrapper a log pipeline adds is peeled first: Docker json-file,
Kubernetes CRI, compose prefixes, ANSI colours. The emitter's own layout is tried
first, without unwrapping; the bulk path of ``tests`` goes further (``scan``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

import orjson

from cvdiag.contract.schema import ENVELOPE_FIELDS, JAVA_PREFIX, MARKER, PREFIX, SCHEMA_VERSION
from cvdiag.contract.timestamps import ts_seconds
from cvdiag.read import rejoin
from cvdiag.read._compiled import CFOLD

ENVELOPE = 1
BREADCRUMB = 2
MALFORMED = 3
NOTHING = 0

#: A line holding either of these may be an envelope or a breadcrumb (every shape of
#: spec section 1, escaped or not, contains one of them).
MARKERS: tuple[bytes, ...] = (MARKER.encode(), ENVELOPE_FIELDS[0].encode())

#: The longest line read: far beyond any envelope (16 KiB at the debug tier), and the
#: bound on what one line of an endless input (``/dev/zero``) may cost.
MAX_LINE = 8 << 20
TOO_LONG = "line longer than 8 MiB"
LONG_LINE = f"{TOO_LONG} (skipped to its end)"
CUT_FILE = "the file ends early: its compressed data is cut"
# What a stream could not deliver (a line over MAX_LINE, the lost end of a cut .gz)
# becomes a placeholder line, which every reader counts as malformed where it meets
# it, with its line number, like any other bad line: no tally is threaded through the
# readers, and a spooled stdin keeps them.
_PLACEHOLDER = PREFIX.encode() + b"\x00"
PLACEHOLDER_LONG = _PLACEHOLDER + b"long"
PLACEHOLDER_CUT = _PLACEHOLDER + b"cut"
_PLACEHOLDERS = {PLACEHOLDER_LONG: LONG_LINE, PLACEHOLDER_CUT: CUT_FILE}

_MARKER = MARKER.encode()
#: JSON's own whitespace, the only characters that may follow an object's closing brace.
_JSON_BLANKS = " \t\r\n"
_PREFIX = PREFIX.encode()
_JSON_PREFIX = _PREFIX + b"{"
_JAVA_PREFIX = JAVA_PREFIX.encode()
_JAVA_JSON_PREFIX = _JAVA_PREFIX + b"{"
_BREADCRUMB_PREFIX = _PREFIX + b"component="
_MARKER_LEN, _PREFIX_LEN, _JAVA_PREFIX_LEN = len(_MARKER), len(_PREFIX), len(_JAVA_PREFIX)
_ANSI = re.compile(rb"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")
_COMPOSE = re.compile(rb"^[\w.-]+\s*\| ")
_BREADCRUMB_FIELD = re.compile(r"(\w+)=(\S*)")
_BOM = b"\xef\xbb\xbf"  # a UTF-8 byte-order mark, which some tools put before a file's first line

# Fields the reader relies on, and the types it needs; `validate` is stricter.
_REQUIRED: tuple[tuple[str, type | tuple[type, ...]], ...] = (
    ("test_id", str),
    ("layer", str),
    ("boundary", str),
    ("ts", str),
    ("outcome", str),
)


#: Where an envelope keeps the values of the wrong type it was read with (``coerce``):
#: ``validate`` checks those, the notes count them.
COERCED = "_coerced"


def _text(value: Any) -> bool:
    return value is None or isinstance(value, str)


def _ms(value: Any) -> bool:
    return value is None or (type(value) in (int, float) and math.isfinite(value))


def _flag(value: Any) -> bool:
    return isinstance(value, bool)


def _object(value: Any) -> bool:
    return isinstance(value, dict)


# The other fields and what every reader may rely on: another emitter's value of
# another type is read as null (an empty object, false), never passed on to crash a view.
_LOOSE: tuple[tuple[str, Callable[[Any], bool], Any], ...] = (
    ("trace_id", _text, None),
    ("span_id", _text, None),
    ("parent_span_id", _text, None),
    ("slug", _text, None),
    ("demo", _text, None),
    ("duration_ms", _ms, None),
    ("edge_headers", _object, {}),
    ("_metadata_dropped", _flag, False),
    ("_truncated", _flag, False),
)


# Plain slotted classes, not dataclasses: a dataclass compiles its methods when its
# module is imported (milliseconds each on a slow CI box), and the CLI must start fast.


class Tally:
    """Malformed lines seen while reading: how many, and where the first one was; and
    the envelopes read with a field of the wrong type (``coerce``), the same way."""

    __slots__ = ("coerced", "count", "first", "first_coerced", "trimmed", "untracked", "untracked_limit")

    def __init__(self) -> None:
        self.count = 0
        self.first: str | None = None
        self.coerced = 0
        self.first_coerced: str | None = None
        self.untracked = 0  # envelopes of test ids past ``untracked_limit`` (``fold.MAX_TESTS``)
        self.untracked_limit = 0
        self.trimmed = 0  # events a timeline left out between its first and last (``_kept``)

    def add(self, where: Callable[[], str], reason: str) -> None:
        self.count += 1
        if self.first is None:
            self.first = f"{where()}: {reason}"

    def seen(self, env: dict[str, Any], where: Callable[[], str]) -> None:
        """Counts ``env`` when it was read with fields of the wrong type."""
        bad = env.get(COERCED)
        if bad:
            self.coerced += 1
            if self.first_coerced is None:
                self.first_coerced = f"{where()}: " + ", ".join(f"{k} is {type(v).__name__}" for k, v in bad.items())

    def merge(self, other: Tally) -> None:
        if other.count and self.first is None:
            self.first = other.first
        if other.coerced and self.first_coerced is None:
            self.first_coerced = other.first_coerced
        self.count += other.count
        self.coerced += other.coerced
        self.untracked += other.untracked
        self.trimmed += other.trimmed
        self.untracked_limit = max(self.untracked_limit, other.untracked_limit)

    def note(self) -> str | None:
        """The one-line stderr note, or None when every line was fine."""
        parts = []
        if self.count:
            noun = "line" if self.count == 1 else "lines"
            parts.append(f"skipped {self.count} malformed CVDIAG {noun} (first at {self.first})")
        if self.coerced:
            noun = "envelope" if self.coerced == 1 else "envelopes"
            parts.append(
                f"read {self.coerced} {noun} with fields of the wrong type as null (first at {self.first_coerced})"
            )
        if self.trimmed:
            parts.append(
                f"the test has more events than a timeline keeps: {self.trimmed:,} between the first"
                " and the last 10,000 are left out (failures among them are kept)"
            )
        if self.untracked:
            parts.append(
                f"more than {self.untracked_limit:,} test ids: {self.untracked:,} envelopes of the later ones"
                " are left out"
            )
        return "cvdiag: " + "; ".join(parts) if parts else None


def _check(env: Any) -> str | None:
    """Why ``env`` cannot be read as an envelope, or None when it can."""
    if not isinstance(env, dict):
        return "not a JSON object"
    if env.get("schema_version") != SCHEMA_VERSION:
        return f"schema_version is {env.get('schema_version')!r}, not {SCHEMA_VERSION}"
    for name, kind in _REQUIRED:
        if not isinstance(env.get(name), kind):
            return f"{name} is missing or not a {kind.__name__}"
    try:
        ts_seconds(env["ts"])
    except ValueError:
        return "ts is not an RFC 3339 time"
    if not isinstance(env.get("metadata", {}), dict):
        return "metadata is not an object"
    mono = env.get("mono_ns", 0)
    if not isinstance(mono, int) or isinstance(mono, bool):
        return "mono_ns is not an integer"
    return None


def parse_json_envelope(raw: bytes) -> tuple[int, Any]:
    """(ENVELOPE, dict) or (MALFORMED, reason) for the JSON text of one envelope."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return MALFORMED, "not UTF-8"
    if text[:1] == "{" and text.rstrip(_JSON_BLANKS)[-1:] != "}":
        # An object cut short (a hostile log holds millions of ``CVDIAG {``) is told
        # without orjson's exception, which costs 8 µs a line; orjson says the same.
        return MALFORMED, "cut or not JSON"
    try:
        env = orjson.loads(text)
    except orjson.JSONDecodeError:
        return MALFORMED, "cut or not JSON"
    reason = _check(env)
    if reason:
        return MALFORMED, reason
    coerce(env)
    return ENVELOPE, env


#: The exact types that certainly pass each check of ``_LOOSE`` (a float duration is left to
#: the check, which tests it is finite), for the compiled ``untouched``.
_CERTAIN: dict[Callable[[Any], bool], tuple[type, ...]] = {
    _text: (type(None), str),
    _ms: (type(None), int),
    _flag: (bool,),
    _object: (dict,),
}
_RULES = tuple((name, _CERTAIN[ok]) for name, ok, _ in _LOOSE)  # a check without types stops the import
_untouched = CFOLD.untouched if CFOLD is not None else None


def coerce(env: dict[str, Any]) -> dict[str, Any]:
    """``env`` with each optional field of the wrong type read as null (edge header
    values too), the values it had kept under ``COERCED``; every reader relies on it."""
    if _untouched is not None and _untouched(env, _RULES, "edge_headers"):
        return env  # most envelopes: nothing of the wrong type, known in one C call
    bad: dict[str, Any] | None = None
    for name, ok, empty in _LOOSE:
        value = env.get(name)
        if not ok(value) and name in env:  # an absent field stays absent
            bad = bad or {}
            bad[name] = value
            env[name] = empty
    edges = env.get("edge_headers")
    if edges and not all(map(_text, edges.values())):
        for k, v in edges.items():
            if not _text(v):
                bad = bad or {}
                bad[f"edge_headers.{k}"] = v
                edges[k] = None
    if bad:
        env[COERCED] = bad
    return env


def restored(env: dict[str, Any]) -> dict[str, Any]:
    """``env`` as it was written: the values ``coerce`` replaced put back (for ``validate``)."""
    bad = env.get(COERCED)
    if not bad:
        return env
    out = {k: v for k, v in env.items() if k != COERCED}
    for name, value in bad.items():
        if name.startswith("edge_headers."):
            out["edge_headers"] = {**out["edge_headers"], name.removeprefix("edge_headers."): value}
        else:
            out[name] = value
    return out


def _breadcrumb(text: bytes) -> tuple[int, Any]:
    """A legacy ``CVDIAG component=...`` line; ``error=`` is free text to the end."""
    line = text.decode("utf-8", "replace")
    head, sep, error = line.partition(" error=")
    fields: dict[str, Any] = {k: v for k, v in _BREADCRUMB_FIELD.findall(head)}
    if sep:
        fields["error"] = error
    if not fields.get("test_id"):
        return MALFORMED, "breadcrumb without test_id"
    return BREADCRUMB, fields


def unwrap(line: bytes) -> tuple[bytes, str | None]:
    """Strip container wrappers (Docker json-file, CRI, compose) and ANSI codes.

    Returns the payload and the wrapper's timestamp, if it had one. ``line`` may hold
    several records of one split line (a span from ``scan.logical_lines``): they are joined.
    """
    if b"\n" in line:
        payload, wrapper_ts, _, _ = rejoin.join(line)
        return _payload(payload), wrapper_ts
    wrapper_ts = None
    if b"\x1b" in line:
        line = _ANSI.sub(b"", line)
    line = line.strip()
    if line.startswith(b'{"log":') or (line.startswith(b"{") and b'"log":' in line and b'"stream"' in line):
        try:
            outer = orjson.loads(line)
        except orjson.JSONDecodeError:
            outer = None
        if isinstance(outer, dict) and isinstance(outer.get("log"), str):
            wrapper_ts = outer.get("time") if isinstance(outer.get("time"), str) else None
            line = outer["log"].encode("utf-8", "surrogatepass").strip()
            if b"\x1b" in line:
                line = _ANSI.sub(b"", line)
    m = rejoin.CRI_RECORD.match(line)
    if m and line[m.end() - 1] == 32:  # a record with its text after a space; an empty one is kept whole
        wrapper_ts = m.group(1).decode("ascii", "replace")
        line = line[m.end() :]
    return _without_compose(line), wrapper_ts


def _payload(line: bytes) -> bytes:
    """The text a rejoined container record carried, as ``unwrap`` leaves a single one."""
    if b"\x1b" in line:
        line = _ANSI.sub(b"", line)
    return _without_compose(line.strip())


def _without_compose(line: bytes) -> bytes:
    """``line`` without the ``service  | `` prefix of ``docker compose logs``."""
    m = _COMPOSE.match(line)
    return line[m.end() :] if m and not line.startswith(_MARKER) else line


def parse_line(line: bytes) -> tuple[int, Any]:
    """Classify one raw line: (ENVELOPE, dict), (BREADCRUMB, dict), (MALFORMED, reason)
    or (NOTHING, None) for a line that is simply not CVDIAG output.

    ``line`` may also be a span from ``scan.logical_lines`` holding the records of one
    split line; a split line that never completes is malformed when it carried an envelope.
    A short malformed line seen lately is answered from ``_MALFORMED_SEEN``.
    """
    short = type(line) is bytes and len(line) <= _SEEN_LINE_MAX
    if short and (seen := _MALFORMED_SEEN.get(line)) is not None:
        return MALFORMED, seen[0]
    kind, value = _parse_line(line)
    if short and kind == MALFORMED:
        if len(_MALFORMED_SEEN) >= _SEEN_MAX:
            _MALFORMED_SEEN.clear()
        _MALFORMED_SEEN[line] = (value, rejoin.record(line, 0, len(line)) is None)
    return kind, value


#: The short malformed lines seen last, each with its reason and whether it is whole (no
#: record of a container runtime's, which may be split): a hostile log repeats one line
#: (``CVDIAG {``) millions of times, and each is then parsed once. ``parse_line`` depends
#: on the line alone; the memory stays bounded (at most 1,024 lines of 256 bytes).
_MALFORMED_SEEN: dict[bytes, tuple[Any, bool]] = {}
_SEEN_MAX = 1024
_SEEN_LINE_MAX = 256


def _parse_line(line: bytes) -> tuple[int, Any]:
    """``parse_line`` without the memory of malformed lines."""
    # The common case first: the emitter's own prefix, no wrapper, the line's first marker
    # (of several, the first decides: ``_classify``).
    i = line.find(_JSON_PREFIX)
    if i >= 0 and b"\x1b" not in line and not line.startswith(b"{") and line.find(_MARKER, 0, i) < 0:
        kind, value = parse_json_envelope(line[i + _PREFIX_LEN :])
        if kind == ENVELOPE:
            return kind, value
    if b"\n" in line:
        payload, _, complete, _ = rejoin.join(line)
        kind, value = _classify(_payload(payload))
        return (MALFORMED, rejoin.INCOMPLETE) if kind == MALFORMED and not complete else (kind, value)
    payload, _ = unwrap(line)
    kind, value = _classify(payload)
    if kind == MALFORMED and value in ("cut or not JSON", "not UTF-8"):
        rec = rejoin.record(line, 0, len(line))
        if rec is not None and rec[2]:  # the first record of a split line, alone
            value = rejoin.INCOMPLETE
    return kind, value


def parse_span(buf: Any, ls: int, le: int, joins: rejoin.Joins | None = None) -> tuple[int, Any, bytes]:
    """``parse_line`` of the line ``buf[ls:le]`` (a newline or the buffer's end at
    ``le``), read forward to its last record when a container runtime split it, and
    the bytes read (empty for a line over ``MAX_LINE``, which is not read).

    ``joins`` remembers the records joined to the line, for callers that visit every
    line of ``buf`` in order and must not read those again (``scan.hits``); without
    it a later record that holds a marker reads as a line of its own.
    """
    if le - ls > MAX_LINE:
        return MALFORMED, LONG_LINE, b""
    raw = buf[ls:le]
    kind, value = parse_line(raw)
    if kind == MALFORMED and not is_whole_malformed(raw):
        # Only a malformed line can be the first record of a split envelope: the
        # search for the rest costs nothing on the lines that parse.
        end = joins.extend(ls, le) if joins is not None else rejoin.extent(buf, ls, le, len(buf))[0]
        if end != le:
            raw = buf[ls:end]
            kind, value = parse_line(raw)
    return kind, value, raw


def is_whole_malformed(raw: bytes) -> bool:
    """True when ``raw`` is a malformed line seen lately that is no container record (so
    no later record continues it, and it continues none)."""
    seen = _MALFORMED_SEEN.get(raw) if type(raw) is bytes else None
    return seen is not None and seen[1]


def _classify(line: bytes) -> tuple[int, Any]:
    """``parse_line`` of a line already unwrapped."""
    if line.startswith(_BOM):
        line = line[len(_BOM) :]
    start = 0
    while True:
        i = line.find(_MARKER, start)
        if i < 0:
            break
        if line.startswith(_JSON_PREFIX, i):
            return parse_json_envelope(line[i + _PREFIX_LEN :])
        if line.startswith(_JAVA_JSON_PREFIX, i):
            return parse_json_envelope(line[i + _JAVA_PREFIX_LEN :])
        if line.startswith(_BREADCRUMB_PREFIX, i):
            return _breadcrumb(line[i + _PREFIX_LEN :])
        start = i + _MARKER_LEN
    if line.startswith(b"{") and b'"schema_version"' in line:
        return parse_json_envelope(line)
    if line.startswith(_PLACEHOLDER) and line in _PLACEHOLDERS:
        return MALFORMED, _PLACEHOLDERS[line]
    return NOTHING, None
