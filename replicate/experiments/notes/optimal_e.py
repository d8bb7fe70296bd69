"""Li et al. (ICLR 2020) eq. (8), the choice of E that the lecture notes' Theorem 1 leads to, against
the measured rounds-to-target minimum of Li et al. Figure 1a.

§3.4 and App. D.2: with ‖w_0 − w*‖² ≤ 4G²/μ² and constants dropped, the rounds needed for accuracy ε
behave as T_ε/E ∝ (1 + 1/K)·E·G² + (Σp_k²σ_k² + LΓ + κG²)/E (eq. 8), minimised at
E* = √((Σp_k²σ_k² + LΓ + κG²)/((1 + 1/K)G²)) (``theory.bounds.optimal_local_steps``; the minimiser
itself is RECONSTRUCTED there). Beside it: T_ε/E with every constant of Theorem 2 (Scheme I)
kept (``theory.bounds.rounds_to_accuracy``), once with §3.4's ‖w_0 − w*‖² ≤ 4G²/μ² and once with the
measured ‖w_0 − w*‖², ε = Figure 1a's target loss − F*.

The measured side is the committed ``figures/li2020/fig1a.csv`` (Scheme I, K = 30, η0 = 0.1,
b = 64 / 24, λ = 1e-4; E there is num_epoch = 10 local steps; ``local_steps`` is in steps): the
median over seeds of the rounds to the target, its minimiser, and the "near-optimal" range of E
whose rounds are within ``near_optimal`` of the minimum.

Symbols → names: E → ``local_steps`` (SGD steps), K → ``clients_per_round``, λ → ``weight_decay``,
G² → ``G2``, Σp_k²σ_k² → ``sum_p2_sigma2``, Γ → ``Gamma``, κ → ``kappa``, E* → ``E_star``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pandas as pd

from replicate.core import paths
from replicate.core.errors import ReplicateError
from replicate.experiments import knobs
from replicate.experiments.li2020.fig1a import FIG1A_TARGET
from replicate.experiments.notes.common import (DATASETS, LABELS, batch_size, cached_constants, moments,
                                                sample_problem, single_threaded)
from replicate.report import plotting  # noqa: F401  (applies the project's plot style)
from replicate.report.claims import check
from replicate.theory import bounds
from replicate.theory import constants as C

DEVIATIONS = (
    "E* of eq. (8) takes every constant the paper drops as 1 (App. D.2 writes it so); its minimiser is "
    "RECONSTRUCTED (the paper says only that an optimal E exists).",
    "G² and σ_k² are the largest of their values at w* and at the initial models w_0 of the seeds (Assumptions 3-4 "
    "ask for every iterate; eq. 8's E* depends on them only through the ratio of its terms).",
    "L is the logistic model's upper bound ½λ_max(X̃ᵀX̃/n_k) + λ; μ = λ = 1e-4 (Li et al.'s weight decay), "
    "so κ = L/λ is 10^5-10^6 and dominates eq. (8).",
    "The measured optimum is Figure 1a's (our committed run: Scheme I, K = 30, η0/max(r, 1) with η0 = 0.1, "
    "clipping at 60), not a run with the theorem's step size: eq. (8) is compared with the experiment the paper "
    "offers for it.",
)


@dataclass(frozen=True)
class OptimalEConfig(knobs.FigureConfig):
    """Eq. (8)'s E* from estimated constants vs Figure 1a's measured minimum (K = 30, λ = 1e-4)."""

    datasets: tuple[str, ...] = DATASETS
    clients_per_round: int = 30  # K of Figure 1a
    weight_decay: float = 1e-4  # λ
    seeds: tuple[int, ...] = (0, 1)  # initial models w_0 where G², σ_k² are also measured
    near_optimal: float = 0.10  # measured optimum: every E whose rounds are within this of the minimum
    orders: float = 1.0  # claim margin: E* within this many decades of the measured optimum
    num_clients: int | None = None  # N of the synthetic sets; None = 100 (Figure 1a's)
    deviations: tuple[str, ...] = DEVIATIONS

    CHOICES: ClassVar[dict] = {"datasets": DATASETS}
    SMOKE: ClassVar[dict] = dict(datasets=("synthetic(1,1)",), seeds=(0,), num_clients=10)

    def validate(self) -> None:
        if not fig1a_path().exists():
            raise ReplicateError(f"{fig1a_path()} is missing: run the li2020/fig1a notebook at the paper profile")

    def clients_for(self, dataset: str) -> int | None:
        return None if dataset.startswith("mnist") else self.num_clients


def fig1a_path():
    return paths.figures_dir() / "li2020" / "fig1a.csv"


def measured_rounds(dataset: str) -> pd.DataFrame:
    """Figure 1a's rounds to the target per E (local steps): ours (median over seeds; censored = inf), the paper's."""
    frame = pd.read_csv(fig1a_path())
    part = frame[(frame.dataset == dataset) & frame.source.isin(["ours", "paper"])].copy()  # not the floor rows
    part["rounds"] = part["rounds"].where(~part["censored"].astype(bool), math.inf)
    return part.groupby(["source", "local_steps"])["rounds"].median().reset_index()


def _constants_at_inits(dataset: str, config: OptimalEConfig):
    """The cached constants with σ_k² and G² raised to their values at the seeds' w_0; and ‖w_0 − w*‖²."""
    c, info = cached_constants(dataset, weight_decay=config.weight_decay, batch_size=batch_size(dataset),
                               num_clients=config.clients_for(dataset))
    problem = sample_problem(dataset, num_clients=config.clients_for(dataset))
    view = C._view(problem)
    variances, G2, dist = c.variances.copy(), c.grad_sq_bound, []
    for seed in config.seeds:
        w0 = problem.init(seed)
        sigma2, sq = moments(problem, view, w0, batch_size(dataset), config.weight_decay)
        variances, G2 = np.maximum(variances, sigma2), max(G2, float(sq.max()))
        dist.append(float(((w0.double().numpy() - c.minimiser) ** 2).sum()))
    return c, variances, G2, float(np.mean(dist)), info


