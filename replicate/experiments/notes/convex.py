"""Lecture notes Theorem 1 (eq. 3) and Li et al. Theorems 1-3 (eqs. 4-6), against measured FedAvg runs.

Li et al. (ICLR 2020): with κ = L/μ, γ = max{8κ, E} and η_t = 2/(μ(γ + t)),
E[F(w_T)] − F* ≤ 2κ/(γ + T)·((B + C)/μ + 2L‖w_0 − w*‖²), B = Σp_k²σ_k² + 6LΓ + 8(E−1)²G² (eq. 5),
C = 0 with full participation (Theorem 1), 4E²G²/K for Scheme I (Theorem 2) and
(N−K)/(N−1)·4E²G²/K for Scheme II with balanced p_k (Theorem 3; on unbalanced data the
transformed scheme, with L̃ = νL, μ̃ = ςμ, σ̃_k = νσ_k, G̃ = νG, ν = N max p_k, ς = N min p_k).
The notes' Theorem 1 prints γ = max{5κ, E} and the form κ/(γ + T − 1)·(2B/μ + μγ/2·‖w_1 − w*‖²)
(eq. 3); their indices start at 1, so their w_1 is our w_0 and their T our T + 1.

We run FedAvg with the theorem's own step size on the logistic model with weight decay λ
(``replicate.fl.schedules`` kind "inverse": η0 = 2/(μγ), decay E/γ per round, i.e. η at each
round's first step), estimate every constant (``notes.common``), and compare the measured
gap E[F(w_T)] − F* (mean over seeds; F includes (λ/2)‖w‖²) with the bound at every logged T.

Symbols → names: T → ``steps``, E → ``local_steps``, K → ``clients_per_round``, N → clients,
λ → ``weight_decay``, γ → ``gamma``, η0 → ``lr0``, ‖w_0 − w*‖² → ``init_dist_sq``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pandas as pd

from replicate.core.errors import ReplicateError
from replicate.experiments import knobs
from replicate.experiments.notes.common import (DATASETS, LABELS, RunProbe, batch_size, cached_constants, log_slope,
                                                single_threaded, slope_interval)
from replicate.runs import cache
from replicate.fl.algorithms import FedAvg
from replicate.runs.config import RunConfig
from replicate.report import plotting  # noqa: F401  (applies the project's plot style)
from replicate.report.claims import bound_claim, check, consistency
from replicate.theory import bounds

SCHEMES = ("full", "scheme1", "scheme2")
THEOREM = {"full": "Thm 1", "scheme1": "Thm 2", "scheme2": "Thm 3"}
SERIES_LABELS = {"full": "full", "notes": "full, notes' 5κ", "scheme1": "Scheme I",
                 "scheme2": "Scheme II / T-Scheme II", "rate": "full, λ raised to κ = 5 (rate test)"}

RATE_DEVIATION = (
    "The O(1/T) rate is tested on an instance of our choosing (PROPOSED): the same data with λ raised so that "
    "κ = L/μ = 5 (γ = max{8κ, E} = 40 ≪ T), full participation, Theorem 1's η_t; at the paper's λ = 1e-4, γ = 8κ "
    "is 1e6-1e7 and the bound itself is flat at any feasible T.")
DEVIATIONS = (
    "One η per round: the engine applies η0/(1 + (E/γ)·r), the theorem's η_t at the round's first step t = rE; "
    "the round's later steps use at most (1 + E/γ)× the theorem's η_t (a factor 1 + 5e-7 to 1 + 4e-5 here).",
    "σ_k² and G² (Assumptions 3-4 are about the local iterates w_t^k) are the largest values found at w* and at the "
    "global model of log-spaced rounds of every run of the dataset; Σp_k²σ_k² uses each client's largest σ_k².",
    "L is the logistic model's upper bound ½λ_max(X̃ᵀX̃/n_k) + λ (a valid L; the true one is smaller), so η0 = 1/(4L) "
    "is conservative; μ = λ exactly.",
    "w_0 is PyTorch's default initialisation (the theorem allows any w_0); the bound uses the measured "
    "mean over seeds of ‖w_0 − w*‖².",
    "Scheme II on the unbalanced synthetic sets runs as T-Scheme II (Li et al. §3.3's transformation) with the "
    "transformed constants, since Theorem 3 needs balanced p_k; mnist balanced runs Scheme II itself.",
    "No gradient clipping (the Li et al. figures' code clips at 60; the theorems do not).",
    RATE_DEVIATION,
    "Notes vs Li et al. (typographical differences): (a) Theorem 1 prints γ = max{5κ, E} (Li et al.: 8κ), which "
    "gives η0 = 2/(5L) > 1/(4L), against Lemma 1's condition: both are run and evaluated (the 5κ series uses the "
    "notes' step size and their eq. 3); (b) eq. (3) reads κ/(γ+T−1)·(2B/μ + μγ/2·‖w_1 − w*‖²) where Li et al. write "
    "2κ/(γ+T)·(B/μ + 2L‖w_0 − w*‖²): equal up to T − 1 vs T when γ = 8κ, so the 8κ curves use Li et al.'s form; "
    "(c) the notes' proof sets γ = max{8κ, E} − 1 (not their theorem's 5κ) and ends with μ(γ+1)/2·Δ_t where Δ_1 is "
    "meant; (d) their indices start at 1 (w_1 is the initial model), so eq. (3) is evaluated at their T = our T + 1.",
)


@dataclass(frozen=True)
class ConvexConfig(knobs.FigureConfig):
    """Theorems 1-3 vs measured gaps: λ = 1e-4, E = 10, K = 10, the theorem's η_t."""

    datasets: tuple[str, ...] = DATASETS
    schemes: tuple[str, ...] = SCHEMES
    local_steps: int = 10  # E
    clients_per_round: int = 10  # K (Schemes I and II)
    weight_decay: float = 1e-4  # λ (Li et al.'s value; μ = λ)
    notes_gamma_factor: float = 5.0  # the notes' γ = max{5κ, E}; Li et al.'s 8κ is always run
    rounds: int = 400  # T/E on the synthetic sets (T = 4,000 steps)
    mnist_rounds: int = 100  # T/E on mnist balanced (T = 1,000 steps)
    seeds: tuple[int, ...] = (0, 1, 2)  # synthetic sets
    mnist_seeds: tuple[int, ...] = (0, 1)
    num_clients: int | None = None  # N of the synthetic sets; None = 100 (the paper's)
    probes: int = 8  # rounds per run where σ_k², G² are measured
    slope_margin: float = 0.25  # "decays like 1/T": fitted slope within this of −1
    # κ of the rate instance: the same data with λ raised until L/μ = rate_kappa, so that γ = max{8κ, E} ≪ T and
    # Theorem 1's O(1/T) rate is testable (at λ = 1e-4, γ ≈ 1e6-1e7 ≫ any feasible T); 0: no such instance
    rate_kappa: float = 5.0
    deviations: tuple[str, ...] = DEVIATIONS

    CHOICES: ClassVar[dict] = {"datasets": DATASETS, "schemes": SCHEMES}
    ZERO_ALLOWED: ClassVar[tuple] = ("rate_kappa",)
    SMOKE: ClassVar[dict] = dict(datasets=("synthetic(1,1)",), clients_per_round=5, rounds=30, seeds=(0,),
                                 num_clients=10, probes=3)

    def validate(self) -> None:
        if self.rate_kappa and self.rate_kappa <= 1:
            raise ReplicateError(f"ConvexConfig.rate_kappa must be above 1 (κ = L/μ ≥ 1), or 0 for no rate instance, "
                                 f"got {self.rate_kappa}")
        if "full" not in self.schemes:
            raise ReplicateError("ConvexConfig.schemes must include 'full' (Theorem 1, and the notes' series)")
        for dataset in self.datasets:
            for seed in self.seeds_for(dataset):
                self.run_config(dataset, "full", seed, lr0=0.1, decay=0.0)

    def seeds_for(self, dataset: str) -> tuple[int, ...]:
        return self.mnist_seeds if dataset.startswith("mnist") else self.seeds

    def rounds_for(self, dataset: str) -> int:
        return self.mnist_rounds if dataset.startswith("mnist") else self.rounds

    def clients_for(self, dataset: str) -> int | None:
        return None if dataset.startswith("mnist") else self.num_clients

    def series(self) -> list[str]:
        """``full`` (8κ), ``notes`` (full participation, the notes' 5κ), then Schemes I/II."""
        return ["full", "notes", *[s for s in self.schemes if s != "full"]]

    def run_config(self, dataset: str, scheme: str, seed: int, *, lr0: float, decay: float,
                   weight_decay: float | None = None) -> RunConfig:
        return RunConfig(dataset=dataset, num_clients=self.clients_for(dataset),
                         algorithm=FedAvg(scheme, self.clients_per_round), local_steps=self.local_steps,
                         batch_size=batch_size(dataset), client_lr=lr0, lr_schedule="inverse", lr_decay=decay,
                         weight_decay=self.weight_decay if weight_decay is None else weight_decay, clip_norm=None,
                         rounds=self.rounds_for(dataset), seed=seed)


