"""The lecture notes' non-convex Theorem 2 (eqs. 5 and 14), tested on measured FedAvg runs of a small MLP
(and of the logistic model, a control whose L is certified).

Notes eq. (14), for FedAvg with full participation and a constant step size η:

    min_t E‖∇F(w̄_t)‖² ≤ (1/T)Σ_t E‖∇F(w̄_t)‖² ≤ 2/(ηT)·E[F(w̄_0) − F*] + Σp_k²σ_k² + (ηL − 1)·Σp_k²G².

Its proof (§7) takes eq. (12) (exact for one SGD step of the virtual sequence w̄_{t+1} = w̄_t − ηg_t
under L-smoothness) and bounds E‖∇F(w̄_t) − g_t‖² by Lemma 2 via Lemma 4 (∇F(w̄_t) = ḡ_t, true
only when every local model equals w̄_t: E = 1 or a synchronisation step) and (ηL − 1)E‖g_t‖² by
Lemma 5 (E‖g_t‖² ≤ Σp_k²G², false in general) — an upper bound put into a term whose
coefficient is negative when ηL < 1, so that step has the wrong direction. Here both sides are
measured: the left at the logged global models (every ``log_every`` steps; with E > 1 those are
synchronisation steps, where w̄_t is the global model), the right from estimated terms.

Models: ``fl.models.MLP`` (60 → 32 tanh → 10) on a synthetic set, and the logistic model. λ = 0 by
default, so F ≥ 0 and F* is replaced by 0, its lower bound (the largest, most favourable right side).
MLP: L is the largest ‖∇²F_k(w)‖ found by power iteration with Hessian-vector products
(``notes.common.hessian_norms``) at w_0 and at log-spaced global models of every run — Assumption 1's
L along the iterates, estimated from below, so a violation holds only if the true L is below the
break-even value the claims print. Logistic: Li et al.'s certified bound ½λ_max(X̃ᵀX̃/n_k) + λ
(``theory.constants``) is a valid global L, so a violation there does not hinge on an estimate.
η = ``lr_times_L``/L (L(w_0) for the MLP, the certified L for the logistic model; 0.25: a safe
constant step), so ηL < 1, the regime where eq. (14)'s last term is negative.

Symbols → names: η → ``lr``, L → ``L``, T → ``steps``, E → ``local_steps``, p_k → weights,
σ_k² → variances, G² → ``G2``, F(w̄_0) − F* → ``initial_gap``, ‖∇F(w̄_t)‖² → ``grad_sq``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pandas as pd

from replicate.core.errors import ReplicateError
from replicate.experiments import knobs
from replicate.experiments.notes.common import LABELS, RunProbe, hessian_norms, sample_problem, single_threaded
from replicate.runs import cache
from replicate.fl.algorithms import FedAvg
from replicate.runs.config import RunConfig
from replicate.report import plotting  # noqa: F401  (applies the project's plot style)
from replicate.report.claims import check, consistency
from replicate.theory import bounds
from replicate.theory import constants as C

SYNTHETIC = ("synthetic(0,0)", "synthetic(1,1)", "synthetic(0.5,0.5)", "synthetic_iid")
MODELS = ("mlp", "logistic")

DEVIATIONS = (
    "A one-hidden-layer tanh MLP (32 units) on synthetic(1,1) stands in for 'a non-convex model' (the notes run "
    "no experiment); the logistic model is added as a control with a certified L (Theorem 2 asks only for "
    "Assumptions 1, 3, 4, which it meets).",
    "F* is replaced by 0, a lower bound of the cross-entropy (λ = 0), which makes the right side as large as it "
    "can be; the expectation over the algorithm's randomness is the mean over seeds.",
    "MLP: L is the largest Hessian norm max_k ‖∇²F_k‖ found by power iteration at w_0 and at log-spaced global "
    "models of each run (a lower estimate along the iterates, not a global constant). σ_k², G² are the largest "
    "values at log-spaced global models (Assumptions 3-4 ask for every local iterate).",
    "The left side is the minimum over logged steps (every log_every steps; at E > 1 the synchronisation steps, "
    "where w̄_t is the global model); the true minimum over all t can only be smaller.",
    "No gradient clipping, constant η, full participation (the notes' setting).",
)


@dataclass(frozen=True)
class NonconvexConfig(knobs.FigureConfig):
    """Notes eq. (14) on an MLP and a logistic control: FedAvg, full participation, constant η = 0.25/L, E = 1, 10."""

    dataset: str = "synthetic(1,1)"
    models: tuple[str, ...] = ("mlp", "logistic")  # the MLP, and a control whose L is certified
    local_steps: tuple[int, ...] = (1, 10)  # E
    steps: int = 2000  # T, local SGD steps in all
    lr_times_L: float = 0.25  # η = lr_times_L / L (L at w_0 for the MLP, the certified L for logistic)
    batch_size: int = 24  # b
    weight_decay: float = 0.0  # λ (0: the notes' F, and F ≥ 0)
    seeds: tuple[int, ...] = (0, 1, 2)
    log_every: int = 10  # steps between logged global models (a multiple of every E)
    probes: int = 5  # logged rounds per run where σ_k², G² and E‖g_t‖² are measured
    power_iters: int = 30  # power-iteration steps per Hessian-norm estimate
    num_clients: int | None = None  # N; None = 100
    deviations: tuple[str, ...] = DEVIATIONS

    CHOICES: ClassVar[dict] = {"dataset": SYNTHETIC, "models": MODELS}
    ZERO_ALLOWED: ClassVar[tuple] = ("weight_decay",)
    SMOKE: ClassVar[dict] = dict(steps=60, seeds=(0,), num_clients=10, probes=3, power_iters=10)

    def validate(self) -> None:
        for E in self.local_steps:
            if self.log_every % E or self.steps % self.log_every:
                raise ReplicateError(f"NonconvexConfig: log_every ({self.log_every}) must be a multiple of every E "
                                     f"({E}) and divide steps ({self.steps})")
            for seed in self.seeds:
                self.run_config(self.models[0], E, seed, lr=0.1)

    def run_config(self, model: str, local_steps: int, seed: int, *, lr: float) -> RunConfig:
        return RunConfig(dataset=self.dataset, num_clients=self.num_clients, model=model, algorithm=FedAvg("full"),
                         local_steps=local_steps, batch_size=self.batch_size, client_lr=lr, lr_schedule="constant",
                         weight_decay=self.weight_decay, clip_norm=None, rounds=self.steps // local_steps, seed=seed,
                         eval_every=self.log_every // local_steps)


def nonconvex(config: NonconvexConfig, progress: bool = True, log=None) -> pd.DataFrame:
    """``kind == "run"``: logged global models per (model, E, seed); ``"curve"``: both sides of eq. (14) per
    (model, E, T); ``"terms"``: the estimated constants per (model, E)."""
    with single_threaded():
        return pd.concat([_one_model(config, model, progress, log) for model in config.models], ignore_index=True)


def _one_model(config: NonconvexConfig, model: str, progress: bool, log) -> pd.DataFrame:
    problem = sample_problem(config.dataset, model, num_clients=config.num_clients)
    L0 = float(hessian_norms(problem, problem.init(config.seeds[0]), iters=config.power_iters,
                             weight_decay=config.weight_decay).max())
    certified = float(C.smoothness(problem, config.weight_decay)[0].max()) if model == "logistic" else math.nan
    lr = float(f"{config.lr_times_L / (certified if model == 'logistic' else L0):.3g}")
    runs = []
    def probe_for(run):  # the extra metrics are part of a run's cache key: announce them too
        return RunProbe(rounds=run.rounds, eval_every=run.eval_every, batch_size=config.batch_size,
                        weight_decay=config.weight_decay, probes=config.probes, full_gradient=True,
                        hessian_iters=config.power_iters, seed=run.seed)

    cache.plan([(run, None, probe_for(run)) for run in (config.run_config(model, E, seed, lr=lr)
                                                        for E in config.local_steps for seed in config.seeds)], log)
    for E in config.local_steps:
        for seed in config.seeds:
            run = config.run_config(model, E, seed, lr=lr)
            history = cache.run(run, progress=progress, log=log, extra_metrics=probe_for(run))
            runs.append(history.assign(kind="run", model=model, E=E, seed=seed, steps=history["round"] * E,
                                       F=history["train_loss"] + 0.5 * config.weight_decay * history["sq_norm"]))
    data = pd.concat(runs, ignore_index=True)
    weights = problem.weights().double().numpy()
    p2 = float(weights @ weights)
    estimated = max(L0, float(data["L_run"].max()))
    L = certified if model == "logistic" else estimated  # a certified global L where there is one
    G2, s2 = float(data["G2_run"].max()), float(data["sum_p2_sigma2_run"].max())
    curves, terms = [], []
    for E, part in data.groupby("E"):
        mean = part.groupby("steps")[["grad_sq", "F"]].mean()
        gap0 = float(mean["F"].iloc[0])  # F(w̄_0) − F*, with F* ≥ 0 replaced by 0
        T = mean.index.to_numpy()[1:]
        # variances = s2/Σp² for every client makes Σp_k²σ_k² = s2 (the measured weighted maximum)
        rhs = bounds.nonconvex_bound(T, lr=lr, L=L, weights=weights, variances=np.full(len(weights), s2 / p2),
                                     grad_sq_bound=G2, initial_gap=gap0)
        history = mean["grad_sq"].to_numpy()
        lhs_min = np.minimum.accumulate(history)[:-1]  # min over logged t < T
        lhs_mean = (np.cumsum(history) / np.arange(1, len(history) + 1))[:-1]
        curves.append(pd.DataFrame({"kind": "curve", "model": model, "E": E, "steps": T, "lhs_min": lhs_min,
                                    "lhs_mean": lhs_mean, "optimisation": rhs.optimisation, "variance": rhs.variance,
                                    "gradient_norm": rhs.gradient_norm, "rhs": rhs.total}))
        probed = part.dropna(subset=["Eg_sq_at"])
        terms.append({"kind": "terms", "model": model, "E": E, "lr": lr, "L0": L0, "L_estimated": estimated,
                      "L_certified": certified, "L": L, "lr_L": lr * L, "G2": G2, "sum_p2_sigma2": s2, "sum_p2": p2,
                      "sum_p2_G2": p2 * G2, "initial_gap": gap0, "Eg_sq_max": float(probed["Eg_sq_at"].max()),
                      "Eg_sq_ratio_max": float((probed["Eg_sq_at"] / (p2 * G2)).max()),
                      "dataset": LABELS.get(config.dataset, config.dataset)})
    keep = ["kind", "model", "E", "seed", "round", "steps", "train_loss", "F", "grad_sq", "G2_at",
            "sum_p2_sigma2_at", "Eg_sq_at", "L_run"]
    return pd.concat([data[keep], *curves, pd.DataFrame(terms)], ignore_index=True)


MODEL_LABELS = {"mlp": "MLP (L estimated)", "logistic": "logistic (L certified)"}


def plot_nonconvex(data: pd.DataFrame, config: NonconvexConfig):
    """Per (model, E): the measured left side (min and running mean of E‖∇F(w̄_t)‖²) and the notes' right side
    with its three terms, against T; the right side's negative stretch is shaded (no measurement can meet it)."""
    import matplotlib.pyplot as plt

    curves, terms = data[data.kind == "curve"], data[data.kind == "terms"].set_index(["model", "E"])
    runs = data[data.kind == "run"]
    keys = [(m, E) for m in config.models for E in config.local_steps if (m, E) in terms.index]
    ncols = len(config.local_steps)
    nrows = -(-len(keys) // ncols)
    height = 3.3 * nrows + 0.9
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.6 * ncols, height), squeeze=False, sharex=True)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, (model, E) in zip(axes.flat, keys):
        part = curves[(curves.model == model) & (curves.E == E)]
        seeds = runs[(runs.model == model) & (runs.E == E) & (runs.steps > 0)].groupby("steps")["grad_sq"]
        ax.fill_between(seeds.min().index, seeds.min(), seeds.max(), color=colors[0], alpha=0.15, lw=0,
                        label=r"$\|\nabla F(\bar w_t)\|^2$, min–max over seeds")
        ax.plot(part.steps, part.lhs_min, color=colors[0], lw=1.6,
                label=r"left: $\min_{t<T} E\|\nabla F(\bar w_t)\|^2$")
        ax.plot(part.steps, part.lhs_mean, ":", color=colors[0], lw=1.2,
                label=r"$\frac{1}{T}\sum_t E\|\nabla F(\bar w_t)\|^2$")
        ax.plot(part.steps, part.rhs, color=colors[3], lw=1.6, label="right side of eq. (14)")
        ax.plot(part.steps, part.optimisation, "--", color=colors[1], lw=1.0, label=r"$2E[F(\bar w_0)-F^*]/(\eta T)$")
        ax.plot(part.steps, part.variance, "--", color=colors[2], lw=1.0, label=r"$\sum p_k^2\sigma_k^2$")
        ax.plot(part.steps, part.gradient_norm, "--", color=colors[4], lw=1.0, label=r"$(\eta L-1)\sum p_k^2 G^2$")
        negative = part[part.rhs < 0]
        if len(negative):
            ax.axvspan(negative.steps.min(), part.steps.max(), color=colors[3], alpha=0.08, lw=0)
        ax.axhline(0, color="k", lw=0.6)
        ax.set_xscale("log")
        ax.set_yscale("symlog", linthresh=1e-2)
        ax.set_title(f"{MODEL_LABELS.get(model, model)}, E = {E} (η = {terms.loc[(model, E), 'lr']:.3g}, "
                     f"ηL = {terms.loc[(model, E), 'lr_L']:.2f})", fontsize=9)
    for ax in axes[-1]:
        ax.set_xlabel("local SGD steps T")
    for ax in axes[:, 0]:
        ax.set_ylabel("squared gradient norm")
    for ax in list(axes.flat)[len(keys):]:
        ax.set_visible(False)
    fig.suptitle(f"Lecture notes Thm 2 (eq. 14): measured left side vs right side on {config.dataset} "
                 f"(FedAvg, full participation, constant η; mean over {len(config.seeds)} seed(s))", fontsize=9)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=4, frameon=False, fontsize=7)
    fig.tight_layout(rect=(0, 0.75 / height, 1, 1 - 0.35 / height))
    return fig


