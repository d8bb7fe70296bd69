"""``figures --time-budget``: compute for a stated time, then stop as Ctrl-C does.

When the budget runs out while a notebook executes, the batch's main thread gets the SIGINT a
terminal's Ctrl-C would send, so the stop takes the Ctrl-C path: the runs that finished are in
the cache, the interrupted notebook publishes nothing, the committed figures are untouched. The
command line then prints one line and exits with ``STATUS``; rerunning the same command goes on
from the cache. A notebook that finishes inside the budget is published as without one.
"""
from __future__ import annotations

import re
import signal
import threading
import time
from contextlib import contextmanager

from replicate.core.errors import ReplicateError

STATUS = 75  # EX_TEMPFAIL of sysexits.h: stopped by the time budget or SIGTERM, "try again" resumes; Ctrl-C is 130
_DURATION = re.compile(r"(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s)?")


class BudgetSpent(KeyboardInterrupt):
    """The time budget ran out: reported in one line by the command line, which exits with ``STATUS``."""


class Terminated(KeyboardInterrupt):
    """SIGTERM (a job at its time limit, a preempted machine): the batch stopped as a spent budget stops it, its
    runs in flight saved at their round boundary (``cli.runner``); reported in one line by the command line,
    which exits with ``STATUS``, the status a requeueing job script tests."""


def parse(text: str) -> float:
    """Seconds in a duration such as ``25m``, ``90s``, ``1h30m`` or ``1.5h``."""
    match = _DURATION.fullmatch(text.strip().lower())
    if not text.strip() or not match:
        raise ReplicateError(f"--time-budget expects a duration such as 25m, 90s or 1h30m, got {text!r}")
    hours, minutes, seconds = (float(part or 0) for part in match.groups())
    total = 3600 * hours + 60 * minutes + seconds
    if total <= 0:
        raise ReplicateError(f"--time-budget must be longer than zero, got {text!r}")
    return total


def describe(seconds: float) -> str:
    """``25 min``, ``90 s``, ``1 h 30 min``: the budget as the stop line states it."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    hours, minutes = divmod(round(seconds / 60), 60)
    return f"{hours} h {minutes} min" if hours and minutes else f"{hours} h" if hours else f"{minutes} min"


# After the deadline, how long a notebook's runs in flight have to save at a round boundary and stop before
# Ctrl-C: runs of worker processes save at their round boundary on Ctrl-C too; a run computing in the notebook's
# own process keeps what its last periodic checkpoint saved (runs.checkpoints)
GRACE_S = 10.0


class Budget:
    """A deadline ``seconds`` from now, and the interrupt of a notebook still running at it. With
    ``on_deadline`` (``runs.checkpoints.request_stop``: the runs in flight save at their next round
    boundary and stop, so a time-limited job always keeps its progress) that is called first, and the interrupt
    follows ``grace`` seconds later if the notebook is still running."""

    def __init__(self, seconds: float, on_deadline=None, grace: float | None = None):
        self.seconds = seconds
        self.deadline = time.monotonic() + seconds
        self.fired = False  # the deadline interrupted a notebook
        self.on_deadline = on_deadline
        self.grace = (GRACE_S if grace is None else grace) if on_deadline is not None else 0.0
        self._lock = threading.Lock()
        self._armed = False

    def spent(self) -> bool:
        return time.monotonic() >= self.deadline

    @contextmanager
    def watching(self):
        """Raise ``KeyboardInterrupt`` in the main thread, as Ctrl-C would, if the deadline passes inside
        the block. An interrupt sent as the block ends is taken here, not in what follows it."""
        self._armed = True
        timer = threading.Timer(max(0.0, self.deadline - time.monotonic()), self._fire)
        timer.daemon = True
        timer.start()
        try:
            yield
        except KeyboardInterrupt:
            self._disarm(timer)
            raise
        except BaseException:
            self._disarm(timer, absorb=True)
            raise
        self._disarm(timer, absorb=True)

    def _fire(self) -> None:
        with self._lock:
            if not self._armed:
                return
            self.fired = True
            if self.on_deadline is not None:
                self.on_deadline()
        time.sleep(self.grace)
        with self._lock:
            if self._armed:
                signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)

    def _disarm(self, timer: threading.Timer, absorb: bool = False) -> None:
        try:
            with self._lock:
                self._armed = False
                timer.cancel()
            if absorb and self.fired:  # sent just as the block ended: it is on its way to this thread
                time.sleep(1.0)
        except KeyboardInterrupt:
            if not self.fired:
                raise
