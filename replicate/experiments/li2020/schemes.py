"""Li et al. 2020 (ICLR), Figures 1c/1d (mnist) and 4 (synthetic): four sampling and averaging
schemes (Scheme I, Scheme II, T-Scheme II and the Original, whose η0 is tuned) on the same
devices; ``SchemesConfig`` holds what the two figures share.

Settings follow ``docs/specs/li2020-fedavg-noniid-and-fedprox.md`` §2.1 and §3:
logistic regression, η_r = η0/max(r, 1) per round, weight decay λw inside the
optimiser, PyTorch's default initialisation, gradient clipping at 60, and E counted as
the authors' ``num_epoch`` (10 local SGD steps each; ``RunConfig.local_steps`` is in steps).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import ClassVar

import pandas as pd

from replicate.report import plotting
from replicate.report.claims import check, consistency
from replicate.fl.algorithms import FedAvg
from replicate.runs.config import RunConfig
from replicate.experiments import knobs
from replicate.runs.pool import compute
from replicate.runs.tune import Grid
from replicate.core.errors import ReplicateError
from replicate.experiments.li2020.common import (data_seed, COMMON_DEVIATIONS, DATASETS, LABELS,
                                                 MNIST_UNBALANCED_DEVIATION, STEPS_PER_EPOCH, SYNTHETIC_DEVIATION,
                                                 _legend_below, _runs, batch_size, tuning_score, LI2020_OBJECTIVE)
from replicate.runs.measures import finals, fluctuation
from replicate.experiments.li2020.common import quoted


SCHEME_LABELS = {"scheme1": "Scheme I", "scheme2": "Scheme II", "transformed2": "T-Scheme II",
                 "original": "Original"}

SAME_DEVICES_NOTE = (
    "Same devices: runs with one seed share the sampling stream, so Original, Scheme II and "
    "T-Scheme II see identical devices and mini-batches every round; Scheme I samples with "
    "replacement ∝ p_k by definition, so its devices differ.")


@dataclass(frozen=True)
class SchemesConfig(knobs.FigureConfig):
    """Four sampling/averaging schemes on the same devices; the Original's η0 is tuned."""

    datasets: tuple[str, ...]
    epochs: int  # E (num_epoch)
    rounds: int
    clients_per_round: int = 10  # K
    lr: float = 0.1  # η0 of Schemes I, II and T-II (not tuned, as in the paper)
    original_lrs: tuple[float, ...] = (0.1, 0.5, 0.9, 1.1)  # the Original's tuning grid
    seeds: tuple[int, ...] = (0, 1, 2)  # on a synthetic set seed i trains on the i-th Table-2-matched data draw
    tune_seeds: int = 1  # the first seeds tune the Original's η0; the rest run the chosen one
    last: int = 10  # logged rounds averaged for "final loss" (tuning and claims)
    inset: int = 30  # last rounds shown zoomed, as the authors' plot
    fluctuating: float = 0.2  # "unstable" = total rise / total fall of the curve above this
    margin: float = 0.01  # an ordering "a below b" needs mean(b) ≥ (1 + margin)·mean(a), over the seeds

    CHOICES: ClassVar[dict] = {"datasets": DATASETS}
    ZERO_ALLOWED: ClassVar[tuple] = ("fluctuating",)

    def validate(self) -> None:
        knobs.check_tune_seeds(self)
        if self.last > self.rounds or self.inset > self.rounds:
            raise ReplicateError(f"{type(self).__name__}: last and inset must not exceed rounds = {self.rounds}")
        self.grid().tuning(), self.fixed()

    def run_config(self, dataset: str, scheme: str, lr: float, seed: int) -> RunConfig:
        return RunConfig(dataset=dataset, algorithm=FedAvg(scheme, self.clients_per_round),
                         local_steps=self.epochs * STEPS_PER_EPOCH, batch_size=batch_size(dataset), client_lr=lr,
                         rounds=self.rounds, seed=seed, data_seed=data_seed(dataset, seed), **LI2020_OBJECTIVE)

    def settings(self) -> str:
        """E, K and b as the figure's title states them: "E = 10, K = 10, b = 24"."""
        batches = ", ".join(dict.fromkeys(str(batch_size(d)) for d in self.datasets))
        return f"E = {self.epochs}, K = {self.clients_per_round}, b = {batches}"

    def grid(self) -> Grid:
        """The Original's η0 grid per dataset, tuned on the first seeds (``runs.tune.Grid``)."""
        return Grid({d: list(self.original_lrs) for d in self.datasets},
                    lambda d, lr, seed: self.run_config(d, "original", lr, seed), tuple(self.seeds), self.tune_seeds)

    @staticmethod
    def label(d: str, lr: float, s: int) -> dict:
        """The columns of an Original run of the grid (``runs.tune.Tuned.frame``)."""
        return {"dataset": d, "scheme": "original", "lr": lr, "seed": s}

    def fixed(self) -> list[tuple[dict, RunConfig]]:
        return [({"dataset": d, "scheme": scheme, "lr": self.lr, "seed": s}, self.run_config(d, scheme, self.lr, s))
                for d in self.datasets for scheme in ("scheme1", "scheme2", "transformed2") for s in self.seeds]


