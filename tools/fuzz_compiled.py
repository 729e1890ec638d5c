"""Fuzz the compiled code against the Python path: every difference is a defect.

The read side: real logs (the labelled corpus, every line shape of ``tests/data/logs``)
mutated as hostile logs are (bytes flipped, lines cut mid-escape, invalid UTF-8, lone
surrogates, NUL, CR, huge numbers, deep nesting, fields of the wrong type, colour codes,
Docker and CRI wrappers, several markers, odd times), then read by the real commands
(``tests``, ``tests --json``, ``stats``, ``diagnose --all``, ``validate``, ``timeline``,
``report``) in this process, once with the compiled parts and once without: exit code,
stdout, stderr and the page must be the same. The emit side: calls of ``emit`` with
hostile metadata written by the compiled envelope and by the Python steps: the same
bytes (clocks and ids masked).

    python tools/fuzz_compiled.py --seconds 60          # CI (tools/ci_compiled.sh)
    python tools/fuzz_compiled.py --seconds 3600 --seed 7   # by hand

A difference is printed and its input kept in ``--out`` (a log to run both ways with
``CVDIAG_COMPILED=0``); the exit code is 1 when there was one.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import re
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from cvdiag_cli import run_in_process  # noqa: E402

from cvdiag.contract.schema import PREFIX  # noqa: E402
from cvdiag.face import report_data  # noqa: E402
from cvdiag.read import _compiled, _diagnosing, fold, parsing, scan  # noqa: E402

# -- the two paths ---------------------------------------------------------------------------


@contextlib.contextmanager
def python_path() -> Iterator[None]:
    """The read side without any compiled part, as ``CVDIAG_COMPILED=0`` starts it."""
    saved = [
        (fold, "_CFOLD", None),
        (fold, "_EMITTER_SECONDS", lambda ts: None),
        (scan, "_CFOLD", None),
        (parsing, "_untouched", None),
        (_compiled, "CFOLD", None),
        (_diagnosing, "_place_lines", _diagnosing._each_place),
        (report_data, "_plain_events", lambda: None),
    ]
    old = [(mod, name, getattr(mod, name)) for mod, name, _ in saved]
    for mod, name, value in saved:
        setattr(mod, name, value)
    try:
        yield
    finally:
        for mod, name, value in old:
            setattr(mod, name, value)


def _commands(log: Path, page: Path, tid: str | None) -> list[list[str]]:
    commands = [
        ["tests", str(log)],
        ["tests", "--json", str(log)],
        ["stats", str(log)],
        ["diagnose", "--all", str(log)],
        ["validate", str(log)],
        ["report", str(log), "-o", str(page)],
    ]
    if tid:
        commands.append(["timeline", tid, str(log)])
    return commands


def _read_all(log: Path, tid: str | None, workdir: Path) -> list[tuple[str, Any]]:
    """What each command shows of ``log`` on the path in force."""
    page = workdir / "page.html"
    out = []
    for argv in _commands(log, page, tid):
        page.unlink(missing_ok=True)
        try:
            result: Any = run_in_process(argv)
        except BaseException as exc:  # a crash is an output too: both paths must crash alike (they never should)
            result = ("raised", type(exc).__name__, str(exc)[:300])
        if argv[0] == "report":
            text = page.read_text(errors="replace") if page.exists() else ""
            result = (result, re.sub(r'"generated":"[^"]*"', "", text))
        out.append((" ".join(a for a in argv if a not in (str(log), str(page))), result))
    return out


# -- the logs ----------------------------------------------------------------------------------


def _seeds() -> list[bytes]:
    """Real lines: every line shape, and the labelled corpus's envelopes as the emitter writes them."""
    lines = (ROOT / "tests" / "data" / "logs" / "every-shape.log").read_bytes().splitlines()
    for path in sorted((ROOT / "tests" / "corpus").glob("*.jsonl")):
        for row in path.read_text().splitlines():
            if row.strip():
                for env in json.loads(row)["events"]:
                    lines.append(PREFIX.encode() + json.dumps(env, separators=(",", ":"), ensure_ascii=False).encode())
    return lines