def optimal_e(config: OptimalEConfig, log=None) -> pd.DataFrame:
    """``kind == "summary"``: one row per dataset (constants, E*'s, measured optimum);
    ``kind == "curve"``: rounds per E, each source normalised by its own minimum."""
    with single_threaded():
        return _optimal_e(config)


def _optimal_e(config: OptimalEConfig) -> pd.DataFrame:
    rows, curves = [], []
    for dataset in config.datasets:
        c, variances, G2, dist, info = _constants_at_inits(dataset, config)
        K = config.clients_per_round
        kw = dict(weights=c.weights, variances=variances, L=c.L, mu=c.mu, heterogeneity=c.heterogeneity,
                  grad_sq_bound=G2)
        E_star = bounds.optimal_local_steps(clients_per_round=K, **kw)
        eps = FIG1A_TARGET[dataset] - c.optimal_value
        grid = np.unique(np.geomspace(1, 1e5, 400).round())
        kept = {name: bounds.rounds_to_accuracy(grid, eps, scheme="I", clients_per_round=K, init_dist_sq=d, **kw)
                for name, d in (("kept_paper_dist", None), ("kept_measured_dist", dist))}
        measured = measured_rounds(dataset)
        ours = measured[measured.source == "ours"].set_index("local_steps")["rounds"]
        best = float(ours.min()) if len(ours) else math.nan
        near = ours[ours <= best * (1 + config.near_optimal)].index if np.isfinite(best) else []
        a = c.weights**2 @ variances + c.L * c.heterogeneity + c.kappa * G2
        rows.append({"kind": "summary", "dataset": LABELS[dataset], "K": K, "L": c.L, "mu": c.mu, "kappa": c.kappa,
                     "Gamma": c.heterogeneity, "G2": G2, "sum_p2_sigma2": float(c.weights**2 @ variances),
                     "L_Gamma": c.L * c.heterogeneity, "kappa_G2": c.kappa * G2, "numerator": a,
                     "init_dist_sq": dist, "eps": eps, "E_star": E_star,
                     **{f"E_star_{name}": float(grid[np.argmin(v)]) for name, v in kept.items()},
                     "E_measured": float(ours.idxmin()) if len(ours) else math.nan,
                     "E_near_low": float(min(near)) if len(near) else math.nan,
                     "E_near_high": float(max(near)) if len(near) else math.nan,
                     "E_grid_low": float(ours.index.min()), "E_grid_high": float(ours.index.max()),
                     "rounds_min": best, "constants_s": info["elapsed_s"]})
        proxy = bounds.rounds_proxy(grid, clients_per_round=K, **kw)
        for source, x, y in [("eq. (8)", grid, proxy), *[(name, grid, v) for name, v in kept.items()],
                             *[(f"Fig. 1a {s}", g.local_steps, g.rounds) for s, g in measured.groupby("source")]]:
            y = np.asarray(y, dtype=float)
            curves.append(pd.DataFrame({"kind": "curve", "dataset": LABELS[dataset], "source": source,
                                        "local_steps": np.asarray(x, dtype=float), "value": y,
                                        "relative": y / np.min(y[np.isfinite(y) & (y > 0)])}))
    return pd.concat([pd.DataFrame(rows), *curves], ignore_index=True)


