"""A figure notebook shows its figure inline, as in JupyterLab (issue: no figure appeared)."""
import json

import nbformat
import pytest
from nbclient import NotebookClient

from replicate.core import paths


def test_plot_cell_shows_an_image_inline(tmp_path, monkeypatch):
    monkeypatch.setenv("REPLICATE_BUILD", str(tmp_path))
    nb = nbformat.read(paths.notebooks_dir() / "charles2021_fig1.ipynb", as_version=4)
    NotebookClient(nb, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(paths.notebooks_dir())}}).execute()
    plot_cells = [c for c in nb.cells if c.cell_type == "code" and "plot_" in c.source]
    assert plot_cells, "the notebook has a plot cell"
    images = [o for c in plot_cells for o in c.outputs if "image/png" in o.get("data", {})]
    assert len(images) >= 1, json.dumps([c.outputs for c in plot_cells])[:500]
