"""Li et al. 2020 (ICLR), Figure 1a (App. D.2): the impact of E, as the rounds needed to reach a
target loss against the local steps per round (Scheme I, K = 30).

Settings follow ``docs/specs/li2020-fedavg-noniid-and-fedprox.md`` §2.1 and §3:
logistic regression, η_r = η0/max(r, 1) per round, weight decay λw inside the
optimiser, PyTorch's default initialisation, gradient clipping at 60, and E counted as
the authors' ``num_epoch`` (10 local SGD steps each; ``RunConfig.local_steps`` is in steps).
Runs stop at the target and go through the result cache; missing runs are computed side by
side first (``replicate.runs.pool``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pandas as pd
import torch

from replicate.report import plotting  # noqa: F401  (applies the project's plot style)
from replicate.report.claims import WIDE_RANGE, check
from replicate.fl.algorithms import FedAvg
from replicate.runs.config import RunConfig
from replicate.experiments import knobs
from replicate.runs.pool import compute, run_to_target
from replicate.experiments.li2020.common import (data_seed, COMMON_DEVIATIONS, DATASETS, LABELS,
                                                 MNIST_UNBALANCED_DEVIATION, STEPS_PER_EPOCH, SYNTHETIC_DEVIATION,
                                                 _gaussian_smooth, batch_size, rounds_to_target, LI2020_OBJECTIVE)
from replicate.experiments.li2020.common import quoted


# Figure 1a (App. D.2): target loss and the minimum loss the authors found, per dataset.
FIG1A_TARGET = {"mnist_balanced": 0.50, "mnist_unbalanced": 0.29, "synthetic(0,0)": 0.95, "synthetic(1,1)": 1.15}
FIG1A_PAPER_MIN_LOSS = {"mnist_balanced": 0.3429, "mnist_unbalanced": 0.2591,
                        "synthetic(0,0)": 0.7999, "synthetic(1,1)": 1.075}
FIG1A_NOTE = (
    "Why the paper's synthetic(1,1) rounds are about 3× ours (an investigation by experiment): a direct "
    "re-implementation of the authors' trainer (lx10077/fedavgpy: Scheme I with replacement ∝ n_k, η0/(r+1), "
    "num_epoch × 10 steps, clipping at 60, weight decay in the optimiser, loss = cross-entropy over all "
    "devices' training data) matches our engine within 2 rounds on the same data. Each setting we could "
    "question moves the rounds by at most ~30%: weight decay 1e-3 (their code default) or batch 64: "
    "unchanged; K = 10: +0–30%; w0 = 0: 20% faster; target on the test loss or with the L2 term: ±5%; α, β "
    "as variances: no effect at α = β = 1; softmax overflow in the label rule: no label changes. The data "
    "draw moves them several-fold: over 154 draws at E = 5 the rounds have median 27, 99th percentile 114, "
    "maximum 145; the draws whose device sizes match Table 2 (used here) give median 53 (35–119). The "
    "authors' unseeded draw (189 at E = 5) lies beyond all ~180 of ours, a difference that cannot be "
    "resolved without their data. The paper's minimum losses (0.3429, 0.2591, 0.7999, 1.075) appear only "
    "in its text (App. D.2); our runs stop at the target, so they are shown, not compared. What the draw changes "
    "is the depth of the target: the synthetic claims give each draw's settling loss f(w*) (the data loss at the "
    "minimiser of the runs' own objective), and the target sits far above ours, while the lowest loss the paper's "
    "runs reached (at or above their own f(w*)) lies just below its target: on the authors' draw the same target "
    "lay near where their runs settle, which is what the rounds measure.")
# The published curve's data before its Gaussian smoothing: (E as num_epoch, required rounds),
# from the authors' plot/plot_E.py (lx10077/fedavgpy@4a2e171).
FIG1A_PAPER = {
    "mnist_balanced": ((10, 20, 30, 50, 60, 80, 100, 125, 150), (120, 50, 39, 28, 27, 22, 21, 20, 20)),
    "mnist_unbalanced": ((10, 20, 30, 50, 100, 200, 400), (400, 145, 114, 104, 119, 137, 205)),
    "synthetic(0,0)": ((5, 10, 20, 30, 50, 60, 80, 100, 125, 200), (160, 101, 88, 87, 90, 92, 96, 106, 114, 139)),
    "synthetic(1,1)": ((5, 10, 20, 30, 50), (189, 140, 143, 150, 194)),
}


@dataclass(frozen=True)
class Fig1aConfig(knobs.FigureConfig):
    """Impact of E (App. D.2): Scheme I, K = 30, η0 = 0.1, rounds until a target loss."""

    datasets: tuple[str, ...] = DATASETS
    epochs: tuple[int, ...] | None = None  # E grid (num_epoch) for every dataset; None = the paper's grid per dataset
    clients_per_round: int = 30  # K
    lr: float = 0.1  # η0
    max_rounds: int = 500  # cap: points that miss the target by then are censored (the paper's slowest needed 400)
    target_factor: float = 1.0  # targets: the paper's loss × this (smoke: looser, so that 12 rounds reach them)
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4, 5)  # synthetic sets: seed i trains on the i-th Table-2-matched data draw
    mnist_seeds: tuple[int, ...] = (0,)
    smooth_sigma: float = 0.6  # the authors' display smoothing (grid-index units)
    floors: bool = True  # each synthetic draw's settling loss f(w*), its target's yardstick (a minute a draw, once)
    deviations: tuple[str, ...] = COMMON_DEVIATIONS + (
        MNIST_UNBALANCED_DEVIATION, SYNTHETIC_DEVIATION,
        "One seed on the MNIST sets and six data draws on the synthetic ones (the paper reports one run per point); "
        "the E grids, K = 30 and the targets are the paper's.",
    )

    # 12 rounds reach a 1.55× looser target (measured: rounds 6-10), so a first look shows measured points
    # and the figure's shape, never only censored triangles
    SMOKE: ClassVar[dict] = dict(datasets=("synthetic(0,0)", "synthetic(1,1)"), epochs=(1, 5, 20), max_rounds=12,
                                 seeds=(0,), target_factor=1.55, floors=False)

    CHOICES: ClassVar[dict] = {"datasets": DATASETS}
    ZERO_ALLOWED: ClassVar[tuple] = ("smooth_sigma",)

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

    def target(self, dataset: str) -> float:
        """The training loss a run of ``dataset`` stops at: the paper's (``FIG1A_TARGET``) × ``target_factor``."""
        return round(FIG1A_TARGET[dataset] * self.target_factor, 6)

    def run_config(self, dataset: str, epochs: int, seed: int) -> RunConfig:
        return RunConfig(dataset=dataset, algorithm=FedAvg("scheme1", self.clients(dataset)),
                         local_steps=epochs * STEPS_PER_EPOCH, batch_size=batch_size(dataset), client_lr=self.lr,
                         rounds=self.max_rounds, seed=seed, data_seed=data_seed(dataset, seed), **LI2020_OBJECTIVE)

    def jobs(self) -> list[tuple[RunConfig, float]]:
        return [(self.run_config(d, e, s), self.target(d))
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
    rows += [floor(dataset, seed) for dataset in config.datasets if config.floors and dataset.startswith("synthetic")
             for seed in config.seeds_for(dataset)]
    for dataset in config.datasets:
        for epochs, rounds in zip(*FIG1A_PAPER[dataset]):
            rows.append({"dataset": dataset, "source": "paper", "epochs": epochs,
                         "local_steps": epochs * STEPS_PER_EPOCH, "rounds": float(rounds), "censored": False,
                         "target": FIG1A_TARGET[dataset], "min_loss": FIG1A_PAPER_MIN_LOSS[dataset]})
    return pd.DataFrame(rows)


def floor(dataset: str, seed: int) -> dict:
    """Where a data draw's training loss settles: f(w*), the data loss (no λ term, as ``train_loss``) at w*, the
    minimiser of the runs' own objective f + (λ/2)‖w‖² (λ = 1e-4, ``LI2020_OBJECTIVE``), solved to ‖∇F‖ ≤ 1e-10
    (``theory.constants``, cached and sealed with the lecture notes' constants); ``floor_objective`` is F(w*) with
    the λ term. A target loss sits at another height above it on every draw: this is its yardstick (the data loss
    alone can dip below f(w*) on the way, at a larger ‖w‖, but the runs settle there)."""
    from replicate.experiments.notes.common import cached_constants, sample_problem

    draw = data_seed(dataset, seed)
    constants, _ = cached_constants(dataset, weight_decay=LI2020_OBJECTIVE["weight_decay"],
                                    batch_size=batch_size(dataset), data_seed=draw)
    problem = sample_problem(dataset, data_seed=draw)
    loss = problem.evaluate(torch.as_tensor(constants.minimiser, dtype=torch.float32))["train_loss"]
    return {"dataset": dataset, "source": "floor", "seed": seed, "floor": float(loss),
            "floor_objective": float(constants.optimal_value)}


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
        label = f"{LABELS[dataset]}, K = {config.clients(dataset)} (target {config.target(dataset):g})"
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
    return ", ".join(f"E={int(steps) // STEPS_PER_EPOCH}: {'>cap' if not np.isfinite(r) else f'{r:.0f}'}"
                     for steps, r in rounds.items())


@quoted
def fig1a_claims(data: pd.DataFrame, config: Fig1aConfig, margin: float = 0.10, agree: float = 0.25) -> list:
    """Replication claims: the shape (falls then rises, on the median over data draws, with the number of
    single draws that show it) and the paper's round counts against ours (MNIST: within ``agree``;
    synthetic: inside the range of our data draws)."""
    curves = _fig1a_curves(data)
    ours = data[data.source == "ours"]

    def rule(dataset):
        seeds = len(config.seeds_for(dataset))
        return (f"K = {config.clients(dataset)}, " + (f"median of {seeds} data draws, " if seeds > 1 else "one seed, ")
                + f"cap {config.max_rounds} rounds")

    def per_draw(dataset) -> str:
        draws = ours[ours.dataset == dataset].pivot_table(index="local_steps", columns="seed", values="rounds",
                                                          aggfunc="first").fillna(math.inf)
        if draws.shape[1] < 2:
            return ""
        shaped = sum(_u_shape(draws[c], margin)[0] for c in draws.columns)
        return f"; single draws showing it: {shaped}/{draws.shape[1]}"

    shape_margin = (f"the minimum lies inside the E grid and both grid ends need more than {margin:.0%} more rounds "
                    "(median over draws)")
    claims = []
    for dataset in [d for d in ("mnist_unbalanced", "synthetic(0,0)", "synthetic(1,1)") if d in config.datasets]:
        rounds = curves[curves.dataset == dataset].set_index("local_steps")["rounds"]
        passed, text = _u_shape(rounds, margin)
        paper = FIG1A_PAPER[dataset]
        claims.append(check(f"{LABELS[dataset]}: rounds to reach loss {config.target(dataset):g} first fall, then "
                            "rise with E (the trade-off of eq. 8)", passed,
                            f"{text}{per_draw(dataset)} ({rule(dataset)})",
                            deviations=_dataset_deviations(dataset), margin=shape_margin,
                            paper_value=", ".join(f"E={e}: {r}" for e, r in zip(*paper))))
    if "mnist_balanced" in config.datasets:
        rounds = curves[curves.dataset == "mnist_balanced"].set_index("local_steps")["rounds"]
        rising = _u_shape(rounds, margin)[0]
        claims.append(check("mnist balanced: no such trade-off — required rounds fall and level off as E grows "
                            "(the paper could not explain it)", not rising,
                            f"{_fmt_rounds(rounds)}; {'rises again' if rising else 'does not rise again'} "
                            f"at large E ({rule('mnist_balanced')})", margin=f"not '{shape_margin}'",
                            paper_value=", ".join(f"E={e}: {r}" for e, r in zip(*FIG1A_PAPER["mnist_balanced"]))))
    for dataset in config.datasets:
        claims.append(_rounds_match(dataset, ours, agree, data[data.source == "floor"], config.target(dataset)))
    return claims


def _depth(dataset: str, floors: pd.DataFrame, target: float) -> str:
    """Each draw's settling loss f(w*), and how far the target sits above it, beside the lowest loss the paper's
    runs reached: the diagnosis of a rounds ratio between draws (a target far above where a draw's runs settle is
    reached sooner). The paper's number is a run's minimum, so its own f(w*) lies at or below it."""
    mine = floors[floors.dataset == dataset].sort_values("seed") if "floor" in floors else floors.iloc[:0]
    if mine.empty:
        return ""
    paper = FIG1A_PAPER_MIN_LOSS[dataset]
    return ("; each draw's settling loss f(w*) (the data loss at the runs' optimum): "
            + ", ".join(f"{f:.3f}" for f in mine.floor)
            + f", the target {target:g} {target - mine.floor.max():.2f}–{target - mine.floor.min():.2f} above it; "
            f"the lowest loss the paper's runs reached, {paper:g} (App. D.2, at or above their f(w*)), lies "
            f"{FIG1A_TARGET[dataset] - paper:.3f} below its target")


def _rounds_match(dataset: str, ours: pd.DataFrame, agree: float, floors: pd.DataFrame | None = None,
                  target: float | None = None):
    """The paper's rounds per E against ours: one seed (MNIST) within ``agree``; several data
    draws (synthetic): the paper's value inside our draws' range at ≥ 80% of the E grid, each draw's loss
    floor beside (``_depth``)."""
    paper = dict(zip(*FIG1A_PAPER[dataset]))
    mine = ours[ours.dataset == dataset].assign(rounds=lambda f: f.rounds.fillna(math.inf))
    by_e = mine.groupby(mine.local_steps // STEPS_PER_EPOCH)["rounds"]
    common = [e for e in paper if e in by_e.groups]
    paper_text = ", ".join(f"E={e}: {paper[e]}" for e in common)
    if not common:
        return check(f"{LABELS[dataset]}: our required rounds match the paper's", False,
                     "none of the paper's E values is in our grid", paper_value=paper_text)
    if mine.seed.nunique() > 1:
        lo, hi = by_e.min(), by_e.max()
        inside = [lo[e] <= paper[e] <= hi[e] for e in common]
        median = by_e.median()
        ratio = np.median([paper[e] / median[e] for e in common])
        # The paper's one unseeded draw against the range of ours: where our draws span a decade or more, a wrong
        # result lands inside too, so the comparison is a consistency check, not a replication
        spread = float(np.median([hi[e] / lo[e] for e in common]))
        return check(f"{LABELS[dataset]}: the paper's required rounds are within the range of our data draws",
                     np.mean(inside) >= 0.8,
                     f"range over {mine.seed.nunique()} draws: " + ", ".join(
                         f"E={e}: {lo[e]:.0f}–{hi[e]:.0f}".replace("inf", ">cap") for e in common)
                     + f"; paper inside at {sum(inside)}/{len(common)} E; paper/our median ≈ {ratio:.1f}×; "
                     + (f"our draws span ×{spread:.1f} (median over E)" if math.isfinite(spread)
                        else "our draws span beyond the cap")
                     + (_depth(dataset, floors, target) if floors is not None else ""),
                     margin="the paper's value inside [min, max] of our draws at ≥ 80% of the E grid",
                     basis="wide-range" if spread >= WIDE_RANGE else "measured",
                     paper_value=paper_text, deviations=_dataset_deviations(dataset))
    rounds = by_e.median()
    errors = [abs(rounds[e] / paper[e] - 1) for e in common]
    return check(f"{LABELS[dataset]}: our required rounds match the paper's", float(np.median(errors)) <= agree,
                 ", ".join(f"E={e}: {rounds[e]:.0f}".replace("inf", ">cap") for e in common)
                 + f"; median relative difference {np.median(errors):.0%}",
                 margin=f"median over the E grid of |ours/paper − 1| ≤ {agree:.0%}", paper_value=paper_text,
                 deviations=_dataset_deviations(dataset))


def _dataset_deviations(dataset: str) -> tuple[str, ...]:
    if dataset == "mnist_unbalanced":
        return (MNIST_UNBALANCED_DEVIATION,)
    if dataset.startswith("synthetic"):
        return (SYNTHETIC_DEVIATION,)
    return ()
