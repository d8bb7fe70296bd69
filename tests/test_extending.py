"""docs/extending.md's steps, followed for a toy dataset and a toy figure (the algorithm's are
tests/test_algorithms.py::test_an_algorithm_registers_where_it_is_defined and the FedAdam example): if a step
stops being enough, this fails."""
import json
from dataclasses import dataclass
from typing import ClassVar

import pytest
import torch

from replicate import data
from replicate.data import registry
from replicate.data.federated import FederatedDataset, Split
from replicate.experiments import catalog, knobs, requirements


@pytest.fixture
def own_registries(monkeypatch):
    """The toy registrations disappear after the test."""
    monkeypatch.setattr(registry, "BUILDERS", dict(registry.BUILDERS))
    monkeypatch.setattr(registry, "READS", dict(registry.READS))
    monkeypatch.setattr(data, "_BUILDERS", registry.BUILDERS)


def _register_toy_dataset():
    """Step 1 of "A dataset": a generated one, so steps 2-3 (catalogue, stand-in) do not apply."""
    @registry.builder("toy_blobs", reads=())
    def toy_blobs(seed: int = 0, num_clients: int = 4) -> FederatedDataset:
        g = torch.Generator().manual_seed(seed)
        sizes = torch.full((num_clients,), 6)

        def split():
            y = torch.arange(int(sizes.sum())) % 2
            x = torch.randn(len(y), 3, generator=g) + y[:, None].float()
            return Split(x, y, torch.cat([torch.zeros(1, dtype=torch.long), sizes.cumsum(0)]))
        return FederatedDataset("toy_blobs", split(), split(), 2, {"paper": "none: a toy", "deviations": []})
    return toy_blobs


def test_a_dataset_is_its_registered_builder(own_registries):
    _register_toy_dataset()
    assert "toy_blobs" in data.available() and data.load("toy_blobs", seed=1).num_clients == 4
    assert requirements.staged("toy_blobs") == ()
    from replicate.runs.config import RunConfig, build

    config = RunConfig(dataset="toy_blobs", num_clients=3, model="logistic", local_steps=2, batch_size=4, rounds=2)
    problem, *_ = build(config, device=torch.device("cpu"))
    assert problem.num_clients == 3  # a RunConfig reads it by name, num_clients included


@dataclass(frozen=True)
class ToyConfig(knobs.FigureConfig):
    """Step 1 of "A figure": knobs with the paper profile's values, ``SMOKE``, ``CHOICES``."""

    dataset: str = "toy_blobs"  # the dataset its runs read
    rounds: int = 5  # communication rounds
    seeds: tuple[int, ...] = (0, 1)
    deviations: tuple[str, ...] = ("a toy: no paper",)

    CHOICES: ClassVar[dict] = {"dataset": ("toy_blobs",)}
    SMOKE: ClassVar[dict] = dict(rounds=2, seeds=(0,))


NOTEBOOK_CELLS = (  # step 2: the notebook (its markdown cell aside): parameters, then a few library calls
    "profile = \"smoke\"\nout_dir = None\ndataset = None  # paper: toy_blobs\nrounds = None  # paper: 5\n"
    "seeds = None  # paper: [0, 1]",
    f"""import matplotlib.pyplot as plt
import pandas as pd
from replicate.report.claims import check, publish
from {__name__} import ToyConfig

config = ToyConfig.for_profile(profile, out_dir=out_dir, dataset=dataset, rounds=rounds, seeds=seeds)""",
    """rows = [{"seed": s, "round": r, "loss": 1.0 / (1 + r)} for s in config.seeds for r in range(config.rounds)]
frame = pd.DataFrame(rows)
fig = plt.figure(); fig.suptitle("toy")
claims = [check("the loss falls", frame.loss.iloc[-1] < frame.loss.iloc[0], "ours: it does", margin="any")]
publish(fig, frame, claims, paper="notes", figure="toy", profile=profile, config=config, out_dir=out_dir,
        deviations=config.deviations)""")


def test_a_figure_is_a_config_and_a_notebook(own_registries, tmp_path, monkeypatch):
    import matplotlib.pyplot as plt

    _register_toy_dataset()
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    cells = [{"cell_type": "markdown", "metadata": {}, "source": "# Toy figure\nThe loss falls."}]
    cells += [{"cell_type": "code", "metadata": {"tags": ["parameters"] if i == 0 else []}, "source": source,
               "outputs": [], "execution_count": None} for i, source in enumerate(NOTEBOOK_CELLS)]
    (notebooks / "notes_toy.ipynb").write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4,
                                                           "nbformat_minor": 5}))
    monkeypatch.setattr(catalog, "FIGURES", catalog.figures(notebooks))  # what the catalogue reads at import
    assert catalog.config_class("notes/toy") is ToyConfig  # the saved notebook is the catalogue's line
    assert requirements.needs("notes/toy", "paper") == ()  # the generated toy reads no download
    with pytest.raises(Exception, match="ToyConfig.dataset must be one of toy_blobs"):
        knobs.configure(ToyConfig, "smoke", {"dataset": "mnist"})  # a knob is checked before anything runs
    space = {}  # the notebook's cells, run in-process as a kernel would, with the runner's out_dir
    for i, source in enumerate(NOTEBOOK_CELLS):
        exec(compile(source, f"toy notebook cell {i}", "exec"), space)
        if i == 0:
            space["out_dir"] = str(tmp_path / "out")
    record = json.loads((tmp_path / "out" / "notes" / "toy.claims.json").read_text())
    assert record["profile"] == "smoke" and [c["passed"] for c in record["claims"]] == [True]
    assert (tmp_path / "out" / "notes" / "toy.png").is_file()
    plt.close("all")
