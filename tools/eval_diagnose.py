"""Score ``cvdiag.diagnosis`` on the labelled corpus: confusion matrix, per-class precision/recall.

    python tools/eval_diagnose.py [CORPUS.jsonl ...]   # default: tests/corpus/*.jsonl

Exits 1 when any class of ``CLASSES`` has precision or recall below 0.95 (a class with
no scenario in the corpus counts as 0: every class must be covered), 0 otherwise.
``-v`` also prints each misclassified scenario with the classifier's reason.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cvdiag.contract.timestamps import parse_ts
from cvdiag.diagnosis import CLASSES, Diagnosis, Thresholds, diagnose

ROOT = Path(__file__).resolve().parent.parent
MIN_SCORE = 0.95


@dataclass(frozen=True, slots=True)
class Scored:
    name: str
    label: str
    diagnosis: Diagnosis


def load(paths: Iterable[Path]) -> list[dict]:
    records = []
    for path in paths:
        with path.open(encoding="utf-8") as fh:
            records.extend(json.loads(line) for line in fh if line.strip())
    return records


def run(record: dict) -> Diagnosis:
    """Classify one corpus record the way the CLI would (its thresholds and log end)."""
    thresholds = Thresholds(**record.get("thresholds", {}))
    log_end = parse_ts(record["log_end"]) if record.get("log_end") else None
    return diagnose(record["events"], thresholds, log_end=log_end)


def score(records: Iterable[dict]) -> list[Scored]:
    return [Scored(r["name"], r["label"], run(r)) for r in records]


def metrics(scored: list[Scored]) -> dict[str, dict[str, float | int]]:
    """Per class: support (labelled), predicted, precision, recall (0.0 when undefined)."""
    out = {}
    for cls in CLASSES:
        tp = sum(1 for s in scored if s.label == cls and s.diagnosis.cls == cls)
        support = sum(1 for s in scored if s.label == cls)
        predicted = sum(1 for s in scored if s.diagnosis.cls == cls)
        out[cls] = {
            "support": support,
            "predicted": predicted,
            "precision": tp / predicted if predicted else 0.0,
            "recall": tp / support if support else 0.0,
        }
    return out


def confusion(scored: list[Scored]) -> dict[str, dict[str, int]]:
    """rows: labelled class, columns: predicted class."""
    matrix = {a: dict.fromkeys(CLASSES, 0) for a in CLASSES}
    for s in scored:
        matrix.setdefault(s.label, dict.fromkeys(CLASSES, 0))
        matrix[s.label][s.diagnosis.cls] = matrix[s.label].get(s.diagnosis.cls, 0) + 1
    return matrix


def failing(table: dict[str, dict[str, float | int]]) -> list[str]:
    return [cls for cls, m in table.items() if m["precision"] < MIN_SCORE or m["recall"] < MIN_SCORE]


def render(scored: list[Scored], *, verbose: bool = False) -> str:
    matrix = confusion(scored)
    table = metrics(scored)
    short = {cls: f"c{i}" for i, cls in enumerate(CLASSES)}
    width = max(len(c) for c in CLASSES)
    legend = ", ".join(f"{v}={k}" for k, v in short.items())
    lines = [f"{len(scored)} scenarios; rows = label, columns = predicted ({legend})"]
    lines.append(" " * (width + 1) + " ".join(f"{short[c]:>3}" for c in CLASSES))
    for label in matrix:
        cells = " ".join(f"{(matrix[label].get(c, 0) or '.'):>3}" for c in CLASSES)
        lines.append(f"{label:<{width}} {cells}")
    lines.append("")
    lines.append(f"{'class':<{width}} support predicted precision recall")
    for cls, m in table.items():
        flag = "" if cls not in failing(table) else "  < 0.95"
        lines.append(
            f"{cls:<{width}} {m['support']:>7} {m['predicted']:>9} {m['precision']:>9.3f} {m['recall']:>6.3f}{flag}"
        )
    wrong = [s for s in scored if s.label != s.diagnosis.cls]
    lines.append("")
    lines.append(f"{len(scored) - len(wrong)}/{len(scored)} correct")
    if verbose or wrong:
        for s in wrong:
            lines.append(f"  MISS {s.name}: label {s.label}, got {s.diagnosis.cls}: {s.diagnosis.reason}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="*", type=Path)
    parser.add_argument("-v", "--verbose", action="store_true", help="also print every reason")
    args = parser.parse_args(argv)
    paths = args.paths or sorted((ROOT / "tests" / "corpus").glob("*.jsonl"))
    if not paths:
        print("no corpus files found", file=sys.stderr)
        return 1
    scored = score(load(paths))
    print(render(scored, verbose=args.verbose))
    if args.verbose:
        for s in scored:
            print(f"  {s.name}: {s.diagnosis.cls} ({s.diagnosis.confidence}) {s.diagnosis.reason}")
    bad = failing(metrics(scored))
    if bad:
        print(f"FAIL: precision or recall below {MIN_SCORE} for {', '.join(bad)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