def schemes(config: SchemesConfig, progress: bool = True, workers: int = 2, log=None) -> pd.DataFrame:
    """Loss curves of every scheme, dataset and seed; the Original at its tuned η0 (tidy).

    Every tuning run is kept (``chosen`` marks the Original's selected η0) so the CSV shows
    the tuning; the selection is the lowest mean loss over the last ``last`` rounds.
    """
    compute([(c, None) for c in config.grid().tuning() + [c for _, c in config.fixed()]], workers, progress,
            log=log)  # one sweep
    found = config.grid().tune(functools.partial(tuning_score, last=config.last), workers=workers, log=log)
    rest = config.seeds[config.tune_seeds:]  # the Original at its chosen η0 on the seeds that did not tune it
    data = pd.concat([_runs(config.fixed(), log=log), found.frame(config.label, ("round", "train_loss"))]
                     + ([found.frame(config.label, ("round", "train_loss"), finals_on=rest)] if rest else []),
                     ignore_index=True)
    data["chosen"] = (data.scheme != "original") | (data.lr == data.dataset.map(found.chosen))
    data["series"] = data.scheme.map(SCHEME_LABELS)
    data.loc[data.scheme == "original", "series"] = data.lr.map(lambda lr: f"Original (η0 = {lr:g})")
    data["dataset"] = data["dataset"].map(LABELS)
    return data[["dataset", "series", "scheme", "lr", "chosen", "seed", "round", "train_loss"]]


def plot_schemes(data: pd.DataFrame, config: SchemesConfig, title: str):
    import matplotlib.pyplot as plt

    shown = data[data.chosen]
    order = sorted(pd.unique(shown.series), key=lambda s: ("Scheme I" != s, "Scheme II" != s, s))
    fig = plotting.lines(shown, "round", "train_loss", hue="series", style="series", facet="dataset",
                         xlabel="Round (T/E)", ylabel="Global training loss", panel_size=(4.4, 3.3), title=title)
    last = shown["round"].max()
    for ax, dataset in zip(fig.axes, pd.unique(shown["dataset"])):
        part = shown[shown.dataset == dataset]
        steady = part[part.scheme.isin(["scheme1", "original"])]  # Scheme II's spikes may leave the axes
        low, high = float(steady.train_loss.min()), float(steady.train_loss.max())
        ax.set_ylim(low - 0.03 * (high - low), high + 0.03 * (high - low))
        tail = part[part["round"] > last - config.inset]
        inner = plotting.inset_zoom(ax, tail, "round", "train_loss", "series", (last - config.inset + 1, last),
                                    bounds=(0.4, 0.52, 0.55, 0.4))
        base = tail[tail.scheme.isin(["scheme1", "original", "transformed2"])].train_loss
        inner.set_ylim(float(base.min()) * 0.98, float(base.max()) * 1.05)
    plt.setp(fig.axes, xmargin=0.01)
    _legend_below(fig, order)
    return fig


