"""A researcher's own ``torch.nn.Module``, defined here, outside the package, trained through the same engine,
algorithms and oracle as the presets (``fl.models.module.TorchModule``), and the public API around it."""
import pandas as pd
import pytest
import torch
from torch import nn

from test_algorithms import Problem64, assert_engine_matches_oracle, toy_dataset

import replicate as rp
from replicate.fl.algorithms import LocalWork


class TwoLayer(nn.Module):
    def __init__(self, features=5, classes=3):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(features, 8), nn.Tanh(), nn.Linear(8, classes))

    def forward(self, x):
        return self.body(x)


class SmallConv(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 2, 3)
        self.head = nn.Linear(2 * 4 * 4, 3)

    def forward(self, x):
        return self.head(torch.relu(self.conv(x)).flatten(1))


@pytest.mark.parametrize("algorithm", [rp.FedAvg("weighted", 4), rp.FedProx(prox_mu=0.1, clients_per_round=4),
                                       rp.Scaffold(4)], ids=lambda a: type(a).__name__)
def test_a_users_module_trains_stacked_and_agrees_with_the_oracle(algorithm):
    """Stacked over clients (``vmap`` of ``functional_call``) against the client-by-client autograd oracle, in
    float64 to the engine's stated tolerance (RTOL64, ATOL64: the same arithmetic up to summation order)."""
    problem = Problem64(toy_dataset(small_clients=2), rp.TorchModule(TwoLayer()))
    assert_engine_matches_oracle(problem, algorithm, LocalWork(3, "steps", 8), executions=("stacked", "sequential"))


