"""The face of the run layer: ``run(config)`` for one history, ``compare({label: config})`` for a tidy frame.

A history has a row per evaluated round (row r: the global model before round r; the last row: the final
model), with the columns of ``COLUMNS``. A run comes from the run cache when it was computed before
(``runs.cache``), a dataset or a ``torch.nn.Module`` of one's own named by its contents (``runs.own``).
"""
from __future__ import annotations

import pandas as pd

from replicate.core.errors import ReplicateError
from replicate.runs import cache
from replicate.runs.config import RunConfig

COLUMNS = {
    "round": "the round the row's model stands before (0: the initial model; the last row: the final model)",
    "lr": "the client learning rate of that round (the schedule's η_r)",
    "train_loss": "the global training loss, sample-weighted over every client (the model's loss, no regulariser)",
    "train_acc": "the accuracy on every client's training samples, pooled",
    "test_loss": "the loss on the test split (absent when the dataset has none)",
    "test_acc": "the accuracy on the test split (absent when the dataset has none)",
    "objective": "quadratic problems: the global objective F(w) = Σ_k p_k F_k(w), instead of the four above",
    "distance": "quadratic problems: ‖w − w*‖, the distance to the global minimiser",
}


def run(config: RunConfig, *, use_cache: bool = True, progress: bool = True) -> pd.DataFrame:
    """Train one run and return its history (``COLUMNS``), or read it from the run cache. ``progress``: a bar over
    its rounds in a terminal or a notebook (none where stderr is a file, such as a job's log)."""
    if not isinstance(config, RunConfig):
        raise ReplicateError(f"run takes a RunConfig, got {type(config).__name__}; for several, use compare()")
    return cache.run(config, progress=progress, use_cache=use_cache)


def compare(configs: dict[str, RunConfig], *, use_cache: bool = True, progress: bool = True) -> pd.DataFrame:
    """Every run of ``configs`` (label → config) as one tidy frame: the histories stacked, with a ``run``
    column holding each one's label (``seaborn.lineplot(frame, x="round", y="test_acc", hue="run")``)."""
    if not isinstance(configs, dict) or not configs:
        raise ReplicateError("compare takes a non-empty dict of label → RunConfig")
    for label, config in configs.items():
        if not isinstance(config, RunConfig):
            raise ReplicateError(f"compare: {label!r} is a {type(config).__name__}, not a RunConfig")
    return pd.concat([run(c, use_cache=use_cache, progress=progress).assign(run=label)
                      for label, c in configs.items()], ignore_index=True)


__all__ = ["COLUMNS", "compare", "run"]
