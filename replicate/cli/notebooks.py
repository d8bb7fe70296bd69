"""The figure notebooks, found and named without importing the heavy floors (``figures --list`` and the
checks of a command's figure names answer in well under a second)."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from replicate.core import paths
from replicate.core.errors import ReplicateError


@dataclass(frozen=True)
class FigureNotebook:
    paper: str
    figure: str
    path: Path

    @property
    def key(self) -> str:
        return f"{self.paper}/{self.figure}"

    @property
    def title(self) -> str:
        cells = json.loads(self.path.read_text())["cells"]
        for cell in cells:
            if cell["cell_type"] == "markdown":
                return "".join(cell["source"]).splitlines()[0].lstrip("# ").strip()
        return ""


def discover(folder: Path | None = None) -> list[FigureNotebook]:
    """Every ``notebooks/<paper>_<figure>.ipynb``, in name order."""
    folder = folder or paths.notebooks_dir()
    found = []
    for path in sorted(folder.glob("*.ipynb")):
        paper, _, figure = path.stem.partition("_")
        if figure:
            found.append(FigureNotebook(paper, figure, path))
    return found


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
            raise ReplicateError(f"unknown figure {name!r}; run `python -m replicate figures --list` "
                                 f"to see the {len(available)} available (e.g. {available[0].key if available else '-'})")
        chosen += [nb for nb in match if nb not in chosen]
    return chosen
