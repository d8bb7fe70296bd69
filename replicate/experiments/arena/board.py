"""The arena: every algorithm on every dataset at one budget, tuned by one protocol.

The comparison none of the five documents makes. Each entry (``entries.ENTRIES`` and a user's file) trains on
each dataset with the model its paper uses there and the clients its paper has take part (``tasks.TASKS``:
logistic regression on the synthetic sets and the MNISTs, Li et al.'s and those under Dirichlet label skew after Hsu
et al. 2019, Reddi et al.'s CNN on EMNIST-62, FedProx's LSTMs on Shakespeare and Sent140, STEM's LeNet-5 on CIFAR-10;
a user's model in their place and a user's dataset beside them: ``yours``), for the rounds its budget buys
(``entries.rounds``: equal rounds, bytes or samples). Tuning is the same for all: ``trials`` points of each entry's
declared ranges, searched by successive halving (``runs.tune.Halving``) on the first ``tune_seeds`` seeds by final
training loss; every number reported comes from the other seeds only, with their range. Runs are ordinary cached
runs (batched, resumable, ``--executor ray``, ``--time-budget``).

Output: a leaderboard per dataset (final and best-so-far training loss, final test accuracy; mean and range over
the held-out seeds; rank), training loss against the budget spent, a rank heat map across datasets; and
cross-checks of the five documents where they overlap with the arena, shown and never counted (basis
``cross-check``): they test a paper's statement under other budgets, tuning and data than the paper's.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pandas as pd

from replicate.data import parameters as builder_parameters
from replicate.core.errors import ReplicateError
from replicate.experiments import knobs
from replicate.experiments.arena.entries import BUDGET_KINDS, ENTRIES, Entry, cost, rounds, trials, user_entry
from replicate.experiments.arena import yours
from replicate.experiments.arena.tasks import TASKS, Task, partial
from replicate.runs import config as run_config
from replicate.runs.config import RunConfig
from replicate.runs.measures import final
from replicate.runs.tune import Grid, Halving
from replicate.report import plotting  # noqa: F401  (applies the project's plot style)
from replicate.report.claims import check

_SKIPPED = "Not run:"
_YOURS = "A model of yours:"
USER_BATCH_SIZE = RunConfig.batch_size  # b on a user's dataset: a run config's default
DEVIATIONS = (
    "Not a replication: no document runs this comparison. Every entry trains the clients its dataset's paper "
    "has take part (all of them every round on the convex sets and STEM's CIFAR-10; K = 10 sampled uniformly, "
    "the same for every entry, on FedProx's and Charles & Konečný's datasets: replicate/experiments/arena/tasks.py) "
    "and aggregates as its paper does; constant client rates except STEM's per-epoch "
    "diminishing rate (its eq. 2); the ranges searched are PROPOSED (replicate/experiments/arena/entries.py).",
)


@dataclass(frozen=True)
class ArenaConfig(knobs.DataChoice, knobs.FigureConfig):
    """The arena's knobs (``python -m replicate arena``; notebooks/arena_leaderboard.ipynb)."""

    algorithms: tuple[str, ...] = tuple(ENTRIES)  # entries.ENTRIES names
    user_algorithm: str | None = None  # "path/to/file.py:ClassName", a registered algorithm class, joins them
    # tasks.TASKS names, each with its paper's model, or "path/to/file.py:NAME": a FederatedDataset of yours
    datasets: tuple[str, ...] = ("synthetic(1,1)", "mnist_balanced", "mnist_dirichlet0.1", "mnist_dirichlet1")
    user_model: str | None = None  # "path/to/file.py:NAME", an nn.Module of yours, trains on every dataset
    num_clients: int | None = None  # the first N clients where the builder takes it (not Li's or FedProx's MNIST)
    budget_kind: str = "bytes"  # "rounds", "bytes" (vectors sent and received) or "samples" (read by a client)
    # in rounds of FedAvg: every entry gets the rounds that cost as much; 50, so that the four default datasets
    # fit about 20 minutes on 2 cores (docs/arena.md)
    budget: int = 50
    local_steps: int = 20  # E, local SGD steps a round
    trials: int = 8  # points of each entry's ranges tried (the same number for every entry)
    halving_rungs: int = 3  # successive halving: rungs a factor 3 apart (1: every trial runs the whole budget)
    seeds: tuple[int, ...] = (0, 1, 2)  # each seed its own data draw, initialisation and mini-batches
    tune_seeds: int = 1  # the first seeds choose; the leaderboard reads only the others
    evals: int = 20  # evaluations per run
    tail: float = 0.1  # "final" = mean over the last 10% of evaluations
    workers: int = 2
    deviations: tuple[str, ...] = DEVIATIONS

    CHOICES: ClassVar[dict] = {"budget_kind": BUDGET_KINDS}
    ZERO_ALLOWED: ClassVar[tuple] = ()

    # The arena on a GPU: every dataset of the five documents at the default tuning and 100 rounds of FedAvg
    # (``experiments.work`` sizes it in figures/gpu_work.json; docs/arena.md: the command)
    GPU: ClassVar[dict] = {"datasets": tuple(d for d in TASKS if not d.startswith("mnist_dirichlet")), "budget": 100}
    SMOKE: ClassVar[dict] = dict(datasets=("synthetic(1,1)",), budget=6, local_steps=5, trials=2, halving_rungs=1,
                                 seeds=(0, 1), evals=3, workers=1)

    def __post_init__(self):  # the pairs it does not run are one of its deviations (derived, never set)
        kept = tuple(d for d in self.deviations if not d.startswith((_SKIPPED, _YOURS)))
        skipped = self.skipped()
        note = (f"{_SKIPPED} " + "; ".join(f"{n} on {', '.join(ds)}" for n, ds in skipped.items())
                + ": every client takes part each round in its algorithm, where the others sample K of N, so no "
                  "budget would be equal") if skipped else None
        model = (f"{_YOURS} {self.user_model} trains on every dataset in place of its paper's model",) \
            if self.user_model else ()
        object.__setattr__(self, "deviations", kept + ((note,) if note else ()) + model)

    def skipped(self) -> dict[str, list[str]]:
        """Entry → the datasets it does not run on: those whose paper samples clients, for an algorithm that
        cannot (STEM)."""
        out: dict[str, list[str]] = {}
        for name in self.algorithms:  # a user's entry is checked in ``pairs`` (its file loads in validate)
            for d in self.datasets:
                if d in TASKS and name in ENTRIES and partial(TASKS[d]) and not ENTRIES[name].samples():
                    out.setdefault(name, []).append(d)
        return out

    def pairs(self) -> list[tuple[str, str]]:
        """(entry, dataset) pairs the arena runs: every one but where the entry cannot sample the clients."""
        tasks = self.tasks()
        return [(name, d) for name, entry in self.entries().items() for d in tasks
                if not (partial(tasks[d]) and not entry.samples())]

    def validate(self) -> None:
        knobs.check_tune_seeds(self)
        unknown = [a for a in self.algorithms if a not in ENTRIES]
        if unknown:
            raise ReplicateError(f"ArenaConfig.algorithms: unknown {', '.join(unknown)}; choose from "
                                 + ", ".join(ENTRIES))
        unknown = [d for d in self.datasets if d not in TASKS and not yours.is_file(d)]
        if unknown:
            raise ReplicateError(f"ArenaConfig.datasets: unknown {', '.join(unknown)}; choose from "
                                 + ", ".join(TASKS) + ", or name a dataset of yours as path/to/file.py:NAME")
        if not 0 < self.tail <= 1:
            raise ReplicateError("ArenaConfig.tail must lie in (0, 1]")
        self.entries()  # a user's files are checked here, before anything runs
        tasks = self.tasks()
        for d, task in tasks.items():  # and every data draw the runs read (e.g. a partition a seed cannot make)
            if self.user_model:
                yours.check_fits(task.model, run_config.dataset(self.loaded(d), data_seed(d, self.seeds[0]),
                                                                self.clients_of(d)), task.label)
            for seed in self.seeds:
                clients, k = len(self.sizes(d, seed)), task.clients_per_round
                if k is not None and clients < k:  # found as a user: it failed in the first run's first round
                    raise ReplicateError(f"ArenaConfig.num_clients = {self.num_clients} leaves {d} {clients} "
                                         f"clients, fewer than the {k} its paper samples each round: set "
                                         f"num_clients to at least {k}, or leave it unset (every client)")

    def entries(self) -> dict[str, Entry]:
        chosen = {name: ENTRIES[name] for name in self.algorithms}
        if self.user_algorithm:
            name, entry = user_entry(self.user_algorithm)
            chosen[name] = entry
        return chosen

    def tasks(self) -> dict[str, Task]:
        """Every dataset the arena runs on → its task: ``tasks.TASKS``'s, or for a file of yours
        (``yours.user_dataset``) every client every round, b = 64 and logistic regression; with a model of yours,
        that model on every one (``yours.user_model``)."""
        tasks = {d: TASKS[d] if d in TASKS else _user_task(d) for d in self.datasets}
        if self.user_model:
            model = yours.user_model(self.user_model)
            tasks = {d: task._replace(model=model) for d, task in tasks.items()}
        return tasks

    def dataset_names(self) -> tuple[str, ...]:
        """The staged datasets' loaders its runs read (``replicate.experiments.requirements``): not a user's."""
        return tuple(self.loaded(d) for d in self.datasets if d in TASKS and not d.startswith("synthetic"))

    def loaded(self, dataset: str) -> str:
        """The loader ``dataset``'s runs read: its official one, or its stand-in (``data_source``)."""
        return self.loader(self.tasks()[dataset].official)

    def clients_of(self, dataset: str) -> int | None:
        """``num_clients`` where ``dataset``'s builder takes the first N of its clients (not a synthetic set's
        draw, whose N would make another set), else None: every client."""
        if self.num_clients is None or _synthetic(dataset):
            return None
        return self.num_clients if "num_clients" in builder_parameters(self.loaded(dataset)) else None

    def sizes(self, dataset: str, seed: int):
        return _sizes(self.loaded(dataset), data_seed(dataset, seed), self.clients_of(dataset))

    def rounds(self, entry: Entry, dataset: str) -> int:
        return rounds(entry, self.budget_kind, self.budget, self.local_steps, self.tasks()[dataset].batch_size)

    def grid(self) -> Grid:
        """Every entry's trial points on every dataset, tuned on the first seeds (``runs.tune.Grid``)."""
        entries = self.entries()
        return Grid({(name, d): trials(name, entries[name], self.trials) for name, d in self.pairs()},
                    lambda g, point, s: self.run_config(entries[g[0]], g[1], s, point), tuple(self.seeds),
                    self.tune_seeds)

    def run_config(self, entry: Entry, dataset: str, seed: int, point: dict) -> RunConfig:
        task, total, sizes = self.tasks()[dataset], self.rounds(entry, dataset), self.sizes(dataset, seed)
        decay = self.local_steps * task.batch_size / float(sizes.double().mean())  # epochs a round
        return RunConfig(dataset=self.loaded(dataset), data_seed=data_seed(dataset, seed),
                         num_clients=self.clients_of(dataset), model=task.model,
                         algorithm=entry.make(task.clients_per_round or int(sizes.numel()), partial(task), **point),
                         local_steps=self.local_steps, batch_size=task.batch_size, client_lr=point["client_lr"],
                         lr_schedule=entry.schedule,
                         lr_decay=decay if entry.schedule != "constant" else 0.0, weight_decay=0.0, clip_norm=None,
                         rounds=total, seed=seed, eval_every=max(1, total // self.evals))


def data_seed(dataset: str, seed: int) -> int | None:
    """A synthetic set's draw is the seed's own (another draw per seed, as Li et al.'s figures use several);
    MNIST keeps its one partition (the builder's, the paper's) and the seed varies the rest."""
    return seed if _synthetic(dataset) else None


def _user_task(spec: str) -> Task:
    name = yours.user_dataset(spec)
    return Task(name, "logistic", USER_BATCH_SIZE, None, f"{name.partition('@')[0]} (yours)", spec)


def _synthetic(dataset: str) -> bool:
    return dataset in TASKS and dataset.startswith("synthetic")


@functools.lru_cache(maxsize=None)
def _sizes(loader: str, seed: int | None, num_clients: int | None):
    return run_config.dataset(loader, seed, num_clients).train.sizes


def arena(config: ArenaConfig, log=None) -> pd.DataFrame:
    """Tidy rows: ``kind`` = trial (one per point tried, its score and the rounds it was scored at) and curve
    (every evaluation of every entry's chosen point on every seed, with ``held_out``)."""
    entries, tasks = config.entries(), config.tasks()
    halving = Halving(eta=3, levels=config.halving_rungs) if config.halving_rungs > 1 else None
    found = config.grid().tune(lambda run: final(run, "train_loss", fraction=config.tail), workers=config.workers,
                               log=log, halving=halving)
    scored_at = {(g, tuple(sorted(p.items()))): r for g, p, r in found.scored_at}
    rows = [{"kind": "trial", "algorithm": name, "dataset": tasks[d].label, **point, "score": score,
             "scored_at_round": scored_at.get(((name, d), tuple(sorted(point.items()))))}
            for (name, d), point, score in found.scores]
    frames = [pd.DataFrame(rows)]
    tuning = set(config.seeds[:config.tune_seeds])
    for (name, d), seed, history in found.runs:
        point, entry = found.chosen[(name, d)], entries[name]
        b = tasks[d].batch_size  # a round's cost in rounds of FedAvg
        per_round = cost(entry, config.budget_kind, config.local_steps, b) / cost(
            ENTRIES["FedAvg"], config.budget_kind, config.local_steps, b)
        edges = [k for k in point if entry.space[k].at_edge(point[k])]
        frames.append(history.assign(kind="curve", algorithm=name, dataset=tasks[d].label, seed=seed,
                                     held_out=seed not in tuning, budget_spent=history["round"] * per_round,
                                     chosen=", ".join(f"{k}={v:g}" for k, v in point.items()),
                                     at_edge=", ".join(edges)))
    return pd.concat(frames, ignore_index=True)


def leaderboard(data: pd.DataFrame, config: ArenaConfig) -> pd.DataFrame:
    """Per dataset and entry, over the held-out seeds: final and best-so-far training loss and test accuracy
    at the budget (each its mean, min and max over the seeds: ``<measure>``, ``<measure>_min``, ``<measure>_max``),
    the rank by mean final training loss (a diverged entry ranks last). Best-so-far is the best evaluation a
    run reached within the budget (lowest loss, highest accuracy); final is the mean of its last ``tail``."""
    curves = data[(data.kind == "curve") & data.held_out.astype(bool)]
    rows = []
    for (d, a), part in curves.groupby(["dataset", "algorithm"], sort=False):
        runs = [p for _, p in part.groupby("seed")]
        measures = {"final_loss": [final(p, "train_loss", fraction=config.tail) for p in runs],
                    "best_loss": [p["train_loss"].min() for p in runs],
                    "final_acc": [final(p, "test_acc", fraction=config.tail) for p in runs],
                    "best_acc": [p["test_acc"].max() for p in runs]}
        spread = {}
        for name, values in measures.items():  # a diverged run's final loss is inf (measures.worst): last
            values = np.array(values, dtype=float)
            spread |= {name: values.mean(), f"{name}_min": values.min(), f"{name}_max": values.max()}
        rows.append({"dataset": d, "algorithm": a, **spread, "chosen": part.chosen.iloc[0],
                     "at_edge": part.at_edge.iloc[0], "rounds": int(part["round"].max()), "seeds": len(runs)})
    board = pd.DataFrame(rows)
    board["rank"] = board.groupby("dataset")["final_loss"].rank(method="min", na_option="bottom").astype(int)
    return board.sort_values(["dataset", "rank"], ignore_index=True)


CURVE_COLUMNS = ("dataset", "algorithm", "seed", "held_out", "chosen", "round", "budget_spent", "train_loss",
                 "train_acc", "test_loss", "test_acc")


def tables(data: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """The tidy data beside the leaderboard (figures/arena/leaderboard.<name>.csv): ``curves``, every evaluation
    of every entry's chosen point on every seed (``held_out`` marks the seeds the board reads), against the
    budget spent in rounds of FedAvg; ``trials``, every point tried, its score and the round it was scored at."""
    curves = data[data.kind == "curve"]
    trials_ = data[data.kind == "trial"].dropna(axis=1, how="all").drop(columns="kind")
    return {"curves": curves[[c for c in CURVE_COLUMNS if c in curves]].reset_index(drop=True),
            "trials": trials_.reset_index(drop=True)}


CROSS_CHECKS = (  # (the entry the document says wins, the one it beats, where it says so)
    ("FedProx", "FedAvg", "FedProx draft §5.3: an appropriate μ makes training on heterogeneous data stable and "
                          "converge faster than FedAvg (μ = 0)"),
    ("STEM", "SCAFFOLD-II", "Khanduri et al. §4: STEM outperforms FedAvg and SCAFFOLD (Figures 2-5)"),
)


def claims(board: pd.DataFrame, config: ArenaConfig) -> list:
    """Cross-checks where the arena overlaps a document: the entry named ends with a lower mean final training
    loss than the other on every dataset (strictly; a margin of none, fixed before any arena run)."""
    out = []
    for winner, other, source in CROSS_CHECKS:
        if not {winner, other} <= set(board.algorithm):
            continue
        pivot = board.pivot(index="dataset", columns="algorithm", values="final_loss")[[winner, other]].dropna()
        if pivot.empty:  # no dataset where both ran (STEM runs where every client takes part)
            continue
        holds = bool((pivot[winner] < pivot[other]).all())
        where = "every dataset" + ("" if len(pivot) == board.dataset.nunique() else " both ran")
        out.append(check(f"{winner} ends below {other} on {where} ({config.budget_kind} budget)", holds,
                         "; ".join(f"{d}: {winner} {pivot.loc[d, winner]:.4g} vs {other} {pivot.loc[d, other]:.4g}"
                                   for d in pivot.index),
                         basis="cross-check", margin="strictly lower mean final training loss over the held-out seeds",
                         source=source))
    return out


def plot_arena(data: pd.DataFrame, board: pd.DataFrame, config: ArenaConfig):
    """One panel per dataset (training loss of the held-out seeds' mean against the budget spent, in rounds
    of FedAvg) and a rank heat map across datasets."""
    import matplotlib.pyplot as plt

    curves = data[(data.kind == "curve") & data.held_out.astype(bool)]
    datasets = list(pd.unique(curves.dataset))
    fig, axes = plt.subplots(1, len(datasets) + 1, figsize=(4.6 * (len(datasets) + 1), 4.2), squeeze=False)
    for ax, d in zip(axes[0], datasets):
        for a, part in curves[curves.dataset == d].groupby("algorithm", sort=False):
            mean = part.groupby("budget_spent")["train_loss"].mean()
            ax.plot(mean.index, mean.to_numpy(), label=a, lw=1.2)
        ax.set(title=d, xlabel=f"budget spent ({config.budget_kind}, in rounds of FedAvg)", ylabel="training loss",
               yscale="log")
        ax.legend(fontsize=6, frameon=False)
    ranks = board.pivot(index="algorithm", columns="dataset", values="rank")
    ax = axes[0, -1]
    ax.imshow(ranks.to_numpy(dtype=float), cmap="viridis_r", aspect="auto")
    ax.set(xticks=range(ranks.shape[1]), yticks=range(ranks.shape[0]), title="rank (1 = lowest final loss)")
    ax.set_xticklabels(ranks.columns, fontsize=7, rotation=20)
    ax.set_yticklabels(ranks.index, fontsize=7)
    ax.grid(False)
    for (i, j), r in np.ndenumerate(ranks.to_numpy(dtype=float)):  # light ranks (1, 2, ...) in dark ink
        ax.text(j, i, "" if math.isnan(r) else f"{r:.0f}", ha="center", va="center", fontsize=8,
                color="k" if r <= ranks.shape[0] / 2 else "w")
    fig.suptitle(f"The arena: equal {config.budget_kind} ({config.budget} rounds of FedAvg), {config.trials} trials "
                 f"each, held-out seeds {list(config.seeds[config.tune_seeds:])}", fontsize=10)
    fig.tight_layout()
    return fig