def _images(n=120, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(n, 1, 6, 6, generator=g), torch.randint(0, 3, (n,), generator=g)


def test_the_public_api_runs_a_users_module_on_a_users_arrays(monkeypatch):
    x, y = _images()
    data = rp.federate(x, y, rp.partitions.dirichlet(alpha=0.5, clients=6), seed=1, test=_images(30, seed=1))
    config = rp.RunConfig(dataset=data, model=SmallConv(), algorithm=rp.FedProx(prox_mu=0.01, clients_per_round=3),
                          rounds=3, local_epochs=1, batch_size=10, client_lr=0.1, seed=2)
    first = rp.run(config, progress=False)
    assert list(first.columns) == ["round", "lr", "train_loss", "train_acc", "test_loss", "test_acc"]
    assert set(first.columns) <= set(rp.COLUMNS) and first["round"].tolist() == [0, 1, 2, 3]
    assert first["train_loss"].iloc[-1] < first["train_loss"].iloc[0]  # it trained
    pd.testing.assert_frame_equal(rp.run(config, progress=False), first, check_exact=True)  # same seed, same numbers
    assert not rp.run(config.replace(seed=3), progress=False).equals(first)
    both = rp.compare({"FedAvg": config.replace(algorithm=rp.FedAvg("weighted", 3)), "FedProx": config},
                      progress=False)
    assert both["run"].unique().tolist() == ["FedAvg", "FedProx"] and len(both) == 8
    pd.testing.assert_frame_equal(both[both["run"] == "FedProx"].drop(columns="run").reset_index(drop=True), first,
                                  check_exact=True)


def test_a_run_of_ones_own_is_cached_under_its_contents_name(tmp_path, monkeypatch):
    """A dataset and a module of one's own are keyed by what they are (``runs.own``): the same run again is read
    back without computing; another label, another layer or another forward names another run."""
    from replicate.core import settings
    from replicate.runs import cache

    x, y = _images()
    data = rp.federate(x, y, rp.partitions.iid(4), seed=0)
    config = rp.RunConfig(dataset=data, model=nn.Sequential(nn.Flatten(), nn.Linear(36, 3)),
                          algorithm=rp.FedAvg("weighted", 2), rounds=2, batch_size=10)
    first = rp.run(config, progress=False)
    runs = settings.current().cache / "runs"
    entries = sorted(p.name for p in runs.rglob("*.csv"))
    assert len(entries) == 1

    def computed(*args, **kwargs):
        raise AssertionError("a cached run was computed again")

    with monkeypatch.context() as patched:
        patched.setattr(cache, "compute", computed)
        again = rp.run(config.replace(dataset=rp.federate(x, y, rp.partitions.iid(4), seed=0),
                                      model=nn.Sequential(nn.Flatten(), nn.Linear(36, 3))), progress=False)
    pd.testing.assert_frame_equal(again, first, check_exact=True)
    y2 = y.clone()
    y2[0] = (y2[0] + 1) % 3
    rp.run(config.replace(dataset=rp.federate(x, y2, rp.partitions.iid(4), seed=0)), progress=False)
    rp.run(config.replace(model=nn.Sequential(nn.Flatten(), nn.Linear(36, 3), nn.Tanh())), progress=False)
    assert len(list(runs.rglob("*.csv"))) == 3


def _from_a_cell(code: str, name: str = "Net"):
    """What a notebook cell defines: code with no file behind it."""
    namespace = {"nn": nn, "torch": torch, "__name__": "cell"}
    exec(code, namespace)
    return namespace[name]


NET = ("class Net(nn.Module):\n"
       "    k = {k}\n"
       "    def __init__(self, scale=1.0, act=torch.relu):\n"
       "        super().__init__()\n        self.lin = nn.Linear(36, 3)\n        self.scale, self.act = scale, act\n"
       "    def forward(self, x, s={s}):\n"
       "        return self.lin(self.act(x.flatten(1)) * self.scale * self.k * s)\n")


def test_a_module_is_named_by_what_decides_its_behaviour():
    """Two modules of one structure and starting point are one name only where nothing that decides their forward
    differs: the class's code, a class attribute, a default argument, an attribute given to __init__, an inherited
    forward from another cell, a decorated method (runs.own)."""
    from replicate.runs import own

    name = own.model_name
    base = _from_a_cell(NET.format(k=1, s=1))
    assert name(base()) == name(_from_a_cell(NET.format(k=1, s=1))())  # the same code again, in another cell
    assert name(base()) != name(_from_a_cell(NET.format(k=2, s=1))())  # a class attribute
    assert name(base()) != name(_from_a_cell(NET.format(k=1, s=2))())  # a default argument
    assert name(base()) != name(base(scale=100.0))  # a constructor argument kept as an attribute
    assert name(base()) != name(base(act=torch.tanh))
    assert name(base(act=torch.tanh)) == name(base(act=torch.tanh))  # stable: no memory address in it
    parent = "class Base(nn.Module):\n    def forward(self, x):\n        return self.lin(torch.{f}(x.flatten(1)))\n"
    child = "class Net(Base):\n    def __init__(self):\n        super().__init__()\n        self.lin = nn.Linear(36, 3)\n"
    relu, tanh = (_from_a_cell(parent.format(f=f) + child) for f in ("relu", "tanh"))
    assert name(relu()) != name(tanh())  # the forward it inherits
    wrapped = ("import functools\n"
               "def keep(f):\n    @functools.wraps(f)\n    def inner(*a, **k):\n        return f(*a, **k)\n"
               "    return inner\n"
               "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
               "        self.lin = nn.Linear(36, 3)\n"
               "    @keep\n    def forward(self, x):\n        return self.lin(torch.{f}(x.flatten(1)))\n")
    assert name(_from_a_cell(wrapped.format(f="relu"))()) != name(_from_a_cell(wrapped.format(f="tanh"))())
    assert name(TwoLayer()) != name(TwoLayer(features=6))


def test_a_dataset_is_named_by_its_samples_cut_labels_and_meta():
    from replicate.data.federated import FederatedDataset
    from replicate.runs import own

    x, y = _images()
    data = rp.federate(x, y, rp.partitions.iid(4), seed=0)
    names = {own.dataset_name(d) for d in (
        data, rp.federate(x, y, rp.partitions.iid(4), seed=1),  # another cut
        rp.federate(x, (y + 1) % 3, rp.partitions.iid(4), seed=0),  # other labels
        FederatedDataset(data.name, data.train, data.test, data.num_classes, {**data.meta, "image_shape": (1, 6, 6)}))}
    assert len(names) == 4 and own.dataset_name(rp.federate(x, y, rp.partitions.iid(4), seed=0)) in names
    assert own.digest("ab", "c") != own.digest("a", "bc")
    assert own.digest(torch.zeros(2, dtype=torch.bfloat16))  # every dtype hashes by its bytes


def test_a_cached_run_of_ones_own_computes_with_the_objects_given():
    """The key is the objects' name; the run computes with the very objects of the config, never with another object
    a registry may hold under a name (so nothing of a user's stays alive in a registry)."""
    from replicate.data import registry
    from replicate.fl import models

    x, y = _images()
    before = (set(registry.BUILDERS), set(models.MODELS))
    rp.run(rp.RunConfig(dataset=rp.federate(x, y, rp.partitions.iid(4), seed=0),
                        model=nn.Sequential(nn.Flatten(), nn.Linear(36, 3)), algorithm=rp.FedAvg("weighted", 2),
                        rounds=1, batch_size=10), progress=False)
    assert (set(registry.BUILDERS), set(models.MODELS)) == before


def test_a_partition_seed_applies_to_a_registered_name_only():
    x, y = _images()
    data = rp.federate(x, y, rp.partitions.iid(4), seed=0)
    with pytest.raises(rp.ReplicateError, match="already partitioned"):
        rp.RunConfig(dataset=data, data_seed=1)


@pytest.mark.parametrize("layer, says", [(nn.BatchNorm1d(5), "GroupNorm or LayerNorm"),
                                         (nn.Dropout(0.5), "nn.Dropout")])
def test_a_module_that_cannot_be_stacked_is_refused_in_one_line(layer, says):
    with pytest.raises(rp.ReplicateError, match=says) as caught:
        rp.TorchModule(nn.Sequential(nn.Linear(5, 5), layer, nn.Linear(5, 3)))
    assert "\n" not in str(caught.value)


def test_a_wrong_dataset_or_model_is_refused_before_any_compute():
    with pytest.raises(rp.ReplicateError, match="FederatedDataset"):
        rp.RunConfig(dataset=[1, 2, 3])
    with pytest.raises(rp.ReplicateError, match="torch.nn.Module"):
        rp.RunConfig(dataset="synthetic(1,1)", model=42)
    with pytest.raises(rp.ReplicateError, match="exactly one of local_steps and local_epochs"):
        rp.RunConfig(dataset="synthetic(1,1)", local_steps=5, local_epochs=1)
    assert rp.RunConfig(dataset="synthetic(1,1)").local_steps == 50  # neither set: 50 steps, keyed as before


def test_the_module_initialises_from_the_runs_seed_and_leaves_the_global_stream_alone():
    model = rp.TorchModule(TwoLayer())
    from replicate.core import rng

    state = torch.random.get_rng_state()
    a, b, c = (model.init(rng.generator(s, "init")) for s in (4, 4, 5))
    assert torch.equal(a, b) and not torch.equal(a, c) and a.numel() == model.num_params == 5 * 8 + 8 + 8 * 3 + 3
    assert torch.equal(torch.random.get_rng_state(), state)


def test_help_lists_the_api_and_importing_it_loads_no_torch():
    import pydoc
    import subprocess
    import sys

    text = pydoc.render_doc(rp, renderer=pydoc.plaintext)
    for name in ("RunConfig", "run", "compare", "FedProx", "load_dataset", "federate", "partitions", "TorchModule"):
        assert name in text and name in rp.__all__ and name in dir(rp)
    code = "import sys, replicate; print('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "False"
    with pytest.raises(AttributeError):
        rp.no_such_name
