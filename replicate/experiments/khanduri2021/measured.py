"""Khanduri et al. 2021, Figure 1 measured (beyond the paper): STEM trained on MNIST for (b, I) pairs on
and off a trade-off curve b·I = P, each run until its training loss reaches a target, and the samples
per worker and communication rounds it needed set beside Figure 1(b)'s curve and Remark 3's prediction.

Remark 3 (RECONSTRUCTED, spec §2.3): per worker STEM needs max{ε^{-3/2}, b·I·K·ε^{-1}}/K samples and
max{ε^{-1}, ε^{-3/2}/(b·I·K)} rounds, so beyond the curve b·I = ε^{-1/2}/K the samples grow with b·I,
short of it the rounds grow, and along it (Remark 2: ν from 0, Minibatch STEM, to 1, Fed STEM) both
stay at the optimum. The curve's product has no measured counterpart (constants and logs are dropped),
so this figure PROPOSES one: P = 80, Figure 5's b = 8, I = 10, where STEM was tuned. Pairs at P/4, P,
4P and 16P, split between b and I several ways (``pairs``), tuned on one seed and tested on two.

Setting: Figure 5's (``samples``): MNIST at high heterogeneity over K = 100 workers, the LeNet, full
participation, STEM's eq. (2) step per epoch. As the paper does for its figures, STEM's (κ̄, c) is tuned
per (b, I): over ``stem_grid`` on the first ``tune_seeds`` seeds, by the samples each needed to reach the
target (``rank``), and the claims are tested on the other seeds only, so no claim is checked on the runs
that chose its settings. The default grid steps κ̄ along a first-epoch momentum weight a = c·η_1² ≈ 0.9,
where Figure 5's tuning found STEM best (PROPOSED); ``stem_momentum = "a0"`` takes the second grid instead
(spec §6.7, PROPOSED): ``stem_lr`` × the first-epoch weights ``stem_a0``, c = a₀/η_1². Samples per worker at
round r: b·I·r plus the initial batch B = b·I read before the first step (Figure 5 counts B among its
gradients, not its samples); evaluations every ``eval_samples`` samples per worker (every round where b·I
is larger), so a pair's count is known to that grain.

Symbols → names: b → ``b``, I → ``I``, P → ``product``, (κ̄, c) → ``stem_grid``'s pairs (``stem_lr``,
``stem_c`` in the data), a₀ → ``stem_a0``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import ClassVar

import numpy as np
import pandas as pd

from replicate.core.errors import ReplicateError
from replicate.data.shards import HETEROGENEITY, WORKERS
from replicate.experiments import knobs
from replicate.experiments.khanduri2021.common import (STEM_A0, STEM_MOMENTUM, add_grid_deviation, check_stem_momentum,
                                                       first_momentum_weight, grid_edges, second_grid)
from replicate.experiments.khanduri2021.samples import Fig5Config
from replicate.experiments.khanduri2021.tradeoff import REMARK2, REMARK3_OFF
from replicate.report import plotting  # noqa: F401  (applies the project's plot style)
from replicate.report.claims import check, seeds_text
from replicate.runs import tune

DEVIATIONS = (
    "Not a figure of the paper: Figure 1 is analytic there. The curve's product P = 80 (Figure 5's b = 8, I = 10), "
    "the (b, I) pairs, the training-loss target and STEM's (κ̄, c) grid (κ̄ stepped along a first-epoch momentum "
    "weight ≈ 0.9) are PROPOSED; (κ̄, c) is tuned per (b, I) on the first seed by samples to the target, and the "
    "claims are tested on the other seeds.",
    "Figure 5's setting (spec §6.2-§6.5): MNIST, 5 of 10 classes per worker, K = 100, LeNet, STEM's eq. (2) step "
    "per epoch with w = σ² = 1; samples per worker count the initial batch B = b·I.",
)


@dataclass(frozen=True)
class Fig1MeasuredConfig(knobs.FigureConfig):
    """STEM to a training-loss target for (b, I) pairs around the product ``product``."""

    heterogeneity: str = "high"  # Figure 5's partition
    product: int = 80  # P: the b·I taken as the curve (Figure 5's b = 8, I = 10)
    pairs: tuple[tuple[int, int], ...] = ((2, 10), (10, 2), (8, 10), (2, 40), (40, 2), (8, 40), (32, 10),
                                          (32, 40), (128, 10))  # (b, I) at P/4, P, 4P, 16P
    target_loss: float = 0.5  # global training loss to reach
    samples_per_worker: int = 6400  # budget per run (≈ 12 local epochs); a run ends at the target
    eval_samples: int = 160  # samples per worker between evaluations (at least one round)
    stem_grid: tuple[tuple[float, float], ...] = ((0.02, 3570.0), (0.03, 1590.0), (0.05, 570.0), (0.1, 150.0),
                                                  (0.2, 35.0), (0.4, 9.0))  # (κ̄, c), a ≈ 0.9
    stem_momentum: str = "c"  # STEM's grid: "c" (the pairs of stem_grid) or "a0" (stem_lr × stem_a0, spec §6.7)
    stem_lr: tuple[float, ...] = (0.02, 0.03, 0.05, 0.1, 0.2, 0.4)  # the second grid's κ̄ (those of stem_grid)
    stem_a0: tuple[float, ...] = STEM_A0  # the second grid's first-epoch momentum weights a₀ (c = a₀/η_1²)
    tune_seeds: int = 1  # the first seeds choose (κ̄, c) per pair; the claims test the others
    seeds: tuple[int, ...] = (0, 1, 2)
    equal_factor: float = 2.0  # "similar along the curve": every split within this factor of the others
    rounds_margin: float = 0.1  # "more rounds below the curve": by more than this fraction
    num_clients: int = WORKERS  # K; fewer keeps the first workers of the 100-worker partition (smoke)
    workers: int = 2  # processes computing runs side by side
    deviations: tuple[str, ...] = DEVIATIONS

    CHOICES: ClassVar[dict] = {"heterogeneity": HETEROGENEITY, "stem_momentum": STEM_MOMENTUM}

    def __post_init__(self):
        add_grid_deviation(self)

    SMOKE: ClassVar[dict] = dict(product=4, pairs=((1, 2), (2, 2), (4, 4)), target_loss=2.25, samples_per_worker=16,
                                 eval_samples=8, stem_grid=((0.1, 150.0), (0.2, 35.0)), stem_lr=(0.1, 0.2),
                                 seeds=(0, 1), num_clients=10, workers=1)

    def validate(self) -> None:
        products = {b * i for b, i in self.pairs}
        if self.product not in products or not any(p > self.product for p in products):
            raise ReplicateError("Fig1MeasuredConfig: pairs must include b·I = product and a larger product")
        if any(b < 1 or i < 1 for b, i in self.pairs) or not self.target_loss > 0 or self.equal_factor < 1:
            raise ReplicateError("Fig1MeasuredConfig: b, I ≥ 1, target_loss > 0 and equal_factor ≥ 1")
        check_stem_momentum(self)
        if not self.stem_grid or any(len(kc) != 2 or first_momentum_weight(*kc) >= 1 for kc in self.stem_grid):
            raise ReplicateError("Fig1MeasuredConfig: stem_grid needs (κ̄, c) pairs with c·η² < 1 in the first epoch "
                                 "(no momentum left otherwise)")
        if not 1 <= self.num_clients <= WORKERS:
            raise ReplicateError(f"Fig1MeasuredConfig.num_clients must be between 1 and {WORKERS}")
        if not self.test_seeds():
            raise ReplicateError(f"Fig1MeasuredConfig: tune_seeds = {self.tune_seeds} leaves no seed of {self.seeds} "
                                 "to test the claims on (they use only seeds that did not tune)")

    def settings(self) -> list[tuple[float, float]]:
        """The (κ̄, c) settings tried per (b, I): ``stem_grid``'s pairs (the first grid), or ``stem_lr`` ×
        ``stem_a0`` with c = a₀/η_1² (the second, spec §6.7)."""
        return second_grid(self.stem_lr, self.stem_a0) if self.stem_momentum == "a0" else list(self.stem_grid)

    def tuning_seeds(self) -> tuple[int, ...]:
        """The seeds that choose (κ̄, c) per pair (none when the grid has one setting)."""
        return tuple(self.seeds[:self.tune_seeds]) if len(self.settings()) > 1 else ()

    def test_seeds(self) -> tuple[int, ...]:
        """The seeds the claims are tested on: those that did not tune."""
        return tuple(self.seeds[len(self.tuning_seeds()):])

    def grid(self) -> tune.Grid:
        """Per (b, I) pair, the (κ̄, c) settings, chosen on the tuning seeds and tested on the others
        (``runs.tune.Grid``)."""
        settings = [{"stem_lr": k, "stem_c": c} for k, c in self.settings()]
        return tune.Grid({pair: settings for pair in self.pairs},
                         lambda pair, setting, seed: self.run_config(*pair, seed, **setting),
                         self.tuning_seeds() + self.test_seeds(), len(self.tuning_seeds()))

    def run_config(self, b: int, I: int, seed: int, stem_lr: float, stem_c: float):
        """STEM at (b, I) with κ̄ = ``stem_lr``, c = ``stem_c``: Figure 5's run config with b and the
        evaluation grain set here."""
        rounds = math.ceil(self.samples_per_worker / (b * I))
        evals = max(1, math.ceil(self.samples_per_worker / self.eval_samples))
        fig5 = replace(Fig5Config(), heterogeneity=self.heterogeneity, batch_size=b, num_clients=self.num_clients,
                       samples_per_worker=self.samples_per_worker, evals=min(evals, rounds))
        return fig5.run_config("stem", I, seed, stem_lr, stem_c).replace(rounds=rounds)

    def dataset_names(self) -> tuple[str, ...]:
        return (f"mnist_stem_{self.heterogeneity}",)


def measured(config: Fig1MeasuredConfig, log=None) -> pd.DataFrame:
    """One row per run: (b, I, seed, κ̄, c), its role ("tuning" or "test"), the samples per worker and
    rounds to the target (inf when not reached in the budget) and its last training loss. Per pair the
    tuning runs choose (κ̄, c) by ``rank`` (``runs.tune``: lowest mean over the tuning seeds, the first of
    equals in grid order); the test runs use the choice, and ``at_edge`` names a choice at its grid's edge.
    Then one row per evaluation of every tuning run, role "tuning curve" (``round``, ``train_loss``, and
    ``samples`` read by then): the full grid's curves, on which successive halving is replayed
    (tests/test_halving.py; a run stops at the target, so its curve ends there)."""
    declared = config.grid()
    tests = config.test_seeds()
    found = declared.tune(lambda history: rank(_outcome(history, config.target_loss)), workers=config.workers, log=log,
                          stop_loss=config.target_loss)

    def row(pair, seed, setting, history, role, edge=""):
        b, i = pair
        outcome = _outcome(history, config.target_loss)
        return {"b": b, "I": i, "product": b * i, "seed": seed, "relative": b * i / config.product, **setting,
                "rounds": outcome["rounds"], "samples": (outcome["rounds"] + 1) * b * i,  # B = b·I before round 1
                "last_train_loss": outcome["last_train_loss"], "outcome": outcome["outcome"], "role": role,
                "at_edge": edge}

    rows = [row(pair, s, h, history, "tuning") for pair, h, s, history in found.tuning]
    rows += [row(pair, s, found.chosen[pair], history, "test", grid_edges(declared.groups[pair], found.chosen[pair]))
             for pair, s, history in found.runs if s in tests]
    curves = [history[["round", "train_loss"]].assign(
        b=pair[0], I=pair[1], product=pair[0] * pair[1], seed=s, relative=pair[0] * pair[1] / config.product,
        **setting, samples=(history["round"] + 1) * pair[0] * pair[1], role="tuning curve")
        for pair, setting, s, history in found.tuning]
    return pd.concat([pd.DataFrame(rows), *curves], ignore_index=True)


# ``rank``'s offset of a run that missed the target: above any count of rounds, and small enough that losses more
# than 1.2e-7 apart (a double's spacing at 1e9) stay ordered
NOT_REACHED = 1e9


def rank(outcome: dict) -> float:
    """A tuning run's score, lower is better: rounds to the target when reached (a pair's samples are
    b·I per round, so this orders its runs as samples do); otherwise ``NOT_REACHED`` plus its last training
    loss (any run that reached beats every run that did not, and among those the lower loss wins); inf when
    it diverged."""
    if outcome["outcome"] == "reached":
        return float(outcome["rounds"])
    return NOT_REACHED + outcome["last_train_loss"] if math.isfinite(outcome["last_train_loss"]) else math.inf


def _outcome(history: pd.DataFrame, target: float) -> dict:
    """The round a run first evaluated at training loss ≤ ``target`` (inf if never), its last training
    loss and whether it reached the target, did not, or diverged."""
    hit = history[history.train_loss <= target]
    last = float(history.train_loss.iloc[-1])
    return {"rounds": float(hit["round"].iloc[0]) if len(hit) else math.inf, "last_train_loss": last,
            "outcome": "reached" if len(hit) else ("diverged" if not math.isfinite(last) else "not reached")}


def tested(data: pd.DataFrame) -> pd.DataFrame:
    """The runs the claims and panels use: those with the tuned (κ̄, c) on seeds that did not tune."""
    return data[data.role == "test"] if "role" in data else data


def measured_claims(data: pd.DataFrame, config: Fig1MeasuredConfig) -> list:
    """Remarks 2-3 on the test runs (tuned (κ̄, c), seeds that did not tune), every seed."""
    data, seeds = tested(data), config.test_seeds()
    curve = data[data["product"] == config.product]
    above = data[data["product"] > config.product]
    below = data[data["product"] < config.product]
    claims = []
    fewer = {s: bool(np.isfinite(on := curve[curve.seed == s].samples.mean())
                     and on <= above[above.seed == s].groupby("product").samples.mean().min()) for s in seeds}
    claims.append(check(
        f"Pairs on the curve (b·I = {config.product}) need no more samples per worker to reach training loss "
        f"{config.target_loss:g} than pairs with a larger b·I (every test seed)", all(fewer.values()),
        _per_product(data, "samples"),
        margin="the curve's mean over its splits ≤ the mean of every larger product, in every seed (no slack)",
        paper_value="analytic: samples ∝ max{1, b·I/P} (Remark 3)", source=REMARK3_OFF))
    if len(below):
        more = {s: below[below.seed == s].groupby("product").rounds.mean().min()
                > curve[curve.seed == s].rounds.mean() * (1 + config.rounds_margin) for s in seeds}
        claims.append(check(
            "Pairs short of the curve need more communication rounds (every test seed)", all(more.values()),
            _per_product(data, "rounds"),
            margin=f"every smaller product's mean rounds > {1 + config.rounds_margin:g}× the curve's, in every seed",
            paper_value="analytic: rounds ∝ max{1, P/(b·I)} (Remark 3)", source=REMARK3_OFF))
    spread = {s: _ratio(curve[curve.seed == s].samples) for s in seeds}
    claims.append(check(
        f"Along the curve every split of b·I = {config.product} between b and I needs about the same samples "
        "(Minibatch STEM to Fed STEM, every test seed)", all(r <= config.equal_factor for r in spread.values()),
        "samples per split: " + "; ".join(f"(b = {b}, I = {i}): {seeds_text(g.samples, ',.0f')}"
                                          for (b, i), g in curve.groupby(["b", "I"], sort=False))
        + f"; largest / smallest {seeds_text(list(spread.values()), '.2f')}",
        margin=f"largest / smallest ≤ {config.equal_factor:g} in every seed",
        paper_value="analytic: ε^(-3/2) samples for every ν on the curve (Remark 2)", source=REMARK2))
    return claims


def _ratio(values: pd.Series) -> float:
    values = values.to_numpy(dtype=float)
    return math.inf if not np.all(np.isfinite(values)) else float(values.max() / values.min())


def _per_product(data: pd.DataFrame, column: str) -> str:
    means = data.groupby(["product", "seed"])[column].mean().unstack("seed")
    failed = data[data.outcome != "reached"].groupby(["b", "I", "outcome"], sort=False).seed.apply(list)
    return "; ".join(f"b·I = {p}: {seeds_text(row.to_numpy(), ',.0f')}" for p, row in means.iterrows()) \
        + " (mean over its splits, per seed; never = a split did not reach the target)" \
        + ("; " + ", ".join(f"({b}, {i}) {outcome} on seeds {seeds}" for (b, i, outcome), seeds in failed.items())
           if len(failed) else "")


def plot_measured(data: pd.DataFrame, config: Fig1MeasuredConfig):
    """(a) the pairs in the (b, I) plane with the curve b·I = P; (b) samples, (c) rounds against b·I."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(14.0, 4.4))
    tuned = tested(data).groupby(["b", "I"]).first()  # the chosen (κ̄, c) per pair
    data = tested(data)
    reached = data[data.outcome == "reached"]
    means = reached.groupby(["b", "I", "product"], as_index=False)[["samples", "rounds"]].mean()
    counts = data.groupby(["b", "I"]).outcome.agg(lambda o: (int((o == "reached").sum()), len(o),
                                                            "diverged" if (o == "diverged").any() else "not reached"))
    finite = means
    ax = axes[0]
    b = np.geomspace(0.5, 4 * max(means.b.max(), config.product), 50)
    for k, style in ((1, "-"), (0.25, ":"), (4, ":"), (16, ":")):
        ax.plot(b, k * config.product / b, color="crimson" if k == 1 else "0.6", ls=style, lw=1.2 if k == 1 else 0.8,
                label=f"b·I = {config.product} (the curve, P)" if k == 1 else None)
        ax.annotate(f"{k:g}P", (b[-8], k * config.product / b[-8]), fontsize=7, color="0.4")
    points = ax.scatter(finite.b, finite.I, c=np.log10(finite.samples), cmap="viridis", s=60, zorder=3)
    for (bb, ii), (hits, runs, failure) in counts.items():
        row = means[(means.b == bb) & (means.I == ii)]
        text = f"{row.samples.iloc[0]:,.0f} / {row.rounds.iloc[0]:.0f}" if hits else failure
        # a line of its own: beside it, a neighbour's label
        text += f"\n({hits}/{runs} seeds)" if 0 < hits < runs else ""
        if "stem_lr" in tuned:  # the tuned κ̄ (the first grid's c follows it; the second's a₀ is shown); † at an edge
            kappa = tuned.stem_lr[(bb, ii)]
            text += (f"\nκ̄ {kappa:g}" + (f", a₀ {first_momentum_weight(kappa, tuned.stem_c[(bb, ii)]):.2g}"
                                          if config.stem_momentum == "a0" else "")
                     + (" †" if tuned.at_edge[(bb, ii)] else ""))
        if not hits:
            ax.scatter([bb], [ii], marker="x", color="0.3", zorder=3)
        ax.annotate(text, (bb, ii), textcoords="offset points", xytext=(-8, 7), fontsize=6)
    fig.colorbar(points, ax=ax, label="log10 samples per worker")
    ax.set(xscale="log", yscale="log", xlabel="minibatch size b", ylabel="local updates I",
           ylim=(0.5, 4 * data.I.max()))
    ax.set_title("(a) samples per worker / rounds to target, tuned κ̄ (×: no seed reached it; "
                 "†: at its grid's edge)", fontsize=8)
    ax.legend(fontsize=7, frameon=False, loc="lower left")
    on = means[means["product"] == config.product]
    for ax, column, shape, label in ((axes[1], "samples", lambda r: np.maximum(1, r), "samples per worker"),
                                     (axes[2], "rounds", lambda r: np.maximum(1, 1 / r), "communication rounds")):
        for (bb, ii), part in reached.groupby(["b", "I"]):
            values = part[column]
            x = bb * ii
            ax.errorbar(x, values.mean(), yerr=[[values.mean() - values.min()], [values.max() - values.mean()]],
                        marker="o", ms=4, capsize=2, color="crimson" if x == config.product else "0.3")
            ax.annotate(f"({bb}, {ii})", (x, values.mean()), textcoords="offset points", fontsize=6,
                        xytext=(4, -9 if ii >= bb else 4))  # splits of one product apart
        if len(on) and len(means):
            relative = np.geomspace(data["product"].min(), data["product"].max(), 50) / config.product
            ax.plot(relative * config.product, on[column].mean() * shape(relative), ls="--", color="0.5",
                    label="Remark 3's shape, through the curve's mean")
        ax.axvline(config.product, color="crimson", lw=0.8)
        ax.set(xscale="log", yscale="log", xlabel="b·I", ylabel=f"{label} to target")
        if ax.get_legend_handles_labels()[0]:  # no curve's mean (no split of it reached the target): no legend
            ax.legend(fontsize=7, frameon=False)
    axes[1].set_title("(b) samples per worker (runs that reached the target)", fontsize=9)
    axes[2].set_title("(c) communication rounds (runs that reached the target)", fontsize=9)
    fig.suptitle(f"Khanduri et al. 2021, Figure 1 measured (beyond the paper): STEM on MNIST "
                 f"({config.heterogeneity} heterogeneity, K = {config.num_clients}) to training loss "
                 f"{config.target_loss:g};\n"
                 f"(κ̄, c) tuned per (b, I) on seeds {list(config.tuning_seeds())} over {len(config.settings())} "
                 f"settings{' (second grid: κ̄ × a₀)' if config.stem_momentum == 'a0' else ''}; "
                 f"shown: test seeds {list(config.test_seeds())}, mean and range", fontsize=10)
    fig.tight_layout()
    return fig


