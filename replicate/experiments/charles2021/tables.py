"""Charles & Konečný 2021 (AISTATS), Tables 1 and 2.

Table 1's algorithms as LocalUpdate configurations, each checked against its textbook round
(:mod:`replicate.theory.classic`), and Table 2's rates ρ(κ) per ServerOpt, checked by running
LocalUpdate on the worst-case quadratic.
"""
from __future__ import annotations

from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch

from replicate import theory as th
from replicate.report.claims import consistency
from replicate.theory import classic
from replicate.experiments.charles2021.common import SERVER_LABELS, _Profiled, _rounds_for, run_local_update


RATE_FORMULAS = {"no momentum": "(κ−1)/(κ+1)", "Nesterov": "1 − 2/√(3κ+1)", "heavy-ball": "(√κ−1)/(√κ+1)"}


@dataclass(frozen=True)
class _Row:
    """One Table 1 algorithm: its LocalUpdate configuration and its textbook round."""

    algorithm: str
    coefficients: str  # a, as in Table 1
    conditions: str
    a: tuple
    gamma: float
    server_lr: float
    alpha: float = 0.0
    single_client: bool = False


def _table1_rows(L: float, K: int) -> list[_Row]:
    gamma, eta = 0.5 / L, 0.8 / L
    return [
        _Row("Mini-batch SGD", "e_1", "–", tuple(th.basis(1)), gamma, eta),
        _Row("Lookahead", "1_K", "one client, α = 0; η = β_LA γ", tuple(th.ones(K)), gamma, 0.5 * gamma,
             single_client=True),
        _Row("FedSGD", "e_1", "B = ∞", tuple(th.basis(1)), gamma, eta),
        _Row("FedAvg, Reptile", "1_K", "α = 0; FedAvg: η = γ", tuple(th.ones(K)), gamma, gamma),
        _Row("FedProx, MetaMinibatchProx", "1_K", "α > 0; FedProx: η = γ", tuple(th.ones(K)), gamma, gamma, alpha=2.0),
        _Row("FOMAML", "e_K", "α = 0", tuple(th.basis(K)), gamma, eta),
        _Row("MAML", "e_{2K−1}", "B = ∞, quadratics (Theorem 2)", tuple(th.basis(2 * K - 1)), gamma, eta),
    ]


def _textbook_round(row: _Row, problem, x, K):
    if row.algorithm == "Mini-batch SGD":
        return classic.minibatch_sgd_round(problem, x, row.server_lr)
    if row.algorithm == "Lookahead":
        return classic.lookahead_round(problem, x, row.gamma, K, slow_lr=row.server_lr / row.gamma)
    if row.algorithm == "FedSGD":
        return classic.fedsgd_round(problem, x, row.server_lr)
    if row.algorithm == "FedAvg, Reptile":
        return classic.fedavg_round(problem, x, row.gamma, K)
    if row.algorithm == "FedProx, MetaMinibatchProx":
        return classic.fedprox_round(problem, x, row.gamma, K, row.alpha)
    if row.algorithm == "FOMAML":
        return classic.fomaml_round(problem, x, row.gamma, K, row.server_lr)
    return classic.maml_round(problem, x, row.gamma, K, row.server_lr)


@dataclass(frozen=True)
class Table12Config(_Profiled):
    """Tables 1-2: Table 1's algorithms as LocalUpdate configurations, and Table 2's rates,
    each checked by running LocalUpdate through ``replicate.fl.engine``; the textbook forms
    come from :mod:`replicate.theory.classic`."""

    mu: float = 1.0
    condition: float = 10.0
    zeta: float = 1.0
    local_steps: int = 4
    clients: int = 6
    dim: int = 4
    table1_rounds: int = 5
    servers: tuple[str, ...] = ("gd", "nesterov", "heavyball")
    seed: int = 0  # seed of the random client Hessians and optima for Table 1
    @property
    def deviations(self) -> tuple[str, ...]:
        return tuple(self._common_deviations((self.condition,), self.servers) + [
            "Table 1's coefficient and condition cells are lost; rows reconstructed in spec §1.4 (DERIVED); MAML "
            "with K local steps = K − 1 inner steps, giving e_{2K−1} (convention, spec §1.4)",
            f"Table 1 checked on a random quadratic (d = {self.dim}, {self.clients} clients, full client batches), "
            f"K = {self.local_steps}, {self.table1_rounds} rounds; Table 2 checked on the worst-case quadratic "
            "(Appendices B.3 + C.2) with ServerOpt tuned as in spec §4"])