def _theory(c, series: str, balanced: bool) -> dict:
    """L, μ and the scheme the bound is evaluated for (transformed constants for T-Scheme II)."""
    p = c.weights
    if series == "scheme2" and not balanced:
        nu, varsigma = len(p) * p.max(), len(p) * p.min()
        return {"L": nu * c.L, "mu": varsigma * c.mu, "nu": nu, "engine_scheme": "transformed2", "scheme": "II"}
    return {"L": c.L, "mu": c.mu, "nu": 1.0, "engine_scheme": "full" if series == "notes" else series,
            "scheme": {"full": "full", "notes": "full", "scheme1": "I", "scheme2": "II"}[series]}


def convex(config: ConvexConfig, progress: bool = True, log=None) -> pd.DataFrame:
    """Measured gaps and bounds per (dataset, series, seed, logged round): ``kind == "run"`` rows;
    one ``kind == "terms"`` row per (dataset, series) with every constant and the bound's parts."""
    with single_threaded():
        return _convex(config, progress, log)


def _convex(config: ConvexConfig, progress: bool, log) -> pd.DataFrame:
    frames, terms = [], []
    for dataset in config.datasets:
        c, info = cached_constants(dataset, weight_decay=config.weight_decay, batch_size=batch_size(dataset),
                                   num_clients=config.clients_for(dataset))
        balanced = bool(np.allclose(c.weights, c.weights[0]))
        runs, settings = {}, []
        for series in config.series():
            th = _theory(c, series, balanced)
            factor = config.notes_gamma_factor if series == "notes" else 8.0
            g = bounds.gamma(th["L"] / th["mu"], config.local_steps, factor)
            settings.append((series, th, factor, g, 2.0 / (th["mu"] * g), config.local_steps / g))
        def probe_for(run):  # the extra metrics are part of a run's cache key: announce them too
            return RunProbe(rounds=run.rounds, eval_every=run.eval_every, batch_size=run.batch_size,
                            weight_decay=config.weight_decay, minimiser=c.minimiser, probes=config.probes)

        cache.plan([(run, None, probe_for(run)) for run in (
            config.run_config(dataset, th["engine_scheme"], seed, lr0=lr0, decay=decay)
            for _, th, _, _, lr0, decay in settings for seed in config.seeds_for(dataset))], log)
        for series, th, factor, g, lr0, decay in settings:
            for seed in config.seeds_for(dataset):
                run = config.run_config(dataset, th["engine_scheme"], seed, lr0=lr0, decay=decay)
                history = cache.run(run, progress=progress, log=log, extra_metrics=probe_for(run))
                runs[series, seed] = history.assign(dataset=LABELS[dataset], series=series, seed=seed,
                                                    steps=history["round"] * config.local_steps,
                                                    gap=history["train_loss"] + 0.5 * config.weight_decay
                                                    * history["sq_norm"] - c.optimal_value)
            terms.append({"dataset": LABELS[dataset], "series": series, "gamma": g, "lr0": lr0, "lr_decay": decay,
                          "gamma_factor": factor, **th, "constants_s": info["elapsed_s"]})
        every = pd.concat(runs.values(), ignore_index=True)
        G2 = max(c.grad_sq_bound, float(every["G2_run"].max()))
        s2 = max(c.weighted_variance, float(every["sum_p2_sigma2_run"].max()))
        s2_sum = max(float(c.variances.sum()), float(every["sum_sigma2_run"].max()))
        dist = float(every[every["round"] == 0].groupby("seed")["dist_sq"].first().mean())
        for row in [t for t in terms if t["dataset"] == LABELS[dataset]]:
            row |= _bound_terms(c, row, config, G2=G2, s2=s2, s2_sum=s2_sum, dist=dist)
            part = every[every.series == row["series"]]
            form = "notes" if row["series"] == "notes" else "paper"
            steps = part["steps"] + (1 if form == "notes" else 0)
            bound = bounds.fedavg_bound(steps, L=row["L"], mu=row["mu"], B=row["B"], C=row["C"],
                                        local_steps=config.local_steps, init_dist_sq=dist,
                                        gamma_kappa_factor=row["gamma_factor"], form=form)
            frames.append(part.assign(bound=np.asarray(bound), kind="run"))
        if config.rate_kappa:
            rate, row = _rate_runs(dataset, c, config, progress, log)
            frames.append(rate)
            terms.append(row)
    data = pd.concat(frames, ignore_index=True)
    keep = ["kind", "dataset", "series", "seed", "round", "steps", "lr", "train_loss", "gap", "bound", "dist_sq",
            "G2_at", "sum_p2_sigma2_at"]
    return pd.concat([data[keep], pd.DataFrame(terms).assign(kind="terms")], ignore_index=True)


