"""Every notebook's parameters cell holds its figure's knobs; values are type- and range-checked
against the figure's config before anything runs, and a changed knob reaches the run."""
import json

import papermill
import pandas as pd
import pytest

from replicate.cli import runner
from replicate.core import paths
from replicate.core.errors import ReplicateError
from replicate.experiments import catalog, knobs
from replicate.experiments.charles2021.frontiers import Fig2Config
from replicate.experiments.li2020.fig1a import Fig1aConfig

NOTEBOOKS = runner.discover()


def test_the_catalogue_is_the_notebooks_and_each_names_its_config_class():
    assert sorted(catalog.FIGURES) == sorted(nb.key for nb in NOTEBOOKS)
    for key in catalog.FIGURES:  # every notebook builds a figure config, read from its own code
        assert issubclass(catalog.config_class(key), knobs.FigureConfig), key
    assert catalog.FIGURES["li2020/fig2"] == "replicate.experiments.li2020.fig2:Fig2Config"


def _notebook(folder, name: str, *cells: str):
    cells = [{"cell_type": "code", "metadata": {}, "source": source, "outputs": [], "execution_count": None}
             for source in cells]
    (folder / f"{name}.ipynb").write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4,
                                                      "nbformat_minor": 5}))


def test_a_notebook_is_read_for_its_config_whatever_its_import_form(tmp_path):
    _notebook(tmp_path, "notes_a", "profile = 'smoke'",
              "from replicate.experiments.li2020 import fig2 as exp\nconfig = exp.Fig2Config.for_profile(profile)")
    _notebook(tmp_path, "notes_b", "%matplotlib inline",  # a magic is skipped, not an error
              "from replicate.experiments.li2020.fig1a import Fig1aConfig\nc = Fig1aConfig.for_profile('paper')")
    _notebook(tmp_path, "notes_c", "print('no config here')")
    _notebook(tmp_path, "notes_d", "%matplotlib inline\nimport replicate.experiments.li2020.fig3\n!ls\n"
              "config = replicate.experiments.li2020.fig3.Fig3Config.for_profile('smoke')")
    assert catalog.figures(tmp_path) == {"notes/a": "replicate.experiments.li2020.fig2:Fig2Config",
                                         "notes/b": "replicate.experiments.li2020.fig1a:Fig1aConfig",
                                         "notes/c": None, "notes/d": "replicate.experiments.li2020.fig3:Fig3Config"}


def test_a_figure_without_a_config_or_notebook_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(catalog.FIGURES, "notes/c", None)
    with pytest.raises(ReplicateError, match=r"notebooks/notes_c.ipynb builds no config: .*Class.for_profile"):
        catalog.config_class("notes/c")
    with pytest.raises(ReplicateError, match=r"no figure 'notes/zzz': its notebook would be notebooks/notes_zzz"):
        catalog.config_class("notes/zzz")


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda nb: nb.key)
def test_parameters_cell_declares_every_knob_and_passes_it_on(notebook):
    cls = catalog.config_class(notebook.key)
    declared = papermill.inspect_notebook(str(notebook.path))  # as papermill parses the cell
    assert list(declared) == ["profile", "out_dir", *knobs.names(cls)]
    assert all(declared[name]["default"] == "None" for name in knobs.names(cls))
    code = "\n".join("".join(c["source"]) for c in json.loads(notebook.path.read_text())["cells"]
                     if c["cell_type"] == "code" and "parameters" not in c["metadata"].get("tags", []))
    assert f"{cls.__name__}.for_profile(profile, out_dir=out_dir" in code  # checked before any compute
    assert all(f"{name}={name}" in code for name in knobs.names(cls))
    for profile in ("smoke", "paper"):  # both profiles are valid configs of every figure
        cls.for_profile(profile)
        cls.for_profile(profile, out_dir=None)  # as the notebook calls it


def test_none_keeps_the_profile_value_and_lists_become_tuples():
    smoke = Fig1aConfig.for_profile("smoke")
    assert Fig1aConfig.for_profile("smoke", max_rounds=None, seeds=None) == smoke
    changed = Fig1aConfig.for_profile("smoke", seeds=[3, 4], lr=0.05, max_rounds=7)
    assert (changed.seeds, changed.lr, changed.max_rounds) == ((3, 4), 0.05, 7)
    assert Fig1aConfig.for_profile("paper").max_rounds == 500 and smoke.max_rounds == 12
    assert Fig2Config.for_profile("smoke", conditions=10).conditions == (10.0,)