def _scheme_stats(data: pd.DataFrame, config: SchemesConfig):
    shown = data[data.chosen]
    final = finals(shown, "train_loss", ("dataset", "scheme", "seed"), rows=config.last)
    wiggle = shown.sort_values("round").groupby(["dataset", "scheme", "seed"])["train_loss"].apply(fluctuation)
    lr = shown[shown.scheme == "original"].groupby("dataset")["lr"].first()
    return final, wiggle, lr


def _tested(data: pd.DataFrame, config: SchemesConfig) -> tuple[pd.DataFrame, str]:
    """The rows of the seeds that did not tune the Original's η0 (a tuning seed is never a test seed: every
    scheme is compared on them) and the claims' words on them."""
    tested, note = knobs.held_out(data, config)
    count = tested["seed"].nunique()
    return tested, ((f"means over {count} seeds" if count > 1 else "") + note).removeprefix("; ") + "; "


def _tuned_text(lr: float, config: SchemesConfig) -> str:
    """The Original's tuned η0, flagged when it sits at the edge of the paper's tuning grid."""
    text = f"Original η0 = {lr:g} (tuned over {list(config.original_lrs)}"
    if len(config.original_lrs) > 1 and lr == max(config.original_lrs):
        text += ", the grid's largest"
    return text + ")"


def _order_text(final: pd.Series, dataset: str) -> str:
    mean = final[dataset].groupby("scheme").mean().sort_values()
    return " < ".join(f"{SCHEME_LABELS[s]} {v:.4g}" for s, v in mean.items())


def _ranked(final: pd.Series, dataset: str) -> tuple[list[str], pd.DataFrame]:
    """Scheme order by mean final loss, and the per-seed final losses (seed × scheme)."""
    per_seed = final[dataset].unstack("scheme")
    return list(per_seed.mean().sort_values().index), per_seed


def _below(per_seed: pd.DataFrame, a: str, others: list[str], margin: float) -> tuple[bool, str]:
    """Whether scheme ``a`` ends below every scheme in ``others`` by the margin, on the seed means: the mean final
    loss of each other scheme is at least (1 + margin) times a's. The paper shows one run a curve, the curve our
    seeds estimate is their mean; each gap's range over single seeds, and in how many a was lower, are shown."""
    gaps = {o: per_seed[o].mean() / per_seed[a].mean() - 1 for o in others}
    single = {o: per_seed[o] / per_seed[a] - 1 for o in others}
    seeds = int((per_seed[a].to_numpy()[:, None] < per_seed[others].to_numpy()).all(axis=1).sum())
    ok = min(gaps.values()) >= margin
    text = (", ".join(f"{SCHEME_LABELS[o]} {g:+.1%} (single seeds {single[o].min():+.1%} to {single[o].max():+.1%})"
                      for o, g in gaps.items())
            + f" above {SCHEME_LABELS[a]}, seed means (margin {margin:.0%}); lower in {seeds}/{len(per_seed)} seeds")
    return ok, text


@dataclass(frozen=True)
class Fig1cdConfig(SchemesConfig):
    """Figures 1c/1d: schemes on mnist balanced / unbalanced, E = 20, K = 10, b = 64."""

    datasets: tuple[str, ...] = ("mnist_balanced", "mnist_unbalanced")
    epochs: int = 20
    rounds: int = 199  # rows 0..199: the 200 logged losses the authors' scheme plots show
    seeds: tuple[int, ...] = (0, 1)
    deviations: tuple[str, ...] = COMMON_DEVIATIONS + (
        MNIST_UNBALANCED_DEVIATION, SAME_DEVICES_NOTE,
        "K = 10 as the text says; the authors' plot script lists (commented out) K = 30 runs with an "
        "Original η0 of 0.9 (spec §3).",
        "Two seeds (the paper shows one run per curve); the Original's η0 is tuned on the first.",
    )

    SMOKE: ClassVar[dict] = dict(datasets=("mnist_balanced",), epochs=1, rounds=6, original_lrs=(0.1, 0.9), seeds=(0,),
                                 last=3, inset=4)


