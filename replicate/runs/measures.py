"""Curve measures that figures and tuning rules read off run histories, each defined once.

A history is one run's per-round metrics (``round`` and metric columns, as ``cache.run`` returns).
Which evaluations count as a curve's "final" part is a figure's stated choice, one of:

- ``fraction``: the last round(fraction · logged rows) rows, at least one (FedProx's, STEM's figures);
- ``rows``: the last ``rows`` logged rows (Li et al.'s figures);
- ``rounds``: the evaluations in the last ``rounds`` rounds (Charles & Konečný: "the last 100 rounds");
- ``early``: the evaluations after round 0 up to round ``early`` (their early-progress window).

A window holding a non-finite value has diverged: its final loss (or dissimilarity) is inf, any
other final metric NaN, so a diverged run never wins a comparison by accident. (A run that diverges
stays diverged, so a final window sees it; an early window sees only what happened early.)
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd


def window(history: pd.DataFrame, *, fraction: float | None = None, rows: int | None = None,
           rounds: int | None = None, early: int | None = None) -> pd.DataFrame:
    """The rows of ``history`` (sorted by round) in the final window named by exactly one keyword."""
    chosen = [name for name, v in (("fraction", fraction), ("rows", rows), ("rounds", rounds), ("early", early))
              if v is not None]
    if len(chosen) != 1:
        raise ValueError(f"name exactly one window (fraction, rows, rounds or early), got {chosen or 'none'}")
    history = history.sort_values("round")
    if fraction is not None:
        return history.iloc[-max(1, int(round(fraction * len(history)))):]
    if rows is not None:
        return history.iloc[-rows:]
    r = history["round"].to_numpy()
    if rounds is not None:
        return history[r > r.max() - rounds]
    return history[(r > 0) & (r <= early)]


def worst(metric: str) -> float:
    """The value a diverged curve scores: inf for losses and the dissimilarity, NaN otherwise."""
    return math.inf if "loss" in metric or metric == "dissimilarity" else math.nan


def final(history: pd.DataFrame, metric: str, **which) -> float:
    """Mean of ``metric`` over the window ``which`` (see ``window``); ``worst(metric)`` if it diverged there."""
    values = window(history, **which)[metric].to_numpy(dtype=float)
    return float(values.mean()) if len(values) and np.isfinite(values).all() else worst(metric)


def finals(data: pd.DataFrame, metric: str, by, **which) -> pd.Series:
    """``final`` of every curve of a tidy frame, one per group of the columns ``by``."""
    return data.groupby(list(by))[[metric, "round"]].apply(lambda part: final(part, metric, **which))


def fluctuation(values) -> float:
    """Total rise over total fall of a curve (Li et al.'s instability measure, on the logged values):
    0 when it only falls, ≥ 1 with no net progress, inf once it diverged."""
    v = np.asarray(values, dtype=float)
    if not np.isfinite(v).all():
        return math.inf
    steps = np.diff(v)
    fall, rise = -steps[steps < 0].sum(), steps[steps > 0].sum()
    return float(rise / fall) if fall > 0 else math.inf


def fluctuations(data: pd.DataFrame, by, metric: str = "train_loss") -> pd.Series:
    """``fluctuation`` of every curve of a tidy frame, one per group of the columns ``by``."""
    return data.sort_values("round").groupby(list(by))[metric].apply(fluctuation)


def stopped_at(history: pd.DataFrame, absorbs: bool = True) -> int:
    """The round at which the engine stopped computing a run: its last evaluation's (its horizon, or the target
    it stopped at), or, for a run whose model turned NaN for good, the first evaluation from which its rows repeat
    with a NaN metric: the engine fills the rest of such a run's history without training it (``engine._fill``;
    never for a run with extra metrics: ``absorbs=False``). Where a model turned NaN only in part first, training
    went on a few rounds past this one: then it undercounts those (a diverged run of the committed grids stops
    here: their elapsed times, docs/tuning.md)."""
    history = history.sort_values("round")
    rounds = history["round"].to_numpy()
    if not len(rounds):
        return 0
    if not absorbs:
        return int(rounds[-1])
    metrics = history.select_dtypes("number").drop(columns=["round", "lr"], errors="ignore").to_numpy(dtype=float)
    nan = np.isnan(metrics).any(axis=1)
    if not nan[-1]:
        return int(rounds[-1])
    same = np.isclose(metrics, metrics[-1], rtol=0, atol=0, equal_nan=True).all(axis=1)  # bitwise the last row
    before = np.flatnonzero(~(same & nan))  # rows before the repeated NaN tail
    return int(rounds[before[-1] + 1 if len(before) else 0])
