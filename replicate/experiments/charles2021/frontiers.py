"""Charles & Konečný 2021 (AISTATS), Figures 1-4: the analytic frontiers.

Figure 1 (FedAvg: vary γ at fixed K vs vary K at fixed γ), Figure 2 (FedAvg frontier under
the three ServerOpts), Figure 3 (FedProx frontiers for several α) and Figure 4 (FedAvg vs
MAML in their guaranteed regimes).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pandas as pd

from replicate import theory as th
from replicate.report.claims import consistency
from replicate.experiments.charles2021.common import (SERVER_LABELS, quoted, _curve, _intercept, _panel, _points,
                                                      _Profiled, _subset_claims, _swept_frontier, _universal,
                                                      _within, plot_frontiers, stated)


@dataclass(frozen=True)
class Fig1Config(_Profiled):
    """Figure 1: FedAvg (a = 1_K, α = 0, server GD), varying γ at fixed K and K at fixed γ."""

    mu: float = 1.0
    conditions: tuple[float, ...] = (10.0, 100.0, 1000.0)  # L/μ, one panel each
    fixed_steps: tuple[int, ...] = (10, 100)  # K of the "vary γ" curves
    fixed_gamma_L: tuple[float, ...] = (0.1, 0.5)  # γ·L of the "vary K" curves
    gamma_points: int = 400
    steps_max: int = 100_000
    steps_points: int = 400
    SMOKE: ClassVar[dict] = dict(gamma_points=80, steps_points=120)

    @property
    def deviations(self) -> tuple[str, ...]:
        return tuple(self._common_deviations(self.conditions) + [
            f"fixed K ∈ {{{', '.join(map(str, self.fixed_steps))}}} for the γ-sweeps, fixed γ ∈ "
            f"{{{', '.join(f'{g:g}/L' for g in self.fixed_gamma_L)}}} for the K-sweeps (K = 1..{self.steps_max}) "
            "(PROPOSED)"])


def fig1(config: Fig1Config) -> pd.DataFrame:
    frames = []
    for condition in config.conditions:
        L = condition * config.mu
        for K in config.fixed_steps:
            gammas = th.gamma_grid(th.gamma_max_fedavg(L), config.gamma_points)
            frames.append(_points(th.kappa_fedavg(config.mu, L, gammas, K), condition, panel=_panel(condition),
                                  series=f"vary γ, K = {K}", kind="analytic", sweep="gamma", gamma=gammas, K=K))
        for gamma_L in config.fixed_gamma_L:
            steps = th.steps_grid(config.steps_max, config.steps_points)
            frames.append(_points(th.kappa_fedavg(config.mu, L, gamma_L / L, steps), condition,
                                  panel=_panel(condition), series=f"vary K, γ = {gamma_L:g}/L", kind="analytic",
                                  sweep="K", gamma=gamma_L / L, K=steps))
    return pd.concat(frames, ignore_index=True)


@quoted
def fig1_claims(data: pd.DataFrame, config: Fig1Config):
    gaps, short, reach, nonlinearity = [], [], [], []
    for condition in config.conditions:
        part = data[data["condition"] == condition]
        vary_K = [s for s in pd.unique(part["series"]) if s.startswith("vary K")]
        vary_gamma = [s for s in pd.unique(part["series"]) if s.startswith("vary γ")]
        for s in vary_gamma:
            for r in vary_K:
                gaps.append(np.nanmax(th.gap_to_curve(*_curve(part, series=s), *_curve(part, series=r))))
        K = min(config.fixed_steps)
        floor = float(th.rho_of_kappa(th.kappa_min_fedavg_fixed_K(config.mu, condition * config.mu, K)))
        short.append((part[part["series"] == f"vary γ, K = {K}"]["rho"].min(), floor))
        for r in vary_K:
            rows = part[part["series"] == r]
            best = rows.loc[rows["rho"].idxmin()]
            reach.append((best["rho"], abs(best["eps"] - _intercept(condition))))
        rho, eps = _curve(part, series=vary_K[0])
        chord = eps.max() * (1 - rho / rho.max())
        nonlinearity.append(np.max(np.abs(eps - chord)) / eps.max())
    return [
        consistency("Varying γ at fixed K and varying K at fixed γ give nearly identical curves (where both exist)",
              max(gaps) < 5e-3, f"largest vertical gap between a γ-sweep and a K-sweep: {max(gaps):.1e} "
              "(linear interpolation between the integer K = 1 and K = 2 points)"),
        consistency("Only growing K reaches ρ = 0 (one-shot averaging, at the ε-intercept of the frontier)",
              all(r < 1e-3 and e < 1e-3 for r, e in reach),
              "smallest ρ of the K-sweeps: " + ", ".join(f"{r:.1e}" for r, _ in reach)),
        consistency(f"Varying γ at fixed K = {min(config.fixed_steps)} stops short of ρ = 0",
              all(lo >= floor - 1e-12 and lo > 0.1 for lo, floor in short),
              "smallest ρ of the γ-sweeps per L/μ: " + ", ".join(f"{lo:.3f} (limit {fl:.3f})" for lo, fl in short)),
        consistency("The trade-off becomes closer to linear as L/μ decreases",
              bool(np.all(np.diff(np.asarray(nonlinearity)[np.argsort(config.conditions)]) > 0)),
              "max distance from the chord / ε-intercept per L/μ: "
              + ", ".join(f"{c:g}: {v:.3f}" for c, v in zip(config.conditions, nonlinearity))),
    ]


def plot_fig1(data: pd.DataFrame):
    return plot_frontiers(data, endpoints=True,
                          title="Fig. 1 — FedAvg frontier: vary γ (fixed K) vs vary K (fixed γ), server GD")


@dataclass(frozen=True)
class Fig2Config(_Profiled):
    """Figure 2: FedAvg frontier (κ ∈ [1, L/μ]) under the three ServerOpts of Table 2."""

    mu: float = 1.0
    conditions: tuple[float, ...] = (10.0, 100.0, 1000.0)
    servers: tuple[str, ...] = ("gd", "nesterov", "heavyball")
    kappa_points: int = 600
    SMOKE: ClassVar[dict] = dict(kappa_points=120)

    @property
    def deviations(self) -> tuple[str, ...]:
        return tuple(self._common_deviations(self.conditions, self.servers) + [
            "curves drawn over the whole attainable κ ∈ [1, L/μ] (FedAvg over all γ < 1/L and K ≥ 1)"])


def fig2(config: Fig2Config) -> pd.DataFrame:
    frames = []
    for condition in config.conditions:
        for server in config.servers:
            curve = _universal(condition, server, config.kappa_points, _panel(condition))
            curve["series"] = SERVER_LABELS[server]
            frames.append(curve)
    return pd.concat(frames, ignore_index=True)


@quoted
def fig2_claims(data: pd.DataFrame, config: Fig2Config):
    ordered, meet, speedups, defects = True, [], [], {}
    for condition in config.conditions:
        part = data[data["condition"] == condition]
        rho = {s: part[part["server"] == s].sort_values("kappa")["rho"].to_numpy() for s in config.servers}
        eps = {s: part[part["server"] == s].sort_values("kappa")["eps"].to_numpy() for s in config.servers}
        ordered &= bool(np.all(rho["heavyball"][1:] < rho["nesterov"][1:])
                        and np.all(rho["nesterov"][1:] < rho["gd"][1:]))
        meet.append(max(max(abs(rho[s][0]), abs(eps[s][0] - _intercept(condition))) for s in config.servers))
        speedups.append(np.log(rho["heavyball"][-1]) / np.log(rho["gd"][-1]))
        for s in config.servers:
            defects[(condition, s)] = th.mirror_defect(rho[s], eps[s], condition, s).max()
    hb = max(v for (c, s), v in defects.items() if s == "heavyball")
    others = min(v for (c, s), v in defects.items() if s != "heavyball")
    return [
        consistency("Strict ordering of frontiers: heavy-ball below Nesterov below no momentum", ordered,
              "at every κ > 1 in every panel: ρ_HB < ρ_Nesterov < ρ_GD" if ordered else "ordering violated"),
        consistency("The benefit of momentum grows with L/μ", bool(np.all(np.diff(speedups) > 0)),
              "rounds-per-decade ratio GD/HB at ε = 0 per L/μ: " + ", ".join(f"{v:.1f}" for v in speedups)),
        consistency("All ServerOpts meet at ρ = 0 with one-shot averaging's ε (κ = 1 gives ρ = 0 for every "
                    "ServerOpt by Table 2)", max(meet) < 1e-12,
              f"largest distance of the κ = 1 points from (0, ε(1)): {max(meet):.1e}"),
        consistency("The heavy-ball frontier is symmetric about ρ = ε (GD and Nesterov are not); follows from the "
                    "reconstructed ε of eq. (17) and the heavy-ball ρ = (√κ−1)/(√κ+1)",
              hb < 1e-10 and others > 1e-2,
              f"mirror defect: heavy-ball {hb:.1e}, smallest of GD/Nesterov {others:.3f}"),
    ]


def plot_fig2(data: pd.DataFrame):
    return plot_frontiers(data, diagonal=True, title="Fig. 2 — FedAvg frontier under server momentum")


@dataclass(frozen=True)
class Fig3Config(_Profiled):
    """Figure 3: FedProx frontiers for several α (sweeping γ < 1/(L+α) and K), per ServerOpt."""

    mu: float = 1.0
    condition: float = 100.0
    alphas: tuple[float, ...] = (0.0, 1.0, 10.0, 100.0)
    servers: tuple[str, ...] = ("gd", "nesterov", "heavyball")
    gamma_points: int = 200
    steps_max: int = 100_000
    steps_points: int = 200
    SMOKE: ClassVar[dict] = dict(gamma_points=50, steps_points=50)

    @property
    def deviations(self) -> tuple[str, ...]:
        return tuple(self._common_deviations((self.condition,), self.servers) + [
            f"α ∈ {{{', '.join(f'{a:g}' for a in self.alphas)}}} (PROPOSED); frontier = Pareto set of a "
            f"{self.gamma_points}×{self.steps_points} grid of γ ∈ (0, 1/(L+α)) and K ∈ 1..{self.steps_max}"])


def fig3(config: Fig3Config) -> pd.DataFrame:
    L = config.condition * config.mu
    steps = th.steps_grid(config.steps_max, config.steps_points)
    frames = []
    for server in config.servers:
        for alpha in config.alphas:
            frames.append(_swept_frontier(
                config.mu, L, "fedavg", alpha, lambda K, a=alpha: th.gamma_grid(th.gamma_max_fedavg(L, a),
                                                                                config.gamma_points),
                steps, server, panel=SERVER_LABELS[server], series=f"α = {alpha:g}", kind="analytic"))
    return pd.concat(frames, ignore_index=True)


@quoted
def fig3_claims(data: pd.DataFrame, config: Fig3Config):
    gaps, lows, highs, increasing = _subset_claims(data, config)
    L = config.condition * config.mu
    expected = {a: float(th.rho_of_kappa(th.kappa_min_fedavg(config.mu, L, a))) for a in config.alphas}
    limit_error = max(abs(lows[("gd", a)] - expected[a]) for a in config.alphas)
    spread = max(max(highs[(s, a)] for a in config.alphas) - min(highs[(s, a)] for a in config.alphas)
                 for s in config.servers)
    return [
        consistency("The α > 0 frontier is a subset of the α = 0 frontier", max(gaps) < 1e-3,
              f"largest vertical gap of an α > 0 point to the α = 0 curve: {max(gaps):.1e}"),
        consistency("As α grows the frontier becomes a smaller subset (FedProx cannot reach one-shot averaging)",
              increasing and min(lows[("gd", a)] for a in config.alphas if a > 0) > 0.1,
              "smallest ρ (GD) per α: " + ", ".join(f"α={a:g}: {lows[('gd', a)]:.3f}" for a in config.alphas)),
        consistency("The truncation point is κ_min(α) = L(α+μ)/(μ(α+L)) (DERIVED, spec §6.3)", limit_error < 5e-3,
              f"largest |ρ_min − ρ(κ_min(α))| (GD): {limit_error:.1e}"),
        consistency("Every α keeps the slow end of the frontier (γ → 0 gives κ = L/μ, ε = 0)", spread < 1e-3,
              f"largest ρ differs across α by at most {spread:.1e}"),
    ]


def plot_fig3(data: pd.DataFrame):
    title = ", ".join(filter(None, ["Fig. 3 — FedProx: frontiers for several α (dot: where each stops)",
                                    stated(data, condition="L/μ")]))
    return plot_frontiers(data, endpoints=True, title=title)


@dataclass(frozen=True)
class Fig4Config(_Profiled):
    """Figure 4: guaranteed frontiers of FedAvg (1_K, γ < 1/L) and MAML (e_K, γ ≤ 1/(KL)), per ServerOpt."""

    mu: float = 1.0
    condition: float = 100.0
    servers: tuple[str, ...] = ("gd", "nesterov", "heavyball")
    gamma_points: int = 200
    steps_max: int = 10_000
    steps_points: int = 200
    SMOKE: ClassVar[dict] = dict(gamma_points=50, steps_points=50)

    @property
    def deviations(self) -> tuple[str, ...]:
        return tuple(self._common_deviations((self.condition,), self.servers) + [
            f"α = 0; K ∈ 1..{self.steps_max} and γ on a {self.gamma_points}-point log grid up to each regime's "
            "bound (PROPOSED)"])


def fig4(config: Fig4Config) -> pd.DataFrame:
    L = config.condition * config.mu
    steps = th.steps_grid(config.steps_max, config.steps_points)
    frames = []
    for server in config.servers:
        frames.append(_swept_frontier(config.mu, L, "fedavg", 0.0,
                                      lambda K: th.gamma_grid(th.gamma_max_fedavg(L), config.gamma_points), steps,
                                      server, panel=SERVER_LABELS[server], series="FedAvg (1_K)", kind="analytic"))
        frames.append(_swept_frontier(config.mu, L, "maml", 0.0,
                                      lambda K: np.append(th.gamma_grid(th.gamma_max_maml(L, K), config.gamma_points),
                                                          th.gamma_max_maml(L, K)),
                                      steps, server, panel=SERVER_LABELS[server], series="MAML (e_K)", kind="analytic"))
    return pd.concat(frames, ignore_index=True)


@quoted
def fig4_claims(data: pd.DataFrame, config: Fig4Config):
    gaps, ranges = [], []
    for server in config.servers:
        part = data[data["server"] == server]
        fedavg, maml = part[part["series"] == "FedAvg (1_K)"], part[part["series"] == "MAML (e_K)"]
        gaps.append(np.nanmax(th.gap_to_curve(maml["rho"], maml["eps"], fedavg["rho"], fedavg["eps"])))
        ranges.append((maml["kappa"].min() / config.condition, fedavg["kappa"].min(), maml["eps"].max(),
                       fedavg["eps"].max()))
    edge = float(th.kappa_min_maml(config.mu, config.condition * config.mu, config.steps_max)) / config.condition
    return [
        consistency("For each ServerOpt the MAML frontier lies on the FedAvg frontier", max(gaps) < 1e-3,
              f"largest vertical gap of a MAML point to the FedAvg curve: {max(gaps):.1e}"),
        consistency("The MAML frontier is a strict subset near ε = 0 (κ ≥ ≈0.37 L/μ; FedAvg reaches κ → 1)",
              all(abs(m - edge) < 1e-3 and f < 1.01 and me < fe - 0.2 for m, f, me, fe in ranges),
              f"MAML smallest κ/(L/μ) = {ranges[0][0]:.3f} (Lemma 4 edge {edge:.3f}); FedAvg smallest κ = "
              f"{ranges[0][1]:.4f}; largest ε MAML {ranges[0][2]:.3f} vs FedAvg {ranges[0][3]:.3f}"),
    ]


def plot_fig4(data: pd.DataFrame):
    return plot_frontiers(data, endpoints=True, title="Fig. 4 — FedAvg vs MAML, guaranteed regimes"
                          + _within(stated(data, condition="L/μ")))
