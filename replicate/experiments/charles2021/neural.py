"""Charles & Konečný 2021, Appendix F, Figures 12 and 13: the client learning rate γ governs a
convergence-accuracy trade-off for FedAvg on non-convex models too (spec Charles §7.3, §7.5-§7.6).

LocalUpdate with a = 1_K (each sampled client sends the sum of its local gradients, §1.2) and
ServerOpt = gradient descent with rate η, one panel per dataset: FEMNIST with Reddi et al.'s CNN
(``conv_dropout``: two 3×3 convs, two dropouts) and TFF's Shakespeare with their 2×256 LSTM
predicting every next character (``char_lstm_tff``; spec §7.2); CIFAR-100 is not available here.
Figure 12 fixes η and sweeps γ; Figure 13 tunes η for each γ (smallest mean training loss over the
last 100 rounds). Both plot the training loss against the round and omit runs that diverge. The
paper: on all three tasks γ changes "not just the speed of convergence, but what point the
algorithm converges to"; "for both FEMNIST and CIFAR-100, smaller client learning rates eventually
reach lower training losses than higher learning rates", a larger γ being better at first; with η
tuned, larger γ "may do much better initially".

Settings the text masks are Reddi et al.'s defaults (spec §7.3, GUESS): M = 10 clients a round
drawn without replacement (the same clients for every (γ, η): the sampling stream depends only on
(seed, round)), batch 20 (FEMNIST) or 4 (Shakespeare), one local epoch, 1,500 (FEMNIST) or 1,200
(Shakespeare) rounds, γ and η on half-decade grids.

Symbols → names: γ → ``client_lrs``, η → ``server_lrs``, M → ``clients_per_round``, B →
``batch_size``, K → ``local_epochs`` (epochs of ⌈n_k/B⌉ steps).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, NamedTuple

import numpy as np
import pandas as pd

from replicate.core.errors import ReplicateError
from replicate.experiments import knobs
from replicate.runs.tune import Grid, at_grid_edge
from replicate.fl.algorithms import LocalUpdate
from replicate.runs.config import RunConfig
from replicate.runs.measures import final
from replicate.report import plotting  # noqa: F401  (applies the project's plot style)
from replicate.report.claims import check, seeds_text

HALF_DECADES = tuple(float(f"{10 ** (e / 2):.4g}") for e in range(-6, 1))  # 10^-3, 10^-2.5, …, 10^0: γ
SERVER_GRID = tuple(float(f"{10 ** (e / 2):.4g}") for e in range(-6, 3))  # 10^-3 … 10^1: η (Reddi's, GUESS)


class Task(NamedTuple):
    """A dataset as Reddi et al.'s defaults train it (spec §7.2-§7.3)."""

    label: str
    model: str  # ``RunConfig.model``
    batch_size: int  # B
    rounds: int
    official: str  # the loader of the paper's data (its stand-in: ``replicate.data.variants``)


TASKS = {"femnist": Task("FEMNIST", "conv_dropout", 20, 1500, "emnist_tff"),  # TFF's EMNIST-62 (spec §7)
         "shakespeare_tff": Task("Shakespeare", "char_lstm_tff", 4, 1200, "shakespeare_tff")}
# The paper's "smaller γ eventually reach lower training losses" names FEMNIST and CIFAR-100 only
OVERTAKES = ("femnist",)

FEMNIST_COPY = ("FEMNIST is the offline stand-in (data_source = 'stand-in'), the local LEAF copy: 105 writers with "
                "train and test (14,708 / 1,685 samples; LEAF's per-writer 90/10 sample split), not TFF's 3,400 "
                "writers (671,585 / 77,483): see Table 3.")
DATA = "Data: TFF's federated EMNIST-62 and Shakespeare, as the paper (a stand-in, where chosen, is listed last)."
DEVIATIONS = (
    DATA,
    "M = 10, B = 20 / 4, one local epoch, 1,500 / 1,200 rounds and the γ / η grids are Reddi et al.'s defaults "
    "(GUESS, spec §7.3): the paper's values are masked in the text.",
    "Figure 12's fixed η is masked; η = 0.01 is PROPOSED: the message is the sum of ≈ 7 local gradients, so "
    "η = 1 would take 7 full-gradient steps of size 1 from any small γ.",
    "Three seeds (initial model, client schedule, mini-batches, dropout) where the paper shows one run; curves "
    "are seed means with their range. Shakespeare's loss counts every position (padding included) and its "
    "accuracy only real characters, as Reddi et al.'s code.",
)


