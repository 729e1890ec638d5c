"""The pytest plugin (entry point ``pytest11`` named ``cvdiag``; ``-p no:cvdiag`` turns it off).

Per test: its own UUIDv7 bound as the current context from setup to teardown, cvdiag
enabled at debug tier with an in-memory sink on top of the configured ones, and the
previous configuration restored afterwards. httpx/httpx2 propagation is installed for
the session, so every request a test makes carries its id. A failed phase gets a
report section titled ``cvdiag``: the diagnosis and the test's timeline from the
in-process envelopes and any ``--cvdiag-log`` files.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
import io
import os
import time
from collections.abc import Iterator, Sequence
from typing import Any

import orjson
import pytest

from cvdiag.contract.ids import new_test_id
from cvdiag.contract.schema import TEST_ID_HEADER, is_accounting
from cvdiag.contract.trace_context import TRACEPARENT_HEADER, new_span_hex, trace_id_of_test, traceparent
from cvdiag.diagnosis import diagnose
from cvdiag.face.render import Out, counted, timeline_table, tool_calls_table
from cvdiag.read import correlate, inventory, toolcalls
from cvdiag.read.sources import InputError, resolve_sources
from cvdiag.read.timeline import Entry, envelope_entry, ordered
from cvdiag.testing import capture
from cvdiag.write import config as _config
from cvdiag.write import emitter as _emitter
from cvdiag.write.context import RequestContext, bind, new_context, unbind
from cvdiag.write.instrumentation import instrument, uninstrument
from cvdiag.write.propagation import is_instrumented

__all__ = ["CvdiagEvents", "add_log"]

#: The environment label the plugin declares for the debug guard when the user set none.
TEST_ENV_LABEL = "test"
DEFAULT_TEST_TIER = "debug"
#: A report section lists at most this many timeline rows (the rest is counted).
TIMELINE_MAX_ROWS = 200

_INSTALLED = pytest.StashKey[bool]()
_LOGS = pytest.StashKey[list[str]]()
_STATE = pytest.StashKey["_TestState"]()
_REPORT = pytest.StashKey["SessionReport"]()
_REPORT_LINE = pytest.StashKey[str]()
_HISTORY = pytest.StashKey[Any]()
_RECEIVER = pytest.StashKey[Any]()
#: Where ``--cvdiag-otlp-receive`` writes when given no file.
DEFAULT_RECEIVE_FILE = ".cvdiag/otlp.jsonl"
#: The variables a test's child processes read its id and trace from (restored after it).
TEST_ENV = ("CVDIAG_TEST_ID", "TRACEPARENT", "OTEL_RESOURCE_ATTRIBUTES")


@dataclasses.dataclass(slots=True)
class _TestState:
    """What one test owns while it runs; restored or read when it ends."""

    test_id: str
    ctx: RequestContext
    tokens: Any
    previous: _config.Settings
    #: Every envelope written during the test (``cvdiag.testing.capture``); None when disabled.
    envelopes: list[dict[str, Any]] | None
    #: Closes the capture: configuration back to ``previous``.
    capturing: contextlib.ExitStack
    started_ns: int
    #: Wall-clock start (Unix seconds): the window in which a log's lines are this test's time.
    started_s: float = 0.0
    failed: bool = False
    skipped: bool = False
    failure_type: str | None = None
    #: (class, reason) of the first failed phase's diagnosis, for JUnit XML properties.
    verdict: tuple[str, str] | None = None
    recorded: bool = False
    #: A bad ``@pytest.mark.cvdiag``: reported as this test's setup error.
    usage_error: str | None = None
    #: The test's trace: its id (from the test id) and the harness's span.
    trace_id: str = ""
    span_id: str = ""
    confidence: float | None = None
    #: ``TEST_ENV`` as it was before the test (None: unset).
    saved_env: dict[str, str | None] = dataclasses.field(default_factory=dict)


class CvdiagEvents(Sequence[dict[str, Any]]):
    """The envelopes with this test's id emitted in-process so far, as dicts, oldest first.

    A live view: every read flushes the writer first, so what the code under test just
    emitted is there. Accounting lines (``cvdiag.*``) are left out.
    """

    def __init__(self, envelopes: list[dict[str, Any]] | None, test_id: str) -> None:
        self._envelopes = envelopes
        self.test_id = test_id

    def _load(self) -> list[dict[str, Any]]:
        if self._envelopes is None:
            return []
        _emitter.flush()
        return _of_test(self._envelopes, self.test_id)

    def __getitem__(self, index: Any) -> Any:
        return self._load()[index]

    def __len__(self) -> int:
        return len(self._load())

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self._load())

    def boundaries(self) -> list[str]:
        """The boundary names in emission order, e.g. to compare with an expected sequence."""
        return [env["boundary"] for env in self._load()]

    def of(self, boundary: str) -> list[dict[str, Any]]:
        """The envelopes of one boundary, in emission order."""
        return [env for env in self._load() if env.get("boundary") == boundary]

    def __repr__(self) -> str:
        return f"CvdiagEvents(test_id={self.test_id!r}, boundaries={self.boundaries()!r})"


def _of_test(envelopes: list[dict[str, Any]], test_id: str) -> list[dict[str, Any]]:
    """The envelopes of one test, without accounting lines."""
    return [
        env for env in envelopes if env.get("test_id") == test_id and not is_accounting(str(env.get("boundary", "")))
    ]


def add_log(config: pytest.Config, path: str | os.PathLike[str]) -> None:
    """Name one more log file for failure reports, as ``--cvdiag-log`` does; for a
    fixture that starts a server whose stdout it writes to a file."""
    logs = config.stash.setdefault(_LOGS, [])
    path = os.fspath(path)
    if path not in logs:
        logs.append(path)


# --- options, session ------------------------------------------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("cvdiag", "cvdiag: test ids, captured envelopes and failure diagnosis")
    group.addoption(
        "--cvdiag-log",
        action="append",
        default=[],
        metavar="PATH",
        help="a log with CVDIAG lines (e.g. a server's stdout) to read for failure reports; repeatable",
    )
    group.addoption(
        "--cvdiag-emit-probe",
        action="store_true",
        default=False,
        help="write probe.start and probe.exit envelopes per test so the harness shows on timelines",
    )
    group.addoption(
        "--cvdiag-report",
        metavar="PATH",
        default=None,
        help="write an HTML report of the session's tests (in-process envelopes and --cvdiag-log files) to PATH",
    )
    group.addoption(
        "--cvdiag-report-all",
        action="store_true",
        default=False,
        help="with --cvdiag-report: a waterfall for every test, not only the failed and flagged ones",
    )
    group.addoption(
        "--cvdiag-history",
        nargs="?",
        const="",
        default=None,
        metavar="DB",
        help="record the session as one run of the history: a DuckDB file or postgresql:// URL "
        "(default: $CVDIAG_HISTORY, else .cvdiag/history.duckdb); write --cvdiag-history=DB before test paths",
    )
    group.addoption(
        "--cvdiag-otlp-receive",
        nargs="?",
        const=DEFAULT_RECEIVE_FILE,
        default=None,
        metavar="FILE",
        help="receive OTLP/HTTP from the processes tests start (coding agents' CLIs) on 127.0.0.1 into FILE "
        f"(default {DEFAULT_RECEIVE_FILE}), read for failure reports; sets OTEL_EXPORTER_OTLP_ENDPOINT for them",
    )
    group.addoption(
        "--cvdiag-strict",
        action="store_true",
        default=False,
        help="make cvdiag's internal errors (a failing sink, processor or scope) raise instead of being counted",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "cvdiag(tier='debug', enabled=True): cvdiag's tier for this test, or enabled=False to capture nothing",
    )
    config.stash[_LOGS] = list(config.getoption("cvdiag_log") or [])
    # Every HTTP client a harness may use (httpx, aiohttp, requests/urllib3, botocore;
    # CVDIAG_INSTRUMENT_OFF and CVDIAG_LLM_CAPTURE apply) carries the test id. Remember
    # whether this session installed it, so that a nested session (pytester) or an
    # application that instrumented itself is not undone by us.
    config.stash[_INSTALLED] = not is_instrumented()
    instrument(otel=False)  # spans are read where the app calls cvdiag.instrument(), not here
    if config.getoption("cvdiag_report_all") and not config.getoption("cvdiag_report"):
        raise pytest.UsageError("--cvdiag-report-all needs --cvdiag-report PATH: where to write the report")
    if config.getoption("cvdiag_report"):
        from cvdiag.pytest_plugin._report import SessionReport

        config.stash[_REPORT] = SessionReport(
            config.getoption("cvdiag_report"), all_tests=config.getoption("cvdiag_report_all")
        )
    if config.getoption("cvdiag_history") is not None:
        _start_history(config, config.getoption("cvdiag_history"))
    if config.getoption("cvdiag_otlp_receive"):
        _start_receiver(config, config.getoption("cvdiag_otlp_receive"))


def _start_receiver(config: pytest.Config, path: str) -> None:
    """The session's OTLP receiver: child processes export to it (the endpoint variables
    are set for the session and restored after), its file is read like ``--cvdiag-log``."""
    from cvdiag.face._receiver import Receiver

    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker:  # one receiver and file per xdist worker
        root, ext = os.path.splitext(path)
        path = f"{root}-{worker}{ext}"
    if os.path.dirname(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
    open(path, "wb").close()  # the session's own file
    receiver = Receiver(path).start()
    saved = {name: os.environ.get(name) for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL")}
    os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = receiver.endpoint
    if (saved["OTEL_EXPORTER_OTLP_PROTOCOL"] or "").strip().lower() not in ("http/protobuf", "http/json"):
        os.environ["OTEL_EXPORTER_OTLP_PROTOCOL"] = "http/protobuf"
    config.stash[_RECEIVER] = (receiver, saved)
    add_log(config, path)


def _stop_receiver(config: pytest.Config) -> None:
    found = config.stash.get(_RECEIVER, None)
    if found is None:
        return
    receiver, saved = found
    receiver.stop()
    for name, value in saved.items():
        _restore_env(name, value)


def _restore_env(name: str, value: str | None) -> None:
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value


def _start_history(config: pytest.Config, db: str) -> None:
    from cvdiag.pytest_plugin._history import SessionHistory, given_with_equals, looks_like_a_test_path

    if db and looks_like_a_test_path(db) and not given_with_equals(config, "--cvdiag-history"):
        raise pytest.UsageError(f"--cvdiag-history took {db!r} as its database: write --cvdiag-history=DB")
    config.stash[_HISTORY] = history = SessionHistory(config, db, _LOGS)
    config.pluginmanager.register(history, "cvdiag-history")


def pytest_sessionfinish(session: pytest.Session) -> None:
    spool = session.config.stash.get(_REPORT, None)
    if spool is not None:
        session.config.stash[_REPORT_LINE] = spool.write(session.config.stash.get(_LOGS, []))


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    line = config.stash.get(_REPORT_LINE, None)
    if line is not None:
        terminalreporter.write_line(line)


def pytest_unconfigure(config: pytest.Config) -> None:
    if config.stash.get(_INSTALLED, False):
        uninstrument()
    _stop_receiver(config)


# --- one test --------------------------------------------------------------------------


@functools.lru_cache(maxsize=16)
def _guarded(tier: str, label: str, enabled: bool) -> tuple[Any, Any]:
    """(effective, requested) tier through config's debug guard, once per combination,
    so a refused label warns once per session rather than once per test."""
    settings = _config.build_settings(enabled=enabled, tier=tier, env=label, environ={})
    return settings.tier, settings.requested_tier


def _test_settings(item: pytest.Item, previous: _config.Settings) -> _config.Settings:
    marker = item.get_closest_marker("cvdiag")
    kwargs = marker.kwargs if marker is not None else {}
    unknown = set(kwargs) - {"tier", "enabled"}
    if unknown or (marker is not None and marker.args):
        raise ValueError(f"it takes only tier= and enabled=, got {sorted(unknown) or list(marker.args)}")
    enabled = bool(kwargs.get("enabled", True))
    tier = kwargs.get("tier", DEFAULT_TEST_TIER)
    label = previous.env_label or TEST_ENV_LABEL
    effective, requested = _guarded(str(tier), label, enabled)
    strict = previous.strict or bool(item.config.getoption("cvdiag_strict"))
    # The plugin turns emission on to capture it; it does not start printing CVDIAG
    # lines into every test's stdout unless the user had cvdiag on or asked for stdout.
    stdout = previous.stdout and (previous.enabled or "CVDIAG_STDOUT" in os.environ)
    # Everything else (file, queue size, slug, allow-list) stays as the user had it.
    return dataclasses.replace(
        previous,
        enabled=enabled,
        stdout=stdout,
        tier=effective,
        requested_tier=requested,
        env_label=label,
        strict=strict,
        debug_armed_at=time.monotonic(),
    )


def _begin(item: pytest.Item) -> _TestState:
    previous = _config.get_settings()
    usage_error = None
    try:
        settings = _test_settings(item, previous)
    except ValueError as exc:
        usage_error = f"@pytest.mark.cvdiag: {exc}"
        settings = dataclasses.replace(previous, enabled=False)
    capturing = contextlib.ExitStack()
    if settings.enabled:
        envelopes = capturing.enter_context(capture(settings=settings))
    else:
        envelopes = None
        _config.apply_settings(settings)
    test_id = new_test_id()
    trace_id, span_id = trace_id_of_test(test_id), new_span_hex()
    parent = traceparent(trace_id, span_id)
    # The harness's requests carry the test's trace beside its id (propagation sends it).
    ctx = new_context(test_id=test_id, forward={TRACEPARENT_HEADER: parent})
    saved_env = _set_test_env(test_id, parent)
    state = _TestState(
        test_id=test_id,
        ctx=ctx,
        tokens=bind(ctx),
        previous=previous,
        envelopes=envelopes,
        capturing=capturing,
        started_ns=time.monotonic_ns(),
        started_s=time.time(),
        usage_error=usage_error,
        trace_id=trace_id,
        span_id=span_id,
        saved_env=saved_env,
    )
    if item.config.getoption("cvdiag_emit_probe"):
        _emitter.emit("probe.start", {"url": item.nodeid, "viewport": None})
    return state


def _set_test_env(test_id: str, parent: str) -> dict[str, str | None]:
    """For the processes the test starts (a coding agent's CLI, a server): its id, its
    trace, and ``test.id`` among their OpenTelemetry resource attributes. Returns what
    was there, for ``_end`` to put back."""
    saved = {name: os.environ.get(name) for name in TEST_ENV}
    os.environ["CVDIAG_TEST_ID"] = test_id
    os.environ["TRACEPARENT"] = parent
    others = [e for e in (saved["OTEL_RESOURCE_ATTRIBUTES"] or "").split(",") if e and not e.startswith("test.id=")]
    os.environ["OTEL_RESOURCE_ATTRIBUTES"] = ",".join([*others, f"test.id={test_id}"])
    return saved


def _end(state: _TestState) -> None:
    try:
        state.capturing.close()
    except Exception:  # strict mode already reported it in teardown; never break the run here
        pass
    finally:
        _config.apply_settings(state.previous)
        unbind(state.tokens)
        for name, value in state.saved_env.items():
            _restore_env(name, value)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    state = _begin(item)
    item.stash[_STATE] = state
    try:
        return (yield)
    finally:
        spool = item.config.stash.get(_REPORT, None)
        if spool is not None and state.envelopes is not None:
            try:
                _emitter.flush()
                spool.add(state.test_id, item.nodeid, state.failed, [orjson.dumps(e) for e in state.envelopes])
            except Exception:  # the report must never break the test run it describes
                pass
        history = item.config.stash.get(_HISTORY, None)
        if history is not None:
            try:
                _emitter.flush()
                lines = [orjson.dumps(e) for e in state.envelopes or ()]
                history.add(state.test_id, item.nodeid, lines)
            except Exception:  # nor must the history
                pass
        _end(state)
        del item.stash[_STATE]


def _bound_coroutine(fn: Any, ctx: RequestContext) -> Any:
    @functools.wraps(fn)
    async def bound(*args: Any, **kwargs: Any) -> Any:
        tokens = bind(ctx)
        try:
            return await fn(*args, **kwargs)
        finally:
            unbind(tokens)

    return bound


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> Any:
    # Async test runners may run every test in one long-lived task (anyio does while a
    # module- or session-scoped async fixture keeps its runner alive), and a task keeps
    # the context it was created with: the first test's id. Binding inside the test's
    # own coroutine makes each async test see its own id wherever it is awaited.
    state = pyfuncitem.stash.get(_STATE, None)
    original = pyfuncitem.obj
    if state is None or not inspect.iscoroutinefunction(original):
        return (yield)
    pyfuncitem.obj = _bound_coroutine(original, state.ctx)
    try:
        return (yield)
    finally:
        pyfuncitem.obj = original


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    state = item.stash.get(_STATE, None)
    if state is not None and state.usage_error is not None:
        pytest.fail(state.usage_error, pytrace=False)


@pytest.hookimpl(wrapper=True, trylast=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    result = yield
    # Fixtures are torn down: everything the test emitted is queued. Flushing here makes
    # a failing sink (re-raised in strict mode) fail this test's teardown, visibly.
    if _STATE in item.stash:
        _emitter.flush()
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> pytest.TestReport:
    report: pytest.TestReport = yield
    state = item.stash.get(_STATE, None)
    if state is None:
        return report
    if report.failed:
        state.failed = True
        if state.failure_type is None and call.excinfo is not None:
            state.failure_type = call.excinfo.typename
    elif report.skipped and not hasattr(report, "wasxfail"):
        state.skipped = True
    if call.when == "teardown" and item.config.getoption("cvdiag_emit_probe"):
        _emit_probe_exit(state)
    if report.failed:
        try:
            report.sections.append(("cvdiag", _failure_section(item.config, state)))
        except Exception as exc:  # a report must never be lost to its own decoration
            report.sections.append(("cvdiag", f"cvdiag could not build this report: {type(exc).__name__}: {exc}"))
        _record_properties(item, report, state)
        _summary_names_the_class(report, state)
    return report


def _summary_names_the_class(report: pytest.TestReport, state: _TestState) -> None:
    """``FAILED test_x - llm-error: ...``: the short summary line (and JUnit's failure
    message) start with the diagnosis, then the test's own error."""
    crash = getattr(report.longrepr, "reprcrash", None)
    if state.verdict is None or crash is None or getattr(crash, "_cvdiag", False):
        return
    cls, reason = state.verdict
    if cls in ("ok", "none"):
        return
    crash.message = f"{cls}: {reason} | {crash.message}"
    crash._cvdiag = True


def _record_properties(item: pytest.Item, report: pytest.TestReport, state: _TestState) -> None:
    """The diagnosis as ``record_property`` would write it, once per failed test:
    ``--junitxml`` shows it as the test case's properties, for CI to read."""
    if state.recorded:
        return
    state.recorded = True
    cls, reason = state.verdict or ("none", "cvdiag could not diagnose this failure")
    _export_verdict(item, state, cls, reason)
    props = [("cvdiag_test_id", state.test_id), ("cvdiag_class", cls), ("cvdiag_reason", reason)]
    item.user_properties.extend(props)
    if report.when == "teardown":  # JUnit XML reads the teardown report, made from item's before this
        report.user_properties.extend(props)


def _export_verdict(item: pytest.Item, state: _TestState, cls: str, reason: str) -> None:
    """With OTLP export on (``CVDIAG_OTLP``), the verdict as one log record in the test's
    trace, so a trace store shows why next to what."""
    if not state.previous.otlp:
        return
    try:
        from cvdiag.write import _otlp

        _otlp.sink(_config.get_settings, _emitter.state.writer.flush).send_event(
            "cvdiag.verdict",
            {
                "test_id": state.test_id,
                "test": item.nodeid,
                "class": cls,
                "confidence": state.confidence,
                "reason": reason,
            },
            test_id=state.test_id,
            trace_id=state.trace_id,
            span_id=state.span_id,
        )
    except Exception:  # the verdict's record must never break the run
        pass


def _emit_probe_exit(state: _TestState) -> None:
    terminal = "error" if state.failed else "cancelled" if state.skipped else "ok"
    elapsed = (time.monotonic_ns() - state.started_ns) // 1_000_000
    _emitter.emit(
        "probe.exit",
        {
            "terminal_outcome": terminal,
            "total_duration_ms": elapsed,
            "sse_event_count": None,
            "first_token_delta_ms": None,
            "failure_classifier": state.failure_type,
        },
        outcome="ok" if terminal == "ok" else "err",
        duration_ms=elapsed,
    )


# --- fixtures --------------------------------------------------------------------------


def _state(request: pytest.FixtureRequest) -> _TestState:
    state = request.node.stash.get(_STATE, None)
    if state is None:  # only when another plugin runs tests without the runtest protocol
        raise pytest.UsageError("cvdiag fixtures need the cvdiag plugin's per-test setup")
    return state


@pytest.fixture
def cvdiag_test_id(request: pytest.FixtureRequest) -> str:
    """This test's id (a UUIDv7), also bound as the current cvdiag context."""
    return _state(request).test_id


@pytest.fixture
def cvdiag_headers(request: pytest.FixtureRequest) -> dict[str, str]:
    """``{"x-test-id": id, "traceparent": the test's trace}`` for clients cvdiag does not
    instrument (browsers, raw sockets)."""
    state = _state(request)
    return {TEST_ID_HEADER: state.test_id, TRACEPARENT_HEADER: state.ctx.forward[TRACEPARENT_HEADER]}


@pytest.fixture
def cvdiag_events(request: pytest.FixtureRequest) -> CvdiagEvents:
    """The in-process envelopes of this test: ``boundaries()``, ``of(name)``, or iterate."""
    state = _state(request)
    return CvdiagEvents(state.envelopes, state.test_id)


# --- the failure report ----------------------------------------------------------------


def _log_entries(paths: Sequence[str], test_id: str) -> tuple[list[Entry], list[str], float | None]:
    """Timeline entries (envelopes and breadcrumbs) of ``test_id`` in the named logs, notes
    on what could not be read, and the time the logs end (it dates an LLM call that never
    answered)."""
    notes = [f"{p}: no such file (yet)" for p in paths if not os.path.exists(p)]
    try:
        found = correlate.timeline(resolve_sources([p for p in paths if os.path.exists(p)]), test_id)
    except (InputError, OSError) as exc:
        return [], [*notes, f"could not read the logs: {exc}"], None
    if (note := found.tally.note()) is not None:
        notes.append(note)
    return (found.entries if found.test_id == test_id else []), notes, found.log_end


def _terminal_width(config: pytest.Config) -> int | None:
    """The width pytest draws its own report at, so that this section fits beside it."""
    try:
        return int(config.get_terminal_writer().fullwidth)
    except Exception:  # no terminal reporter (-p no:terminal): no limit
        return None


#: Lines under other ids this close to the test's run count as "meanwhile" (clocks of a
#: server in a subprocess and of pytest agree to well within this).
_MEANWHILE_SLACK_S = 1.0
_MEANWHILE_SHOWN = 3


def _others_meanwhile(out: Out, logs: Sequence[str], state: _TestState) -> None:
    """No line carries this test's id: the lines the logs hold under other ids while it
    ran, which are most likely its requests, sent without the id."""
    from cvdiag.contract.timestamps import parse_ts
    from cvdiag.read.parsing import ENVELOPE, Tally

    start, end = state.started_s - _MEANWHILE_SLACK_S, time.time() + _MEANWHILE_SLACK_S
    seen: dict[str, list[str]] = {}

    def add(env: dict[str, Any]) -> None:
        if is_accounting(str(env.get("boundary", ""))) or env.get("test_id") == state.test_id:
            return
        try:
            at = parse_ts(env["ts"])
        except (KeyError, TypeError, ValueError):
            return
        if start <= at <= end:
            seen.setdefault(str(env.get("test_id")), []).append(str(env.get("boundary")))

    for env in state.envelopes or ():  # in-process: every id written while the test ran
        add(env)
    try:
        sources = resolve_sources([p for p in logs if os.path.exists(p)])
        for hit in correlate.merged(sources, Tally()) if sources else ():
            if hit.kind == ENVELOPE:
                add(hit.value)
    except (InputError, OSError):
        pass
    if not seen and not logs:
        return
    if not seen:
        out.prose("the logs hold no line from the time this test ran: did the server write to them?")
        return
    ids = list(seen)
    out.prose(
        f"while it ran, cvdiag saw lines under {counted(len(ids), 'other id')}: its requests may"
        " have gone without the x-test-id header (a client cvdiag does not instrument? pass"
        " the cvdiag_headers fixture). `cvdiag timeline ID LOG` shows one:"
    )
    for tid in ids[:_MEANWHILE_SHOWN]:
        out.prose(f"{tid}: {counted(len(seen[tid]), 'line')} ({', '.join(dict.fromkeys(seen[tid]))})", indent="  ")
    if len(ids) > _MEANWHILE_SHOWN:
        out.line(f"  ... {len(ids) - _MEANWHILE_SHOWN} more")


def _failure_section(config: pytest.Config, state: _TestState) -> str:
    """The test's id, diagnosis, tool calls and timeline: the tables ``cvdiag timeline``
    draws, from the in-process envelopes and the ``--cvdiag-log`` files."""
    in_process: list[dict[str, Any]] = []
    if state.envelopes is not None:
        _emitter.flush()
        in_process = _of_test(state.envelopes, state.test_id)
    logs = config.stash.get(_LOGS, [])
    from_logs, notes, log_end = _log_entries(logs, state.test_id) if logs else ([], [], None)
    # In-process first on a tie (their seq is below the logs'); one also read from a log is kept once.
    mine = [envelope_entry(env, "in-process", i - len(in_process)) for i, env in enumerate(in_process)]
    entries = ordered([*mine, *from_logs])
    envelopes = [e.data for e in entries if e.kind == "envelope"]
    text = io.StringIO()
    out = Out(text, plain=True, width=_terminal_width(config))
    out.line(f"test id: {state.test_id}")
    if envelopes:
        verdict = diagnose(envelopes, log_end=log_end)
        out.prose(f"diagnosis: {verdict.cls} ({verdict.confidence:.2f}) {verdict.reason}")
        if state.verdict is None:
            state.verdict, state.confidence = (verdict.cls, verdict.reason), verdict.confidence
    else:
        where = "in-process" + (f" or in {', '.join(logs)}" if logs else "")
        out.prose(f"diagnosis: none (no envelope with this id {where})")
        state.verdict = state.verdict or ("none", f"no envelope with this id {where}")
        _others_meanwhile(out, logs, state)
    if inventory.at_default_tier(str(e.get("boundary", "")) for e in envelopes):
        out.prose(f"note: {inventory.DEFAULT_TIER_NOTE}")
    tool_calls_table(out, toolcalls.tool_calls(envelopes))
    out.prose(f"timeline ({counted(len(entries), 'event')} from {', '.join(['in-process', *logs])}):")
    timeline_table(out, entries, TIMELINE_MAX_ROWS)
    for note in notes:  # whole: a path in it is copied, never broken
        out.line(f"note: {note}")
    return text.getvalue().rstrip("\n")  # log content is shown escaped, never obeyed