_ANSI = [b"\x1b[32m", b"\x1b[0m", b"\x1b[1;31m", b"\x1b]", b"\x1b[", b"\x1b"]
_ODD = [b"\x00", b"\r", b"\xff", b"\xc3", b"\xed\xa0\x80", b"\\", b'"', b"\\u", b"\\ud800", b"\\udc00\\ud800",
        b"{", b"}", b"[", b"]", b",", b":", b"\n", b"\t", b"\xe2\x80\xa8", b"\xef\xbb\xbf", b"CVDIAG ", b"CVDIAG {",
        b'"schema_version"', b"CVDIAG_EVENT {", b"CVDIAG component=x test_id=y "]  # fmt: skip
_NUMBERS = [b"1e400", b"-0", b"18446744073709551616", b"-9223372036854775809", b"99999999999999999999999",
            b"1.5", b"NaN", b"0x10", b"true", b"null", b'"7"', b"[]", b"{}", b"-1", b"00"]  # fmt: skip
_TIMES = [b"2026-11-21T10:00:00.-12Z", b"2026-11-21T10:00:00. 12Z", b"2026-11-21 10:00:00.123Z",
          b"2026-11-21T10:00:00.123456Z", b"2026-11-21T10:00:00+01:00", b"2026-11-21T10:00:00",
          b"2026-02-30T10:00:00.000Z", b"0001-01-01T00:00:00.000Z", b"9999-12-31T23:59:59.999Z",
          b"2026-11-21T24:00:00.000Z", b"2026-11-21T10:00:00.1_2Z", b"x"]  # fmt: skip
_FIELD = re.compile(rb'"(test_id|layer|boundary|slug|ts|mono_ns|duration_ms|outcome|span_id|metadata|schema_version)":')


def _value_span(line: bytes, rnd: random.Random) -> tuple[int, int] | None:
    """Where one head field's value is in ``line`` (start, end), roughly: to the next comma or brace."""
    hits = list(_FIELD.finditer(line))
    if not hits:
        return None
    m = rnd.choice(hits)
    a = m.end()
    b = a
    depth, in_str, esc = 0, False, False
    while b < len(line):
        c = line[b]
        if in_str:
            esc, in_str = (not esc and c == 92), in_str and not (c == 34 and not esc)
        elif c == 34:
            in_str = True
        elif c in b"{[":
            depth += 1
        elif c in b"}]":
            if depth == 0:
                break
            depth -= 1
        elif c == 44 and depth == 0:
            break
        b += 1
    return a, b