THEOREM2_SOURCE = ("Notes, Theorem 2 (eq. 5, reached as eq. 14 in its proof): \"FedAvg with full device participation "
                   "satisfies min_t E‖∇F(w_t)‖² ≤ 2/(η_t T)·E[F(w̄_0) − F*] + Σp_k²σ_k² + (η_t L − 1)Σp_k²G²\"")
LEMMA5_SOURCE = "Notes, Lemma 5: \"Assume Assumption 4 holds. It follows that E‖g_t‖² ≤ Σ_k p_k² G².\""


def nonconvex_claims(data: pd.DataFrame, config: NonconvexConfig) -> list:
    curves, terms = data[data.kind == "curve"], data[data.kind == "terms"].set_index(["model", "E"])
    claims = []
    for (model, E), part in curves.groupby(["model", "E"], sort=False):
        row = terms.loc[(model, E)]
        bad = part[part.lhs_min > part.rhs]
        last = part.iloc[-1]
        # the L that would make the right side at the last T equal the measured left side
        needed = (1.0 + (last.lhs_min - last.optimisation - last.variance) / row.sum_p2_G2) / row.lr
        where = (f"violated from T = {int(bad.steps.min())} on ({len(bad)} of {len(part)} logged T)" if len(bad)
                 else "holds at every logged T")
        source = ("a certified global bound ½λ_max(X̃ᵀX̃/n_k) + λ, so the violation does not hinge on an estimate"
                  if np.isfinite(row.L_certified) else
                  f"the largest Hessian norm found by power iteration along the runs, a lower estimate; "
                  f"from {row.L0:.3g} at w_0")
        claims.append(check(
            f"Notes eq. (14), {MODEL_LABELS.get(model, model)}, E = {E}: min_t E‖∇F(w̄_t)‖² ≤ 2/(ηT)·E[F(w̄_0) − F*] "
            "+ Σp_k²σ_k² + (ηL − 1)Σp_k²G²", bad.empty,
            f"{where}; at T = {int(last.steps)}: left {last.lhs_min:.3g} (running mean {last.lhs_mean:.3g}) vs right "
            f"{last.rhs:.3g} = {last.optimisation:.3g} + {last.variance:.3g} + ({last.gradient_norm:.3g}); "
            f"η = {row.lr:.3g}, L = {row.L:.3g} ({source}), ηL = {row.lr_L:.2f}, Σp²G² = {row.sum_p2_G2:.3g}; the "
            f"right side at T = {int(last.steps)} reaches the left only if L ≥ {needed:.3g} ({needed / row.L:.2f}× "
            "ours)" + ("" if bad.empty else " — a finding about the notes: with ηL < 1 their proof puts the upper "
                       "bound of Lemma 5 into a term with a negative coefficient"),
            margin="left ≤ right at every logged T (left: mean over seeds; F* := 0)", source=THEOREM2_SOURCE))
    probes = data[(data.kind == "run") & data["Eg_sq_at"].notna()] if "Eg_sq_at" in data else data.iloc[:0]
    for (model, E), row in terms.iterrows():
        probed = probes[(probes.model == model) & (probes.E == E)]
        at = int(probed.steps[probed.Eg_sq_at.idxmax()]) if len(probed) else None
        claims.append(check(
            f"Notes Lemma 5, {MODEL_LABELS.get(model, model)}, E = {E}: E‖g_t‖² ≤ Σp_k²G² along the run",
            row.Eg_sq_ratio_max <= 1,
            f"largest E‖g_t‖²/(Σp_k²G²) at the probed global models: {row.Eg_sq_ratio_max:.3g}"
            + ("" if at is None else " at step 0, the initial model every E shares" if at == 0 else f" at step {at}")
            + f" (E‖g_t‖² up to {row.Eg_sq_max:.3g}, Σp_k² = {row.sum_p2:.3g}, G² = {row.G2:.3g}); Jensen gives only "
            "E‖g_t‖² ≤ G², and G² here is a maximum over clients and iterates",
            margin="ratio ≤ 1 at every probed round", source=LEMMA5_SOURCE))
    for model, rows in terms.groupby(level="model", sort=False):
        row = rows.iloc[0]
        slack = (1 - row.lr_L) * row.sum_p2_G2 - row.sum_p2_sigma2
        crossing = 2 * row.initial_gap / (row.lr * slack) if slack > 0 else math.inf
        part = curves[curves.model == model]
        claims.append(consistency(
            f"{MODEL_LABELS.get(model, model)}: with ηL < 1 and Σp²σ² < (1 − ηL)Σp²G² the right side of eq. (14) is "
            "negative for T > 2E[F(w̄_0) − F*]/(η((1 − ηL)Σp²G² − Σp²σ²)), where no squared norm can meet it",
            bool((crossing < part.steps.max()) == (part.rhs < 0).any()),
            f"crossing at T = {crossing:.4g} (logged T up to {int(part.steps.max())}); "
            f"(1 − ηL)Σp²G² = {(1 - row.lr_L) * row.sum_p2_G2:.3g}, Σp²σ² = {row.sum_p2_sigma2:.3g}"))
    return claims
