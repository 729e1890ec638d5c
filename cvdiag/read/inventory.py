"""What an input held, for answers that found nothing and for the facts a table shows
beside its rows: an empty answer says what was read (files, lines, bytes, CVDIAG lines)
and the likely cause; ``tests`` names each test's pytest node id where a harness wrote
it, and counts the requests that came without an ``x-test-id``.

Both are extra passes over the inputs: ``take`` runs only when nothing was found, and
``side_facts`` searches only for lines holding its two needles.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from cvdiag.contract.schema import MARKER
from cvdiag.read.parsing import ENVELOPE, MARKERS, Tally
from cvdiag.read.scan import hits_in
from cvdiag.read.sources import Source

#: How much of each input is looked at for an empty answer: enough to tell a log from a
#: binary file and to count its lines, never a whole huge file for a note.
_LOOK_BYTES = 64 << 20


@dataclass(slots=True)
class Inventory:
    """What the inputs held, as far as ``take`` looked."""

    files: int = 0
    bytes: int = 0
    lines: int = 0
    #: Lines with a CVDIAG marker (an envelope, a breadcrumb, or a malformed one).
    marked: int = 0
    #: Inputs with NUL bytes: not text.
    binary: list[str] = field(default_factory=list)
    #: Inputs read once already (stdin, a FIFO): not looked at again.
    unread: int = 0
    #: Looked at only in part (bigger than ``_LOOK_BYTES``).
    partial: bool = False
    #: One of the inputs was stdin (copied to a file to be read twice).
    stdin: bool = False


def take(sources: Sequence[Source]) -> Inventory:
    """Count what ``sources`` hold: files, bytes, lines, CVDIAG lines, binary inputs."""
    inv = Inventory()
    needles = tuple(MARKERS)
    for src in sources:
        if src.stream:
            inv.unread += 1
            continue
        inv.files += 1
        inv.stdin = inv.stdin or src.name == "<stdin>" or src.name.startswith("<stdin")
        seen = 0
        try:
            for buf in src.blocks():
                block = bytes(buf)
                seen += len(block)
                inv.bytes += len(block)
                inv.lines += block.count(b"\n") + (not block.endswith(b"\n") and bool(block))
                inv.marked += sum(1 for line in block.splitlines() if any(n in line for n in needles))
                if b"\0" in block and src.name not in inv.binary:
                    inv.binary.append(src.name)
                if seen >= _LOOK_BYTES:
                    inv.partial = True
                    break
        except OSError:
            continue
    return inv


def explain(inv: Inventory, tally: Tally, what: str = "tests") -> list[str]:
    """Why an answer is empty: what was read, then the likely cause (one sentence each)."""
    read = _what_was_read(inv)
    if inv.files == 0 and inv.unread == 0:
        return ["read no file: the folder is empty (every regular file in it, and below, is read)"]
    if inv.binary:
        return [f"read {read}; {', '.join(inv.binary[:3])} is not text (it holds NUL bytes): is this the server's log?"]
    if inv.files and inv.bytes == 0:
        return [f"read {read}: empty. Has the server run yet, and does it write its log here?"]
    if inv.marked == 0 and inv.files:
        return [
            f"read {read}, no {MARKER} line among them. Is CVDIAG_ENABLED=1 set in the server's"
            " environment, and is this the server's log (its stdout, or the CVDIAG_FILE it writes)?"
        ]
    if tally.count and tally.count >= inv.marked:
        return [
            f"read {read}: {_lines(inv.marked, f'{MARKER} line')}, every one malformed"
            f" (first at {tally.first}). Was the log cut, or rewritten by another tool?"
        ]
    if inv.unread and not inv.files:
        return [f"read stdin; no {what} in it. Is CVDIAG_ENABLED=1 set in the server's environment?"]
    return [
        f"read {read}: {_lines(inv.marked, f'{MARKER} line')}"
        + (f" ({tally.count} malformed)" if tally.count else "")
        + ", none of a test: only cvdiag's own accounting, or lines the filters left out."
    ]


def _lines(count: int, noun: str) -> str:
    return f"{count:,} {noun}" if count == 1 else f"{count:,} {noun}s"


def _what_was_read(inv: Inventory) -> str:
    if inv.files == 0:
        return ""
    files = "stdin" if inv.stdin and inv.files == 1 else _lines(inv.files, "file")
    some = "the first part of " if inv.partial else ""
    return f"{some}{files}, {_lines(inv.lines, 'line')}, {_size(inv.bytes)}"


def _size(n: int) -> str:
    if n < 1000:
        return f"{n} bytes" if n != 1 else "1 byte"
    return f"{n / 1000:.1f} kB" if n < 1_000_000 else f"{n / 1e6:.1f} MB"


# -- the default tier -------------------------------------------------------------------

#: Written at the verbose tier and up only: a backend test that has none of them was
#: recorded at the default tier (spec section 3), which leaves out what went well.
_VERBOSE_ONLY = frozenset({"backend.request.ingress", "backend.sse.first_byte", "backend.llm.call.start"})

#: What the default tier left out and how to see it, for every face that shows a test.
DEFAULT_TIER_NOTE = (
    "recorded at the default tier, which writes a request's and an agent's end and every failure;"
    " LLM calls, tool calls and first bytes that went well are left out. CVDIAG_TIER=verbose on the"
    " server writes them (docs/configuration.md)"
)


def at_default_tier(boundaries: Iterable[str]) -> bool:
    """A test's boundaries are those of the default tier: backend lines, none verbose."""
    seen = set(boundaries)
    return any(b.startswith("backend.") for b in seen) and not seen & _VERBOSE_ONLY


# -- facts beside the rows ----------------------------------------------------------------

#: The lines that hold them: a harness's ``probe.start`` (its ``url`` is the pytest node
#: id) and the middleware's ingress (``inbound_test_id_adopted``: false when the server
#: minted the id, the request having none; any ingress: the test was written at verbose
#: or up), and an LLM call's start (verbose too).
_SIDE_MARKERS = (b"probe.start", b"backend.request.ingress", b"backend.llm.call.start")


@dataclass(slots=True)
class SideFacts:
    """Per test id: its pytest node id; and the ids the server minted."""

    node_ids: dict[str, str] = field(default_factory=dict)
    minted: set[str] = field(default_factory=set)
    #: Ids with a line of the verbose tier: the others with backend lines were at default.
    verbose: set[str] = field(default_factory=set)
    #: False when the inputs were not read for these facts (too big, or stdin).
    read: bool = True


def side_facts(sources: Sequence[Source]) -> SideFacts:
    """Node ids and minted ids, from the lines holding them (inputs read once are skipped)."""
    facts = SideFacts()
    readable = [s for s in sources if not s.stream]
    for hit in hits_in(readable, Tally(), markers=_SIDE_MARKERS):
        env = hit.value
        if hit.kind != ENVELOPE or not isinstance(env.get("metadata"), dict):
            continue
        md = env["metadata"]
        boundary = env.get("boundary")
        if boundary == "probe.start" and isinstance(md.get("url"), str) and "::" in md["url"]:
            facts.node_ids.setdefault(env["test_id"], md["url"])
        elif boundary in _VERBOSE_ONLY:
            facts.verbose.add(env["test_id"])
            if boundary == "backend.request.ingress" and md.get("inbound_test_id_adopted") is False:
                facts.minted.add(env["test_id"])
    facts.read = len(readable) == len(sources)
    return facts
