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

import pandas as pd
from tqdm.auto import tqdm

from .. import engine, paths
from ..claims import atomic_write_text
from .config import RunConfig, build

VERSION = 1


def key(config: RunConfig) -> str:
    payload = json.dumps({"version": VERSION, **dataclasses.asdict(config)}, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()[:20]


def load(config: RunConfig) -> pd.DataFrame | None:
    path = paths.cache_dir() / "runs" / f"{key(config)}.csv"
    return pd.read_csv(path) if path.exists() else None


def run(config: RunConfig, *, progress: bool = True, use_cache: bool = True) -> pd.DataFrame:
    """Metrics per round for one config, from the cache when present."""
    if use_cache and (cached := load(config)) is not None:
        return cached
    problem, algorithm, update, schedule = build(config)
    history = engine.run(problem, algorithm, update, schedule, rounds=config.rounds, seed=config.seed,
                         eval_every=config.eval_every, progress=progress,
                         desc=f"{config.dataset} {config.scheme} E={config.local_steps} K={config.clients_per_round}")
    if use_cache:
        folder = paths.cache_dir() / "runs"
        buffer = io.StringIO()
        history.to_csv(buffer, index=False)
        atomic_write_text(folder / f"{key(config)}.json", json.dumps(dataclasses.asdict(config), indent=1))
        atomic_write_text(folder / f"{key(config)}.csv", buffer.getvalue())
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
