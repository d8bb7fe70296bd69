"""Charles & Konečný 2021 (AISTATS), Figure 9: the guaranteed MAML (e_K, γ ≤ 1/(KL+α)) frontiers
for several α."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pandas as pd

from replicate import theory as th
from replicate.report.claims import consistency
from replicate.experiments.charles2021.common import (SERVER_LABELS, quoted, _Profiled, _subset_claims, _swept_frontier,
                                                      _within, plot_frontiers, stated)


VISIBLE = 0.01  # a change of 1% of the unit ρ/ε axes: the least a reader can see on the figure


@dataclass(frozen=True)
class Fig9Config(_Profiled):
    """Figure 9: guaranteed MAML (e_K, γ ≤ 1/(KL+α)) frontiers for several α, on a fixed γ grid."""

    mu: float = 1.0
    condition: float = 100.0
    alphas: tuple[float, ...] = (0.0, 1.0, 10.0, 100.0)
    servers: tuple[str, ...] = ("gd", "nesterov", "heavyball")
    gamma_per_decade: int = 10
    steps_max: int = 1000
    steps_points: int = 120
    SMOKE: ClassVar[dict] = dict(steps_points=40)

    @property
    def deviations(self) -> tuple[str, ...]:
        return tuple(self._common_deviations((self.condition,), self.servers) + [
            f"α ∈ {{{', '.join(f'{a:g}' for a in self.alphas)}}}, K ∈ 1..{self.steps_max}; one fixed absolute γ grid "
            f"({self.gamma_per_decade} points per decade, truncated at 1/(KL+α)) for every α (PROPOSED: the paper's "
            "grid is lost, and only its truncation can make α matter, spec §6.8)"])


def fig9(config: Fig9Config) -> pd.DataFrame:
    L = config.condition * config.mu
    steps = th.steps_grid(config.steps_max, config.steps_points)
    grid = np.logspace(-7, 0, 7 * config.gamma_per_decade + 1) / L
    frames = []
    for server in config.servers:
        for alpha in config.alphas:
            frames.append(_swept_frontier(config.mu, L, "maml", alpha,
                                          lambda K, a=alpha: grid[grid <= th.gamma_max_maml(L, K, a)], steps, server,
                                          panel=SERVER_LABELS[server], series=f"α = {alpha:g}", kind="analytic"))
    return pd.concat(frames, ignore_index=True)


@quoted
def fig9_claims(data: pd.DataFrame, config: Fig9Config):
    gaps, lows, highs, increasing = _subset_claims(data, config)
    L = config.condition * config.mu
    alpha_max = max(config.alphas)
    lost_maml = lows[("gd", alpha_max)] - lows[("gd", 0.0)]
    lost_fedprox = float(th.rho_of_kappa(th.kappa_min_fedavg(config.mu, L, alpha_max)) - th.rho_of_kappa(1.0))
    edges = [float(th.kappa_maml(config.mu, L, th.gamma_max_maml(L, config.steps_max, a), config.steps_max, a))
             for a in config.alphas]
    return [
        consistency("Adding a proximal term only changes how much of the MAML frontier is traversed", max(gaps) < 1e-3,
              f"largest vertical gap of an α > 0 point to the α = 0 MAML curve: {max(gaps):.1e}"),
        consistency("The α-effect is a subdued version of Fig. 3: visible, but smaller than FedProx's",
              all(lows[("gd", a)] >= lows[("gd", 0.0)] for a in config.alphas)
              and VISIBLE <= lost_maml < 0.25 * lost_fedprox,
              f"loss of the smallest ρ (GD) at α = {alpha_max:g}: MAML {lost_maml:.3f} vs FedProx (Fig. 3) "
              f"{lost_fedprox:.3f}" + ("; the α curves coincide: no α effect at all" if lost_maml < VISIBLE else ""),
              margin=f"MAML's loss ≥ {VISIBLE:g} (visible on the unit axes) and < 0.25 × FedProx's"),
        consistency("At the regime edge γ = 1/(KL+α), κ does not depend on α (DERIVED, spec §6.8)",
              max(edges) - min(edges) < 1e-9 * max(edges),
              f"κ at the edge for K = {config.steps_max}: {edges[0]:.4f} for every α"),
    ]


def plot_fig9(data: pd.DataFrame):
    return plot_frontiers(data, endpoints=True, title="Fig. 9 — guaranteed MAML frontiers for several α"
                          + _within(stated(data, condition="L/μ")))