def _rate_runs(dataset: str, c, config: ConvexConfig, progress: bool, log) -> tuple[pd.DataFrame, dict]:
    """Theorem 1 where its rate is testable: the same data and runs (full participation, η_t = 2/(μ(γ + t))) with λ
    raised so that κ = ``rate_kappa`` (c.L − λ is the loss's L, so λ' = (L − λ)/(κ − 1)); the gap against its own F*."""
    lam = (c.L - config.weight_decay) / (config.rate_kappa - 1)
    rc, info = cached_constants(dataset, weight_decay=lam, batch_size=batch_size(dataset),
                                num_clients=config.clients_for(dataset))
    g = bounds.gamma(rc.L / rc.mu, config.local_steps, 8.0)
    lr0, decay = 2.0 / (rc.mu * g), config.local_steps / g
    runs = [config.run_config(dataset, "full", seed, lr0=lr0, decay=decay, weight_decay=lam)
            for seed in config.seeds_for(dataset)]
    probes = [RunProbe(rounds=run.rounds, eval_every=run.eval_every, batch_size=run.batch_size, weight_decay=lam,
                       minimiser=rc.minimiser, probes=config.probes) for run in runs]
    cache.plan(list(zip(runs, [None] * len(runs), probes)), log)
    frames = []
    for run, probe in zip(runs, probes):
        history = cache.run(run, progress=progress, log=log, extra_metrics=probe)
        frames.append(history.assign(dataset=LABELS[dataset], series="rate", seed=run.seed,
                                     steps=history["round"] * config.local_steps, kind="run", bound=np.nan,
                                     gap=history["train_loss"] + 0.5 * lam * history["sq_norm"] - rc.optimal_value))
    row = {"dataset": LABELS[dataset], "series": "rate", "gamma": g, "lr0": lr0, "lr_decay": decay, "L": rc.L,
           "mu": rc.mu, "kappa": rc.L / rc.mu, "weight_decay": lam, "F_star": rc.optimal_value,
           "constants_s": info["elapsed_s"]}
    return pd.concat(frames, ignore_index=True), row


