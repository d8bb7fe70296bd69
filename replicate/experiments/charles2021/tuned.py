"""Charles & Konečný 2021, Figure 6 (re-plotted as Figure 11; §6 and App. E.3, spec Charles §7.4):
on FEMNIST, server momentum and the proximal strength α with tuned learning rates. "Server
momentum improves convergence, while α has little to no effect, provided we tune learning rates"
— what the quadratic frontiers of Figures 2 and 3 predict.

LocalUpdate with a = 1_K on Reddi et al.'s CNN (as Figures 12-13, :mod:`neural`). Left: α = 0,
ServerOpt = GD without momentum, with Nesterov or with heavy-ball momentum (β = 0.9). Right:
ServerOpt = GD, α over a grid. For each variant (γ, η) is tuned over a grid by the best mean test
accuracy over the last 100 rounds on the first seed(s), then run on every seed.

Symbols → names: γ → ``client_lrs``, η → ``server_lrs``, β → ``beta``, α → ``alphas``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import pandas as pd

from replicate.core.errors import ReplicateError
from replicate.experiments import knobs
from replicate.experiments.charles2021.common import SERVER_LABELS
from replicate.experiments.charles2021.neural import DATA, HALF_DECADES, SERVER_GRID, NeuralRuns, diverged
from replicate.runs.tune import Grid, at_grid_edge
from replicate.runs.measures import final
from replicate.report import plotting
from replicate.report.claims import check, seeds_text

DEVIATIONS = (
    DATA,
    "M = 10, B = 20, one local epoch, 1,500 rounds and the (γ, η) grids are Reddi et al.'s defaults (GUESS, spec "
    "§7.3): the paper's values are masked in the text.",
    "The α values are masked in the text: {0, 0.01, 0.1, 1} is PROPOSED (spec §7.4 GUESS).",
    "'Improves convergence' is read as a higher mean test accuracy over the whole run (the area under the "
    "curve: faster and higher), 'little to no effect' as final accuracies within `alpha_margin` of α = 0 "
    "(PROPOSED margins).",
    "Three seeds (initial model, client schedule, mini-batches, dropout) where the paper shows one run; curves "
    "are seed means with their range.",
)


@dataclass(frozen=True)
class Fig6Config(NeuralRuns):
    """Figure 6 / 11 (FEMNIST): no momentum vs Nesterov vs heavy-ball, and α, each with (γ, η) tuned."""

    datasets: tuple[str, ...] = ("femnist",)  # the paper's Figure 6 is FEMNIST only
    client_lrs: tuple[float, ...] = HALF_DECADES  # γ grid (10^-3 … 10^0)
    server_lrs: tuple[float, ...] = SERVER_GRID  # η grid (10^-3 … 10^1)
    servers: tuple[str, ...] = ("gd", "nesterov", "heavyball")  # left panel, α = 0
    beta: float = 0.9  # β of Nesterov and heavy-ball
    alphas: tuple[float, ...] = (0.0, 0.01, 0.1, 1.0)  # α of the right panel (GD)
    alpha_margin: float = 0.02  # "little to no effect": final test accuracy within 2 points of α = 0
    deviations: tuple[str, ...] = DEVIATIONS

    CHOICES: ClassVar[dict] = {"datasets": ("femnist",), "servers": tuple(SERVER_LABELS)}
    ZERO_ALLOWED: ClassVar[tuple] = ("alphas",)
    FIGURE: ClassVar[str] = "Figure 6"
    SMOKE: ClassVar[dict] = dict(num_clients=2, clients_per_round=2, client_lrs=(0.03162,), server_lrs=(0.01,),
                                 alphas=(0.0, 0.1), rounds=2, seeds=(0,), eval_every=1, tail_rounds=1, workers=1)

    def validate(self) -> None:
        if "gd" not in self.servers or 0.0 not in self.alphas:
            raise ReplicateError("Fig6Config compares against GD without momentum at α = 0: keep 'gd' in servers "
                                 "and 0 in alphas")
        if not 0 < self.beta < 1:
            raise ReplicateError(f"Fig6Config.beta must lie in (0, 1), got {self.beta}")
        if not 0 < self.alpha_margin < 1:
            raise ReplicateError(f"Fig6Config.alpha_margin must lie in (0, 1), got {self.alpha_margin}")
        self._check_windows(self.tail_rounds)

    def variants(self) -> list[tuple[str, str, float]]:
        """(panel, server, α): the servers at α = 0, then GD at every α > 0 (GD at α = 0 appears once)."""
        return ([("momentum", s, 0.0) for s in self.servers]
                + [("alpha", "gd", a) for a in self.alphas if a > 0])

    def grid(self) -> Grid:
        """Every variant's (γ, η) pairs, tuned on the first seeds (``runs.tune.Grid``: the figure tunes it,
        ``experiments.work`` counts its runs)."""
        pairs = [(g, e) for g in self.client_lrs for e in self.server_lrs]
        return Grid({(server, alpha): pairs for _, server, alpha in self.variants()},
                    lambda v, lr, seed: self.config(v[0], v[1], lr, seed), tuple(self.seeds), self.tune_seeds)

    def config(self, server: str, alpha: float, lr: tuple[float, float], seed: int):
        return self.run_config(self.datasets[0], lr[0], lr[1], seed, server=server, alpha=alpha, beta=self.beta)


def _label(server: str, alpha: float) -> str:
    return SERVER_LABELS[server] + (f", α = {alpha:g}" if alpha else "")


def _tail_accuracy(run: pd.DataFrame, tail_rounds: int) -> float:
    """Mean test accuracy over the last ``tail_rounds`` (the paper's selection rule); -inf once diverged."""
    return -math.inf if diverged(run) else final(run, "test_acc", rounds=tail_rounds)


def tuned(config: Fig6Config, log=None) -> pd.DataFrame:
    """Tidy rows: ``kind`` = tuning (per variant and (γ, η): the selection score), curve (per evaluation of
    each variant's chosen (γ, η), every seed) and tuning curve (per evaluation of every tuning run: the full
    grid's curves, on which successive halving is validated, tests/test_halving.py)."""
    variants = {(server, alpha): panel for panel, server, alpha in config.variants()}
    # the best mean tail accuracy; on a tie the smaller γ, then the smaller η
    found = config.grid().tune(lambda run: _tail_accuracy(run, config.tail_rounds),
                               pick=lambda scored: max(scored, key=lambda sl: (sl[0], -sl[1][0], -sl[1][1]))[1],
                               workers=config.workers, log=log)
    rows = [{"kind": "tuning", "panel": variants[v], "variant": _label(*v), "client_lr": g, "server_lr": e,
             "score": score} for v, (g, e), score in found.scores]
    frames = []
    for (server, alpha), seed, history in found.runs:
        g, e = found.chosen[(server, alpha)]
        frames.append(history.assign(kind="curve", panel=variants[(server, alpha)], variant=_label(server, alpha),
                                     server=server, alpha=alpha, client_lr=g, server_lr=e, seed=seed,
                                     diverged=diverged(history), at_edge=_edges(config, g, e)))
    frames += [history.assign(kind="tuning curve", panel=variants[v], variant=_label(*v), server=v[0], alpha=v[1],
                              client_lr=g, server_lr=e, seed=seed, diverged=diverged(history))
               for v, (g, e), seed, history in found.tuning]
    return pd.concat([pd.DataFrame(rows), *frames], ignore_index=True)


def _edges(config: Fig6Config, client_lr: float, server_lr: float) -> str:
    """Which tuned rates sit at an edge of their grid ("" if none): the best may lie beyond it."""
    return ", ".join(name for name, value, grid in (("γ", client_lr, config.client_lrs),
                                                    ("η", server_lr, config.server_lrs))
                     if at_grid_edge(value, grid))


def summary(data: pd.DataFrame, config: Fig6Config) -> pd.DataFrame:
    """Per variant and seed: the chosen (γ, η), mean test accuracy over the run and over the last rounds."""
    out = []
    curves = data[data.kind == "curve"].astype({"seed": int})
    for (variant, seed), run in curves.groupby(["variant", "seed"], sort=False):
        run = run.sort_values("round")
        out.append({"variant": variant, "server": run.server.iloc[0], "alpha": float(run.alpha.iloc[0]),
                    "seed": seed, "client_lr": run.client_lr.iloc[0], "server_lr": run.server_lr.iloc[0],
                    "at_edge": str(run.at_edge.iloc[0]) if "at_edge" in run and isinstance(run.at_edge.iloc[0], str)
                    else "",
                    "mean_test_acc": float(run.test_acc.mean()) if not run.diverged.iloc[0] else math.nan,
                    "final_test_acc": _tail_accuracy(run, config.tail_rounds),
                    "final_evaluations": int((run["round"] > run["round"].max() - config.tail_rounds).sum())})
    return pd.DataFrame(out)


def _edge_note(table: pd.DataFrame) -> str:
    edges = table[table.at_edge != ""].drop_duplicates("variant")
    return ("; tuned at the edge of the grid (the best may lie beyond): "
            + ", ".join(f"{r.variant}: {r.at_edge}" for r in edges.itertuples()) if len(edges) else "")


SOURCE = ("§6, Figure 6: \"Our results match the Pareto frontiers in Figures 2 and 3: Server momentum improves "
          "convergence, while [α] has little to no effect, provided we tune learning rates.\"")


def tuned_claims(data: pd.DataFrame, config: Fig6Config) -> list:
    table, seeds = knobs.held_out(summary(data, config), config)  # a tuning seed is never a test seed
    claims = []
    edge = _edge_note(table)
    gd = table[(table.server == "gd") & (table.alpha == 0)].set_index("seed")
    momentum = [s for s in config.servers if s != "gd"]
    if momentum:
        parts = {s: table[(table.server == s) & (table.alpha == 0)].set_index("seed") for s in ("gd", *momentum)}
        better = all(bool((parts[s].mean_test_acc > gd.mean_test_acc).all()) for s in momentum)
        claims.append(check(
            "Server momentum improves convergence with tuned rates: a higher mean test accuracy over the run than "
            "no momentum, every seed", better,
            "; ".join(f"{SERVER_LABELS[s]} {seeds_text(parts[s].mean_test_acc, '.3f', 'diverged')} "
                      f"(γ = {parts[s].client_lr.iloc[0]:g}, η = {parts[s].server_lr.iloc[0]:g})"
                      for s in ("gd", *momentum)) + edge,
            paper_value="Fig. 6 left: momentum and Nesterov above gradient",
            margin=f"strictly higher, every seed{seeds}", source=SOURCE))
    others = sorted(a for a in config.alphas if a > 0)
    if others:
        alpha0 = gd.final_test_acc
        gaps = {a: (table[(table.server == "gd") & (table.alpha == a)].set_index("seed").final_test_acc - alpha0)
                for a in others}
        small = all(bool((gap.abs() <= config.alpha_margin).all()) for gap in gaps.values())
        evaluations = int(table.final_evaluations.min())
        stable = config.stable(evaluations)
        claims.append(check(
            "The proximal strength α has little to no effect once rates are tuned: final test accuracy within "
            f"{config.alpha_margin:.0%} of α = 0, every seed", small and stable,
            f"final test accuracy α = 0: {seeds_text(alpha0, '.3f', 'diverged')}; difference to it: "
            + ", ".join(f"α = {a:g}: {seeds_text(g, '+.3f', 'diverged')}" for a, g in gaps.items()) + edge,
            paper_value="Fig. 6 right: the α curves nearly coincide",
            margin=f"|Δ| ≤ {config.alpha_margin:.2f} on every seed; {config.final_note(evaluations)}{seeds}",
            source=SOURCE))
    return claims


def plot_tuned(data: pd.DataFrame, config: Fig6Config):
    """Columns: momentum, α; rows: test accuracy, training loss; seed mean and range per variant."""
    import matplotlib.pyplot as plt

    curves = data[(data.kind == "curve") & ~data.diverged.astype(bool)]
    fig, axes = plt.subplots(2, 2, figsize=(11, 7), sharex=True)
    for col, (panel, title) in enumerate((("momentum", "ServerOpt, α = 0"), ("alpha", "proximal strength α, GD"))):
        shown = curves[(curves.panel == panel) | ((curves.server == "gd") & (curves.alpha == 0))]
        for variant, part in shown.groupby("variant", sort=False):
            label = f"{variant} (γ = {part.client_lr.iloc[0]:g}, η = {part.server_lr.iloc[0]:g})"
            if "at_edge" in part and isinstance(part.at_edge.iloc[0], str) and part.at_edge.iloc[0]:
                label += f" ({part.at_edge.iloc[0]} at its grid's edge)"
            for row, metric in enumerate(("test_acc", "train_loss")):
                stats = part.groupby("round")[metric].agg(["mean", "min", "max"])
                line, = axes[row, col].plot(stats.index, stats["mean"], label=label)
                axes[row, col].fill_between(stats.index, stats["min"], stats["max"], color=line.get_color(),
                                            alpha=0.2, lw=0)
        axes[0, col].set(title=title, ylabel="test accuracy" if col == 0 else None, ylim=(0, 1))
        axes[1, col].set(xlabel="communication round", ylabel="training loss" if col == 0 else None, yscale="log")
        plotting.plain_log_ticks(axes[1, col])
        axes[0, col].legend(fontsize=7, frameon=False)
    fig.suptitle(f"Charles & Konečný 2021, Figure 6: FEMNIST (LEAF copy), (γ, η) tuned per variant on "
                 f"{config.tune_seeds} seed(s), β = {config.beta:g}; seeds {list(config.seeds)}", fontsize=9)
    fig.tight_layout()
    return fig