def _rate_configurations(mu, L, K):
    """Guaranteed-regime operating points of Table 1 rows, for the Table 2 check."""
    return [("Mini-batch SGD", th.basis(1), 0.5 / L, 0.0),
            ("FedAvg", th.ones(K), 0.5 / L, 0.0),
            ("FedProx", th.ones(5 * K), 0.9 / (L + 2.0), 2.0),
            ("FOMAML", th.basis(K), 1.0 / (K * L), 0.0),
            ("MAML", th.basis(2 * K - 1), 1.0 / ((2 * K - 1) * L), 0.0)]


def table1_2(config: Table12Config) -> pd.DataFrame:
    L = config.condition * config.mu
    K = config.local_steps
    rng = np.random.default_rng(config.seed)
    problem = th.random_problem(config.dim, config.clients, config.mu, L, config.zeta, rng)
    single = th.random_problem(config.dim, 1, config.mu, L, config.zeta, rng)
    start = rng.standard_normal(config.dim)
    rows = []
    for row in _table1_rows(L, K):
        clients = single if row.single_client else problem
        ours = run_local_update(clients, start, row.a, row.gamma, th.ServerOpt(row.server_lr), config.table1_rounds,
                                alpha=row.alpha)
        textbook = [ours[0]]
        for _ in range(config.table1_rounds):
            textbook.append(_textbook_round(row, clients, textbook[-1], K))
        rows.append(dict(table="Table 1", algorithm=row.algorithm, a=row.coefficients, conditions=row.conditions,
                         K=th.local_steps(row.a), gamma=row.gamma, alpha=row.alpha,
                         max_abs_diff=float((ours - torch.stack(textbook)).abs().max())))
    for name, a, gamma, alpha in _rate_configurations(config.mu, L, K):
        worst = th.worst_case_problem(config.mu, L, config.zeta, a, gamma, alpha)
        mu_s, L_s = th.surrogate_eigenvalue([config.mu, L], a, gamma, alpha)
        for server in config.servers:
            eta, beta = th.server_tuning(mu_s, L_s, server)
            rho = float(th.rho_of_kappa(L_s / mu_s, server))
            xs = run_local_update(worst, np.ones(3), a, gamma, th.ServerOpt(eta, beta, server == "nesterov"),
                                  _rounds_for(rho), alpha=alpha)
            curvatures = np.linspace(mu_s, L_s, 20001)
            rows.append(dict(table="Table 2", algorithm=name, a=f"{'1' if a[0] else 'e'}_{len(a)}", server=server,
                             K=th.local_steps(a), gamma=gamma, alpha=alpha, kappa=L_s / mu_s, eta=eta, beta=beta,
                             rho=rho,
                             rho_iteration=float(th.iteration_radius(curvatures, eta, beta, server).max()),
                             rho_measured=th.observed_rate(xs, memory=1 if server == "gd" else 2),
                             kind="measured", series=SERVER_LABELS[server]))
    kappa = np.geomspace(1.0, config.condition, 300)
    for server in config.servers:
        rows.extend(dict(table="Table 2", server=server, kappa=k, rho=r, kind="analytic", series=SERVER_LABELS[server])
                    for k, r in zip(kappa, th.rho_of_kappa(kappa, server)))
    return pd.DataFrame(rows)


TABLE1_SOURCE = ("§2.1, Table 1: \"Special cases of LocalUpdate when ServerOpt is gradient descent are given in "
                 "Table 1.\"")
TABLE2_SOURCE = ("§4.2, Theorem 3: \"Suppose [...] ServerOpt is gradient descent with Nesterov, heavy-ball, or no "
                 "momentum. Then for some hyperparameter setting of ServerOpt, and as in Table 2, the iterates of "
                 "LocalUpdate satisfy [(14)]\"")
