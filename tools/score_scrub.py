"""Score the scrubber on the labelled corpus and time it on the emit hot path.

    .venv/bin/python tools/score_scrub.py [--corpus tests/data/scrub_corpus.jsonl] [--no-timing] [-v]

Prints the share of labelled secret substrings removed (overall and per family), the
share of harmless substrings altered, and median timings. Exits 1 when fewer than 99%
of secrets are removed or more than 2% of harmless substrings are altered.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import timeit
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cvdiag.contract import scrubber as scrub_module  # noqa: E402
from cvdiag.contract.scrubber import scrub  # noqa: E402

CORPUS = ROOT / "tests" / "data" / "scrub_corpus.jsonl"
MIN_REMOVED = 0.99
MAX_ALTERED = 0.02

SHORT_BENIGN = ["openai", "gpt-4o-mini", "/api/chat", "text/event-stream", "anthropic", "POST", "message", "default"]
EXCEPTION_500 = (
    "openai.AuthenticationError: Error code: 401 - {'error': {'message': 'Incorrect API key provided: "
    "sk-proj-****wXyZ. You can find your API key at https://platform.openai.com/account/api-keys.', "
    "'type': 'invalid_request_error', 'param': None, 'code': 'invalid_api_key'}} while calling "
    "POST https://api.openai.com/v1/chat/completions for model gpt-4o-mini (request id req_8f3a2c9d1e, "
    "test id d4-agno-1234, trace 4bf92f3577b34da6a3ce929d0e0e4736) after 3 retries in 1532 ms; "
    "last response headers: {'content-type': 'application/json', 'retry-after': '2'}"
)

WITH_SECRETS = EXCEPTION_500.replace("sk-proj-****wXyZ", "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv").replace(
    "'retry-after': '2'", "'authorization': 'Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiI0MiJ9.c2ln'"
)


@dataclass
class Score:
    secrets: int = 0
    removed: int = 0
    kept_total: int = 0
    altered: int = 0
    by_family: dict[str, list[int]] = field(default_factory=lambda: defaultdict(lambda: [0, 0]))
    misses: list[tuple[str, str, str]] = field(default_factory=list)  # (kind, substring, output)

    @property
    def removed_rate(self) -> float:
        return self.removed / self.secrets if self.secrets else 1.0

    @property
    def altered_rate(self) -> float:
        return self.altered / self.kept_total if self.kept_total else 0.0

    @property
    def passed(self) -> bool:
        return self.removed_rate >= MIN_REMOVED and self.altered_rate <= MAX_ALTERED


def load(path: Path = CORPUS) -> list[dict]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def score(records: list[dict]) -> Score:
    result = Score()
    for record in records:
        out = scrub(record["text"])
        family = record["family"]
        for secret in record["secrets"]:
            result.secrets += 1
            result.by_family[family][1] += 1
            if secret in out:
                result.misses.append(("leaked", secret, out))
            else:
                result.removed += 1
                result.by_family[family][0] += 1
        for keep in record["keep"]:
            result.kept_total += 1
            if keep not in out:
                result.altered += 1
                result.misses.append(("altered", keep, out))
    return result


def _median_us(fn, arg: str, number: int) -> float:
    runs = timeit.repeat(lambda: fn(arg), number=number, repeat=7)
    return statistics.median(runs) / number * 1e6


def timings() -> dict[str, float]:
    uncached = scrub_module._scrub_text  # the path a string takes the first time it is seen
    return {
        "short benign, cached (median of strings)": statistics.median(
            _median_us(scrub, s, 20000) for s in SHORT_BENIGN
        ),
        "short benign, first sight (median of strings)": statistics.median(
            _median_us(uncached, s, 20000) for s in SHORT_BENIGN
        ),
        f"{len(EXCEPTION_500)}-char exception message": _median_us(scrub, EXCEPTION_500, 2000),
        f"{len(WITH_SECRETS)}-char message holding 2 secrets": _median_us(scrub, WITH_SECRETS, 2000),
        "hostile 100000 x 'a' (capped scan)": _median_us(scrub, "a" * 100_000, 50),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--no-timing", action="store_true")
    parser.add_argument("-v", "--verbose", action="store_true", help="print every leak and alteration")
    args = parser.parse_args(argv)

    records = load(args.corpus)
    result = score(records)
    secrets, kept = result.secrets, result.kept_total
    print(f"corpus: {len(records)} strings, {secrets} secret substrings, {kept} harmless substrings")
    print(f"secrets removed:   {result.removed}/{secrets} = {result.removed_rate:.1%} (need >= {MIN_REMOVED:.0%})")
    print(f"harmless altered:  {result.altered}/{kept} = {result.altered_rate:.1%} (need <= {MAX_ALTERED:.0%})")
    print("per family (removed/total):")
    for family, (removed, total) in sorted(result.by_family.items()):
        print(f"  {family:<24} {removed:>3}/{total:<3} {removed / total:.0%}")
    if args.verbose:
        for kind, sub, out in result.misses:
            print(f"{kind}: {sub!r}\n    in {out!r}")
    if not args.no_timing:
        print("timing (median µs per call):")
        for name, us in timings().items():
            print(f"  {name:<46} {us:8.2f}")
    return 0 if result.passed else 1


if __name__ == "__main__":
    sys.exit(main())
