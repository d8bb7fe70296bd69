"""The library face refuses a wrong value in one line when the object is made, before any data loads or any
training: RunConfig's and the algorithms' fields by their types, names a run cannot build, partitions that leave
a client empty, modules that do not map the dataset's samples to its classes. Code of one's own (an algorithm,
a dataset builder) is in its runs' cache key, so an edit names other runs."""
from __future__ import annotations

import importlib
import sys
import time

import numpy as np
import pandas as pd
import pytest
from torch import nn

import replicate as rp
from replicate.core.errors import ReplicateError
from replicate.fl.algorithms import ALGORITHMS, protocol
from replicate.runs import cache, keys
from replicate.runs.config import RunConfig


@pytest.mark.parametrize("changes, said", [
    (dict(rounds=2.5), "RunConfig: rounds must be an integer, got 2.5"),
    (dict(rounds=True), "rounds must be an integer, got True"),
    (dict(eval_every=0), "eval_every must be >= 1"),
    (dict(seed="a"), "seed must be an integer, got 'a'"),
    (dict(seed=-1), r"seed must be an integer in \[0, 2\*\*32\), got -1"),
    (dict(client_lr="0.1"), "client_lr must be a finite number, got '0.1'"),
    (dict(client_lr=float("inf")), "client_lr must be a finite number, got inf"),
    (dict(model="MLP"), "unknown model 'MLP'; the presets are logistic, cnn, char_lstm, mlp, lenet"),
    (dict(model="cnn", hidden=5), "model 'cnn' has no hidden width to set"),
    (dict(dataset="synthetic"), r"takes its \(α, β\) in its name: e.g. dataset='synthetic\(1,1\)'"),
    (dict(dataset="mnist"), r"unknown dataset 'mnist'.*replicate.load_dataset\(name, partition=...\)"),
    (dict(model="mlp", hidden=0), r"hidden \(the width of 'mlp''s hidden layer\) must be >= 1, got 0"),
    (dict(num_clients=0), "num_clients must be >= 1, got 0"),
    (dict(dataset="quadratic", num_clients=5), "fixed counterexample: leave data_seed and num_clients unset"),
    (dict(dataset="quadratic", local_steps=5), r"full gradients, so a run gives local_steps and batch_size=None "
                                               r"\(got batch_size=64, local_steps=5\)"),
    (dict(dataset="quadratic", batch_size=None, local_epochs=2), "got batch_size=None, local_steps=None"),
])
def test_a_run_config_refuses_a_wrong_value_when_made(changes, said):
    start = time.perf_counter()
    with pytest.raises(ReplicateError, match=said):
        RunConfig(**{"dataset": "synthetic(1,1)", **changes})
    assert time.perf_counter() - start < 0.5  # no data loaded


def test_numpy_scalars_and_the_packages_names_are_accepted():
    config = RunConfig(dataset="mnist_balanced", model="lenet", rounds=np.int64(3), client_lr=np.float32(0.1),
                       algorithm=rp.FedAvg(clients_per_round=np.int64(5)))
    assert type(config.rounds) is int and type(config.client_lr) is float  # plain: a run's key is JSON
    assert type(config.algorithm.clients_per_round) is int
    assert keys.key(config, device="cpu") == keys.key(config.replace(rounds=3), device="cpu")  # one entry
    assert type(rp.FedProx(prox_mu=0).prox_mu) is int  # a Python int stays one: recorded keys keep their names
    assert RunConfig(dataset="quadratic", local_steps=5, batch_size=None).dataset == "quadratic"
    assert RunConfig(dataset="synthetic(0.5,0.5)", model="Net@0123456789ab").model == "Net@0123456789ab"


@pytest.mark.parametrize("make, said", [
    (lambda: rp.FedAvg(clients_per_round="10"), "FedAvg: clients_per_round must be an integer, got '10'"),
    (lambda: rp.FedAvg(clients_per_round=2.5), "clients_per_round must be an integer, got 2.5"),
    (lambda: rp.FedProx(clients_per_round=None), "FedProx: clients_per_round must be an integer, got None"),
    (lambda: rp.FedProx(prox_mu="0.01"), "FedProx: prox_mu must be a finite number, got '0.01'"),
    (lambda: rp.FedProx(prox_mu=float("nan")), "FedProx: prox_mu must be a finite number, got nan"),
    (lambda: rp.LocalUpdate(nesterov="yes"), "nesterov must be True or False"),
])
def test_an_algorithm_refuses_a_setting_of_the_wrong_type_before_its_own_checks(make, said):
    with pytest.raises(ReplicateError, match=said):
        make()


