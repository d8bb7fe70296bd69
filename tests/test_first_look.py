"""A first look shows something (issue #37 item 9): every figure shows measured data in every panel.

Each notebook declares here what its figure draws as measured: the column its panels are drawn by, the value
plotted, and which rows are measured (not the paper's numbers, not censored, not a tuning row). Every panel of
the figure must hold at least one such row with a finite value: checked on the committed figures (always), and
on the smoke figures the notebooks just wrote: ``make test`` runs this file after nbval with
``REPLICATE_SMOKE_FIGURES`` naming that half's figures folder (without it, that test is skipped with the reason).
"""
import json
import math
import os
from pathlib import Path

import pandas as pd
import pytest

from replicate.core import paths

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"

# figure -> (panel column or None for one panel, plotted value (or values: any of them), measured rows as a
# DataFrame.query, or None: every row)
CURVE, THEORY = "kind == 'curve'", None
RULES = {
    "li2020/fig1a": ("dataset", "rounds", "source == 'ours' and censored == False"),  # floor rows: censored empty
    "li2020/fig1cd": ("dataset", "train_loss", None),
    "li2020/fig2": ("panel", "y", None),
    "li2020/fig3": ("dataset", "train_loss", None),
    "li2020/fig4": ("dataset", "train_loss", None),
    "li2020/table2": ("dataset", "ours", None),
    **{f"charles2021/fig{n}": ("panel", "rho", THEORY) for n in (1, 2, 3, 4, 9)},  # analytic figures: computed
    **{f"charles2021/fig{n}": ("panel", "rho", "kind == 'simulated'") for n in (5, 7, 8, 10)},
    "charles2021/fig_measured": ("panel", "rho", "kind == 'measured'"),
    "charles2021/fig6": ("panel", "train_loss", CURVE),
    "charles2021/fig12": ("dataset", "train_loss", CURVE),
    "charles2021/fig13": ("dataset", "train_loss", CURVE),
    "charles2021/table1_2": ("table", ("max_abs_diff", "rho_measured"), "kind != 'analytic'"),
    "charles2021/table3": (None, "ours", None),
    **{f"fedprox2020/{name}": ("dataset", "train_loss", None) for name in ("fig1", "fig2", "fig3", "fig4", "stragglers")},
    "fedprox2020/table1": (None, "ours", None),
    "khanduri2021/fig1": ("kind", "samples", THEORY),
    "khanduri2021/fig1_measured": (None, "last_train_loss", "role == 'test'"),
    **{f"khanduri2021/fig{n}": ("setting", "train_loss", CURVE) for n in (2, 3, 4)},
    "khanduri2021/fig5": (None, "train_loss", CURVE),
    "khanduri2021/table1": (None, "samples_exp", "kind == 'rate'"),
    "notes/convex": ("dataset", "train_loss", "kind == 'run'"),
    "notes/nonconvex": ("model", "train_loss", "kind == 'run'"),
    "notes/optimal_e": ("dataset", "E_star", "kind == 'summary'"),
    "arena/leaderboard": ("dataset", "final_loss", None),
}


def empty_panels(key: str, data: pd.DataFrame) -> list[str]:
    """The panels of figure ``key`` (``RULES``) in which no measured row has a finite plotted value."""
    panel, value, measured = RULES[key]
    rows = data.query(measured) if measured else data
    values = [value] if isinstance(value, str) else list(value)
    numbers = rows[values].apply(pd.to_numeric, errors="coerce").map(math.isfinite)
    finite = rows[numbers.any(axis=1)]
    if panel is None:
        return [] if len(finite) else ["(the figure)"]
    return [str(p) for p in pd.unique(data[panel].dropna()) if not (finite[panel] == p).any()] or (
        [] if len(finite) else ["(every panel: no panel column values)"])


def test_every_notebook_declares_what_its_first_look_shows():
    notebooks = {p.stem.replace("_", "/", 1) for p in NOTEBOOKS.glob("*.ipynb")}
    assert notebooks == set(RULES), "a notebook without a rule here, or a rule without a notebook"


def test_the_rule_sees_an_empty_panel():
    data = pd.DataFrame({"dataset": ["a", "a", "b", "b"], "source": ["ours", "paper", "ours", "paper"],
                         "censored": [False, False, True, False], "rounds": [10.0, 12.0, float("nan"), 15.0]})
    assert empty_panels("li2020/fig1a", data) == ["b"]  # b's only measured row is censored; the paper's row not ours
    assert empty_panels("li2020/fig1a", data.assign(censored=False, rounds=1.0)) == []


@pytest.mark.parametrize("key", sorted(RULES))
def test_every_committed_figure_shows_a_measured_point_per_panel(key):
    found = [p for p in (paths.figures_dir() / f"{key}.csv", paths.figures_dir() / "cpu_scale" / f"{key}.csv")
             if p.is_file()]
    if not found:
        pytest.skip(f"{key}: no committed figure (its paper profile needs a GPU: figures/gpu_work.json)")
    for csv in found:
        assert empty_panels(key, pd.read_csv(csv)) == [], csv


@pytest.mark.smoke
@pytest.mark.parametrize("key", sorted(RULES))
def test_every_smoke_figure_shows_a_measured_point_per_panel(key):
    folder = Path(os.environ.get("REPLICATE_SMOKE_FIGURES", "")) if os.environ.get("REPLICATE_SMOKE_FIGURES") else None
    if folder is None or not folder.is_dir():
        pytest.skip("REPLICATE_SMOKE_FIGURES names no folder of smoke figures (make test sets it after nbval)")
    csv, record = folder / f"{key}.csv", folder / f"{key}.claims.json"
    if not record.is_file():
        pytest.skip(f"{key}: its notebook wrote no figure here (skipped for its data, or not run)")
    assert json.loads(record.read_text())["profile"] == "smoke", record
    assert empty_panels(key, pd.read_csv(csv)) == []
