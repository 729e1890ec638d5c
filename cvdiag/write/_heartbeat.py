"""One daemon thread that beats for every open synchronous ``llm_call``.

A thread per call would cost a thread start (hundreds of microseconds) per LLM call
and a thread per concurrent call; a single timer heap costs neither. Started on the
first sync call that wants heartbeats, restarted afresh in a forked child.
"""

from __future__ import annotations

import heapq
import itertools
import os
import threading
import time
from collections.abc import Callable

#: A beat returns False when its call has closed: it is then dropped from the heap.
Beat = Callable[[], bool]
#: How long ``stop`` waits for the thread to see it (a beat in progress finishes first).
_STOP_WAIT_S = 1.0


class HeartbeatScheduler:
    def __init__(self) -> None:
        self._reset()
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=self._reset)

    def _reset(self) -> None:
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, float, Beat]] = []
        self._order = itertools.count()
        self._thread: threading.Thread | None = None

    def add(self, interval_s: float, beat: Beat) -> None:
        """Call ``beat`` every ``interval_s`` seconds until it returns False."""
        with self._cond:
            heapq.heappush(self._heap, (time.monotonic() + interval_s, next(self._order), interval_s, beat))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="cvdiag-heartbeat", daemon=True)
                self._thread.start()
            self._cond.notify()

    def stop(self) -> None:
        """End the thread and drop every beat, so that a test starts with no thread;
        the next ``add`` starts one afresh."""
        with self._cond:
            thread, self._thread = self._thread, None
            self._heap.clear()
            self._cond.notify_all()
        if thread is not None and thread is not threading.current_thread():
            thread.join(_STOP_WAIT_S)

    def _run(self) -> None:
        me = threading.current_thread()
        while True:
            with self._cond:
                while self._thread is me and (not self._heap or self._heap[0][0] > time.monotonic()):
                    self._cond.wait(self._heap[0][0] - time.monotonic() if self._heap else None)
                if self._thread is not me:  # stopped (and perhaps replaced) meanwhile
                    return
                _, _, interval, beat = heapq.heappop(self._heap)
            try:
                again = beat()
            except Exception:  # a beat must never kill the thread that serves the others
                again = False
            if again:
                with self._cond:
                    if self._thread is not me:
                        return
                    heapq.heappush(self._heap, (time.monotonic() + interval, next(self._order), interval, beat))


scheduler = HeartbeatScheduler()