def test_help_on_an_algorithm_shows_its_statement():
    for cls in ALGORITHMS.values():
        assert cls.__doc__ == sys.modules[cls.__module__].__doc__ or not cls.__doc__.startswith(cls.__name__ + "(")
    assert "``scheme1``" in rp.FedAvg.__doc__ and "``proportional``" in rp.FedProx.__doc__


def test_federate_refuses_an_empty_client_and_a_test_split_that_is_not_one():
    x, y = np.random.default_rng(0).random((50, 20), dtype=np.float32), np.arange(50) % 3
    with pytest.raises(ReplicateError, match=r"left \d+ of its 100 clients without a sample; give min_size=1"):
        rp.federate(x, y, rp.partitions.dirichlet(0.5, 100, min_size=0))
    assert all(n >= 1 for n in rp.federate(x, y, rp.partitions.dirichlet(0.5, 20)).train.sizes.tolist())
    with pytest.raises(ReplicateError, match="train inputs hold 1 values that are NaN or infinite"):
        rp.federate(np.where(np.arange(1000).reshape(50, 20) == 7, np.nan, x), y, rp.partitions.iid(5))
    with pytest.raises(ReplicateError, match=r"test must be a pair \(x_test, y_test\)"):
        rp.federate(x, y, rp.partitions.iid(5), test=x[:5])
    with pytest.raises(ReplicateError, match=r"a test row has shape \(10,\), a training row \(20,\)"):
        rp.federate(x, y, rp.partitions.iid(5), test=(x[:5, :10], y[:5]))


