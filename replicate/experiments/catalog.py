"""Which config class holds each figure notebook's knobs (``paper/figure`` → class).

The runner checks ``--set NAME=VALUE`` against these classes before any notebook starts; a test
checks that every notebook's ``parameters`` cell declares exactly its class's knobs. Explicit
strings, imported on demand: no registration at import time.
"""
from __future__ import annotations

import importlib

from replicate.core.errors import ReplicateError

FIGURES = {
    "li2020/table2": "replicate.experiments.li2020.table2:Table2Config",
    "li2020/fig1a": "replicate.experiments.li2020.fig1a:Fig1aConfig",
    "li2020/fig1cd": "replicate.experiments.li2020.schemes:Fig1cdConfig",
    "li2020/fig2": "replicate.experiments.li2020.fig2:Fig2Config",
    "li2020/fig3": "replicate.experiments.li2020.fig3:Fig3Config",
    "li2020/fig4": "replicate.experiments.li2020.schemes:Fig4Config",
    "charles2021/fig1": "replicate.experiments.charles2021.frontiers:Fig1Config",
    "charles2021/fig2": "replicate.experiments.charles2021.frontiers:Fig2Config",
    "charles2021/fig3": "replicate.experiments.charles2021.frontiers:Fig3Config",
    "charles2021/fig4": "replicate.experiments.charles2021.frontiers:Fig4Config",
    "charles2021/fig5": "replicate.experiments.charles2021.simulated:Fig5Config",
    "charles2021/fig7": "replicate.experiments.charles2021.simulated:Fig7Config",
    "charles2021/fig8": "replicate.experiments.charles2021.simulated:Fig8Config",
    "charles2021/fig9": "replicate.experiments.charles2021.fig9:Fig9Config",
    "charles2021/fig10": "replicate.experiments.charles2021.simulated:Fig10Config",
    "charles2021/fig_measured": "replicate.experiments.charles2021.measured:FigMeasuredConfig",
    "charles2021/table1_2": "replicate.experiments.charles2021.tables:Table12Config",
    "charles2021/fig12": "replicate.experiments.charles2021.neural:Fig12Config",
    "charles2021/fig13": "replicate.experiments.charles2021.neural:Fig13Config",
    "charles2021/table3": "replicate.experiments.charles2021.table3:Table3Config",
    "charles2021/fig6": "replicate.experiments.charles2021.tuned:Fig6Config",
    "fedprox2020/table1": "replicate.experiments.fedprox2020.table1:Table1Config",
    "fedprox2020/fig1": "replicate.experiments.fedprox2020.heterogeneity:Fig1Config",
    "fedprox2020/fig2": "replicate.experiments.fedprox2020.epochs:Fig2Config",
    "fedprox2020/fig3": "replicate.experiments.fedprox2020.mu:Fig3Config",
    "fedprox2020/fig4": "replicate.experiments.fedprox2020.mu:Fig4Config",
    "fedprox2020/stragglers": "replicate.experiments.fedprox2020.stragglers:StragglersConfig",
    "khanduri2021/table1": "replicate.experiments.khanduri2021.table1:Table1Config",
    "khanduri2021/fig1": "replicate.experiments.khanduri2021.tradeoff:Fig1Config",
    "khanduri2021/fig1_measured": "replicate.experiments.khanduri2021.measured:Fig1MeasuredConfig",
    "khanduri2021/fig2": "replicate.experiments.khanduri2021.cifar:Fig2Config",
    "khanduri2021/fig3": "replicate.experiments.khanduri2021.cifar:Fig3Config",
    "khanduri2021/fig4": "replicate.experiments.khanduri2021.cifar:Fig4Config",
    "khanduri2021/fig5": "replicate.experiments.khanduri2021.samples:Fig5Config",
    "notes/convex": "replicate.experiments.notes.convex:ConvexConfig",
    "notes/optimal_e": "replicate.experiments.notes.optimal_e:OptimalEConfig",
    "notes/nonconvex": "replicate.experiments.notes.nonconvex:NonconvexConfig",
    "arena/leaderboard": "replicate.experiments.arena.board:ArenaConfig",  # not a paper's figure (issue #42)
}


def config_class(key: str) -> type:
    """The config dataclass of figure ``key`` (``paper/figure``)."""
    try:
        module, _, name = FIGURES[key].partition(":")
    except KeyError:
        raise ReplicateError(f"no config registered for figure {key!r} in replicate.experiments.catalog") from None
    return getattr(importlib.import_module(module), name)