def fig1cd(config: Fig1cdConfig, progress: bool = True, workers: int = 2, log=None) -> pd.DataFrame:
    return schemes(config, progress, workers, log=log)


@quoted
def fig1cd_claims(data: pd.DataFrame, config: Fig1cdConfig, equal: float = 0.05) -> list:
    data, seeds = _tested(data, config)
    final, wiggle, lr = _scheme_stats(data, config)
    claims = []
    if LABELS["mnist_balanced"] in final.index.get_level_values("dataset"):
        d = LABELS["mnist_balanced"]
        order, per_seed = _ranked(final, d)
        gap = abs(per_seed.scheme1.mean() - per_seed.scheme2.mean()) / per_seed.scheme1.mean()
        beat1, text1 = _below(per_seed, "scheme1", ["original"], config.margin)
        beat2, text2 = _below(per_seed, "scheme2", ["original"], config.margin)
        claims += [
            check("mnist balanced: Schemes I and II perform about the same",
                  gap < equal, f"final losses differ by {gap:.1%}; {seeds}{_order_text(final, d)}",
                  margin=f"relative difference of the mean final losses below {equal:.0%}"),
            check("mnist balanced: Schemes I and II both beat the (tuned) Original",
                  beat1 and beat2, f"{_tuned_text(lr[d], config)}; {seeds}{_order_text(final, d)}; {text1}; {text2}",
                  margin=f"the Original's mean final loss ≥ {1 + config.margin:g}× each scheme's"),
        ]
        curves = data[data.chosen & (data.dataset == d)].pivot_table(index=["seed", "round"], columns="scheme",
                                                                    values="train_loss")
        diff = float((curves.transformed2 - curves.scheme2).abs().max())
        claims.append(consistency("mnist balanced: T-Scheme II coincides with Scheme II (balanced data)", diff < 1e-3,
                                  f"largest difference between the two curves: {diff:.2e} (coincide = below 1e-3; "
                                  "with equal p_k the two schemes are the same algorithm)", basis="identity"))
    if LABELS["mnist_unbalanced"] in final.index.get_level_values("dataset"):
        d = LABELS["mnist_unbalanced"]
        order, per_seed = _ranked(final, d)
        w = wiggle[d].unstack("scheme")
        best, best_text = _below(per_seed, "scheme1", [s for s in per_seed.columns if s != "scheme1"], config.margin)
        slower, slower_text = _below(per_seed, "scheme1", ["transformed2"], config.margin)
        claims += [
            check("mnist unbalanced: Scheme I performs best",
                  best, f"Original η0 = {lr[d]:g}; {seeds}{_order_text(final, d)}; {best_text}",
                  margin=f"every other scheme's mean final loss ≥ {1 + config.margin:g}× Scheme I's"),
            check("mnist unbalanced: Scheme II suffers from instability",
                  bool(w.scheme2.median() > config.fluctuating),
                  f"fluctuation (total rise / total fall) of Scheme II {w.scheme2.median():.2f} vs Scheme I "
                  f"{w.scheme1.median():.2f} (median over seeds)",
                  margin=f"Scheme II's median fluctuation over seeds above {config.fluctuating:g}"),
            check("mnist unbalanced: T-Scheme II is stable but converges more slowly than Scheme I",
                  bool(w.transformed2.median() <= config.fluctuating) and slower,
                  f"T-Scheme II fluctuation {w.transformed2.median():.2f} (stable = at most {config.fluctuating:g}); "
                  f"final loss T-II {per_seed.transformed2.mean():.4g} vs Scheme I {per_seed.scheme1.mean():.4g}; "
                  f"{slower_text}",
                  margin=f"fluctuation ≤ {config.fluctuating:g}; "
                         f"T-II's mean final loss ≥ {1 + config.margin:g}× Scheme I's"),
        ]
    return claims


