"""What one test's envelopes showed: the slots an ``Evidence`` keeps, filled by the fold.

The handlers of the ``_fold_*`` modules write these; ``evidence.py`` adds the entry
points (``add``, ``add_head``) and the questions the rules ask. A class of its own so the
handlers can name what they fill without importing ``evidence.py``, which imports them.

Memory stays constant in the number of envelopes: counters, small bounded dictionaries
and a few first/last values (``_picks``). The CLI holds one per test of a log (tens of
thousands), so each costs about 1.2 KB: what most tests never fill costs a None slot,
what they all fill sits in slots of its own rather than in objects.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from cvdiag.contract.layout import COUNTED
from cvdiag.diagnosis._agentic import Agentic
from cvdiag.diagnosis._picks import Pick
from cvdiag.diagnosis._shapes import NO_BOUNDARIES, LLMFailures, Response


class Facts:
    """The state of one test's evidence (see the module docstring)."""

    __slots__ = (
        "abort_first",
        "aborts",
        "agent_error_class",
        "agent_exits",
        "agent_failed",
        "agent_name",
        "agent_name_key",
        "agentic",
        "aimock_chunk_bytes",
        "aimock_decisions",
        "aimock_error",
        "aimock_events",
        "aimock_matched",
        "aimock_reject",
        "aimock_sent",
        "backend_events",
        "backend_statuses",
        "boundary_counts",
        "boundary_other",
        "boundary_shape",
        "complete_5xx",
        "complete_last",
        "complete_last_key",
        "complete_ok_bodiless",
        "complete_ok_empty",
        "complete_ok_with_events",
        "completes",
        "completes_5xx",
        "edge_mitigated",
        "edge_proxy",
        "edge_rays",
        "edge_retry",
        "error_first",
        "errors",
        "events",
        "failures",
        "first_boundary",
        "first_byte",
        "first_byte_key",
        "first_key",
        "first_ts",
        "heartbeat_last",
        "heartbeat_last_key",
        "heartbeat_max",
        "heartbeats",
        "ingress",
        "last_backend_boundary",
        "last_backend_key",
        "last_backend_ts",
        "last_boundary",
        "last_key",
        "last_ts",
        "llm_errors",
        "llm_failures",
        "llm_first_error",
        "llm_last_ok_key",
        "llm_last_response",
        "llm_last_response_key",
        "llm_last_start",
        "llm_last_start_key",
        "llm_ok",
        "llm_ok_with_tokens",
        "llm_ok_zero_tokens",
        "llm_responses",
        "llm_slowest",
        "llm_starts",
        "llm_timeouts",
        "other_events",
        "probe_alternate",
        "probe_console_errors",
        "probe_console_first",
        "probe_crash",
        "probe_events",
        "probe_exit",
        "probe_first_tokens",
        "probe_network_errors",
        "skipped",
        "sse_events",
        "test_id",
    )
    #: Counters ``contract.layout.COUNTED`` declares that no slot above holds: slots of their own.
    _NEW_COUNTERS = tuple(sorted(set(COUNTED.values()) - set(__slots__)))
    __slots__ = (*__slots__, *_NEW_COUNTERS)

    def __init__(self, test_id: str) -> None:
        self.test_id = test_id
        for slot in self._NEW_COUNTERS:
            setattr(self, slot, 0)
        self.events = 0
        self.skipped = 0  # envelopes too odd to use (not a mapping, no boundary)
        self.aimock_events = self.backend_events = self.other_events = self.probe_events = 0
        # The boundary histogram: names in a shape shared by the tests that saw the same
        # names in the same order, counts in a list of this test's own.
        self.boundary_shape = NO_BOUNDARIES
        self.boundary_counts: list[int] = []
        self.boundary_other = 0  # envelopes beyond _MAX_BOUNDARY_NAMES names
        self.failures = 0  # envelopes whose outcome is err or timeout
        # The earliest and latest envelope, and the latest of the backend: key, ts, boundary
        # in slots of their own (the boundary, always a str, says whether one was seen).
        self.first_key: int | None = None
        self.first_ts: str | None = None
        self.first_boundary: str | None = None
        self.last_key: int | None = None
        self.last_ts: str | None = None
        self.last_boundary: str | None = None
        self.last_backend_key: int | None = None
        self.last_backend_ts: str | None = None
        self.last_backend_boundary: str | None = None
        # probe (harness)
        self.probe_crash: Pick | None = None  # (boundary, error text)
        self.probe_exit: Pick | None = None  # (terminal_outcome, first_token_delta_ms, failure_classifier)
        self.probe_first_tokens = 0
        self.probe_alternate = 0
        self.probe_console_errors = 0
        self.probe_console_first: Pick | None = None
        self.probe_network_errors = 0
        # edge
        self.edge_mitigated: Pick | None = None  # (layer, boundary, value)
        self.edge_proxy: Pick | None = None  # (layer, via)
        # The dictionaries and sets below stay None until a test needs one: most never do.
        self.edge_rays: dict[str, dict[str, float]] | None = None  # layer -> earliest few rays
        self.edge_retry: dict[int, Pick] | None = None  # status -> first (layer, retry-after)
        self.backend_statuses: tuple[int, ...] = ()  # distinct, at most MAX_STATUSES
        # LLM
        self.llm_starts = 0
        self.llm_responses = 0
        self.llm_ok = 0
        self.llm_ok_with_tokens = 0
        self.llm_ok_zero_tokens = 0  # ok calls that reported 0 tokens explicitly (not null)
        self.llm_errors = 0
        self.llm_timeouts = 0
        # (error_class, provider, model, latency_ms, (http_status, output_chars, chunks, completion_tokens))
        self.llm_first_error: Pick | None = None
        self.llm_failures: LLMFailures | None = None
        self.llm_last_ok_key: int | None = None
        self.llm_last_start: tuple[str | None, str | None] | None = None  # (provider, model)
        self.llm_last_start_key: int | None = None
        self.llm_last_response: Response | None = None
        self.llm_last_response_key: int | None = None
        self.llm_slowest: tuple[float, str, str] | None = None  # (latency_ms, provider, model)
        self.heartbeats = 0
        self.heartbeat_last: float | None = None  # elapsed_ms_since_start
        self.heartbeat_last_key: int | None = None
        self.heartbeat_max: float | None = None
        # backend request/stream
        self.ingress = 0
        self.first_byte: float | None = None  # delta_ms_from_ingress (or -1.0 when absent)
        self.first_byte_key: int | None = None
        self.sse_events = 0
        self.aborts: dict[str, int] | None = None
        self.abort_first: dict[str, Pick] | None = None  # kind -> (bytes_before_abort, duration_ms)
        self.completes = 0
        self.complete_ok_with_events = 0
        self.complete_ok_empty = 0  # ok completions with 0 SSE events
        self.complete_ok_bodiless = 0  # ... that also sent 0 bytes
        self.completes_5xx = 0
        self.complete_5xx: Pick | None = None  # (http_status, total_duration_ms) of the first
        self.complete_last: tuple[int | None, int | None, float | None] | None = None  # status, events, total ms
        self.complete_last_key: int | None = None
        self.errors = 0
        self.error_first: Pick | None = None  # (exception_type, message_scrubbed)
        self.agent_name: str | None = None
        self.agent_name_key: int | None = None
        self.agent_failed: Pick | None = None  # terminal_outcome (error, cancelled) of the first agent that failed
        self.agent_error_class: str | None = None  # of the first agent that exited with an error
        self.agent_exits = 0
        self.agentic: Agentic | None = None  # tool calls and agent-level causes, when there are any
        # aimock
        self.aimock_decisions = 0
        self.aimock_matched = 0
        self.aimock_reject: Pick | None = None
        self.aimock_sent: Pick | None = None  # bytes of its last response: total_bytes or bytes_before_abort
        self.aimock_chunk_bytes = 0
        self.aimock_error: Pick | None = None  # the first 5xx or 429 the LLM mock answered

    def agent(self) -> Agentic:
        """The agent-level part, made when the first fact of it arrives."""
        if self.agentic is None:
            self.agentic = Agentic()
        return self.agentic

    def answered(self, response: Response, duration_ms: Any) -> None:
        """One LLM answer was folded (``_fold_llm``), read as ``response``: nothing more to
        keep here. A subclass that keeps more of each answer (the history's LLM time and
        tokens) takes it from here, so its numbers are the ones the rules read."""


#: Folds one envelope of a boundary into the facts: (facts, metadata, outcome, order key,
#: envelope). Each ``_fold_*`` module lists its own in a ``HANDLERS`` table.
Handler = Callable[[Facts, Mapping[str, Any], Any, "int | None", Mapping[str, Any]], None]


class Counting:
    """The handler of a boundary whose envelopes only count, in the slot ``slot``: its head
    says all, so the compiled fold counts them itself and hands the count over."""

    __slots__ = ("slot",)

    def __init__(self, slot: str) -> None:
        self.slot = slot

    def __call__(self, ev: Facts, md: Mapping[str, Any], outcome: Any, key: Any, env: Mapping[str, Any]) -> None:
        setattr(ev, self.slot, getattr(ev, self.slot) + 1)
