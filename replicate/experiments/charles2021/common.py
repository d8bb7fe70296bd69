"""Charles & Konečný 2021 (AISTATS, arXiv 2103.05032), "Convergence and Accuracy Trade-Offs
in Federated Learning and Meta-Learning": what every figure and table shares.

The profile base class of the figure configs (``_Profiled``) with the common deviations,
labels, (ρ, ε) points and frontier helpers, the swept (γ, K) frontier of Figures 3, 4 and 9,
deterministic LocalUpdate runs through the engine (``run_local_update``) and the frontier
plot (``plot_frontiers``). How a figure is laid out (config, data, claims, plot) and why every
numerical default is PROPOSED: the package docstring.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch

from replicate.report import plotting  # noqa: F401  (applies the project's plot style)
from replicate import theory as th
from replicate.experiments import knobs
from replicate.runs import cache
from replicate.report.claims import quoting
from replicate.fl.algorithms import LocalUpdate
from replicate.runs.config import RunConfig
from replicate.fl.problems import QuadraticFederatedProblem


SERVER_LABELS = {"gd": "no momentum", "nesterov": "Nesterov", "heavyball": "heavy-ball"}

EPS_DEVIATION = ("ε is eq. (17) as reconstructed in spec §5 (DERIVED): ζ and the constant of Lemma 5 are "
                 "dropped, ε = (√(L/μ) − √κ)/(√(L/μ) + √κ)")
NESTEROV_DEVIATION = ("Nesterov row of Table 2 is lost; we use Lessard et al.'s optimal tuning, "
                      "ρ = 1 − 2/√(3κ+1) (PROPOSED, spec §4)")


@dataclass(frozen=True)
class _Profiled(knobs.FigureConfig):
    """Profile handling shared by every figure config: ``smoke`` only lowers resolution."""

    profile: str = "paper"
    SMOKE: ClassVar[dict] = {}

    CHOICES: ClassVar[dict] = {"servers": tuple(SERVER_LABELS), "server": tuple(SERVER_LABELS)}
    ZERO_ALLOWED: ClassVar[tuple] = ("alphas", "zeta")

    @classmethod
    def smoke(cls):
        return cls(**cls.SMOKE, profile="smoke")

    @classmethod
    def for_profile(cls, profile: str = "smoke", **overrides):
        """The ``paper`` or ``smoke`` settings with checked overrides (``None`` = the profile's value)."""
        return dataclasses.replace(super().for_profile(profile, **overrides), profile=profile)

    def _common_deviations(self, conditions, servers=("gd",)) -> list[str]:
        notes = [EPS_DEVIATION,
                 f"μ = {self.mu:g} and L/μ ∈ {{{', '.join(f'{c:g}' for c in conditions)}}} (PROPOSED; values lost)"]
        if "nesterov" in servers:
            notes.append(NESTEROV_DEVIATION)
        return notes


def _panel(condition: float) -> str:
    return f"L/μ = {condition:g}"


def _points(kappa, condition, server="gd", omega=None, **columns) -> pd.DataFrame:
    """Rows (ρ, ε) for a κ-array at L/μ = ``condition`` plus the sweep parameters as extra columns."""
    # κ ≥ 1; closed forms round to 1 − 1e-16, or to L/μ ± 1e-14 at the γ → 0 end, in a CPU-dependent
    # last bit, and such ties must not decide which (γ, K) row a curve keeps (figures --check compares
    # across CPUs). Only round-off is snapped: simulated MAML κ may legitimately exceed L/μ.
    kappa = np.maximum(np.asarray(kappa, dtype=float), 1.0)
    kappa = np.where(np.abs(kappa - condition) <= 1e-9 * condition, float(condition), kappa)
    rho, eps = th.operating_point(kappa, condition, server, omega=omega)
    frame = pd.DataFrame({"kappa": kappa, "rho": rho, "eps": eps,
                          "condition": condition, "server": server})
    for name, value in columns.items():
        frame[name] = value
    return frame


def _universal(condition, server, n, panel, kappa_min=1.0) -> pd.DataFrame:
    """The frontier curve κ ↦ (ρ, ε) over [κ_min, L/μ] (spec §5, key structural fact)."""
    return _points(th.kappa_grid(kappa_min, condition, n), condition, server, panel=panel,
                   series="FedAvg frontier (any K, γ)", kind="analytic")


def _curve(data, **where):
    part = data
    for key, value in where.items():
        part = part[part[key] == value]
    return part["rho"].to_numpy(), part["eps"].to_numpy()


def _intercept(condition):
    """ε at κ = 1: where every FedAvg frontier meets ρ = 0 (one-shot averaging)."""
    return float(th.eps_of_kappa(1.0, condition))


def _thin(frame: pd.DataFrame, n: int) -> pd.DataFrame:
    """At most n rows of a curve sorted by ρ, evenly spaced in arc length, both ends kept."""
    if len(frame) <= n:
        return frame
    steps = np.hypot(np.diff(frame["rho"].to_numpy()), np.diff(frame["eps"].to_numpy()))
    arc = np.concatenate([[0.0], np.cumsum(steps)])
    keep = np.unique(np.searchsorted(arc, np.linspace(0.0, arc[-1], n)).clip(0, len(frame) - 1))
    return frame.iloc[np.union1d(keep, [0, len(frame) - 1])]


def _swept_frontier(mu, L, family, alpha, gammas_for, steps, server, curve_points=600, **columns) -> pd.DataFrame:
    """Pareto-optimal (ρ, ε) points of a (γ, K)-sweep of a = 1_K or e_K at proximal strength α,
    thinned to ``curve_points`` rows for plotting."""
    kappas, gammas, Ks = [], [], []
    for K in steps:
        g = gammas_for(K)
        kappa_of = th.kappa_fedavg if family == "fedavg" else th.kappa_maml
        kappas.append(kappa_of(mu, L, g, K, alpha))
        gammas.append(g)
        Ks.append(np.full(g.size, K))
    frame = _points(np.concatenate(kappas), L / mu, server, gamma=np.concatenate(gammas), K=np.concatenate(Ks),
                    alpha=alpha, **columns)
    front = frame[th.pareto_mask(frame["rho"], frame["eps"])].sort_values("rho", ascending=False, kind="stable")
    return _thin(front, curve_points)


def _subset_claims(data, config):
    gaps, lows, highs = [], {}, {}
    for server in config.servers:
        part = data[data["server"] == server]
        base = _curve(part, alpha=0.0)
        for alpha in config.alphas:
            rho, eps = _curve(part, alpha=alpha)
            lows[(server, alpha)], highs[(server, alpha)] = rho.min(), rho.max()
            if alpha > 0:
                gaps.append(np.nanmax(th.gap_to_curve(rho, eps, *base)))
    increasing = all(np.all(np.diff([lows[(s, a)] for a in sorted(config.alphas)]) >= -1e-12) for s in config.servers)
    return gaps, lows, highs, increasing


def _rounds_for(rho: float, reach: float = 1e-13) -> int:
    """A run long enough for the error to fall to ``reach`` (the predicted ρ only sets the budget)."""
    return int(np.ceil(1.3 * np.log(reach) / np.log(max(rho, 1e-3)))) + 20


def local_update_config(a, gamma: float, server: "th.ServerOpt", rounds: int, alpha: float = 0.0) -> RunConfig:
    """Deterministic LocalUpdate (full participation, full gradients) as a run config on a given problem."""
    algorithm = LocalUpdate(server_lr=server.lr, a=tuple(float(v) for v in a), momentum=server.momentum,
                            nesterov=server.nesterov, alpha=alpha)
    return RunConfig(dataset="given", algorithm=algorithm, local_steps=len(a), batch_size=None, client_lr=gamma,
                     lr_schedule="constant", weight_decay=0.0, clip_norm=None, rounds=rounds)


def run_local_update(problem, x0, a, gamma: float, server: "th.ServerOpt", rounds: int, alpha: float = 0.0):
    """LocalUpdate on quadratic clients (``QuadraticClients``) through the package's one run path
    (uncached: the problem is built here); returns the iterates x_0..x_T, (T+1, d)."""
    engine_problem = QuadraticFederatedProblem(problem, x0=torch.as_tensor(np.asarray(x0)), record_iterates=True)
    history = cache.run(local_update_config(a, gamma, server, rounds, alpha), problem=engine_problem,
                        use_cache=False, progress=False)
    return torch.tensor(history[[f"x{i}" for i in range(problem.dim)]].to_numpy())


def stated(data: pd.DataFrame, **symbols: str) -> str:
    """The settings the data holds one value of, as a title states them: ``stated(data, condition="L/μ", K="K")``
    → "L/μ = 100, K = 100" (a setting the figure's knobs gave several values is left out)."""
    return ", ".join(f"{symbol} = {data[column].dropna().iloc[0]:g}" for column, symbol in symbols.items()
                     if data[column].nunique() == 1)


def _within(text: str) -> str:
    """`` (text)`` after a title, or nothing."""
    return f" ({text})" if text else ""


def plot_frontiers(data: pd.DataFrame, *, hue: str = "series", facet: str = "panel", title: str = "",
                   diagonal: bool = False, endpoints: bool = False, ncols: int | None = None):
    """Frontier panels in the (ρ, ε) square, lines drawn in row order (curves may turn back).

    Rows with ``kind == "measured"`` are drawn as markers, the others as lines, wider for
    earlier series so that coinciding curves stay visible. ``endpoints`` marks the
    smallest-ρ end of each curve (where a sweep stops short of ρ = 0).
    """
    panels = list(pd.unique(data[facet]))
    ncols = ncols or min(len(panels), 3)
    nrows = int(np.ceil(len(panels) / ncols))
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.5 * ncols, 3.4 * nrows), squeeze=False)
    labels = list(pd.unique(data[hue]))
    colours = dict(zip(labels, plt.rcParams["axes.prop_cycle"].by_key()["color"] * 3))
    styles = ["-", "--", "-.", ":"]
    for ax, panel in zip(axes.flat, panels):
        part = data[data[facet] == panel]
        series = list(pd.unique(part[hue]))
        for i, label in enumerate(series):
            rows = part[part[hue] == label]
            if rows["kind"].iloc[0] == "measured":
                ax.plot(rows["rho"], rows["eps"], ls="none", marker="o", ms=4.5, mfc="none", mew=1.1,
                        color=colours[label], label=str(label), zorder=3)
                continue
            width = 1.2 + 1.6 * (len(series) - 1 - i) / max(len(series) - 1, 1)
            ax.plot(rows["rho"], rows["eps"], color=colours[label], ls=styles[i % len(styles)], lw=width,
                    alpha=0.9, label=str(label) + _coincides(rows, part, hue, series[:i]))
            if endpoints:
                end = rows.loc[rows["rho"].idxmin()]
                ax.plot(end["rho"], end["eps"], marker="o", ms=4, color=colours[label])
        if diagonal:
            ax.plot([0, 1], [0, 1], color="0.6", lw=0.7, ls=":", label="ρ = ε")
        ax.set(xlim=(-0.02, 1.02), ylim=(-0.02, 1.02), xlabel="convergence rate ρ", ylabel="suboptimality ε",
               title=str(panel), aspect="equal")
        ax.legend(frameon=False, fontsize=6.5, loc="best")
    for ax in list(axes.flat)[len(panels):]:
        ax.set_visible(False)
    if title:
        fig.suptitle(title if title.startswith("Charles") else f"Charles & Konečný 2021, {title}")
    fig.tight_layout()
    return fig