@dataclass(frozen=True)
class NeuralRuns(knobs.DataChoice, knobs.FigureConfig):
    """What the neural figures (6, 12, 13) share: the datasets, the LocalUpdate runs and their grids."""

    datasets: tuple[str, ...] = tuple(TASKS)  # one panel each (CIFAR-100 is not available here)
    num_clients: int | None = None  # the first N clients only; None = all (105 FEMNIST writers, 715 roles)
    client_lrs: tuple[float, ...] = HALF_DECADES  # γ grid (10^-3 … 10^0)
    server_lrs: tuple[float, ...] = (0.01,)  # η: one value fixes it (Figure 12); several are tuned
    clients_per_round: int = 10  # M
    batch_size: int | None = None  # B; None = the dataset's (20 FEMNIST, 4 Shakespeare)
    local_epochs: int = 1  # K, in epochs
    rounds: int | None = None  # communication rounds; None = the dataset's (1,500 FEMNIST, 1,200 Shakespeare)
    seeds: tuple[int, ...] = (0, 1, 2)
    tune_seeds: int = 1  # the first seeds choose the tuned rates
    eval_every: int = 10  # rounds between evaluations of the global model
    tail_rounds: int = 100  # "final" = mean over the last 100 rounds (the paper's tuning window)
    workers: int = 2  # processes computing runs side by side

    CHOICES: ClassVar[dict] = {"datasets": tuple(TASKS)}
    # A "final" value that decides a verdict averages at least this many evaluations: one or two evaluations of
    # a noisy neural run move by more than a claim's margin (Figure 6's α claim once passed by 0.0001 on two).
    MIN_FINAL_EVALUATIONS: ClassVar[int] = 5

    def dataset_names(self) -> tuple[str, ...]:
        """The loaders its panels read (``replicate.experiments.requirements``)."""
        return tuple(self.loader(TASKS[d].official) for d in self.datasets)

    def __post_init__(self):  # the stand-in a config reads is one of its deviations (derived, never set)
        kept = tuple(d for d in self.deviations if d != FEMNIST_COPY)
        substituted = "femnist" in self.datasets and self.stand_ins([TASKS["femnist"].official])
        object.__setattr__(self, "deviations", kept + ((FEMNIST_COPY,) if substituted else ()))

    def rounds_for(self, dataset: str) -> int:
        return self.rounds or TASKS[dataset].rounds

    def final_note(self, evaluations: int) -> str:
        """The count behind "final" (the fewest evaluations any run has in its last ``tail_rounds``), and
        whether it is enough for a verdict (``MIN_FINAL_EVALUATIONS``)."""
        n = evaluations
        return (f"final = mean over the last {self.tail_rounds} rounds: {n} evaluation{'s' if n != 1 else ''}"
                + ("" if self.stable(n) else f" (fewer than {self.MIN_FINAL_EVALUATIONS}: too few for a stable "
                                              "verdict, so the claim cannot pass)"))

    def stable(self, evaluations: int) -> bool:
        return evaluations >= self.MIN_FINAL_EVALUATIONS

    def _check_windows(self, *windows: int) -> None:
        knobs.check_tune_seeds(self)
        shortest = min(self.rounds_for(d) for d in self.datasets)
        if not all(self.eval_every <= w <= shortest for w in windows):
            raise ReplicateError(f"{type(self).__name__}: need eval_every ≤ tail_rounds, early_rounds ≤ rounds "
                                 f"(got eval_every {self.eval_every}, windows {list(windows)}, rounds {shortest})")

    def grid(self) -> Grid:
        """Per (dataset, γ), the η grid tuned on the first seeds; one η (Figure 12) tunes nothing
        (``runs.tune.Grid``: the figure tunes it, ``experiments.work`` counts its runs)."""
        tuned = len(self.server_lrs) > 1
        return Grid({(d, g): list(self.server_lrs) for d in self.datasets for g in self.client_lrs},
                    lambda dg, e, s: self.run_config(dg[0], dg[1], e, s), tuple(self.seeds),
                    self.tune_seeds if tuned else 0)

    def run_config(self, dataset: str, client_lr: float, server_lr: float, seed: int, server: str = "gd",
                   alpha: float = 0.0, beta: float = 0.9) -> RunConfig:
        """One (γ, η, seed) on ``dataset``; ``server`` = gd / nesterov / heavyball with momentum β, ``alpha`` = α."""
        task = TASKS[dataset]
        momentum = {"gd": 0.0, "nesterov": beta, "heavyball": beta}[server]
        algorithm = LocalUpdate(server_lr=server_lr, momentum=momentum, nesterov=server == "nesterov",
                                clients_per_round=self.clients_per_round, alpha=alpha)
        return RunConfig(dataset=self.loader(task.official), num_clients=self.num_clients, model=task.model,
                         algorithm=algorithm, local_steps=None, local_epochs=self.local_epochs,
                         batch_size=self.batch_size or task.batch_size, client_lr=client_lr, lr_schedule="constant",
                         weight_decay=0.0, clip_norm=None, rounds=self.rounds_for(dataset), seed=seed,
                         eval_every=self.eval_every, execution="auto")