def _mutate(line: bytes, rnd: random.Random) -> list[bytes]:
    """One hostile change of ``line``: the lines it becomes."""
    kind = rnd.randrange(16)
    n = len(line)
    at = rnd.randrange(n + 1)
    if kind == 0 and n:  # a bit flipped
        b = bytearray(line)
        b[rnd.randrange(n)] ^= 1 << rnd.randrange(8)
        return [bytes(b)]
    if kind == 1:  # cut, often right after a backslash (mid-escape)
        slashes = [i + 1 for i in range(n) if line[i] == 92]
        return [line[: rnd.choice(slashes) if slashes and rnd.random() < 0.5 else at]]
    if kind == 2:  # an odd byte or text inserted
        return [line[:at] + rnd.choice(_ODD) + line[at:]]
    if kind == 3:  # a head field's value replaced: wrong types, huge numbers, odd times
        span = _value_span(line, rnd)
        if span:
            new = rnd.choice([*_NUMBERS, *(b'"' + t + b'"' for t in _TIMES), b'"\\u0000"', b'"\xff"'])
            return [line[: span[0]] + new + line[span[1] :]]
    if kind == 4:  # nested deep in the metadata
        depth = rnd.choice([60, 200, 253, 254, 255, 256, 300, 489, 600, 1022, 1023, 1024, 2000])
        opener, closer = rnd.choice([(b"[", b"]"), (b'{"a":', b"}")])
        deep = opener * depth + b"1" + closer * depth
        return [line.replace(b'"metadata":{', b'"metadata":{"deep":' + deep + b",", 1)]
    if kind == 5:  # colour codes around or inside
        codes = rnd.choice(_ANSI)
        return [codes + line + rnd.choice(_ANSI)] if rnd.random() < 0.6 else [line[:at] + codes + line[at:]]
    if kind == 6:  # a Docker json-file record (sometimes split in parts, sometimes cut)
        text = line.decode("utf-8", "surrogateescape") + "\n"
        parts = [text] if rnd.random() < 0.6 else [text[i : i + 64] for i in range(0, len(text), 64)]
        return [json.dumps({"log": p, "stream": "stdout", "time": "2026-11-21T10:00:00.123456789Z"},
                           separators=(",", ":"), ensure_ascii=rnd.random() < 0.5).encode("utf-8", "surrogateescape")
                for p in parts]  # fmt: skip
    if kind == 7:  # CRI records, full or partial
        if rnd.random() < 0.5:
            return [b"2026-11-21T10:00:00.123456789Z stdout F " + line]
        cut = max(1, at)
        return [b"2026-11-21T10:00:00.1Z stdout P " + line[:cut], b"2026-11-21T10:00:00.2Z stdout F " + line[cut:]]
    if kind == 8:  # CR endings, a BOM, trailing space
        return [rnd.choice([b"\xef\xbb\xbf", b"", b"  "]) + line + rnd.choice([b"\r", b" ", b"\t", b"\r\r", b""])]
    if kind == 9:  # several markers
        return [rnd.choice([b'CVDIAG {"x":1} ', b"CVDIAG: ", b"app CVDIAG ", b"CVDIAG_EVENT {} "]) + line]
    if kind == 10:  # a key twice, or a field dropped
        span = _value_span(line, rnd)
        if span:
            return [line[: span[1]] + b',"ts":"2026-11-21T10:00:01.000Z"' + line[span[1] :]]
    if kind == 11:  # a compose or logger prefix
        return [rnd.choice([b"backend-1  | ", b"2026-11-21 10:00:00,123 INFO app: ", b"[app] "]) + line]
    if kind == 12:  # a long string in the metadata
        filler = rnd.choice([b"a", b"\\n", b"\xc3\xa9", b"\\u00e9", b"\\\\"]) * rnd.choice([10, 1000, 70000])
        return [line.replace(b'"metadata":{', b'"metadata":{"long":"' + filler + b'",', 1)]
    if kind == 13:  # a lone surrogate, escaped, in a head string
        return [line.replace(b'"slug":"', b'"slug":"\\ud800', 1)]
    if kind == 14:  # the line twice on one line, or joined with the next
        return [line + line[:at]]
    return [line]


def make_log(seeds: list[bytes], rnd: random.Random) -> bytes:
    start = rnd.randrange(len(seeds))
    lines = seeds[start : start + rnd.randint(3, 40)]
    out: list[bytes] = []
    for line in lines:
        pieces = [line]
        if rnd.random() < 0.35:
            for _ in range(rnd.randint(1, 3)):
                pieces = [x for p in pieces for x in _mutate(p, rnd)]
        out.extend(pieces)
    return b"\n".join(out) + rnd.choice([b"\n", b"", b"\r\n"])


def _a_test_id(log: bytes) -> str | None:
    m = re.search(rb'"test_id":"([A-Za-z0-9_.-]{1,80})"', log)
    return m.group(1).decode() if m else None


# -- the emit side ---------------------------------------------------------------------------