STYLES = {"eq. (8)": ("-", 1.6), "kept_paper_dist": (":", 1.2), "kept_measured_dist": ("-.", 1.2),
          "Fig. 1a ours": ("o-", 1.3), "Fig. 1a paper": ("s--", 1.0)}
NAMES = {"eq. (8)": "Li et al. eq. (8), unit constants",
         "kept_paper_dist": "Thm 2, constants kept, ‖w0−w*‖² ≤ 4G²/μ² (on eq. 8's curve)",
         "kept_measured_dist": "Thm 2, constants kept, measured ‖w0−w*‖²", "Fig. 1a ours": "Fig. 1a measured (ours)",
         "Fig. 1a paper": "Fig. 1a measured (paper)"}


def plot_optimal_e(data: pd.DataFrame, config: OptimalEConfig):
    """Rounds to target / its minimum against E (local steps), predicted and measured; E* marked."""
    import matplotlib.pyplot as plt

    summary = data[data.kind == "summary"].set_index("dataset")
    curves = data[data.kind == "curve"]
    datasets = list(summary.index)
    fig, axes = plt.subplots(1, len(datasets), figsize=(max(4.3 * len(datasets), 8.0), 3.9), squeeze=False)
    colors = dict(zip(STYLES, plt.rcParams["axes.prop_cycle"].by_key()["color"]))
    for ax, dataset in zip(axes[0], datasets):
        row = summary.loc[dataset]
        for source, (style, lw) in STYLES.items():
            part = curves[(curves.dataset == dataset) & (curves.source == source)].sort_values("local_steps")
            ax.plot(part.local_steps, part.relative, style, color=colors[source], lw=lw, ms=3, label=NAMES[source])
        ax.axvline(row.E_star, color=colors["eq. (8)"], lw=0.9)
        if np.isfinite(row.E_near_low):
            ax.axvspan(row.E_near_low, row.E_near_high * 1.0001, color=colors["Fig. 1a ours"], alpha=0.15, lw=0)
        ax.text(row.E_star, 0.97, f" E* = {row.E_star:.0f}", transform=ax.get_xaxis_transform(), fontsize=7,
                va="top", color=colors["eq. (8)"])
        ax.set(xscale="log", yscale="log", xlim=(1, 1e5), ylim=(0.8, 1e3),
               title=dataset + ("\n(measured minimum at the E grid's end: no optimum located)"
                                if row.E_measured >= row.E_grid_high or row.E_measured <= row.E_grid_low else ""),
               xlabel="local steps E",
               ylabel="rounds to target / minimum" if ax is axes[0, 0] else None)
    fig.suptitle("Li et al. (ICLR 2020) eq. (8), §3.4 (via the notes' Theorem 1): predicted optimal E vs Fig. 1a's "
                 "measured minimum "
                 f"(Scheme I, K = {config.clients_per_round}; band: within {config.near_optimal:.0%} of the minimum)",
                 fontsize=9)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=3, frameon=False)
    fig.tight_layout(rect=(0, 0.16, 1, 0.93))
    return fig


