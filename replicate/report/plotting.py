"""One plotting style for every figure, and deterministic PNG/PDF writing.

Figures are drawn from tidy long-form frames (one row per plotted point) so the
CSV committed beside each figure is exactly what was plotted.
"""
from __future__ import annotations

from pathlib import Path

# No backend is forced here: a Jupyter kernel (JupyterLab, papermill) keeps its inline backend,
# so a notebook's figure shows under its plot cell; headless scripts fall back to Agg.
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from cycler import cycler

STYLE = {
    "figure.dpi": 110,
    "savefig.dpi": 150,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "font.size": 9,
    "legend.fontsize": 8,
    "svg.hashsalt": "replicate",
}
# seaborn's "colorblind" palette, set as sns.set_palette("colorblind") sets it (the colour cycle), without
# importing seaborn here: its import (scipy.stats) is ≈ 1.3 s of every notebook's start, and most figures draw
# with matplotlib alone; the functions that draw with seaborn import it (tests/test_plotting.py checks the copy).
COLORBLIND = ("#0173B2", "#DE8F05", "#029E73", "#D55E00", "#CC78BC", "#CA9161", "#FBAFE4", "#949494", "#ECE133",
              "#56B4E9")
plt.rcParams.update(STYLE | {"axes.prop_cycle": cycler(color=COLORBLIND)})

# Fixed metadata so re-running a figure does not change its bytes needlessly.
_PNG_META = {"Software": None}
_PDF_META = {"Creator": None, "Producer": None, "CreationDate": None, "ModDate": None}


def lines(data: pd.DataFrame, x: str, y: str, hue: str | None = None, facet: str | None = None,
          *, logx: bool = False, logy: bool = False, xlabel: str | None = None,
          ylabel: str | None = None, title: str | None = None, style: str | None = None,
          markers: bool = False, ncols: int | None = None, sharey: bool = False,
          hlines: dict | None = None, panel_size=(3.6, 2.8), legend_title: str | None = None):
    """Line plot of a tidy frame, one panel per ``facet`` value, one line per ``hue``.

    ``hlines`` maps a facet value (or None for every panel) to {label: y} reference lines.
    """
    import seaborn as sns

    facets = list(pd.unique(data[facet])) if facet else [None]
    ncols = ncols or min(len(facets), 4)
    nrows = int(np.ceil(len(facets) / ncols))
    fig, axes = plt.subplots(nrows, ncols, figsize=(panel_size[0] * ncols, panel_size[1] * nrows),
                             squeeze=False, sharey=sharey)
    for ax, value in zip(axes.flat, facets):
        part = data if facet is None else data[data[facet] == value]
        sns.lineplot(part, x=x, y=y, hue=hue, style=style, ax=ax, markers=markers,
                     errorbar=("pi", 100) if "seed" in part else None, estimator="mean")
        for label, level in ((hlines or {}).get(value, {}) | (hlines or {}).get(None, {})).items():
            ax.axhline(level, ls="--", lw=1, color="0.3", label=label)
        ax.set(xscale="log" if logx else "linear", yscale="log" if logy else "linear",
               xlabel=xlabel or x, ylabel=ylabel or y, title=str(value) if facet else (title or ""))
        if ax.get_legend() is not None:
            ax.legend(title=legend_title, frameon=False)
    for ax in list(axes.flat)[len(facets):]:
        ax.set_visible(False)
    if facet and title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


def inset_zoom(ax, data: pd.DataFrame, x: str, y: str, hue: str, x_range, bounds=(0.45, 0.4, 0.5, 0.45)):
    """Add an inset axis that zooms on ``x_range`` of the curves already drawn on ``ax``."""
    import seaborn as sns

    inner = ax.inset_axes(bounds)
    part = data[(data[x] >= x_range[0]) & (data[x] <= x_range[1])]
    sns.lineplot(part, x=x, y=y, hue=hue, ax=inner, legend=False,
                 errorbar=("pi", 100) if "seed" in part else None)
    inner.set(xlabel="", ylabel="")
    inner.tick_params(labelsize=6)
    return inner


NICE_MANTISSAS = (1, 1.5, 2, 3, 4, 5, 7)  # log-axis tick values per decade when a decade or less is shown


def log_ticks(low: float, high: float) -> list[float]:
    """Readable tick values for a log axis over [low, high]: the nice mantissas of every decade in range,
    thinned to at most 7 (every decade alone when many decades are shown)."""
    import math

    decades = range(math.floor(math.log10(low)), math.ceil(math.log10(high)) + 1)
    for mantissas in (NICE_MANTISSAS, (1, 2, 5), (1,)):
        ticks = [m * 10.0**d for d in decades for m in mantissas if low <= m * 10.0**d <= high]
        if len(ticks) <= 7:
            return ticks
    return ticks[::len(ticks) // 7 + 1]


def plain_log_ticks(ax) -> None:
    """Log-scale y ticks as plain numbers at readable values (1.5, 2, 3, 4, not 3.9×10⁰ or unlabelled
    minor ticks); a linear axis when the data span less than a factor 3 (a log axis would show one or
    two ticks). Call it after plotting."""
    from matplotlib.ticker import FixedLocator, FormatStrFormatter, NullFormatter, NullLocator

    low, high = ax.get_ylim()
    if low > 0 and high / low < 3:
        ax.set_yscale("linear")
        return
    ax.yaxis.set_major_locator(FixedLocator(log_ticks(max(low, 1e-12), high)))
    ax.yaxis.set_major_formatter(FormatStrFormatter("%g"))
    ax.yaxis.set_minor_locator(NullLocator())
    ax.yaxis.set_minor_formatter(NullFormatter())


def save(fig, path_stem: Path) -> list[Path]:
    """Write ``<stem>.png`` and ``<stem>.pdf`` with fixed metadata; returns the paths."""
    path_stem.parent.mkdir(parents=True, exist_ok=True)
    png, pdf = path_stem.with_suffix(".png"), path_stem.with_suffix(".pdf")
    fig.savefig(png, metadata=_PNG_META, bbox_inches="tight")
    fig.savefig(pdf, metadata=_PDF_META, bbox_inches="tight")
    return [png, pdf]
