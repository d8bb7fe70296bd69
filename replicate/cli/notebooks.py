"""The figure notebooks a command names, found without importing the heavy floors (``figures --list`` and the
checks of a command's figure names answer in well under a second); the notebooks themselves are the
catalogue (``replicate.experiments.catalog``)."""
from __future__ import annotations

import difflib

from replicate.core.errors import ReplicateError
from replicate.experiments.catalog import FigureNotebook, discover


def resolve(names: list[str], available: list[FigureNotebook] | None = None) -> list[FigureNotebook]:
    """Select notebooks by ``paper/figure``, ``paper_figure`` or a whole ``paper``; none = all."""
    available = available if available is not None else discover()
    if not names:
        return available
    chosen = []
    for name in names:
        key = name.replace("_", "/", 1) if "/" not in name else name
        match = [nb for nb in available if nb.key == key or nb.paper == name]
        if not match:
            names = [nb.key for nb in available] + sorted({nb.paper for nb in available})
            close = difflib.get_close_matches(key, names, n=2, cutoff=0.6)
            raise ReplicateError(f"unknown figure {name!r}"
                                 + (f"; did you mean {' or '.join(close)}?" if close else "")
                                 + f" (`python -m replicate figures --list` shows the {len(available)} there are)")
        chosen += [nb for nb in match if nb not in chosen]
    return chosen
