"""``replicate.data.load``: names, parameter checking, cheap import."""
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import replicate.data as data
from replicate.core.errors import ReplicateError

def test_available_names():
    assert sorted(data.available()) == sorted([
        "synthetic", "synthetic_iid", "mnist_balanced", "mnist_unbalanced", "mnist_fedprox", "femnist", "emnist_star",
        "femnist_fedprox", "shakespeare", "sent140", "sent140_leaf", "mnist_stem", "mnist_stem_high",
        "mnist_stem_moderate", "cifar10_stem_high", "cifar10_stem_moderate", "cifar10_jpg_stem_high",
        "cifar10_jpg_stem_moderate", "shakespeare_tff", "emnist_tff", "emnist_draft_tff", "emnist_star_tff",
        "femnist_fedprox_tff", "mnist_dirichlet0.1", "mnist_dirichlet1"])


def test_every_builder_registered_itself_with_the_downloads_it_reads():
    """A builder is registered where it is defined (``@registry.builder``), naming staged datasets that exist."""
    from replicate.data import registry, store

    assert set(registry.BUILDERS) == set(data.available())
    assert all(set(reads) <= set(store.registered()) for reads in registry.READS.values())
    assert registry.READS["sent140_leaf"] == ("sent140_raw", "glove") and registry.READS["synthetic"] == ()
    with pytest.raises(ReplicateError, match="registered twice"):
        registry.builder("mnist_fedprox")(lambda: None)


def test_a_new_dataset_module_is_registered_without_editing_the_package(tmp_path):
    """docs/extending.md: a dataset is its builder's module. A module in the package's folder when the package is
    imported (a copy of the package here, in a fresh interpreter) is imported by it (``discover``) and registers its
    builder, which ``load`` builds; the module may import what the package defines (``load``) at its top."""
    import shutil

    package = Path(data.__file__).resolve().parents[1]
    shutil.copytree(package, tmp_path / "replicate", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "replicate" / "data" / "toy_two_clients.py").write_text(
        "from replicate.data import load, registry  # noqa: F401  (the package's own names, at import time)\n"
        "from replicate.data.synthetic import synthetic\n\n\n"
        "@registry.builder('toy_two_clients')\n"
        "def toy(seed: int = 0):\n"
        "    return synthetic(0, 0, 2, iid=False, seed=seed)\n")
    code = ("import replicate.data as d; assert d.__file__.startswith(%r), d.__file__; "
            "assert d.registry.READS['toy_two_clients'] == (); print(d.load('toy_two_clients', seed=1).num_clients)"
            % str(tmp_path))
    env = dict(os.environ, PYTHONPATH=str(tmp_path), REPLICATE_DATA=str(tmp_path / "none"), REPLICATE_DATA_FROM="none")
    done = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "2", done.stderr[-2000:]


def test_load_synthetic_equals_direct_call():
    a = data.load("synthetic", alpha=1, beta=1, num_clients=5, seed=2)
    b = data.synthetic(1, 1, 5, seed=2)
    assert a.name == "synthetic(1,1)" and torch.equal(a.train.x, b.train.x)
    assert data.load("synthetic_iid", num_clients=3).name == "synthetic_iid"

def test_unknown_dataset_lists_valid_names():
    with pytest.raises(ReplicateError) as err:
        data.load("cifar100")
    assert all(name in str(err.value) for name in data.available())

def test_unknown_parameter_is_named_with_the_valid_ones():
    with pytest.raises(ReplicateError) as err:
        data.load("synthetic", alpha=0, beta=0, num_users=30)
    assert "'num_users'" in str(err.value)
    assert "alpha, beta, num_clients, seed" in str(err.value)
    with pytest.raises(ReplicateError, match="'sed'.*valid: seed"):
        data.load("mnist_balanced", sed=6)

def test_missing_and_invalid_parameters():
    with pytest.raises(ReplicateError, match="needs 'alpha', 'beta'"):
        data.load("synthetic")
    with pytest.raises(ReplicateError, match="alpha"):
        data.load("synthetic", alpha=-1, beta=0)
    with pytest.raises(ReplicateError, match="num_clients"):
        data.load("synthetic", alpha=0, beta=0, num_clients=0)

def test_default_seeds_are_exposed():
    assert data.parameters("mnist_balanced") == {"seed": 6}
    assert data.parameters("mnist_unbalanced") == {"seed": 124}
    assert data.parameters("mnist_fedprox") == {"seed": 64}

def test_import_is_cheap_and_never_touches_torchvision(tmp_path):
    repo = str(Path(data.__file__).resolve().parents[2])
    env = dict(os.environ, REPLICATE_DATA=str(tmp_path / "none"), REPLICATE_DATA_FROM="none",
               PYTHONPATH=os.pathsep.join(filter(None, [repo, os.environ.get("PYTHONPATH")])))
    code = ("import sys, replicate.data; "
            "assert 'torchvision' not in sys.modules; "
            "import replicate.data.mnist as m; assert m._read_mnist.cache_info().currsize == 0")
    subprocess.run([sys.executable, "-c", code], check=True, env=env, cwd=tmp_path,
                   timeout=60)
    assert not (tmp_path / "none").exists()
