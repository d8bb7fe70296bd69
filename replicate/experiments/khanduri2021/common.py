"""What Khanduri et al.'s measured figures share (§4; spec STEM §6.5): the three algorithms with the
same (b, I), each algorithm's rates tuned on the first seeds by the final training loss and then run
on every seed, and the "STEM ends best" comparison. Figure 5 (``samples``, MNIST) and Figures 2-4
(``cifar``, CIFAR-10) build on it.

A figure config mixes in :class:`StemRuns` and provides ``dataset_name()``, ``rounds(I)``, ``MODEL``,
``TRAIN_PER_WORKER`` and the knobs ``batch_size``, ``stem_lr``, ``stem_momentum``, ``stem_c``, ``stem_a0``,
``client_lr``, ``seeds``, ``tune_seeds``, ``evals`` and ``tail``.

STEM's grid has two forms (``stem_momentum``), both PROPOSED: ``"c"``, the spec's first grid (§6.5), κ̄ × c with the
pairs whose first-epoch momentum weight a = c·η_1² reaches 1 dropped, the default; ``"a0"``, the second grid (§6.7,
2026-12-02), κ̄ × the first-epoch weight a₀ itself, c = a₀/η_1². η_1 = κ̄/2^(1/3) is eq. (2)'s rate in the first
epoch (``fl.schedules``' ``epoch_cube_root`` at round 0); later epochs keep a = c·η².
"""
from __future__ import annotations


import numpy as np
import pandas as pd

from replicate.core.errors import ReplicateError
from replicate.data.shards import WORKERS
from replicate.fl.algorithms import FedAvg, Scaffold, Stem
from replicate.fl.schedules import LRSchedule
from replicate.runs.tune import Grid, at_grid_edge
from replicate.runs.config import RunConfig
from replicate.runs.measures import final

ALGORITHMS = ("stem", "fedavg", "scaffold")
LABELS = {"stem": "STEM", "fedavg": "FedAvg", "scaffold": "SCAFFOLD"}
STEM_MOMENTUM = ("c", "a0")  # the momentum axis of STEM's grid: c (the first grid) or a₀ (the second, c = a₀/η_1²)
STEM_A0 = (0.1, 0.3, 0.5, 0.9)  # the second grid's first-epoch momentum weights a₀ (spec §6.7)


