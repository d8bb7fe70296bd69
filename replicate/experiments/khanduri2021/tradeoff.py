"""Khanduri et al. 2021, Figure 1: STEM's trade-off between the mini-batch size b and the local
updates I (Remarks 2-3), from the RECONSTRUCTED bounds of :mod:`replicate.theory.stem`.

(a) "Communication complexity": every (b, I) with b·I ≤ ε^{-1/2}/K keeps STEM's optimal sample
complexity ε^{-3/2}/K per worker; its rounds T/I = max{ε^{-1}, ε^{-3/2}/(K·b·I)} fall from
ε^{-3/2}/K at b = I = 1 to the floor ε^{-1} on the curve b·I = ε^{-1/2}/K (spec §7).
(b) "Minibatch sizes vs Local Updates": that curve, parametrised by ν ∈ [0, 1] (eq. 3): ν = 0 is
Minibatch STEM (I = 1), ν = 1 is Fed STEM (b = 1). FedAvg's optimal curve (Thm 3.2) has the same
product (DERIVED in the spec), at ε^{-2} samples and ε^{-3/2} rounds.
(c) not a panel of the paper: Remark 3 in numbers. Off the curve the costs depend on b·I only;
above it the samples rise, below it the rounds.

Nothing here is measured: the claims are consistency checks of the reconstruction against the
paper's prose (Remarks 2-3), never counted as replications.

Symbols → names: ε → ``eps``, K → ``workers``, b → ``b``, I → ``I``, ν → ``nu``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pandas as pd

from replicate.experiments import knobs
from replicate.report import plotting  # noqa: F401  (applies the project's plot style)
from replicate.report.claims import consistency
from replicate.theory import stem

DEVIATIONS = (
    "Every formula behind the figure is RECONSTRUCTED (spec STEM §2.2-§2.3, §7): the seed lost the symbols. "
    "Constants and logarithms are dropped and L = σ² = 1, so the axes are orders of magnitude, as in the paper's "
    "illustration.",
    "ε = 1e-4 and K = 1 (so ε^{-1/2}/K = 100) are PROPOSED (spec §7): the paper's values are lost.",
    "Panel (c) is ours (Remark 3 in numbers), not a panel of the paper.",
)


@dataclass(frozen=True)
class Fig1Config(knobs.FigureConfig):
    """Figure 1 at accuracy ε with K workers; ``grid`` points per axis, ``nus`` points on the curve."""

    eps: float = 1e-4  # ε
    workers: int = 1  # K
    grid: int = 41  # points per axis of the (b, I) surface
    nus: int = 21  # ν ∈ [0, 1] on the trade-off curve
    tolerance: float = 1e-6  # relative slack allowed in the checks (floating point only)
    deviations: tuple[str, ...] = DEVIATIONS

    SMOKE: ClassVar[dict] = dict(grid=13, nus=5)

    @property
    def scale(self) -> float:
        """ε^{-1/2}/K: the largest b·I that keeps the optimal sample complexity."""
        return self.eps**-0.5 / self.workers


def tradeoff(config: Fig1Config) -> pd.DataFrame:
    """Tidy rows: ``kind`` = surface (panel a), curve (b; both methods), product (c)."""
    eps, K, scale = config.eps, config.workers, config.scale
    optimum = {"samples_per_worker": eps**-1.5 / K, "rounds": 1.0 / eps}
    axis = np.geomspace(1.0, scale, config.grid)
    b, I = (v.ravel() for v in np.meshgrid(axis, axis, indexing="ij"))
    parts = [_rows("surface", "stem", b, I, eps, K, optimum, on_surface=b * I <= scale * (1 + 1e-12))]
    nu = np.linspace(0.0, 1.0, config.nus)
    for method in stem.METHODS:
        cb, cI = stem.tradeoff(method, nu, eps, K)
        parts.append(_rows("curve", method, cb, cI, eps, K, optimum, nu=nu))
    product = np.geomspace(scale / 100, scale * 100, 81)
    parts.append(_rows("product", "stem", np.ones_like(product), product, eps, K, optimum,
                       relative_product=product / scale))
    return pd.concat(parts, ignore_index=True)


def _rows(kind, method, b, I, eps, K, optimum, **extra) -> pd.DataFrame:
    c = stem.costs(method, eps, b, I, K)
    return pd.DataFrame({"kind": kind, "method": method, "b": b, "I": I, **extra, **c,
                         "samples_ratio": c["samples_per_worker"] / optimum["samples_per_worker"],
                         "rounds_ratio": c["rounds"] / optimum["rounds"]})


def tradeoff_claims(data: pd.DataFrame, config: Fig1Config) -> list:
    eps, tol = config.eps, config.tolerance
    surface = data[(data.kind == "surface") & data.on_surface.astype(bool)]
    curve = data[(data.kind == "curve") & (data.method == "stem")].sort_values("nu")
    product = data[data.kind == "product"].sort_values("relative_product")
    corner = surface[(surface.b == 1) & (surface.I == 1)].iloc[0]
    extra = surface.samples_ratio.max() - 1
    above, below = product[product.relative_product > 1], product[product.relative_product < 1]
    return [
        consistency("Remark 3 / Fig. 1(a): every (b, I) of the surface keeps the optimal sample complexity "
                    "ε^{-3/2}/K per worker", extra <= eps * (1 + tol),
                    f"{len(surface)} grid points with b·I ≤ ε^(-1/2)/K = {config.scale:g}: samples per worker at "
                    f"most {1 + extra:.6f} × ε^(-3/2)/K (the initial batch B = b·I adds at most ε = {eps:g} "
                    "of it)", source=REMARK3_SURFACE),
        consistency("Remark 3: b = I = 1 needs ε^{-3/2}/K rounds; the curve b·I = ε^{-1/2}/K reaches the floor "
                    "ε^{-1}",
                    (abs(corner.rounds * eps**1.5 * config.workers - 1) <= tol
                     and abs(surface.rounds.min() * eps - 1) <= tol),
                    f"rounds {corner.rounds:.4g} at b = I = 1 (ε^(-3/2)/K = {eps**-1.5 / config.workers:.4g}); "
                    f"fewest on the surface {surface.rounds.min():.4g} (ε^(-1) = {1 / eps:.4g})", source=REMARK3_OFF),
        consistency("Remark 2 / Fig. 1(b): as ν grows from 0 to 1, b decreases and I increases, at ε^{-1} rounds "
                    "and ε^{-3/2} samples all along",
                    bool(np.all(np.diff(curve.b) < 0) and np.all(np.diff(curve.I) > 0)
                         and np.allclose(curve.rounds_ratio, 1, rtol=tol)
                         and np.all(curve.samples_ratio <= 1 + eps * (1 + tol))),
                    f"ν = 0: b = {curve.b.iloc[0]:.4g}, I = {curve.I.iloc[0]:.4g}; ν = 1: b = {curve.b.iloc[-1]:.4g}, "
                    f"I = {curve.I.iloc[-1]:.4g}; rounds/ε^(-1) within [{curve.rounds_ratio.min():.6f}, "
                    f"{curve.rounds_ratio.max():.6f}]", source=REMARK2),
        consistency("Remark 3: beyond the curve the sample complexity rises above the optimum, short of it the "
                    "communication rises above ε^{-1}",
                    bool(np.all(np.diff(above.samples_ratio) > 0) and np.all(np.diff(below.rounds_ratio) < 0)
                         and np.allclose(above.rounds_ratio, 1) and np.all(below.samples_ratio <= 1 + eps * (1 + tol))),
                    f"at 100× the product: samples {above.samples_ratio.iloc[-1]:.3g}× the optimum, rounds at the "
                    f"floor; at 1/100: rounds {below.rounds_ratio.iloc[0]:.3g}× ε^(-1), samples at the optimum",
                    source=REMARK3_OFF),
    ]


REMARK3_SURFACE = ("§3.1, Remark 3: \"This trade-off is illustrated in Figure 1(a), where we maintain the optimal "
                   "sample complexity, while changing [b] and [I] to generate the trade-off surface.\"")
REMARK3_OFF = ("§3.1, Remark 3: \"if [b·I] increases beyond [ε^(-1/2)/K], then the sample complexity will increase "
               "from the optimal [...]. On the other hand, if [b·I] decreases beyond [it], the communication "
               "complexity increases\"")
REMARK2 = ("§3.1, Remark 2: \"Eqs. in (3) suggest that when [ν] increases from 0 to 1, [b] decreases and [I] "
           "increases. [...] Such a trade-off can be seen in Fig. 1(b).\"")


def _decade_ticks(ax, axis: str, low: float, high: float):
    ticks = np.arange(np.floor(np.log10(low)), np.ceil(np.log10(high)) + 1)
    getattr(ax, f"set_{axis}ticks")(ticks)
    getattr(ax, f"set_{axis}ticklabels")([f"$10^{{{int(t)}}}$" for t in ticks])


def plot_tradeoff(data: pd.DataFrame, config: Fig1Config):
    """(a) rounds over the (b, I) surface; (b) the trade-off curve; (c) Remark 3 off the curve."""
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(14.0, 4.4))
    grid = fig.add_gridspec(1, 3, width_ratios=(1.25, 1.0, 1.0))
    ax = fig.add_subplot(grid[0], projection="3d")
    surface = data[data.kind == "surface"]
    n = int(round(np.sqrt(len(surface))))
    shape = (n, n)
    lb, lI = np.log10(surface.b.to_numpy()).reshape(shape), np.log10(surface.I.to_numpy()).reshape(shape)
    kept = surface.on_surface.astype(bool)
    lr = np.where(kept, np.log10(surface.rounds), np.nan).reshape(shape)
    ax.plot_surface(lb, lI, lr, cmap="viridis", linewidth=0, antialiased=True, alpha=0.9)
    curve = data[(data.kind == "curve") & (data.method == "stem")]
    ax.plot(np.log10(curve.b), np.log10(curve.I), np.log10(curve.rounds), color="crimson", lw=2.2,
            label="b·I = ε^(-1/2)/K: ε^(-1) rounds")
    for axis, values in (("x", surface.b), ("y", surface.I), ("z", surface.rounds.where(kept))):
        _decade_ticks(ax, axis, np.nanmin(values), np.nanmax(values))
    ax.set(xlabel="minibatch size b", ylabel="local updates I", zlabel="communication rounds")
    ax.view_init(elev=22, azim=40)  # b = I = 1, the most rounds, in front
    ax.set_title("(a) Communication complexity\n(every point: optimal ε^(-3/2) samples)", fontsize=9)
    ax.legend(loc="upper left", fontsize=7, frameon=False)

    ax = fig.add_subplot(grid[1])
    colours = {"stem": "crimson", "fedavg": "0.35"}
    for method, part in data[data.kind == "curve"].groupby("method", sort=False):
        style = dict(ls="-", marker="o", ms=3) if method == "stem" else dict(ls="none", marker="s", ms=5, mfc="none")
        ax.plot(part.b, part.I, color=colours[method], **style,
                label="STEM, eq. (3): ε^(-3/2) samples, ε^(-1) rounds" if method == "stem"
                else "FedAvg, eq. (5), same ν: ε^(-2) samples, ε^(-3/2) rounds")
    ends = data[(data.kind == "curve") & (data.method == "stem")].sort_values("nu")
    ax.annotate("Minibatch STEM (ν = 0)", (ends.b.iloc[0], ends.I.iloc[0]), textcoords="offset points",
                xytext=(-110, 14), fontsize=7, arrowprops=dict(arrowstyle="-", lw=0.6))
    ax.annotate("Fed STEM (ν = 1)", (ends.b.iloc[-1], ends.I.iloc[-1]), textcoords="offset points",
                xytext=(12, 4), va="bottom", fontsize=7)  # above and right of the end: clear of the falling curve
    ax.set(xscale="log", yscale="log", xlabel="minibatch size b", ylabel="local updates I",
           xlim=(0.3, config.scale * 3), ylim=(0.1, config.scale * 3))
    ax.set_title(f"(b) Minibatch sizes vs local updates (ε = {config.eps:g}, K = {config.workers})", fontsize=9)
    ax.legend(fontsize=7, frameon=False, loc="lower left")

    ax = fig.add_subplot(grid[2])
    product = data[data.kind == "product"]
    ax.plot(product.relative_product, product.samples_ratio, label="samples per worker / ε^(-3/2)/K")
    ax.plot(product.relative_product, product.rounds_ratio, ls="--", label="rounds / ε^(-1)")
    ax.axvline(1.0, color="crimson", lw=0.9)
    ax.set(xscale="log", yscale="log", xlabel="b·I / (ε^(-1/2)/K)", ylabel="cost / optimum")
    ax.set_title("(c) ours: Remark 3, off the curve", fontsize=9)
    ax.legend(fontsize=7, frameon=False, loc="upper center")
    fig.suptitle("Khanduri et al. 2021, Figure 1 (from the reconstructed bounds; constants and logs dropped)",
                 fontsize=10)
    fig.tight_layout()
    return fig
