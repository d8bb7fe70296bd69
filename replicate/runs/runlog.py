"""What a figure's runs cost and how far a batch has got: ``RunLog``, kept by a notebook, read by the runner."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from tqdm.auto import tqdm

from replicate.core import settings
from replicate.core.fileio import atomic_write_text
from replicate.runs import checkpoints
from replicate.runs.config import RunConfig
from replicate.runs.keys import VERSION


@dataclass
class RunLog:
    """What a figure's runs cost, published beside its claims (``RunLog.provenance``) so the
    report can say how long a figure takes from scratch even when its runs came from the cache.

    A notebook makes one and passes it to the figure function; nothing here is global.
    """

    runs: int = 0
    from_cache: int = 0
    compute_s: float = 0.0
    untimed: int = 0
    fresh: set = field(default_factory=set)  # entries this log's worker pools just computed: not "from cache"
    # The batch runner sets REPLICATE_PROGRESS to a file it polls to show runs done / total and an ETA;
    # without it (JupyterLab, nbval) the log shows the same as a bar of its own.
    progress_file: str | Path | None = field(default_factory=lambda: settings.current().progress_file)
    display: bool = True  # the bar when there is no progress file; off for a run's private log
    to_compute: int = 0  # runs announced (``planned``) or started here, that are not in the cache
    computed: int = 0  # of those, finished (here or by a worker process)
    pending: int = 0  # announced and not started here nor finished by a worker
    resumed: int = 0  # of those announced, the runs with a checkpoint to go on from (cut off before: Ctrl-C, a budget)
    announced: set = field(default_factory=set)  # entries ``planned`` so far (each counted once)
    by_dataset: dict = field(default_factory=dict)  # dataset → compute seconds: where a figure's time goes
    seconds: dict = field(default_factory=dict)  # run key → compute seconds, so totals over figures count a run once
    read: set = field(default_factory=set)  # run keys recorded so far
    machines: dict = field(default_factory=dict)  # processor (sidecar "machine") → runs: which ones computed the figure
    _bar: object = field(default=None, repr=False, compare=False)

    def record(self, elapsed: float | None, cached: bool, dataset: str | None = None, key: str | None = None,
               machine: str | None = None) -> None:
        """A run was read (``cached``) or computed (on ``machine``: ``core.machine.describe``; None: a sidecar from
        before they named it). A run used again (a tuned figure scores its tuning runs, then reads them into its
        frame) counts once: ``runs`` and its compute time are the figure's distinct runs."""
        if key is not None and key in self.read:
            return
        self.read.add(key)
        self.runs += 1
        name = machine or "not recorded"
        self.machines[name] = self.machines.get(name, 0) + 1
        self.from_cache += cached
        if elapsed is None:
            self.untimed += 1
        else:
            self.compute_s += elapsed
            if dataset is not None:
                self.by_dataset[dataset] = self.by_dataset.get(dataset, 0.0) + elapsed
            if key is not None:
                self.seconds[key] = round(elapsed, 1)
        self._report()

    def planned(self, entries: list[str]) -> None:
        """These cache entries are about to be computed (by a worker pool, or here as they are read):
        the total of runs done / total, known before the first of them starts. An entry announced
        twice (a figure's sweep, then its frame) counts once."""
        new = [name for name in entries if name not in self.announced]
        self.announced.update(new)
        self.resumed += sum((checkpoints.folder() / f"{name}.pt").is_file() for name in new)
        self.to_compute += len(new)
        self.pending += len(new)
        self._report()

    def started(self, entry: str | None = None) -> None:
        """A run starts computing in this process; one not announced by ``planned`` adds to the total."""
        if entry in self.announced and self.pending:
            self.pending -= 1
        else:
            self.to_compute += 1
            self.resumed += entry is not None and (checkpoints.folder() / f"{entry}.pt").is_file()
        self._report()

    def finished(self, by_worker: bool = False) -> None:
        """A run finished computing (``by_worker``: in a worker process, so it was never ``started`` here)."""
        if by_worker and self.pending:
            self.pending -= 1
        self.computed += 1
        self._report()

    def _report(self) -> None:
        if self.progress_file:
            atomic_write_text(Path(self.progress_file), json.dumps(
                {"runs": self.runs, "from_cache": self.from_cache, "to_compute": self.to_compute,
                 "computed": self.computed}))
        elif self.display and self.to_compute:
            if self._bar is None:
                self._bar = tqdm(total=self.to_compute, desc="runs computed", unit="run", leave=True)
            self._bar.total, self._bar.n = self.to_compute, self.computed
            self._bar.set_postfix_str(f"{self.from_cache} read from cache" if self.from_cache else "", refresh=False)
            self._bar.refresh()

    def mark_computed(self, config: RunConfig, stop_loss: float | None = None, extra_metrics=None) -> None:
        """Note that a worker process just computed this entry for us, so that reading it back
        counts as computed in this run, not as taken from an earlier run's cache."""
        from replicate.runs import cache  # the cache names its entries; it imports this module

        self.fresh.add(cache._file(config, stop_loss, ".csv", extra_metrics))

    def provenance(self) -> dict:
        return {"runs": self.runs, "runs_from_cache": self.from_cache,
                "runs_compute_s": round(self.compute_s, 1), "runs_untimed": self.untimed,
                "runs_compute_by_dataset_s": {k: round(v, 1) for k, v in sorted(self.by_dataset.items())},
                "run_seconds": dict(sorted(self.seconds.items())), "cache_version": VERSION,
                "machines": dict(sorted(self.machines.items())),
                **({"runs_resumed": self.resumed} if self.resumed else {})}


__all__ = ["RunLog"]
