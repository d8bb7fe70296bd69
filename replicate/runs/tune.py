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

``halving`` (``Halving``) tunes by successive halving instead of the full grid (Jamieson & Talwalkar
2016, one bracket of Li et al.'s Hyperband 2018): every candidate runs a short horizon, the best
1/η of them (by the figure's own ``pick``, applied again and again) a η× longer one, and so on up to
the full rounds, where the survivors are scored as the grid scores them. A short-horizon run is the
run's own config with fewer rounds, i.e. the first rounds of the full run (nothing a run computes
depends on its total rounds; tests/test_halving.py), so its runs are ordinary cached runs. With a
``stop_loss`` (rounds-to-target figures) every run also ends at its first evaluation at or below it, so
a short run is the full run's first rounds or, where it stopped sooner, the whole of it. A survivor's next
run goes on from its short run's last state (``checkpoints.continue_as``; where it stopped, if sooner), bitwise
the run from round 0 on the CPU (where batched rows compute bitwise alone; elsewhere within the float rounding
``engine.run_batch`` states). A choice made so is a deviation from the papers' full grids, stated by the figures
that use it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable

import numpy as np
import pandas as pd

from replicate.core.errors import ReplicateError
from replicate.runs import cache, checkpoints, pool
from replicate.runs.config import RunConfig
from replicate.runs.measures import stopped_at


@dataclass
class Tuned:
    """What ``tune_then_run`` found: every scored candidate with its runs, the choice per group and the final
    runs, so a figure draws and labels its tuning from here, without listing its runs again."""

    scores: list[tuple[Hashable, Any, float]]  # (group, candidate, mean score over the tuning seeds)
    chosen: dict[Hashable, Any]  # group → candidate
    runs: list[tuple[Hashable, int, pd.DataFrame]]  # (group, seed, history) of the chosen candidate, every seed
    # (group, candidate, the rounds its score is of: with halving, an eliminated candidate's last rung)
    scored_at: list[tuple[Hashable, Any, int]] = field(default_factory=list)
    rounds: tuple[int, int] = (0, 0)  # round-evaluations the tuning computed, and the grid's budget: its runs'
    # rounds. Computed: each run's rounds up to where it stopped (its target, or its model all NaN:
    # ``measures.stopped_at``), a run that resumed from its last rung's state from there on
    # (group, candidate, seed, history) of every tuning run in grid order, at the horizon its score is of
    tuning: list[tuple[Hashable, Any, int, pd.DataFrame]] = field(default_factory=list)

    def frame(self, label: Callable[[Hashable, Any, int], dict], columns=None, *, finals_on=None) -> pd.DataFrame:
        """The tuning runs as one tidy frame (``pool.tidy``), each labelled ``label(group, candidate, seed)``;
        with ``finals_on`` (seeds), the chosen candidates' runs on those seeds instead, group by group."""
        if finals_on is None:
            labelled = [(label(g, c, s), history) for g, c, s, history in self.tuning]
        else:
            labelled = [(label(g, self.chosen[g], s), history) for g, s, history in self.runs if s in finals_on]
        return pool.tidy(labelled, columns)


@dataclass(frozen=True)
class Grid:
    """A tuned figure's grid, stated once: the figure tunes it (``tune``) and labels its rows
    from the same groups and candidates, and the GPU-work enumeration (``experiments.work``) lists its runs
    (``tuning``, ``finals``) from it, so no list of a figure's runs is written twice.

    ``groups``: group → its candidate settings (in the order a tie breaks); ``config_of(group, candidate,
    seed)`` → the run's ``RunConfig``; the candidates run on ``seeds[:tune_seeds]``, the choice on every seed."""

    groups: dict[Hashable, list]
    config_of: Callable
    seeds: tuple
    tune_seeds: int

    def __post_init__(self):  # a figure's config builds its grid when it is validated: before anything runs
        _refuse_repeats(self.groups, self.seeds)

    def tuning_items(self) -> list[tuple[Hashable, Any, int]]:
        """(group, candidate, seed) of every tuning run, in the order ``tune`` computes them."""
        tuning = self.seeds[:self.tune_seeds]
        return [(g, c, s) for g, candidates in self.groups.items() for c in candidates for s in tuning]

    def tuning(self) -> list:
        return [self.config_of(*item) for item in self.tuning_items()]

    def finals(self, chosen: dict | None = None) -> list:
        """The chosen candidate of each group (None: its first, which stands in for any in a count) on every seed."""
        chosen = chosen or {g: candidates[0] for g, candidates in self.groups.items()}
        return [self.config_of(g, chosen[g], s) for g in self.groups for s in self.seeds]

    def tune(self, score: Callable[[pd.DataFrame], float], **options) -> "Tuned":
        """``tune_then_run`` of this grid (``options``: its keywords)."""
        return tune_then_run(self.groups, self.config_of, self.seeds, self.tune_seeds, score, **options)


@dataclass(frozen=True)
class Halving:
    """Successive halving with ``levels`` rungs a factor ``eta`` apart: rungs at R/η^(levels−1), …, R/η, R
    rounds (each a multiple of the run's ``eval_every``, at least one evaluation interval)."""

    eta: int = 3
    levels: int = 4

    def rungs(self, rounds: int, eval_every: int | None) -> list[int]:
        step = eval_every or 1
        out = []
        for level in range(self.levels - 1, 0, -1):
            r = max(step, round(rounds / self.eta ** level / step) * step)
            if r < rounds and (not out or r > out[-1]):
                out.append(r)
        return out + [rounds]

    def keep(self, alive: int) -> int:
        return max(1, math.ceil(alive / self.eta))


def _refuse_repeats(groups: dict, seeds) -> None:
    """A run named twice would be one run, and the figure's rows would not say which: refused."""
    def repeats(values) -> bool:  # candidates may be dicts (a setting of several knobs): compared, not hashed
        values = list(values)
        return any(v in values[:i] for i, v in enumerate(values))

    twice = [f"group {g!r}: candidates {cands}" for g, cands in groups.items() if repeats(cands)]
    if repeats(seeds):
        twice.append(f"seeds {tuple(seeds)}")
    if twice:
        raise ReplicateError(f"a tuning grid lists a value twice: {'; '.join(twice)}")


def ranked(scored: list[tuple[float, Any]], pick: Callable, count: int) -> list[Any]:
    """The best ``count`` candidates by ``pick`` (the figure's rule and tie-break), best first: ``pick``
    applied again to what is left."""
    left, best = list(scored), []
    while left and len(best) < count:
        choice = pick(left)
        best.append(choice)
        left = [(value, candidate) for value, candidate in left if candidate is not choice]
    return best


def lowest(scored: list[tuple[float, Any]]):
    """The candidate with the lowest score (the first of equals, in grid order)."""
    return min(scored, key=lambda sc: sc[0])[1]


def tune_then_run(groups: dict[Hashable, list], config_of: Callable, seeds, tune_seeds: int,
                  score: Callable[[pd.DataFrame], float], *, pick: Callable = lowest, workers: int = 2,
                  log=None, extra_metrics=None,
                  stop_loss: float | None = None, halving: Halving | None = None) -> Tuned:
    """Tune each group's candidates on ``seeds[:tune_seeds]`` and run its choice on every seed.

    ``config_of(group, candidate, seed)`` is the run's ``RunConfig``; ``pick`` gets a group's
    ``[(mean score, candidate), ...]`` in candidate order and returns the chosen candidate.
    ``extra_metrics`` is ``pool.frame``'s (the runs' keyed hook); with ``stop_loss`` every run ends at
    its first evaluation whose training loss is at most that (rounds-to-target figures); with ``halving``
    the candidates are tuned by successive halving (module docstring)."""
    tuning, halving = tuple(seeds[:tune_seeds]), halving or Halving(levels=1)
    _refuse_repeats(groups, seeds)

    def compute(configs):
        pool.compute([(c, stop_loss, extra_metrics) for c in configs], workers=workers, log=log)  # pool.Job fields

    def history(config):
        return cache.run(config, stop_loss=stop_loss, progress=False, log=log, extra_metrics=extra_metrics)

    def at(group, candidate, seed, level):  # the candidate's run at a rung
        config = config_of(group, candidate, seed)
        if halving.levels == 1:
            return config
        rungs = halving.rungs(config.rounds, config.eval_every)
        return config.replace(rounds=rungs[min(level, len(rungs) - 1)]) if level < len(rungs) - 1 else config

    def next_rung(group, candidate, seed, level):  # (the rung's run, the next rung's), where a next rung exists
        here, there = at(group, candidate, seed, level), at(group, candidate, seed, level + 1)
        return None if level + 1 >= halving.levels or here == there else (here, there)

    scores, chosen, computed = [], {}, []  # configs compare, they need not hash: lists, not sets
    rounds_of = {}  # (group, index of the candidate) → the rounds of its last score
    runs = {}  # (group, index of the candidate, tuning seed) → the history its score is of
    ended = []  # (a run, the round it stopped at), noted as its history is read for its score
    onward = _Onward(stop_loss, extra_metrics, lambda config: next(r for c, r in ended if c == config))
    alive = {g: list(cands) for g, cands in groups.items()} if tuning else {}
    for level in range(halving.levels):
        configs = [at(g, c, s, level) for g, cands in alive.items() for c in cands for s in tuning]
        onward.ask([p for g, cands in alive.items() for c in cands for s in tuning
                    if (p := next_rung(g, c, s, level))], configs)
        compute(configs)
        computed = _once(computed + configs)  # each run's rounds counted once
        for group, candidates in alive.items():
            scored = []
            for candidate in candidates:
                index = groups[group].index(candidate)
                for s in tuning:  # the last rung's run of each candidate and seed is the one kept
                    runs[(group, index, s)] = history(config := at(group, candidate, s, level))
                    ended.append((config, stopped_at(runs[(group, index, s)], absorbs=extra_metrics is None)))
                value = float(np.mean([score(runs[(group, index, s)]) for s in tuning]))
                scored.append((value, candidate))
                rounds_of[(group, index)] = getattr(at(group, candidate, tuning[0], level), "rounds", None)
                if level == halving.levels - 1 or len(candidates) == 1:
                    scores.append((group, candidate, value))
            last = level == halving.levels - 1 or len(candidates) == 1
            alive[group] = ranked(scored, pick, 1 if last else halving.keep(len(candidates)))
            for c in alive[group]:  # a survivor's next run goes on from here (a group decided before its last
                for s in tuning:    # rung: its final run, where that is the next run)
                    if (pair := next_rung(group, c, s, level)) and (not last or pair[1] == config_of(group, c, s)):
                        onward.keep(pair)
            if not last:  # the eliminated keep the score of their last rung
                scores += [(group, c, v) for v, c in scored if c not in alive[group]]
            else:
                chosen[group] = alive[group][0]
        onward.after_rung(configs)  # after every group ranked: a run two groups share may be kept by either
        alive = {g: cands for g, cands in alive.items() if g not in chosen}
    for group, candidates in groups.items():
        chosen.setdefault(group, candidates[0])  # no tuning seeds: the first candidate
    whole = _once([config_of(g, c, s) for g, cands in groups.items() for c in cands for s in tuning])  # the grid
    finals = [(g, s, config_of(g, chosen[g], s)) for g in groups for s in seeds]
    compute([c for *_, c in finals])
    final_runs = [(g, s, history(c)) for g, s, c in finals]
    onward.after_finals()
    scored_at = [(g, groups[g][i], r) for (g, i), r in rounds_of.items()]
    took = [onward.stopped(config) - onward.start(config) for config in computed]
    return Tuned(scores, chosen, final_runs, scored_at, (sum(took), sum(getattr(c, "rounds", 0) for c in whole)),
                 [(g, groups[g][i], s, h) for (g, i, s), h in runs.items()])


class _Onward:
    """Halving's survivors going on from their short runs' last state (``checkpoints.continue_as``), apart from
    the ranking: every run of a rung asks to leave its state for its next rung's run; a survivor's is kept (and a
    group decided before its last rung keeps it for its final run); the rest are withdrawn once every group has
    ranked (a run two groups share may be kept by either), and a kept one once the run that took it is stored.
    A run leaves its state where it stopped (``stopped``: its last round, its target, or where its model turned
    NaN: the longer run ends there too). Which runs did resume is known only from the state files, before their
    rung computes; their rounds count from there (``start``)."""

    def __init__(self, stop_loss, extra_metrics, stopped: Callable[[Any], int]):
        self.stop_loss, self.extra_metrics, self.stopped = stop_loss, extra_metrics, stopped
        self.asked = []  # (a run of this rung, its next rung's run)
        self.kept = []  # such pairs whose state the next rung, or a decided group's final run, resumes from
        self.resumed = []  # (a run that resumed, the run whose state it resumed from)

    def names(self, here, there) -> tuple[str, str] | None:
        """The two runs' cache entry names, which name their checkpoints; None for an extra metric without a name
        (or a stand-in config, as tests tune)."""
        if not isinstance(here, RunConfig):
            return None
        try:
            return (cache.entry(here, self.stop_loss, self.extra_metrics),
                    cache.entry(there, self.stop_loss, self.extra_metrics))
        except ReplicateError:
            return None

    def ask(self, pairs: list, configs: list) -> None:
        """Before a rung computes ``configs``: which of them resume from a state kept for them, and each of
        ``pairs`` asked to leave its state for its next rung's run."""
        self.resumed += [(there, here) for here, there in self.kept if there in configs and self.left(here, there)]
        self.kept = [pair for pair in self.kept if pair[1] not in configs]  # a decided group's, for its final run
        self.asked = pairs
        for here, there in pairs:
            if (names := self.names(here, there)):
                checkpoints.continue_as(*names)

    def keep(self, pair) -> None:
        self.kept.append(pair)

    def after_rung(self, configs: list) -> None:
        """After every group of a rung ranked: the requests answered, the states no survivor takes withdrawn, and
        those of the runs of ``configs`` that resumed (stored now, their state no longer needed)."""
        for here, there in self.asked:
            if (names := self.names(here, there)):
                checkpoints.withdraw(*names, at=self.stopped(here), keep=(here, there) in self.kept)
        for there, here in self.resumed:
            if there in configs and (names := self.names(here, there)):
                checkpoints.withdraw(*names, at=self.stopped(here))
        self.asked = []

    def after_finals(self) -> None:
        """The final runs stored: the states kept for a decided group's final run are no longer needed."""
        for here, there in self.kept:
            if (names := self.names(here, there)):
                checkpoints.withdraw(*names, at=self.stopped(here))

    def left(self, here, there) -> bool:
        """Whether the run ``here`` left its last state for ``there`` to resume from."""
        names = self.names(here, there)
        return names is not None and checkpoints.reached_by(names[1]) == self.stopped(here)

    def start(self, config) -> int:
        """The round ``config``'s run began at: where the run whose state it resumed from stopped, else 0."""
        return next((self.stopped(before) for after, before in self.resumed if after == config), 0)


def _once(configs: list) -> list:
    """``configs`` without repeats, in order (configs compare, they need not hash)."""
    out = []
    for config in configs:
        if config not in out:
            out.append(config)
    return out


def at_grid_edge(value: float, grid) -> bool:
    """Whether a tuned value is the smallest or largest of its grid (the optimum may lie beyond it)."""
    return len(grid) > 1 and value in (min(grid), max(grid))
