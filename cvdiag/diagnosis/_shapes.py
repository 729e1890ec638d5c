"""Compact parts of an ``Evidence``: what a dict per test would cost several times over.

The CLI holds one ``Evidence`` per test of a log (tens of thousands), so the parts
most tests fill are small slotted objects, and the part every test of an app fills
alike (its boundary names) is shared between tests.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cvdiag.diagnosis._convert import as_float, as_int, as_name
from cvdiag.diagnosis._picks import earlier, later, latest_key

#: Distinct HTTP statuses (and abort kinds) one test keeps; a log inventing more is cut here.
MAX_STATUSES = 16


class Shape:
    """The boundary names a test has seen, in order of first sight, shared between tests.

    Tests of one app see the same few sequences of names, so the histogram of each
    test is a list of counts plus a pointer to one of a few shared shapes (a shared
    dict per test would cost more than the rest of its evidence). A shape knows the
    shape one new name leads to; past ``_MAX_SHAPES`` new shapes are not remembered,
    so a log inventing names cannot grow the cache.
    """

    __slots__ = ("index", "names", "next", "runs")

    def __init__(self, names: tuple[str, ...]) -> None:
        self.names = names
        self.index = {name: i for i, name in enumerate(names)}
        self.next: dict[str, Shape] = {}
        self.runs: dict[tuple[str, ...], Shape] = {}

    def then(self, name: str) -> Shape:
        """The shape of these names followed by ``name``."""
        global _remembered
        shape = self.next.get(name)
        if shape is None:
            shape = Shape((*self.names, name))
            if _remembered < _MAX_SHAPES:
                _remembered += 1
                self.next[name] = shape
        return shape

    def then_all(self, names: tuple[str, ...]) -> Shape:
        """``then`` of each of ``names`` in turn, the run remembered as one: tests hand over
        the same few runs of names (the compiled fold keeps each test's whole)."""
        global _remembered
        shape = self.runs.get(names)
        if shape is None:
            shape = self
            for name in names:
                shape = shape.then(name)
            if _remembered < _MAX_SHAPES:
                _remembered += 1
                self.runs[names] = shape
        return shape

    def __reduce__(self) -> tuple[Any, ...]:  # pickle the names, not the cache behind them
        return Shape, (self.names,)


_MAX_SHAPES = 4096
# Shapes (and runs) remembered so far by every shape of the process. A module global, not a class
# attribute: writing one of those would empty the interpreter's attribute caches of Shape.
_remembered = 0

#: The shape every test starts from.
NO_BOUNDARIES = Shape(())


class Response:
    """The numbers of the last LLM response (a dict per test would cost five times more).

    ``empty`` is True for an ok answer that produced no output (``output_chars`` 0, or a
    2xx stream of 0 events), whatever token count the provider claimed. ``extra`` is
    (finish_reason, tool_calls, output_valid) when one says more than a plain answer (an
    unusual finish, tool calls asked for, structured output checked), else None. Never
    changed once made; a plain slotted class, not a dataclass: making a dataclass costs
    every start-up of the CLI more than the rest of this module.
    """

    __slots__ = (
        "completion_tokens",
        "empty",
        "extra",
        "latency_ms",
        "model",
        "output_chars",
        "prompt_tokens",
        "provider",
        "response_token_count",
    )

    def __init__(
        self,
        provider: str | None,
        model: str | None,
        latency_ms: float | None,
        response_token_count: int | None,
        prompt_tokens: int | None,
        completion_tokens: int | None,
        output_chars: int | None = None,
        empty: bool = False,
        extra: tuple[str | None, int | None, bool | None] | None = None,
    ) -> None:
        self.provider = provider
        self.model = model
        self.latency_ms = latency_ms
        self.response_token_count = response_token_count
        self.prompt_tokens = prompt_tokens
        self.completion_tokens = completion_tokens
        self.output_chars = output_chars
        self.empty = empty
        self.extra = extra


#: What the evidence reports for a test without an LLM response.
NO_RESPONSE = Response(None, None, None, None, None, None)


class LLMFailures:
    """The failed LLM attempts of a test, made only when one failed: how many, with which
    HTTP statuses (in time order), the provider's error type (the earliest named) and
    retry-after (the latest given), the highest attempt number. Decided by time, as every
    first and last value is (``_picks``), so merged files in any order say the same."""

    __slots__ = (
        "error_type", "error_type_key", "last_key", "max_attempt", "no_status", "retry_after_key",
        "retry_after_ms", "status_keys", "statuses",
    )  # fmt: skip

    def __init__(self) -> None:
        self.statuses: tuple[int, ...] = ()  # distinct, the earliest MAX_STATUSES by time
        self.status_keys: tuple[int | None, ...] = ()  # the earliest key of each
        self.no_status = 0  # failed attempts without an HTTP error status (transport errors, cut bodies)
        self.error_type: str | None = None
        self.error_type_key: int | None = None
        self.retry_after_ms: float | None = None
        self.retry_after_key: int | None = None
        self.max_attempt: int | None = None
        self.last_key: int | None = None

    def add(self, md: Mapping[str, Any], key: int | None) -> None:
        """Count one failed attempt from its ``backend.llm.call.response`` metadata."""
        status = as_int(md.get("http_status"))
        if status is None or status < 400:  # no answer, or a 2xx whose body broke off
            self.no_status += 1
        else:
            self._status(status, key)
        named = as_name(md.get("error_type"))
        if named is not None and earlier(self.error_type, self.error_type_key, key):
            self.error_type, self.error_type_key = named, key
        retry_after = as_float(md.get("retry_after_ms"))
        if retry_after is not None and later(self.retry_after_ms, self.retry_after_key, key):
            self.retry_after_ms, self.retry_after_key = retry_after, key
        attempt = as_int(md.get("attempt"))
        if attempt is not None and (self.max_attempt is None or attempt > self.max_attempt):
            self.max_attempt = attempt
        self.last_key = latest_key(self.last_key, key)

    def _status(self, status: int, key: int | None) -> None:
        """``status`` among the distinct ones, at its earliest time; past MAX_STATUSES the
        latest goes (in time order that is the newcomer, as before)."""
        pairs = dict(zip(self.statuses, self.status_keys, strict=True))
        if status in pairs and not earlier(status, pairs[status], key):
            return
        pairs[status] = key
        # keyed by time, keyless after them in the order they came (a stable sort)
        ordered = sorted(pairs.items(), key=lambda pair: (pair[1] is None, pair[1] or 0))[:MAX_STATUSES]
        self.statuses = tuple(status for status, _ in ordered)
        self.status_keys = tuple(key for _, key in ordered)
