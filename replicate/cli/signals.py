"""SIGINT and SIGTERM while a batch of notebooks runs: the runs in flight save at their next round boundary.

A terminal's Ctrl-C (SIGINT, exit 130), and SIGTERM (exit 75: a SLURM job at its time limit, a preempted cloud
instance, a Colab session that ends) both stop a batch the way a spent ``--time-budget`` does: every run in
flight checkpoints at its next round boundary, and the same command resumes it (``runs.checkpoints``).
"""
from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from pathlib import Path

from replicate.cli.budget import Budget
from replicate.runs import checkpoints


class Interrupted(KeyboardInterrupt):
    """Ctrl-C (SIGINT) during a batch: reported in one line by the command line, which exits with 130."""


# After SIGINT or SIGTERM, how long the notebook running then has for its runs in flight to reach their round
# boundary, save and stop, before it is interrupted (a second signal interrupts it at once): a notebook that
# trains no run then (it loads data, plots) or whose rounds are longer than this keeps only what the runs'
# periodic checkpoints saved (REPLICATE_CHECKPOINT_S). Short, since a job's SIGKILL follows its SIGTERM.
GRACE_S = 5.0


class NotStarted(KeyboardInterrupt):
    """A stop asked just before a notebook's kernel started: the notebook is not run."""


class Signals:
    """SIGINT and SIGTERM while a batch runs, in its main thread. The notebook's kernel runs in a session of its
    own (``jupyter_client`` starts it so): neither a terminal's Ctrl-C, sent to this process's group, nor a
    ``kill`` of this process reaches it or its worker processes. So the first signal asks them through the stop
    file of ``runs.checkpoints`` (the one a spent time budget touches) to save every run in flight at its next
    round boundary and stop; the notebook then ends with ``Checkpointed`` and the batch stops as a spent budget
    stops it. A second signal, or a notebook still running ``GRACE_S`` later, is interrupted as by Ctrl-C.
    ``signum``: the first signal received (None: none), which decides the exit status."""

    def __init__(self, stop: Path, budget: Budget | None):
        self.stop, self.budget = stop, budget
        self.signum: int | None = None
        self.after_budget = False  # the signal came once the time budget had already stopped the batch
        self.executing = False  # a notebook executes: an interrupt may be raised in it
        self._lock = threading.Lock()
        self._closed = False
        self._timer: threading.Timer | None = None

    @contextmanager
    def installed(self):
        if threading.current_thread() is not threading.main_thread():  # a library call in a thread: not ours
            yield self
            return
        previous = {signum: signal.signal(signum, self._handle) for signum in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield self
        finally:
            with self._lock:
                self._closed = True
                if self._timer is not None:
                    self._timer.cancel()
            for signum, handler in previous.items():  # a signal pending is handled first, here: executing is off
                signal.signal(signum, handler)

    @contextmanager
    def running(self):
        """The block executes a notebook: a stop asked before it starts raises ``NotStarted``."""
        self.executing = True
        try:
            if self.signum is not None:
                raise NotStarted
            yield
        finally:
            self.executing = False

    def _handle(self, signum, frame) -> None:
        interrupt = signum == signal.SIGINT and self.budget is not None and self.budget.fired  # the budget's own
        if self.signum is None and not interrupt:
            self.signum = signum
            self.after_budget = self.budget is not None and self.budget.fired
            checkpoints.request_stop(self.stop)
            self._timer = threading.Timer(GRACE_S, self._interrupt)
            self._timer.daemon = True
            self._timer.start()
        elif self.executing:  # a second signal, the grace spent, or the spent budget's interrupt
            raise KeyboardInterrupt

    def _interrupt(self) -> None:
        with self._lock:
            if self.executing and not self._closed:
                signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)


__all__ = ["GRACE_S", "Interrupted", "NotStarted", "Signals"]