class _Pair(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(20, 3)

    def forward(self, x):
        return self.linear(x), None


@pytest.mark.parametrize("module, said", [
    (nn.Linear(20, 2), r"Linear must map a batch of samples to one logit per class, \(2, 3\).*got shape \(2, 2\)"),
    (nn.Linear(20, 10), r"got shape \(2, 10\)"),
    (nn.Linear(784, 3), r"Linear cannot take this dataset's samples of shape \(20,\): mat1 and mat2 shapes"),
    (_Pair(), "got a tuple"),
])
def test_a_module_that_does_not_fit_the_dataset_is_refused_before_training(module, said):
    x, y = np.random.default_rng(0).random((40, 20), dtype=np.float32), np.arange(40) % 3
    data = rp.federate(x, y, rp.partitions.iid(4))
    with pytest.raises(ReplicateError, match=said):
        rp.run(RunConfig(dataset=data, model=module, rounds=1, local_steps=1), progress=False, use_cache=False)


ALGORITHM_FILE = '''
import dataclasses
from replicate.fl.algorithms import FedAvg, protocol


@protocol.register("edited_avg", example={})
@dataclasses.dataclass(frozen=True)
class EditedAvg(FedAvg):
    def scale(self):
        return SCALE


@__import__("replicate.data.registry", fromlist=["x"]).builder("edited_synthetic")
def edited_synthetic(seed: int = 0, num_clients: int = 4):
    from replicate.data.synthetic import synthetic
    return synthetic(1.0, 1.0, num_clients + OFFSET, seed=seed)
'''


def test_the_code_of_ones_own_algorithm_and_dataset_is_in_its_runs_key(tmp_path, monkeypatch):
    """An edited algorithm or builder of one's own names other runs (the cache cannot return the old code's
    numbers); the package's own leave their keys as they were (the ledger's names hold them)."""
    from replicate.data import registry

    monkeypatch.syspath_prepend(str(tmp_path))
    names = []
    try:
        for scale, offset in ((1, 0), (1, 0), (2, 0), (2, 1)):
            (tmp_path / "edited_code.py").write_text(ALGORITHM_FILE.replace("SCALE", str(scale))
                                                     .replace("OFFSET", str(offset)))
            sys.modules.pop("edited_code", None)
            module = importlib.import_module("edited_code")  # defined again: it replaces its first registration
            config = RunConfig(dataset="edited_synthetic", algorithm=module.EditedAvg(clients_per_round=2))
            names.append(keys.key(config, device="cpu"))
            assert set(keys.own_code(config)) == {"algorithm", "dataset"}
        _, meta = cache.entry_of(config, None, None, pd.DataFrame({"round": [0]}), 1.0, "cpu", serialize=False)
    finally:
        registry.BUILDERS.pop("edited_synthetic", None), registry.READS.pop("edited_synthetic", None)
        protocol.ALGORITHMS.pop("edited_avg", None), protocol.EXAMPLES.pop("edited_avg", None)
        sys.modules.pop("edited_code", None)
    assert names[0] == names[1] and len(set(names)) == 3
    # a process that has not imported the builder (`cache export`) names the run by the code its sidecar recorded
    protocol.register("edited_avg", example={})(module.EditedAvg)
    try:
        assert keys.entry_name(meta) == names[-1]
    finally:
        protocol.ALGORITHMS.pop("edited_avg", None), protocol.EXAMPLES.pop("edited_avg", None)
    for name in ALGORITHMS:  # the package's: nothing of this kind in their keys
        assert not keys.own_code(RunConfig(dataset="mnist_balanced", algorithm=protocol.example(name)))


def test_a_dataset_reads_as_what_it_is_and_its_heat_map_counts_in_whole_numbers(tmp_path, monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    x, y = np.random.default_rng(0).random((60, 4), dtype=np.float32), np.arange(60) % 3
    data = rp.federate(x, y, rp.partitions.iid(6), test=(x[:9], y[:9]))
    assert repr(data) == "FederatedDataset('given': 6 clients, 60 training samples, 9 test samples, 3 classes)"
    ax = rp.partitions.plot_label_heatmap(rp.partitions.describe(data)["counts"])
    ax.figure.canvas.draw()
    assert all(float(t).is_integer() for t in ax.get_yticks()) and ax.figure.get_layout_engine() is not None
    monkeypatch.setenv("REPLICATE_DATA", str(tmp_path))  # no MNIST here: the partition is refused before it loads
    monkeypatch.setenv("REPLICATE_DATA_FROM", "none")
    with pytest.raises(ReplicateError, match=r"partition must be one of partitions.iid\(...\).*got 'iid'"):
        rp.load_dataset("mnist", partition="iid")


def test_an_algorithm_of_ones_own_keeps_its_defaults_as_written():
    """Only the settings given are type-checked: a default of one's own (``x: int = None``) is the author's."""
    import dataclasses

    @protocol.register("defaults_as_written", example={})
    @dataclasses.dataclass(frozen=True)
    class Mine(rp.FedAvg):
        x: int = None

    try:
        assert Mine().x is None and Mine(x=np.int64(3)).x == 3 and type(Mine(x=np.int64(3)).x) is int
        with pytest.raises(ReplicateError, match="Mine: x must be an integer, got 'a'"):
            Mine(x="a")
    finally:
        protocol.ALGORITHMS.pop("defaults_as_written"), protocol.EXAMPLES.pop("defaults_as_written")


def test_a_run_whose_stderr_is_a_log_file_writes_no_progress_bar(tmp_path):
    """A script under a job scheduler writes stderr to a file: the runs' bars (the engine's, the sweep's) would fill
    it with carriage-return updates, so none is drawn there; a terminal and a notebook keep theirs."""
    import os
    import subprocess

    code = ("import replicate as rp\n"
            "base = rp.RunConfig(dataset='synthetic(1,1)', rounds=30, local_steps=5, batch_size=10, client_lr=0.05,\n"
            "                    algorithm=rp.FedAvg(scheme='weighted', clients_per_round=10))\n"
            "print(len(rp.compare({'a': base, 'b': base.replace(seed=1)})))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "REPLICATE_CACHE": str(tmp_path / "cache")})
    assert done.returncode == 0 and done.stdout.strip() == "62", done.stderr
    assert done.stderr == "", done.stderr  # the bars (tqdm with disable=None) stay off where stderr is no terminal
