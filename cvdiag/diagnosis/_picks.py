"""The first or last of a kind of value, decided by time, whatever the arrival order.

Envelopes arrive in any order (several files merged), so "first" and "last" are decided
by the order key (``contract.timestamps.order_key``), not by arrival. A value without
a key never displaces one that has a key; among keyless values the first offered stays.

Every first/last value of the evidence is decided by the two rules here, ``earlier``
and ``later``; only where it is kept differs, for memory. A value most tests never have
is a ``Pick`` (a None slot until offered: ``earliest``, ``latest``); a value most tests
have sits in a slot of its own next to a slot for its key (a ``Pick`` would cost an
object per test), replaced when ``earlier``/``later`` say so; a key alone is kept with
``latest_key``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

#: Does an offer at a key replace what a pick holds: (held value, held key, key) -> bool.
_Replaces = Callable[[Any, int | None, int | None], bool]


class Pick:
    """One kept value and its order key; see ``earliest`` and ``latest``.

    A test holds a dozen of these, most never offered: the slot stays None until the
    first offer, so an unused pick costs a pointer, not an object.
    """

    __slots__ = ("key", "value")

    def __init__(self, key: int | None, value: Any) -> None:
        self.key, self.value = key, value

    def __bool__(self) -> bool:
        return self.value is not None


def earliest(pick: Pick | None, key: int | None, value: Any) -> Pick:
    """``pick`` keeping the earlier of what it holds and ``value`` (a new pick if None)."""
    return _offer(pick, key, value, earlier)


def latest(pick: Pick | None, key: int | None, value: Any) -> Pick:
    """``pick`` keeping the later of what it holds and ``value`` (a new pick if None)."""
    return _offer(pick, key, value, later)


def _offer(pick: Pick | None, key: int | None, value: Any, replaces: _Replaces) -> Pick:
    if pick is None:
        return Pick(key, value)
    if replaces(pick.value, pick.key, key):
        pick.key, pick.value = key, value
    return pick


def earlier(held: Any, held_key: int | None, key: int | None) -> bool:
    """Does an offer at ``key`` replace ``held`` (None: nothing yet) as the earliest?"""
    return held is None or (key is not None and (held_key is None or key < held_key))


def later(held: Any, held_key: int | None, key: int | None) -> bool:
    """Does an offer at ``key`` replace ``held`` (None: nothing yet) as the latest?"""
    return held is None or (key is not None and (held_key is None or key >= held_key))


def value_of(pick: Pick | None) -> Any:
    """The value of a pick, None when nothing was offered to it."""
    return None if pick is None else pick.value


def latest_key(held: int | None, key: int | None) -> int | None:
    """The later of two order keys, a missing one never winning: a key kept on its own."""
    return key if later(held, held, key) else held


def earliest_of(picks: Iterable[tuple[Any, Pick]]) -> tuple[Any, Pick] | None:
    """The (name, pick) holding the earliest value of several picks; None for none."""
    best: tuple[Any, Pick] | None = None
    for named in picks:
        if earlier(best, best[1].key if best is not None else None, named[1].key):
            best = named
    return best