@dataclass(frozen=True)
class Fig4Config(SchemesConfig):
    """Figure 4: schemes on synthetic(0,0) / (1,1), E = 10, K = 10, b = 24, first 200 logged losses."""

    datasets: tuple[str, ...] = ("synthetic(0,0)", "synthetic(1,1)")
    epochs: int = 10
    rounds: int = 199
    deviations: tuple[str, ...] = COMMON_DEVIATIONS + (
        SYNTHETIC_DEVIATION, SAME_DEVICES_NOTE, "The Original's η0 is tuned on the first of the three seeds.")

    SMOKE: ClassVar[dict] = dict(epochs=2, rounds=15, original_lrs=(0.1, 0.9), seeds=(0,), last=3, inset=6)


def fig4(config: Fig4Config, progress: bool = True, workers: int = 2, log=None) -> pd.DataFrame:
    return schemes(config, progress, workers, log=log)


@quoted
def fig4_claims(data: pd.DataFrame, config: Fig4Config) -> list:
    data, seeds = _tested(data, config)
    final, wiggle, lr = _scheme_stats(data, config)
    claims = []
    for d in pd.unique(data.dataset):
        order, per_seed = _ranked(final, d)
        w = wiggle[d].unstack("scheme")
        second_half = data[data.chosen & (data.dataset == d) & (data.scheme == "scheme2")
                           & (data["round"] >= config.rounds // 2)]
        stalled = second_half.sort_values("round").groupby("seed")["train_loss"].apply(fluctuation).median()
        best, best_text = _below(per_seed, "scheme1", [s for s in per_seed.columns if s != "scheme1"], config.margin)
        slower, slower_text = _below(per_seed, "scheme1", ["transformed2"], config.margin)
        others = [s for s in per_seed.columns if s not in ("scheme1", "original")]
        second, second_text = _below(per_seed, "original", others, config.margin)
        claims += [
            check(f"{d}: Scheme I performs best and stably",
                  best and bool(w.scheme1.median() <= config.fluctuating),
                  f"{seeds}{_order_text(final, d)}; Scheme I fluctuation {w.scheme1.median():.2f} "
                  f"(stable = at most {config.fluctuating:g}); {best_text}",
                  margin=f"every other scheme's mean final loss ≥ {1 + config.margin:g}× Scheme I's; "
                         f"fluctuation ≤ {config.fluctuating:g}"),
            check(f"{d}: the (tuned) Original performs second", len(order) > 1 and order[1] == "original" and second,
                  f"{_tuned_text(lr[d], config)}; order {' < '.join(SCHEME_LABELS[s] for s in order)}; {second_text}",
                  margin=f"second by mean final loss, the schemes after it ≥ {1 + config.margin:g}× its mean"),
            check(f"{d}: Scheme II fluctuates and shows no sign of convergence",
                  bool(w.scheme2.median() > config.fluctuating) and stalled > 0.5,
                  f"Scheme II fluctuation {w.scheme2.median():.2f} over the run (fluctuates = above "
                  f"{config.fluctuating:g}), {stalled:.2f} over its second half",
                  margin=f"median fluctuation above {config.fluctuating:g} over the run and above 0.5 over its second "
                         "half (rises undo more than half of the falls)"),
            check(f"{d}: T-Scheme II converges more slowly than Scheme I", slower,
                  f"final loss T-II {per_seed.transformed2.mean():.4g} vs Scheme I {per_seed.scheme1.mean():.4g}; "
                  f"{slower_text}",
                  margin=f"T-II's mean final loss ≥ {1 + config.margin:g}× Scheme I's"),
        ]
    return claims