def _bound_terms(c, row: dict, config: ConvexConfig, *, G2: float, s2: float, s2_sum: float, dist: float) -> dict:
    """B's three terms (Li et al. eq. 5), C, and the two parts of the bound's bracket."""
    E, K, N, nu = config.local_steps, config.clients_per_round, c.num_clients, row["nu"]
    G2_used = nu**2 * G2
    s2_used = nu**2 * s2_sum / N**2 if row["engine_scheme"] == "transformed2" else s2
    parts = {"B_variance": s2_used, "B_heterogeneity": 6.0 * row["L"] * c.heterogeneity,
             "B_local_drift": 8.0 * (E - 1) ** 2 * G2_used}
    B = sum(parts.values())
    C = bounds.C_term(local_steps=E, grad_sq_bound=G2_used, clients_per_round=K, num_clients=N, scheme=row["scheme"])
    kappa = row["L"] / row["mu"]
    conditions = bounds.step_size_conditions(L=row["L"], mu=row["mu"], local_steps=E,
                                             gamma_kappa_factor=row["gamma_factor"])
    return {**parts, "B": B, "C": C, "kappa": kappa, "G2": G2_used, "Gamma": c.heterogeneity, "F_star": c.optimal_value,
            "init_dist_sq": dist, "noise_part": (B + C) / row["mu"], "init_part": 2.0 * row["L"] * dist,
            "B_dominant": max(parts, key=parts.get), "lemma1_ok": conditions["eta_at_most_1_over_4L"],
            "lr0_times_4L": row["lr0"] * 4.0 * row["L"]}