@dataclass(frozen=True)
class Fig12Config(NeuralRuns):
    """Figure 12: training loss per round for each client rate γ at a fixed server rate η, per dataset."""

    early_rounds: int = 150  # "early" = mean over the first 150 rounds (10 %; PROPOSED)
    spread: float = 0.05  # "γ changes the point reached": final losses of the stable γ differ by ≥ 5 % (PROPOSED)
    deviations: tuple[str, ...] = DEVIATIONS

    FIGURE: ClassVar[str] = "Figure 12"
    SMOKE: ClassVar[dict] = dict(num_clients=2, clients_per_round=2, client_lrs=(0.01, 0.1), rounds=2, seeds=(0,),
                                 eval_every=1, tail_rounds=1, early_rounds=1, workers=1)

    def validate(self) -> None:
        self._check_windows(self.tail_rounds, self.early_rounds)
        if len(self.client_lrs) < 2:
            raise ReplicateError(f"{type(self).__name__}.client_lrs needs at least two γ values to compare")
        if not 0 < self.spread < 1:
            raise ReplicateError(f"{type(self).__name__}.spread must lie in (0, 1), got {self.spread}")


@dataclass(frozen=True)
class Fig13Config(Fig12Config):
    """Figure 13: as Figure 12, with η tuned for each γ on the first seed(s)."""

    server_lrs: tuple[float, ...] = SERVER_GRID  # η grid (10^-3 … 10^1), tuned per γ
    FIGURE: ClassVar[str] = "Figure 13"
    SMOKE: ClassVar[dict] = {**Fig12Config.SMOKE, "datasets": ("femnist",), "server_lrs": (0.01, 0.1)}


def diverged(run: pd.DataFrame) -> bool:
    """Non-finite, or ending above where it started: the paper omits such runs."""
    loss = run.sort_values("round")["train_loss"].to_numpy(dtype=float)
    return not np.isfinite(loss).all() or loss[-1] > loss[0]


def sweep(config: Fig12Config, log=None) -> pd.DataFrame:
    """Tidy rows: ``kind`` = tuning (per dataset and (γ, η): mean final loss over the tuning seeds), curve (per
    evaluation of the chosen η's run, every seed), with ``diverged`` per curve, and, where η is tuned (Figure 13),
    tuning curve (per evaluation of every tuning run: the full grid's curves, tests/test_halving.py)."""
    tuned = len(config.server_lrs) > 1  # one η: Figure 12, nothing to tune
    # the lowest mean final training loss; on a tie the smaller η
    found = config.grid().tune(lambda run: final(run, "train_loss", rounds=config.tail_rounds),
                               pick=lambda scored: min(scored, key=lambda se: (se[0], se[1]))[1],
                               workers=config.workers, log=log)
    rows = [{"kind": "tuning", "dataset": d, "client_lr": g, "server_lr": e, "final_train_loss": score}
            for (d, g), e, score in found.scores]
    frames = []
    for (d, g), s, history in found.runs:
        e = found.chosen[(d, g)]
        frames.append(history.assign(kind="curve", dataset=d, client_lr=g, server_lr=e, seed=s,
                                     diverged=diverged(history),
                                     eta_at_edge=tuned and at_grid_edge(e, config.server_lrs)))
    if tuned:
        frames += [history.assign(kind="tuning curve", dataset=d, client_lr=g, server_lr=e, seed=s,
                                  diverged=diverged(history)) for (d, g), e, s, history in found.tuning]
    return pd.concat([pd.DataFrame(rows), *frames], ignore_index=True)


