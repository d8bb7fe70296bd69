"""Li et al. 2020 (ICLR), Figure 1a (App. D.2): the impact of E, as the rounds needed to reach a
target loss against the local steps per round (Scheme I, K = 30).

Settings follow ``shared/specs/li2020-fedavg-noniid-and-fedprox.md`` §2.1 and §3:
logistic regression, η_r = η0/max(r, 1) per round, weight decay λw inside the
optimiser, PyTorch's default initialisation, gradient clipping at 60, and E counted as
the authors' ``num_epoch`` (10 local SGD steps each; ``RunConfig.local_steps`` is in steps).
Runs stop at the target and go through the result cache; missing runs are computed side by
side first (``replicate.experiments.runs.pool``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pandas as pd

from replicate.report import plotting  # noqa: F401  (applies the project's plot style)
from replicate.report.claims import check
from replicate.experiments.runs.config import RunConfig
from replicate.experiments import knobs
from replicate.experiments.runs.pool import compute, run_to_target
from replicate.experiments.li2020.common import (COMMON_DEVIATIONS, DATASETS, LABELS, MNIST_UNBALANCED_DEVIATION,
                                                 STEPS_PER_EPOCH, SYNTHETIC_DEVIATION, _gaussian_smooth, batch_size,
                                                 rounds_to_target)


# Figure 1a (App. D.2): target loss and the minimum loss the authors found, per dataset.
FIG1A_TARGET = {"mnist_balanced": 0.50, "mnist_unbalanced": 0.29, "synthetic(0,0)": 0.95, "synthetic(1,1)": 1.15}
FIG1A_PAPER_MIN_LOSS = {"mnist_balanced": 0.3429, "mnist_unbalanced": 0.2591,
                        "synthetic(0,0)": 0.7999, "synthetic(1,1)": 1.075}
# The published curve's data before its Gaussian smoothing: (E as num_epoch, required rounds),
# from the authors' plot/plot_E.py (lx10077/fedavgpy@4a2e171).
FIG1A_PAPER = {
    "mnist_balanced": ((10, 20, 30, 50, 60, 80, 100, 125, 150), (120, 50, 39, 28, 27, 22, 21, 20, 20)),
    "mnist_unbalanced": ((10, 20, 30, 50, 100, 200, 400), (400, 145, 114, 104, 119, 137, 205)),
    "synthetic(0,0)": ((5, 10, 20, 30, 50, 60, 80, 100, 125, 200), (160, 101, 88, 87, 90, 92, 96, 106, 114, 139)),
    "synthetic(1,1)": ((5, 10, 20, 30, 50), (189, 140, 143, 150, 194)),
}


@dataclass(frozen=True)
class Fig1aConfig:
    """Impact of E (App. D.2): Scheme I, K = 30, η0 = 0.1, rounds until a target loss."""

    datasets: tuple[str, ...] = DATASETS
    epochs: tuple[int, ...] | None = None  # E grid (num_epoch) for every dataset; None = the paper's grid per dataset
    clients_per_round: int = 30  # K
    lr: float = 0.1  # η0
    max_rounds: int = 500  # cap: points that miss the target by then are censored (the paper's slowest needed 400)
    seeds: tuple[int, ...] = (0, 1)  # synthetic sets
    mnist_seeds: tuple[int, ...] = (0,)
    smooth_sigma: float = 0.6  # the authors' display smoothing (grid-index units)
    deviations: tuple[str, ...] = COMMON_DEVIATIONS + (
        MNIST_UNBALANCED_DEVIATION, SYNTHETIC_DEVIATION,
        "One seed on the MNIST sets and two on the synthetic ones (the paper reports one run per point); "
        "the E grids, K = 30 and the targets are the paper's.",
    )

    @classmethod
    def smoke(cls):
        return cls(datasets=("synthetic(0,0)", "synthetic(1,1)"), epochs=(1, 5, 20), max_rounds=12, seeds=(0,))

    CHOICES: ClassVar[dict] = {"datasets": DATASETS}
    ZERO_ALLOWED: ClassVar[tuple] = ("smooth_sigma",)

    @classmethod
    def for_profile(cls, profile: str = "smoke", **overrides):
        """The ``paper`` or ``smoke`` settings with checked overrides (``None`` = the profile's value)."""
        return knobs.configure(cls, profile, overrides)

    def validate(self) -> None:
        """Every run the figure implies is a valid run config (raises before anything runs)."""
        for dataset in self.datasets:
            for epochs in self.epochs_for(dataset):
                for seed in self.seeds_for(dataset):
                    self.run_config(dataset, epochs, seed)

    def epochs_for(self, dataset: str) -> tuple[int, ...]:
        return tuple(self.epochs) if self.epochs is not None else FIG1A_PAPER[dataset][0]

    def clients(self, dataset: str) -> int:
        return self.clients_per_round

    def seeds_for(self, dataset: str) -> tuple[int, ...]:
        return self.mnist_seeds if dataset.startswith("mnist") else self.seeds

    def run_config(self, dataset: str, epochs: int, seed: int) -> RunConfig:
        return RunConfig(dataset=dataset, scheme="scheme1", clients_per_round=self.clients(dataset),
                         local_steps=epochs * STEPS_PER_EPOCH, batch_size=batch_size(dataset), client_lr=self.lr,
                         rounds=self.max_rounds, seed=seed)

    def jobs(self) -> list[tuple[RunConfig, float]]:
        return [(self.run_config(d, e, s), FIG1A_TARGET[d])
                for d in self.datasets for e in self.epochs_for(d) for s in self.seeds_for(d)]


def fig1a(config: Fig1aConfig, progress: bool = True, workers: int = 2, log=None) -> pd.DataFrame:
    """Rounds to the target loss per (dataset, E, seed), ours and the paper's (tidy).

    ``rounds`` is NaN where the target was not met within ``max_rounds`` (``censored``).
    """
    compute(config.jobs(), workers, progress, log=log)
    rows = []
    for run_config, target in config.jobs():
        history = run_to_target(run_config, target, log=log)
        rounds = rounds_to_target(history["train_loss"], target)
        rows.append({"dataset": run_config.dataset, "source": "ours", "seed": run_config.seed,
                     "epochs": run_config.local_steps // STEPS_PER_EPOCH, "local_steps": run_config.local_steps,
                     "rounds": rounds, "censored": math.isnan(rounds), "cap": config.max_rounds,
                     "target": target, "last_loss": float(history["train_loss"].iloc[-1]),
                     "min_loss": float(history["train_loss"].min())})
    for dataset in config.datasets:
        for epochs, rounds in zip(*FIG1A_PAPER[dataset]):
            rows.append({"dataset": dataset, "source": "paper", "epochs": epochs,
                         "local_steps": epochs * STEPS_PER_EPOCH, "rounds": float(rounds), "censored": False,
                         "target": FIG1A_TARGET[dataset], "min_loss": FIG1A_PAPER_MIN_LOSS[dataset]})
    return pd.DataFrame(rows)


def _fig1a_curves(data: pd.DataFrame) -> pd.DataFrame:
    """Median rounds over seeds per (dataset, E); a censored seed counts as never (inf)."""
    ours = data[data.source == "ours"].copy()
    ours["rounds_or_inf"] = ours["rounds"].fillna(math.inf)
    return (ours.groupby(["dataset", "local_steps"])
            .agg(rounds=("rounds_or_inf", "median"), lo=("rounds_or_inf", "min"), hi=("rounds_or_inf", "max"),
                 cap=("cap", "first"))
            .reset_index())


def plot_fig1a(data: pd.DataFrame, config: Fig1aConfig):
    """Required rounds vs local steps (log x), ours solid (censored: open triangles at the cap),
    the paper's unsmoothed numbers dashed."""
    import matplotlib.pyplot as plt

    curves = _fig1a_curves(data)
    fig, ax = plt.subplots(figsize=(5.6, 3.8))
    colors = dict(zip(DATASETS, plt.rcParams["axes.prop_cycle"].by_key()["color"]))
    for dataset in config.datasets:
        color = colors[dataset]
        part = curves[curves.dataset == dataset].sort_values("local_steps")
        done = part[np.isfinite(part.rounds)]
        ax.plot(done.local_steps, done.rounds, "o", color=color, ms=4)
        if len(config.seeds_for(dataset)) > 1:
            ax.vlines(done.local_steps, done.lo, done.hi.clip(upper=done.cap), color=color, lw=1)
        label = f"{LABELS[dataset]}, K = {config.clients(dataset)} (target {FIG1A_TARGET[dataset]:g})"
        smoothed = _gaussian_smooth(done.rounds, config.smooth_sigma) if len(done) > 1 else []
        ax.plot(done.local_steps if len(done) > 1 else [], smoothed, "-", color=color, lw=1.2, label=label)
        censored = part[~np.isfinite(part.rounds)]
        ax.plot(censored.local_steps, censored.cap, "^", mfc="none", color=color, ms=6)
        paper = data[(data.source == "paper") & (data.dataset == dataset)].sort_values("local_steps")
        ax.plot(paper.local_steps, paper.rounds, "--", color=color, lw=0.9, alpha=0.7)
    ax.plot([], [], "k--", lw=0.9, alpha=0.7, label="paper (unsmoothed)")
    if not np.isfinite(curves.rounds).all():
        ax.plot([], [], "k^", mfc="none", label="ours: target not met by the cap")
    ax.set(xscale="log", xlabel="Local steps per round (10 × E)", ylabel=r"Required rounds ($T_\epsilon/E$)",
           title="Li et al. 2020, Fig. 1a: impact of E (Scheme I)")
    ax.legend(frameon=False, fontsize=7)
    fig.tight_layout()
    return fig


def _u_shape(rounds: pd.Series, margin: float) -> tuple[bool, str]:
    """Falls then rises: an interior minimum that both ends exceed by more than ``margin``."""
    values = rounds.to_numpy(dtype=float)
    best = int(np.argmin(values))
    low = values[best]
    passed = 0 < best < len(values) - 1 and values[0] > low * (1 + margin) and values[-1] > low * (1 + margin)
    return bool(passed), _fmt_rounds(rounds)


def _fmt_rounds(rounds: pd.Series) -> str:
    return ", ".join(f"E={steps // STEPS_PER_EPOCH}: {'>cap' if not np.isfinite(r) else f'{r:.0f}'}"
                     for steps, r in rounds.items())


def fig1a_claims(data: pd.DataFrame, config: Fig1aConfig, margin: float = 0.10) -> list:
    curves = _fig1a_curves(data)
    ours = data[data.source == "ours"]

    def rule(dataset):
        seeds = len(config.seeds_for(dataset))
        return (f"'falls then rises' = the minimum lies inside the E grid and both grid ends need more than "
                f"{margin:.0%} more rounds; K = {config.clients(dataset)}, "
                + (f"median of {seeds} seeds, " if seeds > 1 else "one seed, ") + f"cap {config.max_rounds} rounds")

    claims = []
    for dataset in [d for d in ("mnist_unbalanced", "synthetic(0,0)", "synthetic(1,1)") if d in config.datasets]:
        rounds = curves[curves.dataset == dataset].set_index("local_steps")["rounds"]
        passed, text = _u_shape(rounds, margin)
        claims.append(check(f"{LABELS[dataset]}: rounds to reach loss {FIG1A_TARGET[dataset]:g} first fall, then "
                            "rise with E (the trade-off of eq. 8)", passed, f"{text} ({rule(dataset)})",
                            deviations=_dataset_deviations(dataset)))
    if "mnist_balanced" in config.datasets:
        rounds = curves[curves.dataset == "mnist_balanced"].set_index("local_steps")["rounds"]
        rising = _u_shape(rounds, margin)[0]
        claims.append(check("mnist balanced: no such trade-off — required rounds fall and level off as E grows "
                            "(the paper could not explain it)", not rising,
                            f"{_fmt_rounds(rounds)}; {'rises again' if rising else 'does not rise again'} "
                            f"at large E ({rule('mnist_balanced')})"))
    found = ours.groupby("dataset")["min_loss"].min()
    reached = ours.groupby("dataset")["censored"].apply(lambda c: bool((~c).any()))
    claims.append(check(
        "The paper's target losses are reached on every dataset (paper's minimum loss found: "
        + ", ".join(f"{LABELS[d]} {FIG1A_PAPER_MIN_LOSS[d]:g}" for d in config.datasets) + ")",
        all(reached.get(d, False) for d in config.datasets),
        "lowest loss in our sweep: " + ", ".join(f"{LABELS[d]} {found.get(d, math.nan):.4f} (target "
                                                 f"{FIG1A_TARGET[d]:g}, {'met' if reached.get(d, False) else 'missed'})"
                                                 for d in config.datasets)
        + "; runs stop at the target, so longer runs would go lower"))
    return claims


def _dataset_deviations(dataset: str) -> tuple[str, ...]:
    if dataset == "mnist_unbalanced":
        return (MNIST_UNBALANCED_DEVIATION,)
    if dataset.startswith("synthetic"):
        return (SYNTHETIC_DEVIATION,)
    return ()
