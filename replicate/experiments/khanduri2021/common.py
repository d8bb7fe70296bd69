"""What Khanduri et al.'s measured figures share (§4; spec STEM §6.5): the three algorithms with the
same (b, I), each algorithm's rates tuned on the first seeds by the final training loss and then run
on every seed, and the "STEM ends best" comparison. Figure 5 (``samples``, MNIST) and Figures 2-4
(``cifar``, CIFAR-10) build on it.

A figure config mixes in :class:`StemRuns` and provides ``dataset_name()``, ``rounds(I)``, ``MODEL``,
``TRAIN_PER_WORKER`` and the knobs ``batch_size``, ``stem_lr``, ``stem_c``, ``client_lr``, ``seeds``,
``tune_seeds``, ``evals`` and ``tail``.
"""
from __future__ import annotations


import numpy as np
import pandas as pd

from replicate.core.errors import ReplicateError
from replicate.data.shards import WORKERS
from replicate.fl.algorithms import FedAvg, Scaffold, Stem
from replicate.runs.tune import Grid, at_grid_edge
from replicate.runs.config import RunConfig
from replicate.runs.measures import final

ALGORITHMS = ("stem", "fedavg", "scaffold")
LABELS = {"stem": "STEM", "fedavg": "FedAvg", "scaffold": "SCAFFOLD"}


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

    def stem_grid(self) -> list[tuple[float, float]]:
        """(κ̄, c) pairs whose first-epoch momentum weight a = c·η_1² stays below 1 (spec §6.5)."""
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


def first_momentum_weight(kappa: float, c: float) -> float:
    """STEM's momentum weight a = c·η_1² in the first epoch, η_1 = κ̄/2^(1/3) (spec §6.5: must stay below 1)."""
    return c * (kappa / 2 ** (1 / 3)) ** 2


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


def seeds_text(values, spec: str, missing: str = "never") -> str:
    """One value per seed; ``missing`` stands for a non-finite one (a target never reached, a run diverged)."""
    values = np.atleast_1d(np.asarray(values, dtype=float))
    text = [(missing if not np.isfinite(v) else format(v, spec)) for v in values]
    return text[0] if len(text) == 1 else "[" + ", ".join(text) + "]"


def legend_label(part: pd.DataFrame, algorithm: str) -> str:
    chosen = part.chosen.iloc[0]
    edge = part.at_edge.iloc[0] if "at_edge" in part and isinstance(part.at_edge.iloc[0], str) else ""
    if edge == ALL_DIVERGED:
        return f"{algorithm} ({chosen}: {edge}, none tuned)"
    return f"{algorithm} ({chosen}" + (f"; {edge} at its grid's edge)" if edge else ")")
