"""Khanduri et al. 2021, Table 1: sample and communication complexities of FedAvg, SCAFFOLD,
FedPD/FedProx, MIME/FedGLOMO and STEM, with mini-batch size and local updates per round.

The cells were stripped from the seed; spec STEM §5 RECONSTRUCTS them from the related-work prose
(confidence H/M/L per cell) and we typeset them as reconstructed. This work's rows (FedAvg,
Theorem 3.2; STEM, Theorem 3.1 and Corollaries 1-2) are re-derived here from the reconstructed
bounds (:mod:`replicate.theory.stem`) in two independent ways, and their exponents checked:

- ε-form: (b, I) on the trade-off curve for each ε, T(ε) from the bound, costs counted;
- fixed-T form: (b, I) from eq. (3)/(5) for a budget T, the bound's value as ε, costs counted.

Both rest on the same reconstruction, so agreement with the table is a consistency check, never a
replication: nothing in the table is measured.

Symbols → names: ε → ``eps``, K → ``workers``, ν → ``nu``, ζ² → ``zeta2``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pandas as pd

from replicate.experiments import knobs
from replicate.report import plotting  # noqa: F401  (applies the project's plot style)
from replicate.report.claims import check
from replicate.theory import stem

DEVIATIONS = (
    "Table 1's cells are RECONSTRUCTED (spec STEM §5) from the related-work prose; confidence H/M/L per cell as the "
    "spec marks it (M/L: the Minibatch and Local-update columns of the [15]/[16], SCAFFOLD, FedPD and MIME rows).",
    "This work's rows are re-derived from the RECONSTRUCTED bounds (spec §2.2-§3), constants and logs dropped, "
    "L = σ² = 1; FedAvg's ζ² = 1.",
)

# (algorithm, work, samples, communication, minibatch, local updates per round, confidence) — spec §5
CELLS = (
    ("FedAvg ⋄", "[12] Yu–Yang–Zhu / [14] Yu–Jin–Yang", "O(ε^-2)", "O(ε^-3/2)", "O(1)", "O(ε^-1/2)", "H H H H"),
    ("FedAvg", "[15] SCAFFOLD / [16] Yang–Fang–Liu", "O(ε^-2)", "O(ε^-2)", "O(1)", "O(1)", "H M M M"),
    ("FedAvg ⋄", "this work (Thm 3.2)", "O(ε^-2)", "O(ε^-3/2)", "O(ε^-1/2) → O(1) via ν",
     "O(1) → O(ε^-1/2) via ν", "H H H H"),
    ("SCAFFOLD *", "[15]", "O(ε^-2)", "as FedAvg [15]/[16]", "O(1)", "O(1)", "H M M M"),
    ("FedPD / FedProx ‡", "[9] / [10]", "O(ε^-2)", "O(ε^-1)", "O(1)", "O(ε^-1)", "M H L L"),
    ("MIME † / FedGLOMO", "[17] / [18]", "O(ε^-3/2)", "O(ε^-3/2)", "O(1)", "O(1)", "H H L L"),
    ("STEM ⋄", "this work (Thm 3.1)", "Õ(ε^-3/2)", "Õ(ε^-1)", "O(ε^-1/2) → O(1) via ν",
     "O(1) → O(ε^-1/2) via ν", "H H H H"),
    ("Fed STEM", "this work (Cor. 2, ν = 1)", "Õ(ε^-3/2)", "Õ(ε^-1)", "O(1)", "O(ε^-1/2)", "H H H H"),
    ("Minibatch STEM *", "this work (Cor. 1, ν = 0)", "Õ(ε^-3/2)", "Õ(ε^-1)", "O(ε^-1/2)", "1", "H H H H"),
)
# exponents p (cost ∝ ε^-p) the table gives this work's rows: samples, rounds, and b, I at ν = 0 and 1
EXPECTED = {"stem": {"samples": 1.5, "rounds": 1.0, 0.0: (0.5, 0.0), 1.0: (0.0, 0.5)},
            "fedavg": {"samples": 2.0, "rounds": 1.5, 0.0: (0.5, 0.0), 1.0: (0.0, 0.5)}}
ROW_OF = {("stem", 0.0): "Minibatch STEM *", ("stem", 1.0): "Fed STEM", ("stem", None): "STEM ⋄",
          ("fedavg", None): "FedAvg ⋄"}


@dataclass(frozen=True)
class Table1Config(knobs.FigureConfig):
    """This work's rows of Table 1 re-derived over ε ∈ ``eps_range`` at ν ∈ ``nus``."""

    eps_range: tuple[float, float] = (1e-10, 1e-4)  # the ε decades the exponents are fitted over
    workers: int = 100  # K (the table drops K factors; eq. (3)/(5) need one)
    zeta2: float = 1.0  # ζ², FedAvg's heterogeneity (the STEM bound has it only as a factor)
    nus: tuple[float, ...] = (0.0, 0.25, 0.5, 0.75, 1.0)  # ν on the trade-off curve
    points: int = 25  # ε values per fit
    tolerance: float = 0.05  # |fitted − table exponent| allowed: logs and lower-order terms bend the fit
    deviations: tuple[str, ...] = DEVIATIONS

    ZERO_ALLOWED: ClassVar[tuple[str, ...]] = ("nus",)
    SMOKE: ClassVar[dict] = dict(nus=(0.0, 1.0), points=9)

    def validate(self) -> None:
        from replicate.core.errors import ReplicateError

        low, high = sorted(self.eps_range)
        if not (0 < low < high < 1):
            raise ReplicateError(f"Table1Config.eps_range must be two accuracies in (0, 1), got {self.eps_range}")
        if any(nu > 1 for nu in self.nus):
            raise ReplicateError(f"Table1Config.nus must lie in [0, 1], got {self.nus}")


