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
from replicate.report import claims as report_claims


@pytest.fixture
def own_registries(monkeypatch):
    """The toy registrations disappear after the test."""
    monkeypatch.setattr(registry, "BUILDERS", dict(registry.BUILDERS))
    monkeypatch.setattr(registry, "READS", dict(registry.READS))
    monkeypatch.setattr(data, "_BUILDERS", registry.BUILDERS)
    monkeypatch.setattr(catalog, "FIGURES", dict(catalog.FIGURES))


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
    """Step 1 of "A figure": knobs with the paper profile's values, ``smoke()``, ``CHOICES``."""

    dataset: str = "toy_blobs"  # the dataset its runs read
    rounds: int = 5  # communication rounds
    seeds: tuple[int, ...] = (0, 1)
    deviations: tuple[str, ...] = ("a toy: no paper",)

    CHOICES: ClassVar[dict] = {"dataset": ("toy_blobs",)}

    @classmethod
    def smoke(cls):
        return cls(rounds=2, seeds=(0,))


NOTEBOOK_CODE = '''
config = ToyConfig.for_profile(profile, out_dir=out_dir, dataset=dataset, rounds=rounds, seeds=seeds)
rows = [{"seed": s, "round": r, "loss": 1.0 / (1 + r)} for s in config.seeds for r in range(config.rounds)]
frame = pd.DataFrame(rows)
fig = plt.figure(); fig.suptitle("toy")
claims = [check("the loss falls", frame.loss.iloc[-1] < frame.loss.iloc[0], "ours: it does", margin="any")]
publish(fig, frame, claims, paper="notes", figure="toy", profile=profile, config=config, out_dir=out_dir,
        deviations=config.deviations)
'''


def test_a_figure_is_a_config_a_catalogue_line_and_a_notebook(own_registries, tmp_path):
    import matplotlib.pyplot as plt
    import pandas as pd

    _register_toy_dataset()
    catalog.FIGURES["notes/toy"] = f"{__name__}:ToyConfig"  # step 2
    assert catalog.config_class("notes/toy") is ToyConfig
    assert requirements.needs("notes/toy", "paper") == ()  # the generated toy reads no download
    with pytest.raises(Exception, match="ToyConfig.dataset must be one of toy_blobs"):
        knobs.configure(ToyConfig, "smoke", {"dataset": "mnist"})  # a knob is checked before anything runs
    # step 3: the notebook's parameters cell, then its calls (run here in-process, as a kernel would)
    space = {"profile": "smoke", "out_dir": str(tmp_path / "out"), "dataset": None, "rounds": None, "seeds": None,
             "ToyConfig": ToyConfig, "pd": pd, "plt": plt, "check": report_claims.check,
             "publish": report_claims.publish}
    exec(compile(NOTEBOOK_CODE, "toy notebook", "exec"), space)
    record = json.loads((tmp_path / "out" / "notes" / "toy.claims.json").read_text())
    assert record["profile"] == "smoke" and [c["passed"] for c in record["claims"]] == [True]
    assert (tmp_path / "out" / "notes" / "toy.png").is_file()
    plt.close("all")
