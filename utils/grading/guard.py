"""The parent's watchdog over one unit (one student's exercise cells): :class:`Guard`."""

from __future__ import annotations

import math
import threading
import time

from utils.exercises.common import Status
from utils.grading import sandbox
from utils.grading.rows import Row

__all__ = ["Guard"]


class Guard:
    """The parent's watchdog over one unit. The unit's thread announces each phase with a deadline
    (:meth:`enter`) and the worker it runs (:meth:`attach`); the batch loop calls :meth:`abandon` when a
    deadline passes: it kills the worker, and the unit's rows are decided without it."""

    def __init__(self) -> None:
        self.phase = "waiting"
        self.deadline = math.inf
        self.worker: sandbox.Worker | None = None
        self.verdicts: dict[int, tuple[Status, str] | tuple[Status, str, str] | Row] = {}
        self.abandoned = False
        self._lock = threading.Lock()

    def enter(self, phase: str, seconds: float) -> None:
        with self._lock:
            self.phase, self.deadline = phase, time.monotonic() + seconds

    def attach(self, worker: sandbox.Worker | None) -> None:
        with self._lock:
            self.worker = worker
            abandoned = self.abandoned
        if abandoned and worker is not None:
            worker.terminate()

    def overdue(self, now: float) -> bool:
        with self._lock:
            return now > self.deadline

    def abandon(self) -> None:
        with self._lock:
            self.abandoned = True
            worker = self.worker
        if worker is not None:
            worker.terminate()
