"""runs.tune: tune on the first seeds, then run the choice on every seed (one protocol for the tuned figures)."""
from __future__ import annotations

from types import SimpleNamespace

import pandas as pd

from replicate.runs import tune


def _fake(monkeypatch, loss):
    """Runs whose final loss is ``loss[(group, candidate)] + seed``; records what was read and computed,
    and the stop_loss of every job computed and run read."""
    read, computed, stops = [], [], []

    def run(config, stop_loss=None, **_):
        read.append((config.group, config.candidate, config.seed))
        stops.append(stop_loss)
        return pd.DataFrame({"round": [0, 1], "train_loss": [9.0, loss[(config.group, config.candidate)] + config.seed]})

    monkeypatch.setattr(tune.cache, "run", run)
    def compute(jobs, **_):
        computed.append([j[0].seed for j in jobs])
        stops.extend(j[1] for j in jobs)  # pool.Job's target

    monkeypatch.setattr(tune.pool, "compute", compute)
    return read, computed, stops


def config_of(group, candidate, seed):
    return SimpleNamespace(group=group, candidate=candidate, seed=seed)


def last(run):
    return float(run.train_loss.iloc[-1])


def test_tunes_on_the_first_seeds_and_runs_the_choice_on_every_seed(monkeypatch):
    loss = {("a", 0.1): 2.0, ("a", 0.5): 1.0, ("b", 0.1): 1.0, ("b", 0.5): 1.0}
    read, computed, _ = _fake(monkeypatch, loss)
    found = tune.tune_then_run({"a": [0.1, 0.5], "b": [0.1, 0.5]}, config_of, (0, 1, 2), 1, last)
    assert found.chosen == {"a": 0.5, "b": 0.1}  # the lowest; on a tie the first in grid order
    assert found.scores == [("a", 0.1, 2.0), ("a", 0.5, 1.0), ("b", 0.1, 1.0), ("b", 0.5, 1.0)]
    assert computed == [[0, 0, 0, 0], [0, 1, 2, 0, 1, 2]]  # tuning on seed 0, then every seed of the choices
    assert [(g, s) for g, s, _ in found.runs] == [("a", 0), ("a", 1), ("a", 2), ("b", 0), ("b", 1), ("b", 2)]
    assert ("a", 0.1, 1) not in read and ("a", 0.5, 2) in read
    found = tune.tune_then_run({"a": [0.1, 0.5]}, config_of, (0, 1), 1, last,
                               pick=lambda scored: max(scored, key=lambda sc: sc[0])[1])
    assert found.chosen == {"a": 0.1}  # the figure's own rule (here: the highest score)


def test_no_tuning_seeds_runs_each_groups_first_candidate(monkeypatch):
    read, computed, _ = _fake(monkeypatch, {("a", 0.1): 1.0, ("a", 0.5): 0.0})
    found = tune.tune_then_run({"a": [0.1, 0.5]}, config_of, (0, 1), 0, last)
    assert found.chosen == {"a": 0.1} and found.scores == [] and computed == [[], [0, 1]]


def test_a_stop_loss_reaches_every_computed_and_read_run(monkeypatch):
    """Rounds-to-target figures (STEM Figure 1 measured) tune on runs that stop at a training-loss target:
    the target is part of the run's cache key, so the runs computed and the runs read must both carry it."""
    read, _, stops = _fake(monkeypatch, {("a", 0.1): 1.0, ("a", 0.5): 0.0})
    tune.tune_then_run({"a": [0.1, 0.5]}, config_of, (0, 1), 1, last, stop_loss=0.5)
    assert len(stops) == 4 + len(read) and set(stops) == {0.5}  # 2 tuning + 2 final jobs, then every read


def test_at_grid_edge():
    assert tune.at_grid_edge(0.1, (0.1, 0.2, 0.3)) and tune.at_grid_edge(0.3, [0.3, 0.1])
    assert not tune.at_grid_edge(0.2, (0.1, 0.2, 0.3)) and not tune.at_grid_edge(0.1, (0.1,))