class StemRuns:
    """Run configs, STEM's (κ̄, c) grid and each algorithm's tuning candidates of a figure config."""

    def clients(self) -> int:
        """Workers taking part, every round: ``num_clients`` (K), the first of the 100-worker partition."""
        return self.num_clients

    def data_options(self) -> dict:
        return {} if self.num_clients == WORKERS else {"num_clients": self.num_clients}

    def check_clients(self) -> None:
        if not 1 <= self.num_clients <= WORKERS:
            raise ReplicateError(f"{type(self).__name__}.num_clients must be between 1 and {WORKERS}")

    def run_options(self) -> dict:
        """Further ``RunConfig`` fields (e.g. the execution) where the figure sets them."""
        return {}

    def __post_init__(self):
        add_grid_deviation(self)

    def stem_grid(self) -> list[tuple[float, float]]:
        """(κ̄, c) pairs: under the first grid those of ``stem_lr`` × ``stem_c`` whose first-epoch momentum weight
        a = c·η_1² stays below 1 (spec §6.5); under the second, ``stem_lr`` × ``stem_a0`` with c = a₀/η_1² (§6.7)."""
        if self.stem_momentum == "a0":
            return second_grid(self.stem_lr, self.stem_a0)
        return [(k, c) for k in self.stem_lr for c in self.stem_c if first_momentum_weight(k, c) < 1]

    def run_config(self, algorithm: str, local_updates: int, seed: int, lr: float, c: float = 1.0) -> RunConfig:
        rounds = self.rounds(local_updates)
        common = dict(dataset=self.dataset_name(), data_seed=seed, model=self.MODEL, local_steps=local_updates,
                      batch_size=self.batch_size, client_lr=lr, weight_decay=0.0, clip_norm=None, rounds=rounds,
                      seed=seed, eval_every=max(1, rounds // self.evals), **self.data_options(), **self.run_options())
        if algorithm == "stem":
            return RunConfig(**common, algorithm=Stem(momentum_c=c), lr_schedule="epoch_cube_root",
                             lr_decay=self.batch_size * local_updates / self.TRAIN_PER_WORKER)
        if algorithm == "fedavg":
            return RunConfig(**common, algorithm=FedAvg("full", self.clients()), lr_schedule="constant")
        return RunConfig(**common, algorithm=Scaffold(), lr_schedule="constant")

    def candidates(self, algorithm: str) -> list[dict]:
        if algorithm == "stem":
            return [{"lr": k, "c": c} for k, c in self.stem_grid()]
        return [{"lr": lr} for lr in self.client_lr]

    def updates(self) -> tuple[int, ...]:
        """The figure's values of I (one for a CIFAR-10 figure, several for Figure 5)."""
        return tuple(self.local_updates) if isinstance(self.local_updates, (tuple, list)) else (self.local_updates,)

    def grid(self, local_updates) -> Grid:
        """Every algorithm's candidates at every I in ``local_updates``, tuned on the first seeds (``runs.tune.Grid``:
        the figure tunes it, ``experiments.work`` counts its runs)."""
        return Grid({(a, i): self.candidates(a) for i in local_updates for a in ALGORITHMS},
                    lambda g, h, s: self.run_config(g[0], g[1], s, **h), tuple(self.seeds), self.tune_seeds)


def first_rate(kappa: float) -> float:
    """η_1 = κ̄/(w + σ²·1)^(1/3) = κ̄/2^(1/3): eq. (2)'s rate in the first epoch, as the runs' schedule gives it."""
    return LRSchedule("epoch_cube_root", kappa)(0)


def first_momentum_weight(kappa: float, c: float) -> float:
    """STEM's momentum weight a = c·η_1² in the first epoch, η_1 = κ̄/2^(1/3) (spec §6.5: must stay below 1)."""
    return c * first_rate(kappa) ** 2


def momentum_constant(kappa: float, a0: float) -> float:
    """The c whose first-epoch momentum weight is a₀: c = a₀/η_1² (the second grid, spec §6.7)."""
    return a0 / first_rate(kappa) ** 2


def second_grid(kappas, weights) -> list[tuple[float, float]]:
    """The second grid's (κ̄, c) pairs: every κ̄ with every first-epoch weight a₀, in that order (spec §6.7)."""
    return [(k, momentum_constant(k, a0)) for k in kappas for a0 in weights]


def check_stem_momentum(config) -> None:
    """The second grid's a₀ lie in (0, 1): a₀ = 1 would make every first-epoch step plain SGD, no momentum left."""
    if config.stem_momentum == "a0" and not all(0 < a0 < 1 for a0 in config.stem_a0):
        raise ReplicateError(f"{type(config).__name__}.stem_a0: first-epoch momentum weights a₀ must lie in (0, 1), "
                             f"got {list(config.stem_a0)}")


def add_grid_deviation(config) -> None:
    """Name the second grid among the config's deviations when it is chosen (its records then say so); the first
    grid's deviations stay as they were."""
    if config.stem_momentum != "a0":
        return
    note = ("STEM's grid is the second grid (spec §6.7, PROPOSED 2026-12-02, after the first grid's a = c·η² "
            "collapsed: at κ̄ ≤ 0.05 its c ≤ 200 left a first-epoch weight of 6e-5 to 0.31): κ̄ × the first-epoch "
            "momentum weight a₀ ∈ {" + ", ".join(f"{a0:g}" for a0 in config.stem_a0) + "}, c = a₀/η_1² = "
            "2^(2/3)·a₀/κ̄²; later epochs keep a = c·η².")
    if note not in config.deviations:
        object.__setattr__(config, "deviations", tuple(config.deviations) + (note,))


def grid_edges(candidates: list[dict], chosen: dict) -> str:
    """The tuned settings that sit at the smallest or largest value of their grid ("" if none): the best
    may lie beyond the grid."""
    return ", ".join(key for key, value in chosen.items() if at_grid_edge(value, {c[key] for c in candidates}))


def tune_and_run(config, local_updates, log=None) -> tuple[list[dict], list[tuple], list[tuple]]:
    """Tune every algorithm at every I on the first ``tune_seeds`` seeds (lowest mean final training
    loss, ``runs.tune``), then run the chosen rates on every seed. Returns the tuning rows (one per candidate),
    ``(algorithm, I, seed, history, chosen, at_edge)`` for every final run, and ``(algorithm, I, seed, history,
    candidate)`` for every tuning run (published as ``tuning curve`` rows: the full grid's curves, on which
    successive halving is validated, tests/test_halving.py)."""
    grid = config.grid(local_updates)
    groups = grid.groups
    found = grid.tune(lambda run: final(run, "train_loss", fraction=config.tail), workers=config.workers, log=log)
    rows = [{"kind": "tuning", "algorithm": LABELS[a], "local_updates": i, **h, "final_train_loss": score}
            for (a, i), h, score in found.scores]
    trained = {group for group, _, score in found.scores if np.isfinite(score)}
    return rows, [(a, i, s, history, found.chosen[(a, i)],
                   grid_edges(groups[(a, i)], found.chosen[(a, i)]) if (a, i) in trained else ALL_DIVERGED)
                  for (a, i), s, history in found.runs], [(a, i, s, history, h)
                                                          for (a, i), h, s, history in found.tuning]


# ``at_edge`` of a group whose every candidate diverged on the tuning seeds: its "chosen" setting is only the
# grid's first (ties keep grid order), not a tuned one, and its grid's edges say nothing
ALL_DIVERGED = "every candidate diverged"


def chosen_text(chosen: dict) -> str:
    return ", ".join(f"{k}={v:g}" for k, v in chosen.items())


def edge_note(curves: pd.DataFrame) -> str:
    """"; tuned at the edge of its grid …" for the algorithms whose tuned rates sit at a grid's edge, and
    "; no setting trained …" for those whose every candidate diverged (``ALL_DIVERGED``)."""
    marked = (curves[curves["at_edge"].fillna("") != ""].drop_duplicates("algorithm") if "at_edge" in curves
              else curves.iloc[:0])
    diverged = [r.algorithm for r in marked.itertuples() if r.at_edge == ALL_DIVERGED]
    edges = [f"{r.algorithm} {r.at_edge}" for r in marked.itertuples() if r.at_edge != ALL_DIVERGED]
    return (("; tuned at the edge of its grid (the best may lie beyond): " + ", ".join(edges) if edges else "")
            + ("; no setting trained: every candidate of its grid diverged on the tuning seed, so its finals ran "
               "the grid's first (" + ", ".join(diverged) + ")" if diverged else ""))


def legend_label(part: pd.DataFrame, algorithm: str) -> str:
    chosen = part.chosen.iloc[0]
    edge = part.at_edge.iloc[0] if "at_edge" in part and isinstance(part.at_edge.iloc[0], str) else ""
    if edge == ALL_DIVERGED:
        return f"{algorithm} ({chosen}: {edge}, none tuned)"
    return f"{algorithm} ({chosen}" + (f"; {edge} at its grid's edge)" if edge else ")")