def table1(config: Table1Config) -> pd.DataFrame:
    """``kind`` = cell (the reconstructed table) and rate (fitted exponents of this work's rows)."""
    cells = pd.DataFrame(CELLS, columns=["algorithm", "work", "samples", "communication", "minibatch", "local",
                                         "confidence"]).assign(kind="cell")
    K, low, high = config.workers, *sorted(config.eps_range)
    eps = np.geomspace(high, low, config.points)
    rates = []
    for method in stem.METHODS:
        for nu in config.nus:
            b, I = stem.tradeoff(method, nu, eps, K)
            rates.append(_rate(method, nu, "ε-form", eps, b, I, stem.costs(method, eps, b, I, K, config.zeta2)))
            # fixed-T: budgets T, eq. (3)/(5)'s (b, I), the bound's value as ε; kept where it lies in eps_range
            start = K**2 if method == "stem" else K**3  # the theorems' T ≥ K² (STEM) and T ≥ K³ (FedAvg): b, I ≥ 1
            T = np.geomspace(start, start * low**-3.0, 40 * config.points)
            b, I = stem.tradeoff_at_iterations(method, nu, T, K)
            e = stem.stationarity_bound(method, T, b, I, K, config.zeta2)
            keep = (e >= low) & (e <= high)
            T, b, I, e = T[keep], b[keep], I[keep], e[keep]
            per_worker = b * T + (b * I if method == "stem" else 0.0)
            rates.append(_rate(method, nu, "fixed-T", e, b, I, {"samples": K * per_worker, "rounds": T / I}))
    return pd.concat([cells, pd.DataFrame(rates).assign(kind="rate")], ignore_index=True)


def _rate(method, nu, view, eps, b, I, cost) -> dict:
    return {"method": method, "nu": float(nu), "view": view, "eps_low": float(np.min(eps)),
            "eps_high": float(np.max(eps)), "samples_exp": stem.exponent(eps, cost["samples"]),
            "rounds_exp": stem.exponent(eps, cost["rounds"]), "b_exp": stem.exponent(eps, b),
            "I_exp": stem.exponent(eps, I)}


SOURCES = {
    "stem": ("§3.1, Remark 1: \"Theorem 3.1 suggests that when [b] and [I] are selected appropriately, then STEM "
             "achieves [ε^(-3/2)] and [ε^(-1)] sample and communication complexities. [...] see Table 1.\""),
    "fedavg": ("§3.2: \"the parameter [ν] in the statement of Theorem 3.2 balances [b] and [I] at each WN while "
               "maintaining state-of-the-art sample and communication complexities; please see Table 1\""),
}


