"""runs.tune: tune on the first seeds, then run the choice on every seed (one protocol for the tuned figures)."""
from __future__ import annotations

import dataclasses
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


def test_the_result_carries_every_tuning_run_and_frames_it_with_the_figures_labels(monkeypatch):
    """A figure labels its tuning from the result (issue #41 item 2), not by listing the grid's runs again: the
    tuning runs in grid order, each read once, and the chosen runs on the seeds that did not tune."""
    loss = {("a", 0.1): 2.0, ("a", 0.5): 1.0, ("b", 0.1): 1.0, ("b", 0.5): 3.0}
    read, *_ = _fake(monkeypatch, loss)
    found = tune.tune_then_run({"a": [0.1, 0.5], "b": [0.1, 0.5]}, config_of, (0, 1, 2), 2, last)
    assert [(g, c, s) for g, c, s, _ in found.tuning] == [(g, c, s) for g in "ab" for c in (0.1, 0.5) for s in (0, 1)]
    assert all(h.train_loss.iloc[-1] == loss[(g, c)] + s for g, c, s, h in found.tuning)
    assert sum(1 for r in read if r[2] in (0, 1)) == 8 + 4  # each tuning run read once, then the finals' own reads

    def label(group, candidate, seed):
        return {"set": group.upper(), "lr": candidate, "seed": seed}

    tuning = found.frame(label, ("round", "train_loss"))
    assert list(tuning.columns) == ["set", "lr", "seed", "round", "train_loss"] and len(tuning) == 8 * 2
    assert tuning.groupby(["set", "lr", "seed"]).train_loss.last().to_dict() == {
        (g.upper(), c, s): loss[(g, c)] + s for g in "ab" for c in (0.1, 0.5) for s in (0, 1)}
    finals = found.frame(label, finals_on=(2,))
    assert finals[["set", "lr", "seed"]].drop_duplicates().values.tolist() == [["A", 0.5, 2], ["B", 0.1, 2]]
    assert finals.train_loss.tolist() == [9.0, 3.0, 9.0, 3.0]


def test_with_halving_a_tuning_run_is_the_one_its_score_is_of(monkeypatch):
    """An eliminated candidate's run is its last rung's (the short run), a survivor's the full run."""
    seen = []

    def run(config, **_):
        seen.append(config.rounds)
        return pd.DataFrame({"round": range(config.rounds + 1), "train_loss": [1.0 / config.lr] * (config.rounds + 1)})

    monkeypatch.setattr(tune.cache, "run", run)
    monkeypatch.setattr(tune.pool, "compute", lambda jobs, **_: None)

    @dataclasses.dataclass(frozen=True)
    class Config:  # compares by value, as a RunConfig does
        lr: float
        seed: int
        rounds: int = 9
        eval_every: int = 1

        def replace(self, **changes):
            return dataclasses.replace(self, **changes)

    def config_of(group, lr, seed):
        return Config(lr, seed)

    found = tune.tune_then_run({"g": [1.0, 2.0, 3.0]}, config_of, (0,), 1, last, halving=tune.Halving(3, 2))
    assert found.chosen == {"g": 3.0}
    assert [(c, int(h["round"].max())) for _, c, _, h in found.tuning] == [(1.0, 3), (2.0, 3), (3.0, 9)]
    assert [(c, r) for _, c, r in found.scored_at] == [(1.0, 3), (2.0, 3), (3.0, 9)]


def test_a_value_listed_twice_is_refused_before_any_run(monkeypatch):
    import pytest

    from replicate.core.errors import ReplicateError

    read, computed, _ = _fake(monkeypatch, {("a", 0.1): 1.0})
    with pytest.raises(ReplicateError, match=r"lists a value twice: group 'a': candidates \[0.1, 0.1\]"):
        tune.tune_then_run({"a": [0.1, 0.1]}, config_of, (0, 1), 1, last)
    with pytest.raises(ReplicateError, match=r"seeds \(0, 0\)"):
        tune.tune_then_run({"a": [0.1]}, config_of, (0, 0), 1, last)
    assert read == computed == []
    with pytest.raises(ReplicateError, match="lists a value twice"):  # as a figure's config declares its grid
        tune.Grid({"a": [0.1, 0.1]}, config_of, (0,), 1)
    assert tune.Tuned([], {}, []).frame(lambda *_: {}, ("round", "train_loss")).columns.tolist() == ["round",
                                                                                                      "train_loss"]
