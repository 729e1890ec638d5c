"""Time two scrubbers side by side in one process: another checkout's and this one's.

    git archive <commit> cvdiag | tar -x -C /tmp/old
    .venv/bin/python tools/compare_scrubbers.py /tmp/old/cvdiag [--rounds 60]

Wall-clock timings on a shared machine move by tens of percent between runs; here the
two scrubbers run alternately on the same inputs, and the best time of each over many
rounds is compared, so load that comes and goes hits both alike. Prints µs per call of
``_scrub_text`` (the uncached path) and the ratio new/old.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

import score_scrub  # noqa: E402

from cvdiag.contract import scrubber as new  # noqa: E402


def _load_old(package_dir: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "cvdiag_old", package_dir / "__init__.py", submodule_search_locations=[str(package_dir)]
    )
    package = importlib.util.module_from_spec(spec)
    sys.modules["cvdiag_old"] = package
    spec.loader.exec_module(package)
    return importlib.import_module("cvdiag_old.scrubber")


def _per_call_us(module: ModuleType, texts: list[str], repeat: int) -> float:
    scrub_text = module._scrub_text
    start = time.perf_counter()
    for _ in range(repeat):
        for text in texts:
            scrub_text(text)
    return (time.perf_counter() - start) / repeat / len(texts) * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old", type=Path, help="the other checkout's cvdiag/ directory")
    parser.add_argument("--rounds", type=int, default=60)
    args = parser.parse_args(argv)
    old = _load_old(args.old.resolve())
    corpus = [record["text"] for record in score_scrub.load()]
    cases = (
        (f"{len(score_scrub.EXCEPTION_500)}-char exception message", [score_scrub.EXCEPTION_500], 20),
        (f"{len(score_scrub.WITH_SECRETS)}-char message holding 2 secrets", [score_scrub.WITH_SECRETS], 20),
        (f"mean over the {len(corpus)} corpus strings", corpus, 1),
    )
    print("| input | old µs | new µs | new/old |\n|---|---|---|---|")
    for name, texts, repeat in cases:
        best = {"old": float("inf"), "new": float("inf")}
        for _ in range(args.rounds):
            for label, module in (("old", old), ("new", new)):
                best[label] = min(best[label], _per_call_us(module, texts, repeat))
        print(f"| {name} | {best['old']:.1f} | {best['new']:.1f} | {best['new'] / best['old']:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