def table1_claims(data: pd.DataFrame, config: Table1Config) -> list:
    rates, tol, claims = data[data.kind == "rate"], config.tolerance, []
    for method, part in rates.groupby("method", sort=False):
        want = EXPECTED[method]
        off = max(np.abs(part.samples_exp - want["samples"]).max(), np.abs(part.rounds_exp - want["rounds"]).max())
        row = next(c for c in CELLS if c[0] == ROW_OF[(method, None)] and "this work" in c[1])
        claims.append(check(
            f"Table 1, {ROW_OF[(method, None)]} (this work): {_order(want['samples'])} samples and "
            f"{_order(want['rounds'])} rounds for every ν", off <= tol,
            f"fitted over ε ∈ [{config.eps_range[0]:g}, {config.eps_range[1]:g}], ν ∈ {list(config.nus)}, both "
            f"views: samples ε^-[{part.samples_exp.min():.3f}, {part.samples_exp.max():.3f}], rounds "
            f"ε^-[{part.rounds_exp.min():.3f}, {part.rounds_exp.max():.3f}]", basis="closed-form",
            paper_value=f"{row[2]} samples, {row[3]} rounds (cells reconstructed)",
            margin=f"fitted exponents within {tol:g}", source=SOURCES.get(method, "")))
        for nu in (0.0, 1.0):
            ends = part[part.nu == nu]
            if ends.empty:
                continue
            b_want, I_want = want[nu]
            off = max(np.abs(ends.b_exp - b_want).max(), np.abs(ends.I_exp - I_want).max())
            name = ROW_OF.get((method, nu), f"{ROW_OF[(method, None)]} at ν = {nu:g}")
            claims.append(check(
                f"Table 1, {name}: mini-batch {_order(b_want)}, local updates {_order(I_want)} per round",
                off <= tol, f"b ∝ ε^-[{ends.b_exp.min():.3f}, {ends.b_exp.max():.3f}], I ∝ ε^-[{ends.I_exp.min():.3f}, "
                            f"{ends.I_exp.max():.3f}] (both views)", basis="closed-form",
                margin=f"fitted exponents within {tol:g}", source=SOURCES.get(method, "")))
    return claims


def _order(p: float) -> str:
    return "O(1)" if p == 0 else f"O(ε^-{p:g})"


def plot_table1(data: pd.DataFrame, config: Table1Config):
    """The reconstructed Table 1, this work's rows with the exponents re-derived from the bounds."""
    import matplotlib.pyplot as plt

    cells = data[data.kind == "cell"]
    rates = data[data.kind == "rate"]
    derived = {}
    for (method, nu), part in rates.groupby(["method", "nu"]):
        p = {k: round(part[f"{k}_exp"].mean(), 2) + 0.0 for k in ("samples", "rounds", "b", "I")}  # no "-0.00"
        derived[(method, nu)] = f"ε^-{p['samples']:.2f} / ε^-{p['rounds']:.2f}; b ε^-{p['b']:.2f}, I ε^-{p['I']:.2f}"
    rows = []
    for r in cells.itertuples():
        key = next((k for k, v in ROW_OF.items() if v == r.algorithm and ("this work" in r.work)), None)
        if key is not None and key[1] is None:  # the general row: its ν = 0.5 point
            key = (key[0], 0.5) if (key[0], 0.5) in derived else None
        rows.append([r.algorithm, r.work, r.samples, r.communication, r.minibatch, r.local, r.confidence,
                     derived.get(key, "—") if key else "—"])
    fig, ax = plt.subplots(figsize=(15.5, 3.6))
    ax.axis("off")
    table = ax.table(cellText=rows, colLabels=["Algorithm", "Work", "Samples", "Communication", "Minibatch",
                                                "Local updates / round", "confidence (spec)",
                                                "re-derived: samples / rounds; b, I (ν as row; general: ν = 0.5)"],
                     loc="center", cellLoc="left", colWidths=[0.09, 0.16, 0.07, 0.09, 0.13, 0.13, 0.08, 0.25])
    table.auto_set_font_size(False)
    table.set_fontsize(7)
    table.scale(1.0, 1.45)
    ax.set_title("Khanduri et al. 2021, Table 1 (cells RECONSTRUCTED, spec §5; K factors dropped). ⋄ trades b against "
                 "I via ν; * independent of heterogeneity; ‡ weaker heterogeneity assumption; † bounded Hessian "
                 "dissimilarity", fontsize=8)
    fig.tight_layout()
    return fig