def _curves(data: pd.DataFrame) -> pd.DataFrame:
    """Mean, min and max gap over seeds and the bound, per (dataset, series, steps > 0)."""
    runs = data[(data.kind == "run") & (data.steps > 0)]
    out = runs.groupby(["dataset", "series", "steps"]).agg(gap=("gap", "mean"), lo=("gap", "min"), hi=("gap", "max"),
                                                           bound=("bound", "first")).reset_index()
    return out.assign(ratio=out["bound"] / out["gap"])


def plot_convex(data: pd.DataFrame, config: ConvexConfig):
    """Top: measured gap (mean, min–max band) and bound per series, log–log; bottom: bound/measured."""
    import matplotlib.pyplot as plt

    curves = _curves(data)
    datasets = [LABELS[d] for d in config.datasets if LABELS[d] in set(curves["dataset"])]
    fig, axes = plt.subplots(2, len(datasets), figsize=(max(4.3 * len(datasets), 8.0), 6.6), squeeze=False,
                             sharex="col")
    colors = dict(zip(SERIES_LABELS, plt.rcParams["axes.prop_cycle"].by_key()["color"]))
    for j, dataset in enumerate(datasets):
        top, bottom = axes[0, j], axes[1, j]
        for series in [*config.series(), "rate"]:
            part = curves[(curves.dataset == dataset) & (curves.series == series)]
            if part.empty:
                continue
            color = colors[series]
            top.plot(part.steps, part.gap, color=color, lw=1.3, label=f"{SERIES_LABELS[series]}: measured")
            top.fill_between(part.steps, part.lo, part.hi, color=color, alpha=0.2, lw=0)
            if series != "rate":  # the rate instance is measured only (its own F*; no bound drawn)
                top.plot(part.steps, part.bound, "--", color=color, lw=1.1, label=f"{SERIES_LABELS[series]}: bound")
                bottom.plot(part.steps, part.ratio, color=color, lw=1.3)
        top.set(xscale="log", yscale="log", title=dataset, ylabel=r"$E[F(w_T)] - F^*$" if j == 0 else None)
        bottom.set(xscale="log", yscale="log", xlabel="local SGD steps T",
                   ylabel="bound / measured" if j == 0 else None)
    fig.suptitle("Lecture notes Thm 1 (eq. 3) and Li et al. Thms 1–3: bound vs measured gap\n"
                 f"(E = {config.local_steps}, K = {config.clients_per_round}, λ = {config.weight_decay:g}, "
                 "η_t = 2/(μ(γ + t)); mean over seeds, band min–max)", fontsize=10)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=4 if len(datasets) > 2 else 2, frameon=False)
    fig.tight_layout(rect=(0, 0.1 if len(datasets) > 2 else 0.16, 1, 0.94))
    return fig


SOURCES = {
    "full": "Li et al. §3.2, Theorem 1: \"Choose κ=L/μ, γ=max{8κ,E} and the learning rate ηt=2/(μ(γ+t)). Then FedAvg "
            "with full device participation satisfies E[F(wT)]−F* ≤ 2κ/(γ+T)·(B/μ+2L‖w0−w*‖²)\" (eq. 4)",
    "notes": "Notes, Theorem 1 (eq. 3): \"Choose κ = L/μ, γ = max{5κ, E} and the learning rate η_t = 2/(μ(γ+t))\"",
    "scheme1": "Li et al. §3.3, Theorem 2: \"Let Assumption 5 hold and define C=4/K·E²G². Then [the bound of Theorem 1 "
               "with B + C]\"",
    "scheme2": "Li et al. §3.3, Theorem 3: \"Replace Assumption 5 by Assumption 6 and C by C=(N−K)/(N−1)·4/K·E²G². "
               "Then the same bound in Theorem 2 holds.\"",
}
RATE_SOURCE = "Li et al. §1: \"We show in Theorems 1, 2, and 3 that FedAvg has O(1/T) convergence rate.\""