def summary(data: pd.DataFrame, config: Fig12Config) -> pd.DataFrame:
    """Per (dataset, γ, seed): η, diverged, early and final mean training loss, final test accuracy."""
    out = []
    curves = data[data.kind == "curve"].astype({"seed": int})
    for (d, g, s), run in curves.groupby(["dataset", "client_lr", "seed"], sort=False):
        last = run[run["round"] > run["round"].max() - config.tail_rounds]
        out.append({"dataset": d, "client_lr": g, "seed": s, "server_lr": run.server_lr.iloc[0],
                    "eta_at_edge": bool(run.get("eta_at_edge", pd.Series([False])).iloc[0]),
                    "diverged": bool(run.diverged.iloc[0]),
                    "early_train_loss": final(run, "train_loss", early=config.early_rounds),
                    "final_train_loss": final(run, "train_loss", rounds=config.tail_rounds),
                    "final_evaluations": len(last), "final_test_acc": float(last.test_acc.mean())})
    return pd.DataFrame(out)


APP_F = "App. F (Figures 12-13): "
EARLY_SOURCE = {"Figure 12": APP_F + "\"smaller client learning rates eventually reach lower training losses than "
                                     "higher learning rates [...] While [the largest γ] initially performs better "
                                     "than all other methods, it is eventually surpassed\"",
                "Figure 13": APP_F + "\"when the server learning rate is tuned, larger client learning rates may do "
                                     "much better initially.\""}
POINT_SOURCE = APP_F + ("\"on all three tasks [...] the choice of client learning rate can impact not just the speed "
                        "of convergence, but what point the algorithm converges to.\"")
LOWER_SOURCE = APP_F + ("\"For both FEMNIST and CIFAR-100, smaller client learning rates eventually reach lower "
                        "training losses than higher learning rates.\"")


def sweep_claims(data: pd.DataFrame, config: Fig12Config) -> list:
    """Per dataset: a larger γ is faster early; γ changes the loss reached; and (FEMNIST) a smaller γ ends lower."""
    table, seeds = summary(data, config), ""
    tuned = " (η tuned per γ)" if len(config.server_lrs) > 1 else f" (η = {config.server_lrs[0]:g})"
    if len(config.server_lrs) > 1:  # η chosen on the first seeds: the claims test the others
        table, seeds = knobs.held_out(table, config)
    claims = []
    for d in config.datasets:
        part = table[table.dataset == d]
        kept = sorted(g for g, runs in part.groupby("client_lr") if not runs.diverged.any())
        early = part.pivot(index="seed", columns="client_lr", values="early_train_loss")[kept]
        final = part.pivot(index="seed", columns="client_lr", values="final_train_loss")[kept]
        name = TASKS[d].label
        evaluations = int(part.final_evaluations.min()) if len(part) else 0
        window = (f"early = mean training loss over rounds ≤ {config.early_rounds}; {config.final_note(evaluations)}; "
                  f"among the γ that did not diverge on any seed: {_list(kept)}{seeds}")
        stable = config.stable(evaluations)
        edges = sorted(set(part[part.eta_at_edge].client_lr))
        edge = (f"; tuned η at the edge of its grid {_list(config.server_lrs)} for γ = {_list(edges)}: the best η "
                "may lie beyond it" if edges else "")
        faster = len(kept) >= 2 and bool((early.diff(axis=1).iloc[:, 1:] < 0).all().all())
        claims.append(check(
            f"{name}: a larger client rate γ is faster early{tuned}: the early loss falls with γ on every seed",
            faster, "early loss per γ: " + _by_gamma(early) + edge, paper_value="Fig. 12/13: larger γ better initially",
            margin=f"strictly decreasing across adjacent γ, every seed; {window}",
            source=EARLY_SOURCE.get(config.FIGURE, "")))
        ratio = final.max(axis=1) / final.min(axis=1) if kept else pd.Series(dtype=float)
        apart = len(kept) >= 2 and bool((ratio >= 1 + config.spread).all())
        claims.append(check(
            f"{name}: γ changes the training loss reached{tuned}", apart and stable,
            "final loss per γ: " + _by_gamma(final) + (f"; highest / lowest: {_list(ratio.round(3))}" if kept else "")
            + edge,
            paper_value="all three tasks: γ changes what point the algorithm converges to",
            margin=f"highest / lowest final loss ≥ {1 + config.spread:g} on every seed; {window}",
            source=POINT_SOURCE))
        if d in OVERTAKES:
            top = max(kept) if kept else None
            best = final.idxmin(axis=1) if kept else None
            overtakes = len(kept) >= 2 and bool((best < top).all()) and bool(
                (final.min(axis=1) <= (1 - config.spread) * final[top]).all())
            claims.append(check(
                f"{name}: a smaller γ eventually reaches a lower training loss than the largest stable γ{tuned}",
                overtakes and stable, "final loss per γ: " + _by_gamma(final)
                + (f"; lowest at γ = {_list(sorted(set(best)))}" if kept else "") + edge,
                paper_value="FEMNIST and CIFAR-100: smaller γ eventually reach lower training losses",
                margin=f"on every seed the lowest final loss is at a γ below the largest and ≥ "
                       f"{config.spread:.0%} below it; {window}", source=LOWER_SOURCE))
    return claims