SOURCE = ("§6, Impact of E: \"We expect that Tϵ/E, the required communication round to achieve curtain accuracy, "
          "is a hyperbolic finction of E as Eqn. (8) indicates. [...] We empirically observe this phenomenon on the "
          "unbalanced datasets in Figure (a)a. The reason why the phenomenon does not appear in mnist balanced dataset "
          "requires future investigations.\"")


# Li et al. §6 expects eq. (8)'s trade-off on the unbalanced sets and says it "does not appear in mnist
# balanced": there the paper states nothing for E* to match (Figure 1a's claims test that it does not appear),
# so E* is shown in the figure and table, and no claim is made.
NO_TRADE_OFF = ("mnist balanced",)


def optimal_e_claims(data: pd.DataFrame, config: OptimalEConfig) -> list:
    """Per dataset on which §6 expects the trade-off: Li et al.'s eq. (8) E* against Figure 1a's measured
    optimum. A measured minimum at either end of the E grid locates no optimum (the curve has not turned), so
    there is nothing E* can match: FAIL."""
    summary = data[(data.kind == "summary") & ~data.dataset.isin(NO_TRADE_OFF)]
    claims = []
    for _, row in summary.iterrows():
        name = (f"{row.dataset}: Li et al.'s eq. (8) optimal E, from the estimated constants, is of the order of "
                "Figure 1a's measured optimum")
        if not np.isfinite(row.E_near_low):
            claims.append(check(name, False, "no measured rounds to compare with", source=SOURCE))
            continue
        low, high = row.E_near_low, row.E_near_high
        off = 0.0 if low <= row.E_star <= high else min(abs(math.log10(row.E_star / low)),
                                                         abs(math.log10(row.E_star / high)))
        at_edge = row.E_measured >= row.E_grid_high or row.E_measured <= row.E_grid_low
        grid = data[(data.kind == "curve") & (data.dataset == row.dataset) & (data.get("source") == "Fig. 1a ours")]
        inner = sorted(grid.get("local_steps", grid.index).unique())[1:-1]  # where an inner minimum can lie
        reach = max((abs(math.log10(row.E_star / e)) for e in inner), default=math.inf)
        claims.append(check(
            name, off <= config.orders and not at_edge,
            f"E* = {row.E_star:.0f} steps (κG² = {row.kappa_G2:.3g} is {row.kappa_G2 / row.numerator:.1%} of the "
            f"numerator, so E* ≈ √(κ/(1 + 1/K)) with κ = {row.kappa:.3g}: set by λ, not by the data's G² = "
            f"{row.G2:.3g}); measured: minimum {row.rounds_min:.0f} rounds at "
            f"E = {row.E_measured:.0f}, within {config.near_optimal:.0%} for E ∈ [{low:.0f}, {high:.0f}]"
            + (f" — at the end of the E grid [{row.E_grid_low:.0f}, {row.E_grid_high:.0f}]: the curve has not "
               "turned, no optimum is located" if at_edge else "")
            + f"; {off:.2f} decades apart. With every constant of Theorem 2 kept: E* = "
              f"{row.E_star_kept_paper_dist:.0f} (‖w0−w*‖² ≤ 4G²/μ²), {row.E_star_kept_measured_dist:.0f} "
              f"(measured ‖w0−w*‖² = {row.init_dist_sq:.3g})"
            + (f"; every E inside the grid lies within {reach:.2f} decades of E*, so the margin cannot fail on "
               "this grid once the minimum is inside it" if reach <= config.orders else ""),
            basis="powerless" if reach <= config.orders else "measured",
            margin=f"the measured minimum inside the E grid (not at either end) and E* within {config.orders:g} "
                   "decade(s) of the measured near-optimal range",
            source=SOURCE))
    return claims