def convex_claims(data: pd.DataFrame, config: ConvexConfig) -> list:
    curves, terms = _curves(data), data[data.kind == "terms"].set_index(["dataset", "series"])
    runs = data[(data.kind == "run") & (data.steps > 0)]
    claims = []
    for series in config.series():
        part = curves[curves.series == series]
        if part.empty:
            continue
        worst = part.groupby("dataset")["ratio"].agg(["min", "max"])
        name = ("Notes Theorem 1 (eq. 3, γ = max{5κ, E}, the notes' η_t)" if series == "notes"
                else f"Li et al. {THEOREM[series]} ({SERIES_LABELS[series]}, γ = max{{8κ, E}})")
        detail = "; ".join(f"{d}: bound/measured {worst.loc[d, 'min']:.3g}–{worst.loc[d, 'max']:.3g}, "
                           + _decomposition(terms.loc[(d, series)]) for d in worst.index)
        claims.append(bound_claim(f"{name}: the bound holds at every T", part["ratio"], detail,
                                  margin="bound ≥ measured mean gap (over seeds) at every logged T",
                                  source=SOURCES.get(series, "")))
    for dataset in pd.unique(runs["dataset"]):
        rows, passed = [], True
        for series in config.series():
            part = runs[(runs.dataset == dataset) & (runs.series == series)]
            if part.empty:
                continue
            tail = part[part.steps >= part.steps.max() / 10]
            per_seed = [log_slope(g.steps, g.gap) for _, g in tail.groupby("seed")]
            mean, lo, hi = slope_interval(per_seed)
            passed &= abs(mean + 1) <= config.slope_margin
            interval = f" [{lo:.3f}, {hi:.3f}]" if np.isfinite(lo) else " (one seed)"
            rows.append(f"{SERIES_LABELS[series]} {mean:.3f}{interval}")
        t_max = int(runs[runs.dataset == dataset].steps.max())
        gamma = terms.loc[(dataset, "full"), "gamma"]
        # The bound is v/(γ + T): its own log-log slope over [T/10, T] is what Theorem 1 predicts there. At T ≪ γ it
        # is flat, so "decays like 1/T" cannot be tested at feasible T: a closed-form check that says so (the bound
        # itself fails the 1/T test there; on an instance with T ≳ γ it would not, and this check would fail).
        bound_slope = -float(np.log((gamma + t_max) / (gamma + t_max / 10)) / np.log(10))
        claims.append(consistency(
            f"{dataset}: Theorem 1's O(1/T) rate is out of reach at feasible T: its own bound is flat there (γ ≫ T)",
            abs(bound_slope + 1) > config.slope_margin,
            f"γ = 8κ = {gamma:.3g} against T = {t_max}: the bound's log–log slope over T ∈ [{t_max // 10}, {t_max}] "
            f"is {bound_slope:.2g} (1/T: −1), η_t falls by {100 * (1 - gamma / (gamma + t_max)):.2g}% over the run, "
            "so the runs are constant-step SGD with η ≈ 1/(4L); measured slopes (mean over seeds, 95% t-interval, "
            "not a test of the rate): " + "; ".join(rows) + f" (measured {'all' if passed else 'not all'} within "
            f"±{config.slope_margin:g} of −1)",
            margin=f"the bound's own slope over the window farther than ±{config.slope_margin:g} from −1: the bound "
                   "itself would fail the 1/T test there", source=RATE_SOURCE))
        rate = runs[(runs.dataset == dataset) & (runs.series == "rate")]
        if not rate.empty:
            claims.append(_rate_claim(dataset, rate, terms.loc[(dataset, "rate")], config))
    full, notes = terms.xs("full", level="series"), terms.xs("notes", level="series")
    claims.append(consistency(
        "Lemma 1 needs η_t ≤ 1/(4L): γ = max{8κ, E} meets it (η0 = 1/(4L)); the notes' max{5κ, E} breaks it",
        bool(full["lemma1_ok"].all() and not notes["lemma1_ok"].any()),
        "4L·η0: " + ", ".join(f"{d}: {full.loc[d, 'lr0_times_4L']:.3g} (8κ) vs {notes.loc[d, 'lr0_times_4L']:.3g} (5κ)"
                             for d in full.index)))
    return claims


