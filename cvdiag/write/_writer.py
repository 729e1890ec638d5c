"""A bounded in-memory queue drained by one daemon thread into the sinks.

The caller's thread only appends to a deque, so a slow or full stdout can never block
the event loop. When the queue is full the oldest line is dropped and counted; the
emitter turns the count into one ``cvdiag.queue_dropped`` envelope.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import threading
import time
from collections import deque
from collections.abc import Callable

from cvdiag.write.sinks import Sink

#: Lines written to the sinks per batch: bounds the memory of one join.
_BATCH = 512
_EXIT_DRAIN_SECONDS = 2.0
#: After a wake-up the writer lets a batch form for this long: waking once per line
#: would make the writer fight the emitting thread for the GIL on every envelope.
_COALESCE_SECONDS = 0.002
#: Lines waiting beyond this many are copied to their size as they are queued: orjson's
#: bytes keep the buffer it grew to write them (4 KB for a short line, 64 KB for a 3 KB
#: one), and a stalled stdout would hold ``CVDIAG_QUEUE_SIZE`` of those in the host.
_SHRINK_AFTER = 64


class _Barrier:
    """Placed in the queue by ``flush``; set when the writer reaches it (or drops it)."""

    __slots__ = ("event",)

    def __init__(self) -> None:
        self.event = threading.Event()


class Writer:
    def __init__(
        self,
        sinks: Callable[[], list[Sink]],
        on_error: Callable[[BaseException], None],
        on_idle: Callable[[], None],
    ) -> None:
        self._sinks = sinks
        self._on_error = on_error
        self._on_idle = on_idle
        self._queue: deque[bytes | _Barrier] = deque()
        self._wake = threading.Event()
        #: ``_wake`` is set (a plain attribute: ``Event.is_set`` is a Python call per line).
        self._woken = False
        self._drop_lock = threading.Lock()
        self._start_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._writing = False
        self.reset_counts()
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=self._after_fork)

    def _after_fork(self) -> None:
        """A forked child (uvicorn/gunicorn workers) inherits no writer thread: start
        afresh, without the parent's pending lines, which the parent still writes."""
        self._queue = deque()
        self._wake = threading.Event()
        self._woken = False
        self._drop_lock = threading.Lock()
        self._start_lock = threading.Lock()
        self._thread = None
        self._writing = False

    def reset_counts(self) -> None:
        """Lines dropped, written and failed so far: zero (for ``stats()`` after a reset)."""
        self.dropped = 0
        self.written = 0
        self.failed = 0

    @property
    def started(self) -> bool:
        return self._thread is not None

    @property
    def idle(self) -> bool:
        """Nothing queued and no batch being written: a sink added now misses no earlier line."""
        return not self._queue and not self._writing

    def put(self, line: bytes, maxlen: int) -> None:
        """Enqueue without blocking; drop the oldest line when ``maxlen`` are waiting."""
        if self._thread is None:
            self._start()
        queue = self._queue
        waiting = len(queue)
        if waiting >= maxlen:
            self._drop_oldest(maxlen)
        if waiting >= _SHRINK_AFTER:
            line = memoryview(line).tobytes()
        queue.append(line)
        if not self._woken:
            self._woken = True
            self._wake.set()

    def _drop_oldest(self, maxlen: int) -> None:
        with self._drop_lock:
            while len(self._queue) >= maxlen:
                try:
                    oldest = self._queue.popleft()
                except IndexError:
                    return
                if isinstance(oldest, _Barrier):
                    oldest.event.set()
                else:
                    self.dropped += 1

    def flush(self, timeout: float = 5.0) -> bool:
        """Block until every line enqueued before the call is written; False on timeout."""
        if self._thread is None or threading.current_thread() is self._thread:
            return True
        barrier = _Barrier()
        self._queue.append(barrier)
        self._wake.set()
        return barrier.event.wait(timeout)

    def _start(self) -> None:
        with self._start_lock:
            if self._thread is not None:
                return
            thread = threading.Thread(target=self._run, name="cvdiag-writer", daemon=True)
            thread.start()
            self._thread = thread
            atexit.register(self.flush, _EXIT_DRAIN_SECONDS)

    def _run(self) -> None:
        queue = self._queue
        while True:
            self._wake.wait()
            if len(queue) < _BATCH:
                time.sleep(_COALESCE_SECONDS)
            self._wake.clear()
            self._woken = False  # after clear: a put in between only skips a wake-up this drain covers
            self._writing = True
            while queue:
                batch: list[bytes] = []
                barriers: list[_Barrier] = []
                while queue and len(batch) < _BATCH:
                    try:
                        item = queue.popleft()
                    except IndexError:
                        break
                    if isinstance(item, _Barrier):
                        barriers.append(item)
                        break  # lines after a barrier belong to the next batch
                    batch.append(item)
                if batch:
                    self._write(batch)
                for barrier in barriers:
                    barrier.event.set()
            self._writing = False
            with contextlib.suppress(Exception):  # reporting drops must not kill the writer
                self._on_idle()

    def _write(self, batch: list[bytes]) -> None:
        """Count a line written when every sink took it whole, failed when one did not."""
        lost: set[int] = set()
        for sink in self._sinks():
            try:
                sink.write(batch)
            except BaseException as exc:  # a broken sink must not kill the writer
                lost.update(getattr(exc, "lost", range(len(batch))))
                self._on_error(exc)
        self.failed += len(lost)
        self.written += len(batch) - len(lost)
