"""Tune on the first seeds, then run the chosen setting on every seed: the protocol of the papers'
tuned figures (Charles & Konečný Figures 6/11 and 13, Khanduri et al. Figures 2-5, Li et al.'s
Original η0 in Figures 3-4, FedProx's best μ in Figures 3-4), written once.

For each group (a variant, a (dataset, γ), an (algorithm, I)) and each of its candidate settings, the
runs on the tuning seeds are computed together (``pool.compute``: batched and spread over workers as
the run layer decides), each run is scored (``score(history)``), a candidate's score is the mean over
the tuning seeds, and ``pick`` chooses among the (score, candidate) pairs — each figure states its
rule and its tie-break (lowest final loss, highest tail accuracy, the smaller rate on a tie). The
chosen candidate then runs on every seed. With no tuning seeds nothing is scored and each group runs
its first candidate.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Hashable

import numpy as np
import pandas as pd

from replicate.core.threads import threads
from replicate.runs import cache, pool


@dataclass
class Tuned:
    """What ``tune_then_run`` found: every scored candidate, the choice per group and the final runs."""

    scores: list[tuple[Hashable, Any, float]]  # (group, candidate, mean score over the tuning seeds)
    chosen: dict[Hashable, Any]  # group → candidate
    runs: list[tuple[Hashable, int, pd.DataFrame]]  # (group, seed, history) of the chosen candidate, every seed


def lowest(scored: list[tuple[float, Any]]):
    """The candidate with the lowest score (the first of equals, in grid order)."""
    return min(scored, key=lambda sc: sc[0])[1]


def tune_then_run(groups: dict[Hashable, list], config_of: Callable, seeds, tune_seeds: int,
                  score: Callable[[pd.DataFrame], float], *, pick: Callable = lowest, workers: int = 2,
                  log=None, extra_metrics=None, single_threaded: bool = False,
                  stop_loss: float | None = None) -> Tuned:
    """Tune each group's candidates on ``seeds[:tune_seeds]`` and run its choice on every seed.

    ``config_of(group, candidate, seed)`` is the run's ``RunConfig``; ``pick`` gets a group's
    ``[(mean score, candidate), ...]`` in candidate order and returns the chosen candidate.
    ``extra_metrics`` and ``single_threaded`` are ``pool.frame``'s (the runs' keyed hook; runs left to
    this process compute with one intra-op thread, as workers do); with ``stop_loss`` every run ends at
    its first evaluation whose training loss is at most that (rounds-to-target figures)."""
    tuning = tuple(seeds[:tune_seeds])
    with threads(1 if single_threaded else None):
        return _tune_then_run(groups, config_of, seeds, tuning, score, pick, workers, log, extra_metrics, stop_loss)


def _tune_then_run(groups, config_of, seeds, tuning, score, pick, workers, log, extra_metrics, stop_loss) -> Tuned:
    def compute(configs):
        pool.compute([(c, stop_loss, extra_metrics) for c in configs], workers=workers, log=log)  # pool.Job fields

    def history(config):
        return cache.run(config, stop_loss=stop_loss, progress=False, log=log, extra_metrics=extra_metrics)

    compute([config_of(g, c, s) for g, cands in groups.items() for c in cands for s in tuning])
    scores, chosen = [], {}
    for group, candidates in groups.items():
        if not tuning:
            chosen[group] = candidates[0]
            continue
        scored = []
        for candidate in candidates:
            value = float(np.mean([score(history(config_of(group, candidate, s))) for s in tuning]))
            scored.append((value, candidate))
            scores.append((group, candidate, value))
        chosen[group] = pick(scored)
    finals = [(g, s, config_of(g, chosen[g], s)) for g in groups for s in seeds]
    compute([c for *_, c in finals])
    return Tuned(scores, chosen, [(g, s, history(c)) for g, s, c in finals])


def at_grid_edge(value: float, grid) -> bool:
    """Whether a tuned value is the smallest or largest of its grid (the optimum may lie beyond it)."""
    return len(grid) > 1 and value in (min(grid), max(grid))