@pytest.mark.parametrize("overrides, message", [
    ({"lr": -0.1}, r"lr must be > 0, got -0\.1"),
    ({"lr": "fast"}, "lr must be a number"),
    ({"max_rounds": 2.5}, "max_rounds must be an integer"),
    ({"clients_per_round": 0}, "clients_per_round must be ≥ 1"),
    ({"seeds": []}, "seeds needs at least one value"),
    ({"seeds": [-1]}, "seeds must be ≥ 0"),
    ({"datasets": ["cifar"]}, "datasets must be one of mnist_balanced"),
    ({"rounds": 3}, "has no parameter.*rounds"),
    ({"lr": float("nan")}, "lr must be finite"),
    ({"seeds": "[0, 1]"}, r"seeds takes a list, got the text '\[0, 1\]'.*-y '\{seeds: \[0, 1\]\}'"),  # papermill -p
])
def test_bad_values_get_one_clear_error(overrides, message):
    with pytest.raises(ReplicateError, match=message):
        Fig1aConfig.for_profile("smoke", **overrides)


def test_cross_field_checks_run_before_compute():
    from replicate.experiments.li2020.fig2 import Fig2Config as LiFig2
    with pytest.raises(ReplicateError, match="one decay value per entry"):
        LiFig2.for_profile("smoke", local_steps=[1, 5])
    with pytest.raises(ReplicateError, match="choose one of|must be one of"):
        Fig2Config.for_profile("smoke", servers=["adam"])


def test_runner_rejects_a_bad_value_before_any_notebook_runs(monkeypatch):
    def never(*args, **kwargs):
        raise AssertionError("a notebook ran although a --set value was invalid")
    monkeypatch.setattr(papermill, "execute_notebook", never)
    with pytest.raises(ReplicateError, match=r"li2020/fig1a: Fig1aConfig\.lr must be > 0"):
        runner.run(["li2020/fig1a", "li2020/fig3"], "smoke", {"lr": -1})
    with pytest.raises(ReplicateError, match="charles2021/fig2 has no parameter.*lr"):
        runner.run(["charles2021/fig2", "li2020/fig1a"], "smoke", {"lr": 0.1})


def test_a_changed_knob_reaches_the_published_data(tmp_path, monkeypatch):
    monkeypatch.setenv("REPLICATE_BUILD", str(tmp_path / "build"))
    assert runner.run(["charles2021/fig2"], "smoke", {"conditions": [10], "kappa_points": 20,
                                                      "out_dir": str(tmp_path / "out")}) == 0
    data = pd.read_csv(tmp_path / "out" / "charles2021" / "fig2.csv")
    assert set(data["condition"]) == {10}
    assert not (paths.figures_dir() / "charles2021" / "fig2.csv").read_bytes() == (
        tmp_path / "out" / "charles2021" / "fig2.csv").read_bytes()


def test_every_parameters_cell_line_parses_as_papermill_reads_it():
    """papermill lists a notebook's parameters from its tagged cell (``papermill --help-notebook``, JupyterLab's
    parameter tools) and skips a line it cannot parse, e.g. one with '=' in its comment: every knob line parses."""
    import json
    import logging

    import nbformat
    from papermill.translators import PythonTranslator

    logging.getLogger("papermill").setLevel(logging.CRITICAL)
    for path in sorted((paths.REPO / "notebooks").glob("*.ipynb")):
        cell = next(c for c in json.loads(path.read_text())["cells"] if "parameters" in c["metadata"].get("tags", []))
        source = "".join(cell["source"])
        declared = [line.split("=", 1)[0].strip() for line in source.splitlines()
                    if line and not line.startswith((" ", "#")) and "=" in line]
        parsed = [p.name for p in PythonTranslator.inspect(nbformat.v4.new_code_cell(source))]
        assert parsed == declared, (path.name, sorted(set(declared) - set(parsed)))