def _emit_case(rnd: random.Random) -> Callable[[], tuple[Any, Any]] | None:
    """One ``emit`` with hostile metadata, written both ways (``test_emit_compiled``'s harness)."""
    try:
        import test_emit_compiled as tec
        from test_emit_fused import BOUNDARIES
    except ImportError:  # the emit side's harness needs the frameworks extra: not this run's
        return None
    from cvdiag.contract.schema import lookup
    from cvdiag.write import emitter

    if emitter._line_compiled is None:
        return None
    leaves: list[Any] = ["x", "", "\x00", "\ud800", "a\udc00b", "é" * 40, "sk-" + "A" * 40, "\r\n", "\u2028",
                         0, -1, 2**63, -(2**63) - 1, 2**64, 10**30, 1.5, float("inf"), float("nan"), -0.0, True, None,
                         b"bytes", ("t", 1), {"k": "v"}, [1, [2, [3]]], {1: "int key"}]  # fmt: skip
    name = rnd.choice(BOUNDARIES)
    keys = [*sorted(lookup(name).metadata or ()), "undeclared", "password", "api_key"]

    def value(depth: int = 0) -> Any:
        if depth < 3 and rnd.random() < 0.2:
            return {rnd.choice(keys): value(depth + 1) for _ in range(rnd.randint(0, 3))}
        if depth < 3 and rnd.random() < 0.1:
            return [value(depth + 1) for _ in range(rnd.randint(0, 3))]
        return rnd.choice(leaves)

    call = {
        "tier": rnd.choice(["default", "verbose", "debug"]),
        "demo": rnd.choice(["chat", "x\x00", "\ud800", "é"]),
        "name": name,
        "metadata": {rnd.choice(keys): value() for _ in range(rnd.randint(0, 6))},
        "outcome": rnd.choice(["ok", "err", "info", "timeout"]),
        "duration_ms": rnd.choice([None, 0, 5, 2**70, True, -3]),
        "edge_headers": rnd.choice([None, {"cf-ray": "abc"}, {"retry-after": "\x00"}]),
    }
    return lambda: (tec._written(call, compiled=True), tec._written(call, compiled=False))


# -- the loop ---------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "cvdiag-fuzz")
    args = parser.parse_args(argv)
    if fold._CFOLD is None or _compiled.CFOLD is None:
        print("fuzz_compiled: the compiled fold is off or not built: nothing to compare", file=sys.stderr)
        return 1
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 32)
    rnd = random.Random(seed)
    seeds = _seeds()
    args.out.mkdir(parents=True, exist_ok=True)
    end = time.monotonic() + args.seconds
    logs = emits = 0
    found: list[str] = []
    with tempfile.TemporaryDirectory() as work:
        workdir = Path(work)
        log = workdir / "fuzz.log"
        while time.monotonic() < end:
            data = make_log(seeds, rnd)
            log.write_bytes(data)
            tid = _a_test_id(data)
            compiled = _read_all(log, tid, workdir)
            with python_path():
                python = _read_all(log, tid, workdir)
            logs += 1
            for (what, got), (_, want) in zip(compiled, python, strict=True):
                if got != want:
                    kept = args.out / f"read-{seed}-{logs}.log"
                    kept.write_bytes(data)
                    found.append(f"{what}: the paths differ on {kept}")
                    print(f"fuzz_compiled: {found[-1]}", file=sys.stderr)
                    break
            for _ in range(5):
                case = _emit_case(rnd)
                if case is None:
                    break
                got, want = case()
                emits += 1
                if got != want:
                    found.append(f"emit: the paths differ: {got!r} != {want!r}"[:2000])
                    print(f"fuzz_compiled: {found[-1]}", file=sys.stderr)
    print(f"fuzz_compiled: seed {seed}, {logs} logs read both ways by {len(_commands(log, log, 'x'))} commands,"
          f" {emits} emits written both ways, {len(found)} differences")  # fmt: skip
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