MOMENTUM_SOURCE = ("§5, Impact of Server Momentum: \"As shown empirically by Hsu et al. (2019) and as reflected in "
                   "Table 2, server momentum can improve convergence.\"")


def table1_2_claims(data: pd.DataFrame, config: Table12Config):
    table1 = data[data["table"] == "Table 1"]
    measured = data[(data["table"] == "Table 2") & (data["kind"] == "measured")]
    claims = [consistency(f"{r.algorithm} is LocalUpdate with a = {r.a} ({r.conditions})",
                          r.max_abs_diff < 1e-12, f"max |Δx| over {config.table1_rounds} rounds vs the textbook form: "
                                                  f"{r.max_abs_diff:.1e}", basis="identity",
                          source=TABLE1_SOURCE)
              for r in table1.itertuples()]
    for server in config.servers:
        rows = measured[measured["server"] == server]
        error = np.max(np.abs(rows["rho_measured"] / rows["rho"] - 1))
        formula = np.max(np.abs(rows["rho_iteration"] / rows["rho"] - 1))
        # on the tight instance the iteration's rate is ρ(κ) by construction (agreement to 1e-16 … 3e-7): an
        # identity of our implementation, not a measurement that could miss
        claims.append(consistency(f"Table 2, {SERVER_LABELS[server]}: LocalUpdate converges at ρ(κ) (tight instance)",
                                  error < 1e-5 and formula < 1e-6,
                                  f"largest relative error over {len(rows)} configurations: measured {error:.1e}, "
                                  f"worst-case iteration radius {formula:.1e}", basis="identity",
                                  source=TABLE2_SOURCE))
    pivot = measured.pivot(index="algorithm", columns="server", values="rho_measured")
    ordered = bool(np.all(pivot["heavyball"] < pivot["nesterov"]) and np.all(pivot["nesterov"] < pivot["gd"]))
    claims.append(consistency("Server momentum improves the rate: heavy-ball < Nesterov < none (on the tight "
                              "instances: the order of Table 2's ρ)", ordered,
                              "holds for every configuration" if ordered else "violated", basis="closed-form",
                              source=MOMENTUM_SOURCE))
    return claims


def plot_table1_2(data: pd.DataFrame):
    """Left: Table 2's ρ(κ) with the measured rates; right: Table 1 with its equivalence check."""
    fig = plt.figure(figsize=(11.5, 3.9))
    grid = fig.add_gridspec(1, 2, width_ratios=(1.0, 1.9))
    ax = fig.add_subplot(grid[0])
    colours = dict(zip(SERVER_LABELS.values(), plt.rcParams["axes.prop_cycle"].by_key()["color"]))
    table2 = data[data["table"] == "Table 2"]
    for label, rows in table2[table2["kind"] == "analytic"].groupby("series", sort=False):
        ax.plot(rows["kappa"], rows["rho"], color=colours[label], label=f"Table 2: {label}, {RATE_FORMULAS[label]}")
    for label, rows in table2[table2["kind"] == "measured"].groupby("series", sort=False):
        ax.plot(rows["kappa"], rows["rho_measured"], ls="none", marker="o", mfc="none", color=colours[label],
                label=f"measured: {label}")
    ax.set(xscale="log", xlabel="surrogate condition number κ", ylabel="convergence rate ρ",
           title="Table 2: ρ(κ), formula vs LocalUpdate on its tight instances")
    ax.legend(frameon=False, fontsize=6.5)
    table_ax = fig.add_subplot(grid[1])
    table_ax.axis("off")
    table1 = data[data["table"] == "Table 1"]
    cells = [[r.algorithm, r.a, r.conditions, f"{r.max_abs_diff:.0e}"] for r in table1.itertuples()]
    table = table_ax.table(cellText=cells, colLabels=["Algorithm", "a", "Conditions", "max |Δx| vs textbook"],
                           loc="center", cellLoc="left", colWidths=[0.3, 0.22, 0.33, 0.17])
    table.auto_set_font_size(False)
    table.set_fontsize(7)
    table.scale(1.0, 1.35)
    table_ax.set_title("Table 1: special cases of LocalUpdate (ServerOpt = GD)")
    fig.suptitle("Charles & Konečný 2021, Tables 1 and 2", fontsize=11)
    fig.tight_layout()
    return fig