def _rate_claim(dataset: str, rate: pd.DataFrame, row: pd.Series, config: ConvexConfig):
    """Theorem 1's O(1/T) rate on the instance where it is testable (``_rate_runs``): the mean log–log slope of
    the measured gap over T ∈ [T/10, T] within ``slope_margin`` of −1. Where T is not ≫ γ there (the bound's own
    slope over the window is farther than ``slope_margin`` from −1: short runs, a large κ) it is no test of the rate,
    and says so as a consistency check."""
    t_max = int(rate.steps.max())
    tail = rate[rate.steps >= t_max / 10]
    mean, lo, hi = slope_interval([log_slope(g.steps, g.gap) for _, g in tail.groupby("seed")])
    interval = f" [{lo:.3f}, {hi:.3f}]" if np.isfinite(lo) else " (one seed)"
    bound_slope = -float(np.log((row["gamma"] + t_max) / (row["gamma"] + t_max / 10)) / np.log(10))
    if abs(bound_slope + 1) > config.slope_margin:  # T not ≫ γ here: the bound itself would fail the 1/T test
        return consistency(f"{dataset}: on the rate instance (κ = {config.rate_kappa:g}) T = {t_max} is not ≫ γ = "
                           f"{row['gamma']:.3g}: the 1/T rate is not tested at this T", True,
                           f"the bound's own log–log slope over T ∈ [{t_max // 10}, {t_max}] is {bound_slope:.2f}; "
                           f"measured {mean:.3f}{interval}", source=RATE_SOURCE, deviations=(RATE_DEVIATION,))
    return check(f"{dataset}: the measured gap decays like 1/T (Theorem 1's O(1/T) rate), on the same data with λ "
                 f"raised to κ = {config.rate_kappa:g}, where T ≫ γ", abs(mean + 1) <= config.slope_margin,
                 f"log–log slope over T ∈ [{t_max // 10}, {t_max}] (mean over seeds, 95% t-interval): {mean:.3f}"
                 f"{interval}; λ = {row['weight_decay']:.3g}, κ = {row['kappa']:.3g}, γ = {row['gamma']:.3g} (the "
                 f"bound's own slope there {bound_slope:.2f})"
                 + ("; the gap falls faster than 1/T" if mean < -1 - config.slope_margin else
                    "; the gap falls slower than 1/T" if mean > -1 + config.slope_margin else ""),
                 margin=f"slope within ±{config.slope_margin:g} of −1", source=RATE_SOURCE,
                 deviations=(RATE_DEVIATION,))


def _decomposition(row: pd.Series) -> str:
    """Which term dominates B (and the bound's bracket), in words."""
    return (f"B = {row['B']:.3g} (8(E−1)²G² {_share(row, 'B_local_drift')}, 6LΓ {_share(row, 'B_heterogeneity')}, "
            f"Σp²σ² {_share(row, 'B_variance')})" + (f", C = {row['C']:.3g}" if row["C"] else "")
            + f", (B+C)/μ = {row['noise_part']:.3g} vs 2L‖w0−w*‖² = {row['init_part']:.3g}, κ = {row['kappa']:.3g}")


def _share(row: pd.Series, name: str) -> str:
    total = row["B_variance"] + row["B_heterogeneity"] + row["B_local_drift"]
    return f"{row[name] / total:.1%}" if total > 0 else "–"


def fitted_slopes(data: pd.DataFrame) -> pd.DataFrame:
    """Per (dataset, series): the mean log–log slope over the last decade of T and its 95% interval."""
    runs = data[(data.kind == "run") & (data.steps > 0)]
    rows = []
    for (dataset, series), part in runs.groupby(["dataset", "series"]):
        tail = part[part.steps >= part.steps.max() / 10]
        mean, lo, hi = slope_interval([log_slope(g.steps, g.gap) for _, g in tail.groupby("seed")])
        rows.append({"dataset": dataset, "series": series, "slope": mean, "low": lo, "high": hi})
    return pd.DataFrame(rows)


