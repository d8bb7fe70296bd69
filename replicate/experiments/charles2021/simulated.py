"""Charles & Konečný 2021 (AISTATS), Figures 5, 7, 8 and 10: frontiers simulated on one random
quadratic (Appendix D.1).

Figure 5 (MAML beyond γ = 1/(KL) vs FedAvg, per d), Figure 7 (per L/μ), Figure 8 (per
ServerOpt) and Figure 10 (FedAvg/FedProx and MAML for several α).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pandas as pd

from replicate import theory as th
from replicate.report.claims import consistency
from replicate.experiments.charles2021.common import (SERVER_LABELS, quoted, _intercept, _panel, _points, _Profiled,
                                                      _universal, _within, plot_frontiers, stated)


VISIBLE = 0.01  # a change of 1% of the unit ρ/ε axes: the least a reader can see on the figure
MOST, IMMEDIATELY = 0.5, 0.15  # Fig. 7's words as shares of the FedAvg ε-range that MAML follows


def _simulated(mu, L, K, alpha, eig, gamma_points, server, **columns) -> pd.DataFrame:
    """FedAvg (1_K) and MAML (e_K) over γ ∈ (0, 1/(L+α)) on one random spectrum (Appendix D.1)."""
    # stop at 0.99/(L+α): closer to the edge q(L) = (1-γ(α+L))^{K-1} underflows for large K
    gammas = th.gamma_grid(th.gamma_max_fedavg(L, alpha), gamma_points, lowest=1e-3, highest=0.99)
    frames = []
    for family, label in (("fedavg", f"FedAvg (1_K), K = {K}"), ("maml", f"MAML (e_K), K = {K}")):
        kappa, omega = th.family_condition(eig, family, gammas, K, alpha)
        frames.append(_points(kappa, L / mu, server, omega=omega, series=label, kind="simulated", family=family,
                              gamma=gammas, K=K, alpha=alpha,
                              regime=np.where(gammas <= th.gamma_max_maml(L, K, alpha), "guaranteed", "beyond"),
                              **columns))
    return pd.concat(frames, ignore_index=True)


def _cusp_and_divergence(part, condition):
    """(ε at the MAML curve's smallest ρ, ε where MAML leaves the FedAvg frontier)."""
    maml = part[part["family"] == "maml"]
    cusp = float(maml.loc[maml["rho"].idxmin(), "eps"])
    ref_rho, ref_eps = th.operating_point(th.kappa_grid(1.0, condition, 4001), condition, maml["server"].iloc[0])
    off = th.gap_to_curve(maml["rho"], maml["eps"], ref_rho, ref_eps) > 1e-4
    leave = float(maml["eps"].to_numpy()[np.argmax(off)]) if off.any() else np.nan
    return cusp, leave, off


@dataclass(frozen=True)
class Fig5Config(_Profiled):
    """Figure 5: simulated MAML frontier (γ up to 1/(L+α)) against FedAvg at the same K, per d."""

    mu: float = 1.0
    condition: float = 100.0
    local_steps: int = 10
    dims: tuple[int, ...] = (10, 100, 1000)
    server: str = "gd"
    gamma_points: int = 1000
    seed: int = 0  # seed of the random Hessian B of Appendix D.1
    SMOKE: ClassVar[dict] = dict(gamma_points=300, dims=(10, 100))

    @property
    def deviations(self) -> tuple[str, ...]:
        return tuple(self._common_deviations((self.condition,), (self.server,)) + [
            f"K = {self.local_steps}, α = 0, d ∈ {{{', '.join(map(str, self.dims))}}} (the blanked parameter is taken "
            f"to be d), one random A per d (seed {self.seed}), γ on a {self.gamma_points}-point log grid in "
            "[1e-3/L, 0.99/L] (PROPOSED)",
            "simulated ε uses ω = cond(Q) (Lemma 5 form, spec §6.5); equals eq. (17) in the guaranteed regime"])


def fig5(config: Fig5Config) -> pd.DataFrame:
    L = config.condition * config.mu
    rng = np.random.default_rng(config.seed)
    frames = []
    for d in config.dims:
        eig = th.random_spectrum(d, config.mu, L, rng)
        frames += _frontier_pair(config, config.condition, config.server, eig, f"d = {d}", d)
    return pd.concat(frames, ignore_index=True)


def _frontier_pair(config, condition: float, server: str, eig, panel: str, d: int) -> list[pd.DataFrame]:
    """A panel's universal FedAvg frontier and the simulated FedAvg/MAML curves (α = 0) on spectrum ``eig``."""
    return [_universal(condition, server, 400, panel),
            _simulated(config.mu, condition * config.mu, config.local_steps, 0.0, eig, config.gamma_points, server,
                       panel=panel, d=d)]


def _simulated_claims(data, condition_of, panels, tol):
    cusp_errors, guaranteed_gaps, outside, leaves = [], [], [], {}
    for panel in panels:
        part = data[(data["panel"] == panel) & (data["kind"] == "simulated")]
        condition = condition_of(panel)
        cusp, leave, off = _cusp_and_divergence(part, condition)
        cusp_errors.append(abs(cusp - _intercept(condition)))
        leaves[panel] = leave / _intercept(condition)
        maml = part[part["family"] == "maml"]
        ref_rho, ref_eps = th.operating_point(th.kappa_grid(1.0, condition, 4001), condition, maml["server"].iloc[0])
        inside = maml["regime"] == "guaranteed"
        guaranteed_gaps.append(np.nanmax(th.gap_to_curve(maml["rho"][inside], maml["eps"][inside], ref_rho, ref_eps)))
        before_cusp = (~inside) & (maml["eps"] < cusp - tol)
        right = maml["rho"][before_cusp] > np.interp(maml["eps"][before_cusp], ref_eps[::-1], ref_rho[::-1])
        outside.append(float(right.mean()) if right.size else 1.0)
    return cusp_errors, guaranteed_gaps, outside, leaves


def _common_simulated_checks(cusp_errors, gaps, outside, tol):
    return [
        consistency("MAML and FedAvg frontiers are identical while γ ≤ 1/(KL+α) (Theorems 3 and 4)", max(gaps) < 1e-6,
              f"largest gap of guaranteed-regime MAML points to the FedAvg frontier: {max(gaps):.1e}"),
        consistency("Beyond γ = 1/(KL+α) the MAML frontier moves further from 0 (right of FedAvg's)",
              min(outside) == 1.0,
              f"fraction of beyond-regime MAML points (before the cusp) right of the FedAvg curve: {min(outside):.3f}"),
        consistency("The cusp of the MAML curve sits at the ε where the FedAvg frontier meets ρ = 0 (a property of "
                    "the reconstructed ε of eq. 17)", max(cusp_errors) < tol,
              f"largest |ε_cusp − ε(κ=1)|: {max(cusp_errors):.1e} (tolerance {tol:g}, set by the γ grid)"),
    ]


@quoted
def fig5_claims(data: pd.DataFrame, config: Fig5Config):
    panels = [f"d = {d}" for d in config.dims]
    tol = 5e-3
    cusp_errors, gaps, outside, _ = _simulated_claims(data, lambda p: config.condition, panels, tol)
    roughness = []
    for panel in panels:
        maml = data[(data["panel"] == panel) & (data["family"] == "maml")]
        continuum = th.family_condition(np.linspace(config.mu, config.condition * config.mu, 4001), "maml",
                                        maml["gamma"].to_numpy(), config.local_steps)[0]
        roughness.append(np.max(np.abs(maml["rho"] - th.rho_of_kappa(continuum, config.server))))
    return _common_simulated_checks(cusp_errors, gaps, outside, tol) + [
        consistency("The simulated MAML frontier is noisy for small d and stabilises as d grows",
              bool(np.all(np.diff(roughness) < 0)) and roughness[0] >= VISIBLE,
              "largest |ρ − ρ of the continuum limit (eq. 9 on [μ, L])| per d: "
              + ", ".join(f"d={d}: {r:.1e}" for d, r in zip(config.dims, roughness))
              + ("; below what the figure can show, so its panels look alike" if roughness[0] < VISIBLE else ""),
              margin=f"decreasing in d, and ≥ {VISIBLE:g} (visible on the unit axes) at the smallest d"),
    ]


def plot_fig5(data: pd.DataFrame):
    return plot_frontiers(data, title="Fig. 5 — simulated MAML (e_K) beyond γ = 1/(KL) vs FedAvg"
                          + _within(stated(data, condition="L/μ")))


@dataclass(frozen=True)
class _SimulatedConfig(_Profiled):
    """Settings shared by the figures simulated on one random quadratic of dimension d (App. D.1)."""

    mu: float = 1.0
    local_steps: int = 10  # K
    dim: int = 100  # d
    gamma_points: int = 1000
    seed: int = 0  # seed of the random Hessian B of Appendix D.1
    SMOKE: ClassVar[dict] = dict(gamma_points=300)


@dataclass(frozen=True)
class Fig7Config(_SimulatedConfig):
    """Figure 7: as Figure 5 with L varying (μ, K, d fixed)."""

    conditions: tuple[float, ...] = (10.0, 100.0, 1000.0)
    server: str = "gd"

    @property
    def deviations(self) -> tuple[str, ...]:
        return tuple(self._common_deviations(self.conditions, (self.server,)) + [
            f"K = {self.local_steps}, α = 0, d = {self.dim}, one random A per L (seed {self.seed}), γ on a "
            f"{self.gamma_points}-point log grid in [1e-3/L, 0.99/L] (PROPOSED)"])


def fig7(config: Fig7Config) -> pd.DataFrame:
    rng = np.random.default_rng(config.seed)
    frames = []
    for condition in config.conditions:
        eig = th.random_spectrum(config.dim, config.mu, condition * config.mu, rng)
        frames += _frontier_pair(config, condition, config.server, eig, _panel(condition), config.dim)
    return pd.concat(frames, ignore_index=True)


@quoted
def fig7_claims(data: pd.DataFrame, config: Fig7Config):
    tol = 5e-3
    panels = [_panel(c) for c in config.conditions]
    conditions = dict(zip(panels, config.conditions))
    cusp_errors, gaps, outside, leaves = _simulated_claims(data, conditions.get, panels, tol)
    shares = [leaves[p] for p in panels]
    return _common_simulated_checks(cusp_errors, gaps, outside, tol) + [
        consistency("The larger L/μ, the sooner MAML leaves the FedAvg curve: for small L/μ it recovers most of the "
              "FedAvg curve, for large L/μ the two diverge almost immediately",
              bool(np.all(np.diff(shares) < 0)) and shares[0] > MOST and shares[-1] < IMMEDIATELY,
              "share of the FedAvg ε-range [0, ε(1)] that MAML follows, per L/μ: "
              + ", ".join(f"{c:g}: {s:.2f}" for c, s in zip(config.conditions, shares)),
              margin=f"decreasing; 'most' = share > {MOST:g} at the smallest L/μ, 'almost immediately' = "
                     f"share < {IMMEDIATELY:g} at the largest"),
    ]


def plot_fig7(data: pd.DataFrame):
    return plot_frontiers(data, title="Fig. 7 — simulated MAML vs FedAvg for several L/μ"
                          + _within(stated(data, K="K", d="d")))


@dataclass(frozen=True)
class Fig8Config(_SimulatedConfig):
    """Figure 8: simulated MAML vs FedAvg under the three ServerOpts (L/μ, K, d fixed)."""

    condition: float = 100.0
    servers: tuple[str, ...] = ("gd", "nesterov", "heavyball")

    @property
    def deviations(self) -> tuple[str, ...]:
        return tuple(self._common_deviations((self.condition,), self.servers) + [
            f"K = {self.local_steps}, α = 0, d = {self.dim}, one random A (seed {self.seed}) shared by all "
            f"ServerOpts, γ on a {self.gamma_points}-point log grid in [1e-3/L, 0.99/L] (PROPOSED)"])


def fig8(config: Fig8Config) -> pd.DataFrame:
    L = config.condition * config.mu
    eig = th.random_spectrum(config.dim, config.mu, L, np.random.default_rng(config.seed))
    frames = [frame for server in config.servers
              for frame in _frontier_pair(config, config.condition, server, eig, SERVER_LABELS[server], config.dim)]
    return pd.concat(frames, ignore_index=True)


def _bulge(maml: pd.DataFrame) -> float:
    """Signed area between the beyond-regime MAML branch (up to its cusp) and its chord.

    Negative when the branch bows towards smaller ρ, i.e. when the region to its right
    (larger ρ) is convex; positive when that region has a concave boundary.
    """
    rows = maml[maml["regime"] == "beyond"]
    rows = rows.loc[: rows["rho"].idxmin()]
    eps, rho = rows["eps"].to_numpy(), rows["rho"].to_numpy()
    chord = rho[0] + (rho[-1] - rho[0]) * (eps - eps[0]) / (eps[-1] - eps[0])
    return float(np.trapezoid(rho - chord, eps))


@quoted
def fig8_claims(data: pd.DataFrame, config: Fig8Config):
    sim = data[data["kind"] == "simulated"]
    rho = {s: sim[sim["server"] == s].sort_values(["family", "gamma"])["rho"].to_numpy() for s in config.servers}
    helps = bool(np.all(rho["heavyball"] <= rho["nesterov"] + 1e-15) and np.all(rho["nesterov"] <= rho["gd"] + 1e-15))
    bulges = [_bulge(sim[(sim["server"] == s) & (sim["family"] == "maml")]) for s in config.servers]
    tol = 5e-3
    panels = [SERVER_LABELS[s] for s in config.servers]
    cusp_errors, gaps, outside, _ = _simulated_claims(data, lambda p: config.condition, panels, tol)
    return [
        consistency("Momentum helps convergence everywhere, for FedAvg and MAML alike", helps,
              "at every γ and both methods: ρ_HB ≤ ρ_Nesterov ≤ ρ_GD" if helps else "ordering violated"),
        consistency("Momentum makes the region right of the MAML branch (γ > 1/(KL)) more convex, most for heavy-ball",
              bool(np.all(np.diff(bulges) < 0)) and bulges[-1] < 0,
              "signed area between branch and chord (GD, Nesterov, HB): " + ", ".join(f"{b:+.4f}" for b in bulges)),
    ] + _common_simulated_checks(cusp_errors, gaps, outside, tol)[2:]


def plot_fig8(data: pd.DataFrame):
    return plot_frontiers(data, title="Fig. 8 — simulated MAML vs FedAvg under server momentum"
                          + _within(stated(data, condition="L/μ")))


@dataclass(frozen=True)
class Fig10Config(_SimulatedConfig):
    """Figure 10: simulated FedAvg/FedProx and MAML (γ up to 1/(L+α)) for several α."""

    condition: float = 100.0
    local_steps: int = 100  # K
    alphas: tuple[float, ...] = (0.0, 1.0, 10.0, 100.0)
    server: str = "gd"

    @property
    def deviations(self) -> tuple[str, ...]:
        return tuple(self._common_deviations((self.condition,), (self.server,)) + [
            f"K = {self.local_steps}, d = {self.dim}, α ∈ {{{', '.join(f'{a:g}' for a in self.alphas)}}}, one random A "
            f"(seed {self.seed}), γ on a {self.gamma_points}-point log grid in [1e-3/(L+α), 0.99/(L+α)] (PROPOSED)"])


def fig10(config: Fig10Config) -> pd.DataFrame:
    L = config.condition * config.mu
    eig = th.random_spectrum(config.dim, config.mu, L, np.random.default_rng(config.seed))
    panels = {"fedavg": "FedAvg / FedProx (1_K)", "maml": "MAML (e_K)"}
    frames = [_universal(config.condition, config.server, 400, panel) for panel in panels.values()]
    for alpha in config.alphas:
        both = _simulated(config.mu, L, config.local_steps, alpha, eig, config.gamma_points, config.server)
        both["panel"] = both["family"].map(panels)
        both["series"] = f"α = {alpha:g}"
        frames.append(both)
    return pd.concat(frames, ignore_index=True)


def _hausdorff(a: pd.DataFrame, b: pd.DataFrame) -> float:
    pa, pb = a[["rho", "eps"]].to_numpy(), b[["rho", "eps"]].to_numpy()
    dist = np.linalg.norm(pa[:, None, :] - pb[None, :, :], axis=-1)
    return float(max(dist.min(1).max(), dist.min(0).max()))


@quoted
def fig10_claims(data: pd.DataFrame, config: Fig10Config):
    def curve(family, alpha):
        return data[(data["kind"] == "simulated") & (data["family"] == family) & (data["alpha"] == alpha)]

    lows = [curve("fedavg", a)["rho"].min() for a in config.alphas]
    moved = {f: max(_hausdorff(curve(f, a), curve(f, 0.0)) for a in config.alphas if a > 0) for f in ("fedavg", "maml")}
    cusps = [abs(_cusp_and_divergence(curve("maml", a), config.condition)[0] - _intercept(config.condition))
             for a in config.alphas]
    return [
        consistency("Increasing α shrinks the FedAvg/FedProx curve", bool(np.all(np.diff(lows) > 0)),
              "smallest ρ per α: " + ", ".join(f"{a:g}: {v:.3f}" for a, v in zip(config.alphas, lows))),
        consistency("The MAML curves barely change with α (while α shrinks FedAvg's)",
              moved["maml"] < 0.25 * moved["fedavg"],
              f"largest distance of an α > 0 curve from α = 0: MAML {moved['maml']:.3f}, FedAvg/FedProx "
              f"{moved['fedavg']:.3f}"),
        consistency("The MAML cusp stays at one-shot averaging's ε for every α", max(cusps) < 5e-3,
              f"largest |ε_cusp − ε(κ=1)|: {max(cusps):.1e}"),
    ]


def plot_fig10(data: pd.DataFrame):
    return plot_frontiers(data, ncols=2, endpoints=True,
                          title="Fig. 10 — simulated FedProx and MAML for several α"
                          + _within(stated(data, condition="L/μ", K="K")))
