"""Coverage of every figure and table in the five documents, for the top of REPLICATION.md.

One row per item of each document, so what is missing is as visible as what is done. ``status``:

- ``replicated``: a notebook runs the paper's experiment at the paper's scale;
- ``partial``: a notebook runs it, reduced as ``detail`` says;
- ``not yet``: planned, no notebook yet;
- ``not reproducible here``: needs something this project cannot have (``detail`` says what).

``figures`` names the notebooks (``paper/figure``) whose claims back the row.
"""
from __future__ import annotations

from dataclasses import dataclass

STATUSES = ("replicated", "partial", "not yet", "not reproducible here")


@dataclass(frozen=True)
class Item:
    paper: str
    item: str  # as the document names it
    what: str
    status: str
    detail: str = ""
    figures: tuple[str, ...] = ()


ITEMS: tuple[Item, ...] = (
    # Li et al. 2020 (seed 000)
    Item("li2020", "Table 1", "sampling and averaging schemes", "replicated",
         "definitions implemented as algorithms (Original, Scheme I, II, T-Scheme II); checked by hand-computed tests, "
         "no numbers to compare"),
    Item("li2020", "Table 2", "dataset statistics", "partial",
         "MNIST sets exact; synthetic sets are other draws of the unseeded generators", ("li2020/table2",)),
    Item("li2020", "Figure 1a", "rounds to target vs E", "partial",
         "all four datasets at paper scale; synthetic(1,1) needs ~4× fewer rounds than the paper (see fig1a note)",
         ("li2020/fig1a",)),
    Item("li2020", "Figure 1b", "fewer active devices barely matter, synthetic(0,0)", "replicated",
         "the synthetic(0,0) panel of the Figure 3 notebook (same experiment)", ("li2020/fig3",)),
    Item("li2020", "Figure 1c, 1d", "schemes on mnist balanced / unbalanced", "replicated", "", ("li2020/fig1cd",)),
    Item("li2020", "Figure 2", "fixed vs decayed learning rate on the quadratic counterexample", "replicated", "",
         ("li2020/fig2",)),
    Item("li2020", "Figure 3", "impact of K, four datasets", "replicated", "", ("li2020/fig3",)),
    Item("li2020", "Figure 4", "schemes on the synthetic sets", "replicated", "", ("li2020/fig4",)),
    # Charles & Konečný 2021 (seed 001)
    Item("charles2021", "Table 1", "LocalUpdate special cases", "replicated", "", ("charles2021/table1_2",)),
    Item("charles2021", "Table 2", "rates of ServerOpt on the surrogate", "replicated", "", ("charles2021/table1_2",)),
    Item("charles2021", "Figures 1–4", "analytic Pareto frontiers (γ/K, momentum, α, MAML)", "replicated",
         "ε of eq. (17) reconstructed (spec §5); numbers of L/μ, K and γ PROPOSED where lost",
         ("charles2021/fig1", "charles2021/fig2", "charles2021/fig3", "charles2021/fig4")),
    Item("charles2021", "Figure 5", "simulated MAML frontier for several d", "replicated", "",
         ("charles2021/fig5",)),
    Item("charles2021", "Figures 7–10", "simulated frontiers: L/μ, momentum, α", "replicated", "",
         ("charles2021/fig7", "charles2021/fig8", "charles2021/fig9", "charles2021/fig10")),
    Item("charles2021", "(ours)", "measured LocalUpdate runs against the predicted ρ and ε", "replicated",
         "not a figure of the paper: checks the theory the frontiers rest on", ("charles2021/fig_measured",)),
    Item("charles2021", "Table 3", "FEMNIST / CIFAR-100 / Shakespeare statistics", "not yet",
         "loaders exist for LEAF-format FEMNIST and Shakespeare; CIFAR-100 is not available here"),
    Item("charles2021", "Figures 6 and 11", "FEMNIST: momentum and α with tuned learning rates", "not yet",
         "planned on the engine's CNN path; the local FEMNIST copy is partial (105 writers)"),
    Item("charles2021", "Figures 12–13", "γ sweeps on FEMNIST, CIFAR-100, Shakespeare", "not yet",
         "CIFAR-100 panels not reproducible here (no CIFAR-100 data); FEMNIST and Shakespeare planned"),
    # FedProx (seed 004 + the final paper's straggler figure)
    Item("fedprox2020", "Table 1", "statistics of the real federated datasets", "not yet"),
    Item("fedprox2020", "Figures 1 and 5", "heterogeneity on four synthetic sets", "not yet"),
    Item("fedprox2020", "Figures 2 and 6", "E ∈ {1, 20, 50} with μ = 0 on real data", "not yet"),
    Item("fedprox2020", "Figures 3 and 7", "μ = 0 vs the best μ", "not yet"),
    Item("fedprox2020", "Figure 4", "dissimilarity (variance of local gradients)", "not yet"),
    Item("fedprox2020", "final paper, Figure 1", "0 / 50 / 90 % stragglers, FedAvg vs FedProx", "not yet",
         "Sent140 panels: only the LEAF test split and no GloVe exist here"),
    # STEM (seed 002)
    Item("khanduri2021", "Table 1", "sample and communication complexities", "not yet",
         "cells reconstructed in the spec (§5); a table to typeset, no experiment"),
    Item("khanduri2021", "Figure 1", "analytic b–I trade-off surface", "not yet"),
    Item("khanduri2021", "Figures 2–4", "STEM vs FedAvg vs SCAFFOLD on CIFAR-10", "not yet",
         "the local CIFAR-10 copy is lossy JPEG (quality ~75): runs would be labelled as such"),
    Item("khanduri2021", "Figure 5", "samples accessed for two values of I", "not yet"),
    # Lecture notes (seed 003): no figures; the items are its theorems, evaluated on measured runs
    Item("notes", "Theorem 1 (convex bound)", "Li et al.'s bound against measured FedAvg runs", "not yet"),
    Item("notes", "eq. (8)", "optimal E from estimated constants vs Figure 1a", "not yet"),
    Item("notes", "Theorem 2 / eq. (14)", "non-convex bound on a small MLP", "not yet"),
)
