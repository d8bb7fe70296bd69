"""FedProx draft, Figure 2 (§5.3, "Dependence on E") with Figure 6's rows (App. C.3): E ∈ {1, 20, 50}
local epochs with μ = 0 (FedAvg) on the real datasets — training loss, test accuracy, dissimilarity.

The draft's panels: MNIST, EMNIST, EMNIST*, Shakespeare, Sent140; we run the convex three (the LSTM
panels: see ``common.LSTM_DEVIATION``). Settings: spec §3 and ``common`` (b = 10, η = 0.03 on MNIST and
0.003 on EMNIST/EMNIST*, K = 10 / 5 / 10 devices, 100 / 200 / 200 rounds).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import pandas as pd

from replicate.core.errors import ReplicateError
from replicate.experiments import knobs
from replicate.experiments.fedprox2020.common import (data_deviation, LABELS, SETTINGS, DatasetDeviations,
                                                       curves_grid, fmt_seeds, run_config, runs)
from replicate.runs.measures import fluctuations
from replicate.report import plotting  # noqa: F401  (applies the project's plot style)
from replicate.experiments.fedprox2020.common import quoted, rests_on
from replicate.report.claims import check

REAL = ("mnist", "emnist", "emnist_star")
# The paper's reading of each panel (§5.3): which sets are heterogeneous (large E unstable) and
# which are near-homogeneous (large E speeds convergence up).
UNSTABLE = ("mnist", "emnist_star", "shakespeare")
FASTER = ("emnist", "sent140")


@dataclass(frozen=True)
class Fig2Config(DatasetDeviations, knobs.FigureConfig):
    """Figure 2 / 6: μ = 0 (FedAvg) with E ∈ {1, 20, 50} local epochs on the real convex sets."""

    datasets: tuple[str, ...] = REAL
    epochs: tuple[int, ...] = (1, 20, 50)  # E
    rounds: int | None = None  # None = each dataset's (100 MNIST, 200 EMNIST / EMNIST*)
    seeds: tuple[int, ...] = (0, 1)
    unstable: float = 0.2  # "unstable" = the loss curve's total rise / total fall above this
    margin: float = 0.05  # relative gap an ordering must clear
    deviations: tuple[str, ...] = ()  # derived from datasets (DatasetDeviations)

    CHOICES: ClassVar[dict] = {"datasets": tuple(SETTINGS)}
    ZERO_ALLOWED: ClassVar[tuple] = ("unstable", "margin")
    SMOKE: ClassVar[dict] = dict(datasets=("mnist",), epochs=(1, 5), rounds=8, seeds=(0,))

    def validate(self) -> None:
        if len(self.epochs) < 2:
            raise ReplicateError(f"Fig2Config.epochs needs at least two values of E, got {self.epochs}")
        self.configs()

    def configs(self):
        return [({"dataset": LABELS[d], "E": e, "seed": s},
                 run_config(d, prox_mu=0.0, epochs=e, seed=s, rounds=self.rounds, data=self.data_source))
                for d in self.datasets for e in sorted(self.epochs) for s in self.seeds]


def fig2(config: Fig2Config, progress: bool = True, workers: int = 2, log=None) -> pd.DataFrame:
    """Per-round metrics of every (dataset, E, seed), μ = 0 (tidy)."""
    data = runs(config.configs(), workers, progress, log)
    data.insert(2, "series", data["E"].map(lambda e: f"E = {e}"))
    return data


def plot_fig2(data: pd.DataFrame, config: Fig2Config):
    return curves_grid(data, ("train_loss", "test_acc", "dissimilarity"), "series",
                       "FedProx (Li, Sahu et al.), Fig. 2 and Fig. 6: effect of the local epochs E with μ = 0 "
                       "(FedAvg) on real federated data")


@quoted
def fig2_claims(data: pd.DataFrame, config: Fig2Config) -> list:
    lo, hi = min(config.epochs), max(config.epochs)
    by = ("dataset", "E", "seed")
    wiggle = fluctuations(data, by)
    n = len(config.seeds)
    seeds = f"{n} seed{'s' if n > 1 else ''}: mean [min, max]"
    claims = []
    for key in [d for d in UNSTABLE if d in config.datasets]:
        d = LABELS[key]
        ok = bool((wiggle[d][hi] > wiggle[d][lo] * (1 + config.margin)).all()
                  and (wiggle[d][hi] > config.unstable).all())
        claims.append(check(
            f"{d}: many local epochs make FedAvg unstable or divergent (heterogeneous data)", ok,
            f"fluctuation (total rise / total fall of the training loss): E = {lo}: {fmt_seeds(wiggle[d][lo])}, "
            f"E = {hi}: {fmt_seeds(wiggle[d][hi])} ({seeds})",
            margin=f"E = {hi} fluctuates > {config.margin:.0%} more than E = {lo}, and above {config.unstable:g}, "
                   "in every seed",
            paper_value="qualitative (Fig. 2)", deviations=(data_deviation(key, config.data_source),),
            **rests_on(config, [d])))
    first_half = data[data["round"] <= data.groupby("dataset")["round"].transform("max") / 2]
    early = first_half.groupby(list(by))["train_loss"].mean()
    for key in [d for d in FASTER if d in config.datasets]:
        d = LABELS[key]
        ok = bool((early[d][hi] < early[d][lo] * (1 - config.margin)).all())
        claims.append(check(
            f"{d}: larger E speeds up convergence (near-homogeneous data)", ok,
            f"mean training loss over the first half of the rounds: E = {lo}: {fmt_seeds(early[d][lo])}, "
            f"E = {hi}: {fmt_seeds(early[d][hi])} ({seeds})",
            margin=f"E = {hi} below E = {lo} by > {config.margin:.0%} in every seed",
            paper_value="qualitative (Fig. 2)", deviations=(data_deviation(key, config.data_source),),
            **rests_on(config, [d])))
    dis = data.groupby(list(by))["dissimilarity"].mean()
    names = list(pd.unique(data["dataset"]))
    ok = all(bool((dis[d][lo] < dis[d][hi]).all()) for d in names)
    claims.append(check(
        "Decreasing E makes the local functions more similar (smaller dissimilarity; §5.4, Fig. 6)", ok,
        "mean dissimilarity over rounds, E = {} vs E = {}: ".format(lo, hi)
        + "; ".join(f"{d}: {fmt_seeds(dis[d][lo])} vs {fmt_seeds(dis[d][hi])}" for d in names) + f" ({seeds})",
        margin=f"E = {lo} below E = {hi} in every dataset and seed", paper_value="qualitative (Fig. 6)",
        **rests_on(config, names)))
    return claims
