"""Results of runs cached on disk by config hash.

Each run is stored as ``<hash>.csv`` (its per-round metrics) next to
``<hash>.json`` (its full config), both written atomically, so an interrupted
batch resumes from the runs it finished and a rerun with the same config loads
instead of recomputing. Bump ``VERSION`` when the engine's numbers change.
"""
from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import time
from pathlib import Path

import pandas as pd
from tqdm.auto import tqdm

from replicate.report import claims
from replicate.fl import engine
from replicate.core import paths
from replicate.core.fileio import atomic_write_text
from replicate.experiments.runs.config import RunConfig, build

VERSION = 2

# What this process's runs cost: published beside each figure's claims so the report can
# say how long a figure takes from scratch even when its runs came from the cache.
_usage = {"runs": 0, "from_cache": 0, "compute_s": 0.0, "untimed": 0}
_fresh: set[Path] = set()  # cache entries this process's worker pools just computed: not "from cache"


def usage() -> dict:
    return {"runs": _usage["runs"], "runs_from_cache": _usage["from_cache"],
            "runs_compute_s": round(_usage["compute_s"], 1), "runs_untimed": _usage["untimed"]}


def reset_usage() -> None:
    _usage.update(runs=0, from_cache=0, compute_s=0.0, untimed=0)
    _fresh.clear()


def mark_computed(config: RunConfig, stop_loss: float | None = None) -> None:
    """Note that a worker process just computed this entry for us, so that reading it back
    counts as computed in this run, not as taken from an earlier run's cache."""
    _fresh.add(_file(config, stop_loss, ".csv"))


claims.PROVENANCE.append(usage)


def key(config: RunConfig) -> str:
    payload = json.dumps({"version": VERSION, **dataclasses.asdict(config)}, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()[:20]


def _file(config: RunConfig, stop_loss: float | None, suffix: str):
    """``runs/<key>.csv|json``, or ``to_target/<key>_to_<loss>.csv|json`` for stopped runs."""
    if stop_loss is None:
        return paths.cache_dir() / "runs" / f"{key(config)}{suffix}"
    return paths.cache_dir() / "to_target" / f"{key(config)}_to_{stop_loss:g}{suffix}"


def load(config: RunConfig, stop_loss: float | None = None) -> pd.DataFrame | None:
    path = _file(config, stop_loss, ".csv")
    return pd.read_csv(path) if path.exists() else None


def _record(elapsed: float | None, cached: bool) -> None:
    _usage["runs"] += 1
    _usage["from_cache"] += cached
    if elapsed is None:
        _usage["untimed"] += 1
    else:
        _usage["compute_s"] += elapsed


def run(config: RunConfig, *, stop_loss: float | None = None, progress: bool = True,
        use_cache: bool = True) -> pd.DataFrame:
    """Metrics per round for one config, from the cache when present.

    With ``stop_loss`` the run ends at the first evaluated round whose global training loss
    is at most that value (rounds-to-target sweeps); such runs are cached separately.
    """
    if use_cache and (cached := load(config, stop_loss)) is not None:
        _record(json.loads(_file(config, stop_loss, ".json").read_text()).get("elapsed_s"),
                cached=_file(config, stop_loss, ".csv") not in _fresh)
        return cached
    start = time.perf_counter()
    problem, algorithm, update, schedule = build(config)
    history = engine.run(problem, algorithm, update, schedule, rounds=config.rounds, seed=config.seed,
                         eval_every=config.eval_every, progress=progress,
                         stop=None if stop_loss is None else (lambda row: row["train_loss"] <= stop_loss),
                         desc=f"{config.dataset} {config.scheme} E={config.local_steps} K={config.clients_per_round}")
    elapsed = time.perf_counter() - start
    _record(elapsed, cached=False)
    if use_cache:
        buffer = io.StringIO()
        history.to_csv(buffer, index=False)
        meta = dataclasses.asdict(config) | {"elapsed_s": round(elapsed, 3), "device": str(problem.device)}
        if stop_loss is not None:
            meta["target"] = stop_loss
        atomic_write_text(_file(config, stop_loss, ".json"), json.dumps(meta, indent=1))
        atomic_write_text(_file(config, stop_loss, ".csv"), buffer.getvalue())
    return history


def run_many(configs: list[RunConfig], *, progress: bool = True, labels: list[dict] | None = None) -> pd.DataFrame:
    """Run (or load) every config; one long frame with the config's varying fields as columns."""
    frames = []
    varying = [f for f in RunConfig.fields() if len({getattr(c, f) for c in configs}) > 1]
    for i, config in enumerate(tqdm(configs, desc="runs", disable=not progress, leave=False)):
        history = run(config, progress=progress).copy()
        for name in varying:
            history[name] = getattr(config, name)
        for name, value in (labels[i] if labels else {}).items():
            history[name] = value
        frames.append(history)
    return pd.concat(frames, ignore_index=True)
