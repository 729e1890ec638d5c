"""Writing a run into a history so that none is lost: the legs of one CI job, and runs
that could not be written, kept until the next writer.

Legs. A matrix or a sharded job runs several test sessions under one CI run id (GitHub
Actions gives every leg the same repo/run/attempt/job). Each leg is a run of its own: a
leg is a session on one machine with its own environment, so a test of a three-leg
matrix ran three times. When a run's id is taken by a run of *other* tests, this one
is another leg and is recorded as ``ID+DIGEST`` (a digest of its test ids); the same
tests under the same id are the same run (the same logs added twice), recorded once.

Kept runs. A run that cannot be written now (DuckDB's lock wait ran out, the server is
down, the file is damaged) is kept beside the history (``places``); the next ``cvdiag
history add`` or ``pytest --cvdiag-history`` to that history records it first. At most
``MAX_KEPT`` runs wait per history.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import orjson

from cvdiag.history.places import kept_folder, scratch, unlink
from cvdiag.history.store import (
    FIELD_MAX,
    RESULT_COLUMNS,
    HistoryError,
    LastingError,
    Result,
    Run,
    Store,
    keyed,
    result_rows,
    tests_digest,
)

#: Runs kept per history at most: a history that stays unwritable does not fill the disk.
MAX_KEPT = 50
_KEPT_SUFFIX = ".run.json"


@dataclass(slots=True)
class Recorded:
    """What a write did: the run's id (a leg's own, when it was one), whether it was
    added (False: it was there), where, and the kept runs recorded before it."""

    run_id: str
    added: bool
    where: str
    earlier: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


class Kept(HistoryError):
    """The history could not be written; the run is kept for the next writer (or, when
    even that failed, the message says so)."""


# -- writing ------------------------------------------------------------------------------


def record(db: str | None, run: Run, results: Sequence[Result]) -> Recorded:
    """Writes the kept runs of this history, then ``run``; a ``Kept`` error (the run kept)
    when the history cannot be written now, a ``LastingError`` when it never will be as
    it is (a newer schema, a folder at its path, a missing extra)."""
    from cvdiag.history.backend import open_store

    try:
        store = open_store(db, write=True)
    except LastingError:
        raise
    except HistoryError as exc:
        raise _kept(db, run, results, exc) from None
    try:
        done = Recorded(run.run_id, False, store.where)
        try:
            done.earlier, done.notes = _record_kept(store, db)
            done.run_id, done.added = add_leg(store, run, results)
        except LastingError:
            raise
        except HistoryError as exc:
            raise _kept(db, run, results, exc) from None
        return done
    finally:
        store.close()


def record_kept(db: str | None) -> Recorded | None:
    """Writes the runs kept for this history, if there are any; None when there are none."""
    from cvdiag.history.backend import open_store

    if not kept_runs(db):
        return None
    store = open_store(db, write=True)
    try:
        earlier, notes = _record_kept(store, db)
        return Recorded("", False, store.where, earlier, notes)
    finally:
        store.close()


def add_leg(store: Store, run: Run, results: Sequence[Result]) -> tuple[str, bool]:
    """Adds ``run``, or, when its id is another leg's (other tests), as a leg of its own:
    (the id it has, whether it was added)."""
    if store.add_run(run, results):
        return run.run_id, True
    there = [r[0] for r in store.fetch("SELECT test_id FROM results WHERE run_id = %s", [run.run_id])]
    digest = tests_digest(r.test_id for r in results)
    if tests_digest(there) == digest:
        return run.run_id, False  # the same run, added before
    leg_id = f"{keyed(run.run_id, FIELD_MAX - 9)}+{digest[:8]}"
    leg = replace(run, run_id=leg_id)
    return leg_id, store.add_run(leg, [replace(r, run_id=leg_id) for r in results])


def _kept(db: str | None, run: Run, results: Sequence[Result], exc: HistoryError) -> Kept:
    try:
        path = keep(db, run, results)
    except OSError as err:
        return Kept(f"{exc}; the run could not be kept for later either: {err.strerror or err}")
    if path is None:
        return Kept(f"{exc}; {MAX_KEPT} runs wait already in {kept_folder(db)}: this one is not kept")
    return Kept(
        f"{exc}; run {run.run_id} is kept in {path}: the next `cvdiag history add` or "
        "`pytest --cvdiag-history` to this history records it"
    )


def keep(db: str | None, run: Run, results: Sequence[Result]) -> str | None:
    """Keeps a run for a later writer; its file, or None when ``MAX_KEPT`` wait already."""
    folder = kept_folder(db)
    os.makedirs(folder, exist_ok=True)
    key = f"{run.run_id}\n{tests_digest(r.test_id for r in results)}"  # two legs of one id: two files
    name = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:20] + _KEPT_SUFFIX
    path = os.path.join(folder, name)
    if not os.path.exists(path) and len(kept_runs(db)) >= MAX_KEPT:
        return None
    doc = {"run": asdict(run), "columns": list(RESULT_COLUMNS), "results": result_rows(results)}
    staged = scratch(db, "keeping")
    try:
        with open(staged, "wb") as fh:
            fh.write(orjson.dumps(doc))
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(staged, path)  # whole or not at all
    except BaseException:
        unlink(staged)
        raise
    return path


def kept_runs(db: str | None) -> list[str]:
    """The files of the runs waiting for this history, oldest first."""
    folder = kept_folder(db)
    try:
        names = [n for n in os.listdir(folder) if n.endswith(_KEPT_SUFFIX)]
    except OSError:
        return []
    paths = [os.path.join(folder, n) for n in names]
    return sorted(paths, key=lambda p: (_mtime(p), p))


def _mtime(path: str) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0.0


def _record_kept(store: Store, db: str | None) -> tuple[list[str], list[str]]:
    """Adds every kept run (each in its own transaction) and removes its file: the ids
    added, and a note per kept file that could not be read."""
    added, notes = [], []
    for path in kept_runs(db):
        try:
            run, results = _load(path)
        except (OSError, ValueError, TypeError, KeyError) as exc:
            with contextlib.suppress(OSError):
                os.replace(path, path + ".unreadable")
            notes.append(f"a kept run could not be read ({exc}); it is left in {path}.unreadable")
            continue
        try:
            run_id, was_added = add_leg(store, run, results)
        except LastingError:
            raise
        except HistoryError as exc:  # this one only, perhaps: it waits, and blocks no other run
            notes.append(f"run {run.run_id}, kept in {path}, could not be recorded yet: {exc}")
            continue
        if was_added:
            added.append(run_id)
        unlink(path)
    if added or notes:
        with contextlib.suppress(OSError):
            os.rmdir(kept_folder(db))  # only when nothing else waits there
    return added, notes


def _load(path: str) -> tuple[Run, list[Result]]:
    with open(path, "rb") as fh:
        doc: dict[str, Any] = orjson.loads(fh.read())
    columns = doc["columns"]
    if list(columns) != list(RESULT_COLUMNS):  # written by another cvdiag: by name
        rows = [Result(**dict(zip(columns, row, strict=True))) for row in doc["results"]]
    else:
        rows = [Result(*row) for row in doc["results"]]
    return Run(**doc["run"]), rows