def _list(values) -> str:
    return "[" + ", ".join(f"{v:g}" for v in values) + "]"


def _by_gamma(frame: pd.DataFrame | None) -> str:
    if frame is None or frame.empty:
        return "no γ converged"
    return ", ".join(f"γ={g:g}: {seeds_text(frame[g], '.3f', 'inf')}" for g in frame.columns)


def plot_sweep(data: pd.DataFrame, config: Fig12Config):
    """Per dataset (columns): training loss and test accuracy per round, one curve per non-diverged γ
    (seed mean and range)."""
    import matplotlib.pyplot as plt

    curves = data[(data.kind == "curve") & ~data.diverged.astype(bool)]
    fig, axes = plt.subplots(2, len(config.datasets), figsize=(5.5 * len(config.datasets), 7), squeeze=False)
    colours = plt.get_cmap("viridis")(np.linspace(0, 0.9, len(config.client_lrs)))
    for col, d in enumerate(config.datasets):
        for colour, g in zip(colours, config.client_lrs):
            part = curves[(curves.dataset == d) & (curves.client_lr == g)]
            if part.empty:
                continue
            label = f"γ = {g:g}" + (f", η = {part.server_lr.iloc[0]:g}" if len(config.server_lrs) > 1 else "")
            if "eta_at_edge" in part and part.eta_at_edge.astype(bool).any():
                label += " (η at its grid's edge)"
            for row, metric in enumerate(("train_loss", "test_acc")):
                stats = part.groupby("round")[metric].agg(["mean", "min", "max"])
                axes[row, col].plot(stats.index, stats["mean"], color=colour, label=label)
                axes[row, col].fill_between(stats.index, stats["min"], stats["max"], color=colour, alpha=0.2, lw=0)
        gone = sorted(set(data[(data.kind == "curve") & (data.dataset == d) & data.diverged.astype(bool)].client_lr))
        task = TASKS[d]
        axes[0, col].set(yscale="log", ylabel="training loss" if col == 0 else None,
                         title=f"{task.label}: B = {config.batch_size or task.batch_size}"
                               + (f"; diverged, omitted: γ = {_list(gone)}" if gone else ""))
        plotting.plain_log_ticks(axes[0, col])
        axes[1, col].set(xlabel="communication round", ylabel="test accuracy" if col == 0 else None, ylim=(0, 1))
        axes[0, col].legend(fontsize=7, frameon=False)
    eta = "η tuned per γ" if len(config.server_lrs) > 1 else f"η = {config.server_lrs[0]:g}"
    fig.suptitle(f"Charles & Konečný 2021, {config.FIGURE}: {eta}, M = {config.clients_per_round}, "
                 f"{config.local_epochs} local epoch; seeds {list(config.seeds)}", fontsize=9)
    fig.tight_layout()
    return fig
