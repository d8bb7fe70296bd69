"""The batch runner's bar: a notebook's runs done / total and an ETA, read from the progress file its
``RunLog`` writes (``replicate.runs.runlog``).

The ETA is the recorded compute time of the runs still missing from the cache: every published
figure lists its runs with their compute seconds (``run_seconds`` in its claims record). The wall
time of the last run says nothing about the next one: a warm-cache run takes 31 s where a cold
one takes 263 s. A record from before ``run_seconds`` gives the mean compute of a run, times the
runs left, as it does once runs are computed of which the record names none (keyed otherwise now: a
model's numerics changed); without any record, the ETA extrapolates the runs computed so far.
"""
from __future__ import annotations

import contextvars
import json
import threading
import time
from pathlib import Path

from replicate.core import paths
from replicate.core import settings
from replicate.runs import cache


def previous(paper: str, figure: str, profile: str, target: Path, overrides: dict | None = None) -> dict:
    """The last recorded run of this figure at this profile (runs and their compute seconds), for the
    ETA; with ``--set`` overrides only the target's own record (another scale's runs would mislead)."""
    roots = (target,) if overrides else (target, paths.figures_dir(), settings.current().build / "figures")
    for root in roots:
        claims = root / paper / f"{figure}.claims.json"
        if claims.exists():
            record = json.loads(claims.read_text())
            if record.get("profile") == profile and "wall_time_s" in record:
                return record
    return {}


def minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 90 else f"{seconds:.0f} s"


class Progress:
    """Polls a notebook's progress file every 2 s and shows runs done / total and the ETA on ``bar``."""

    def __init__(self, bar, key: str, record: dict, progress_file: Path):
        self.bar, self.key, self.file = bar, key, progress_file
        self.expected_runs = record.get("runs")
        seconds = cache.recorded_runs(record)
        # runs of the last recorded run that are not in the cache now: what is left to compute
        self.missing = None if seconds is None else {k: s for k, s in seconds.items() if not cache.is_cached(k)}
        self.mean = sum(seconds.values()) / len(seconds) if seconds else None
        timed = (record.get("runs") or 0) - record.get("runs_untimed", 0)
        # older records list no run_seconds: their mean compute per run, times the runs left
        self.per_run = record["runs_compute_s"] / timed if timed > 0 and "runs_compute_s" in record else None
        self.start, self.stop = time.perf_counter(), threading.Event()
        # the poll runs in this scope's context: a thread starts with none, and would read another cache
        self.thread = threading.Thread(target=contextvars.copy_context().run, args=(self._poll,), daemon=True)

    def __enter__(self):
        self.show({})
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()

    def _poll(self):
        while not self.stop.wait(2.0):
            try:
                state = json.loads(self.file.read_text())
            except (OSError, ValueError):
                state = {}
            self.show(state)

    def show(self, state: dict):
        parts = [self.key]
        total, done = state.get("to_compute", 0), state.get("computed", 0)
        if total:
            parts.append(f"computing runs {done}/{total}")
        elif state.get("runs"):
            # the last record's count is a hint: a run with other knobs may read more runs than it did
            expected = f"/{self.expected_runs}" if self.expected_runs and state["runs"] <= self.expected_runs else ""
            parts.append(f"runs {state['runs']}{expected} ({state['from_cache']} from cache)")
        if self.missing is not None:
            left = {k: s for k, s in self.missing.items() if not cache.is_cached(k)}
            if done and len(left) == len(self.missing) and self.mean is not None:
                # runs were computed but none the record names: they are keyed otherwise now (a model's numerics
                # changed, or other knobs), so the record's runs say nothing of what is left but their mean cost
                self.missing, self.per_run = None, self.mean
            else:
                self.missing = left
        if self.missing is not None:
            if self.missing:
                parts.append(f"ETA {minutes(sum(self.missing.values()))} (recorded compute of the "
                             f"{len(self.missing)} runs still missing)")
        elif total > done and self.per_run is not None:
            parts.append(f"ETA {minutes(self.per_run * (total - done))} (mean recorded compute of a run × "
                         f"{total - done} runs left)")
        elif 0 < done < total:
            elapsed = time.perf_counter() - self.start
            parts.append(f"ETA {minutes(elapsed / done * (total - done))}")
        self.bar.set_postfix_str(", ".join(parts))