def _coincides(rows: pd.DataFrame, part: pd.DataFrame, hue: str, earlier: list) -> str:
    """A legend note when a curve lies on an earlier one (within 1e-3 in ε wherever both exist),
    so that a reader knows the hidden curve is there."""
    for other in earlier:
        ref = part[part[hue] == other]
        if ref["kind"].iloc[0] == "measured":
            continue
        gap = th.gap_to_curve(rows["rho"], rows["eps"], ref["rho"], ref["eps"])
        if np.isfinite(gap).mean() > 0.5 and np.nanmax(gap) < 1e-3:
            return f" (lies on {other})"
    return ""


# ---- the seed sentences the frontier claims test (§5 and App. D of the paper) ---------------------------

_S5 = "§5 (Figure 1): "
SOURCES = {
    "Varying γ at fixed K and varying K at fixed γ": _S5 + "\"When [...], we obtain nearly identical curves.\"",
    "Only growing K reaches ρ = 0": _S5 + "\"Intuitively, [K → ∞] recovers one-shot averaging while [γ → ∞] does "
                                          "not.\"",
    "Varying γ at fixed K": _S5 + "\"except that when we fix [K] and vary [γ], we do not reach [ρ = 0].\"",
    "The trade-off becomes closer to linear": _S5 + "\"Notably, the convergence-accuracy trade-off becomes closer to "
                                                    "a linear trade-off as [L/μ] decreases.\"",
    "Strict ordering of frontiers": "§5, Impact of Server Momentum: \"We see a strict ordering of the server "
                                    "optimization methods. Heavy-ball momentum is better than Nesterov momentum, which "
                                    "is better than no momentum.\"",
    "The benefit of momentum grows": "§5, Impact of Server Momentum: \"the benefit of momentum is more pronounced as "
                                     "[L/μ] increases.\"",
    "All ServerOpts meet at ρ = 0": "§5, Impact of Server Momentum: \"as [K → ∞], we recover one-shot averaging, which "
                                    "converges in a single communication round with or without momentum.\"",
    "The heavy-ball frontier is symmetric": "§5, Impact of Server Momentum: \"The Pareto frontiers for heavy-ball "
                                            "momentum appear to be symmetric about the line [ρ = ε].\"",
    "The α > 0 frontier is a subset": "§5, Proximal Client Updates: \"the frontier for [α > 0] was simply a subset of "
                                      "the frontier for [α = 0].\"",
    "As α grows the frontier becomes": "§5, Proximal Client Updates: \"As [α] increases, the frontier becomes a "
                                       "smaller subset [...] FedProx cannot recover one-shot averaging.\"",
    "For each ServerOpt the MAML frontier": "§5, Comparing MAML to FedAvg: \"For each ServerOpt, the MAML frontier is "
                                            "a subset of the FedAvg frontier.\"",
    "The MAML frontier is a strict subset": "§5, Comparing MAML to FedAvg: \"In Figure 4 this causes the frontier for "
                                            "[MAML] to be more restrictive than for [FedAvg].\"",
    "MAML and FedAvg frontiers are identical": "§5, Comparing MAML to FedAvg: \"The Pareto frontiers are identical for "
                                               "small [γ] (mirroring Figure 4), but diverge when [γ > 1/(KL)].\"",
    "Beyond γ = 1/(KL+α)": "§5, Comparing MAML to FedAvg: \"The frontier for MAML then moves further from 0.\"",
    "The cusp of the MAML curve": "§5, Comparing MAML to FedAvg: \"This seems to occur at the same suboptimality [...] "
                                  "as the intersection of the FedAvg curve with the [ε]-axis.\"",
    "The simulated MAML frontier is noisy": "§5, Comparing MAML to FedAvg: \"The MAML frontier is noisy for [small d] "
                                            "[...], but stabilizes for [large d].\"",
    "The larger L/μ, the sooner MAML": "App. D.1 (Figure 7): \"for small [L/μ], we see that the MAML curve recovers "
                                       "most of the FedAvg curve before diverging, while for large [L/μ], the two "
                                       "diverge almost immediately.\"",
    "Momentum helps convergence everywhere": "App. D.1 (Figure 8): \"we see that momentum helps convergence in all "
                                             "cases, FedAvg or MAML.\"",
    "Momentum makes the region": "App. D.1 (Figure 8): \"As we add momentum, the region to the right of the MAML curve "
                                 "becomes more convex, becoming more rounded for heavy-ball momentum than for Nesterov "
                                 "momentum.\"",
    "Adding a proximal term only changes": "App. D.2 (Figure 9): \"adding a proximal term simply alters how much of "
                                           "the Pareto frontier is traversed; it does not change the fundamental "
                                           "shape.\"",
    "The α-effect is a subdued version": "App. D.2 (Figure 9): \"We see a similar, though more subdued, version of the "
                                         "behavior in Figure 3.\"",
    "Increasing α shrinks": "App. D.2 (Figure 10): \"while increasing [α] shrinks the space of the Pareto curve of "
                            "FedAvg, it does not seem to change the MAML curves by a meaningful amount.\"",
    "The MAML curves barely change with α": "App. D.2 (Figure 10): \"it does not seem to change the MAML curves by a "
                                            "meaningful amount.\"",
}


quoted = quoting(SOURCES, prefix=True)  # attaches the seed sentence each claim tests (by its opening words)
