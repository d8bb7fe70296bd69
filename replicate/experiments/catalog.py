"""The figure notebooks and the config class each one builds: the catalogue of figures.

A figure is declared once, by its notebook ``notebooks/<paper>_<figure>.ipynb``: the notebook imports its
config class and calls ``Class.for_profile(...)``, and that call is what this module reads (by parsing
the notebook's code, not running it). Nothing else lists the figures: ``figures --list``, the runner's check
of ``--set NAME=VALUE`` before any notebook starts, the data requirements and the tests all read
``FIGURES``, so a new notebook is in the catalogue when it is saved. Cheap to import (JSON and ``ast``;
the config modules are imported on demand by :func:`config_class`).
"""
from __future__ import annotations

import ast
import importlib
import json
from dataclasses import dataclass
from functools import cached_property
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
        for cell in self._cells:
            if cell["cell_type"] == "markdown":
                return "".join(cell["source"]).splitlines()[0].lstrip("# ").strip()
        return ""

    @cached_property
    def _cells(self) -> list[dict]:
        return json.loads(self.path.read_text())["cells"]

    @cached_property
    def config(self) -> str | None:
        """``module:Class`` of the config the notebook builds (its ``X.for_profile(...)`` call, ``X`` resolved
        through the notebook's imports), or None when its code makes no such call."""
        imported: dict[str, str] = {}  # a name in the notebook → the dotted path it stands for
        for cell in self._cells:
            if cell["cell_type"] != "code":
                continue
            source = "".join(cell["source"])  # IPython's magics and shell lines are not Python: blanked
            source = "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines())
            try:
                tree = ast.parse(source)
            except SyntaxError:  # a cell that is not Python declares nothing
                continue
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and node.module:
                    imported.update({a.asname or a.name: f"{node.module}.{a.name}" for a in node.names})
                elif isinstance(node, ast.Import):  # `import a.b as m` names a.b; `import a.b` binds a
                    imported.update({a.asname: a.name for a in node.names if a.asname})
                    imported.update({a.name.split(".")[0]: a.name.split(".")[0] for a in node.names if not a.asname})
            for node in ast.walk(tree):
                if isinstance(node, ast.Attribute) and node.attr == "for_profile":
                    dotted = ast.unparse(node.value).split(".")  # exp.Fig2Config or Fig2Config
                    if dotted[0] in imported:
                        module, _, name = ".".join([imported[dotted[0]], *dotted[1:]]).rpartition(".")
                        return f"{module}:{name}"
        return None


def discover(folder: Path | None = None) -> list[FigureNotebook]:
    """Every ``notebooks/<paper>_<figure>.ipynb``, in name order (a paper's name has no underscore)."""
    folder = folder or paths.notebooks_dir()
    found = []
    for path in sorted(folder.glob("*.ipynb")):
        paper, _, figure = path.stem.partition("_")
        if figure:
            found.append(FigureNotebook(paper, figure, path))
    return found


def figures(folder: Path | None = None) -> dict[str, str | None]:
    """``{"paper/figure": "module:Class"}`` of every notebook in ``folder`` (None: its code builds no config)."""
    return {nb.key: nb.config for nb in discover(folder)}


FIGURES = figures()


def config_class(key: str) -> type:
    """The config dataclass of figure ``key`` (``paper/figure``)."""
    if key not in FIGURES:
        raise ReplicateError(f"no figure {key!r}: its notebook would be notebooks/{key.replace('/', '_', 1)}.ipynb")
    if FIGURES[key] is None:
        raise ReplicateError(f"notebooks/{key.replace('/', '_', 1)}.ipynb builds no config: its code must import its "
                             "config class and call `Class.for_profile(profile, ...)` (docs/extending.md, A figure)")
    module, _, name = FIGURES[key].partition(":")
    return getattr(importlib.import_module(module), name)
