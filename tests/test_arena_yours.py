"""A user's model and dataset enter the arena as a user's algorithm does: ``path/to/file.py:NAME``, on the command
line (``arena --model FILE:NAME --dataset FILE:NAME``) or as ``ArenaConfig(user_model=..., datasets=[...])``; their
runs are cached, keyed by the full config, and a worker process that unpickles a run registers them again."""
import pickle
import subprocess
import sys

import pytest

from replicate.cli.arena import figures_argv
from replicate.core.errors import ReplicateError
from replicate.experiments.arena import ArenaConfig, arena, leaderboard
from replicate.experiments.arena.entries import ENTRIES, trials
from replicate.runs import cache
from replicate.runs.measures import final

USER_FILE = '''
import numpy as np
import torch
from torch import nn

import replicate as rp

_rng = np.random.default_rng(SEED)  # seeded: every process that imports this file builds the same data
_x = _rng.normal(size=(240, 6)).astype("float32")
_y = (_x[:, 0] > 0).astype("int64") + (_x[:, 1] > 0.5)
toy = rp.federate(_x, _y, rp.partitions.dirichlet(alpha=0.5, clients=6, min_size=8), seed=0,
                  test=(_x[:60], _y[:60]), num_classes=3)


def make_toy():
    return toy


class TwoLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))

    def forward(self, x):
        return self.body(x)


net = TwoLayer()
wide = nn.Sequential(nn.Linear(5, 3))  # fits no dataset here (6 features)
'''

TINY = dict(algorithms=["FedAvg", "SCAFFOLD-II"], budget=4, local_steps=3, trials=2, seeds=[0, 1],
            evals=2, workers=1)


@pytest.fixture(autouse=True)
def registries():
    """A user's dataset and model register themselves process-wide: restored after each test, so that no other
    test's list of registered names sees them."""
    from replicate.data import registry
    from replicate.experiments.arena import yours
    from replicate.fl import models

    saved = dict(registry.BUILDERS), dict(registry.READS), dict(models.MODELS), dict(yours._REGISTERED)
    yield
    for table, before in zip((registry.BUILDERS, registry.READS, models.MODELS, yours._REGISTERED), saved):
        table.clear()
        table.update(before)


@pytest.fixture
def user_file(tmp_path, monkeypatch):
    monkeypatch.setenv("REPLICATE_BUILD", str(tmp_path / "build"))
    file = tmp_path / "elsewhere" / "my_entries.py"
    file.parent.mkdir()
    file.write_text(USER_FILE.replace("SEED", "0"))
    yield file
    sys.modules.pop("my_entries", None)
    if str(file.parent) in sys.path:
        sys.path.remove(str(file.parent))


def test_a_users_model_and_dataset_join_the_leaderboard_and_their_runs_are_cached(user_file):
    config = ArenaConfig.for_profile("smoke", **TINY, datasets=[f"{user_file}:toy"],
                                     user_model=f"{user_file}:TwoLayer")  # a class: called without arguments
    task = config.tasks()[f"{user_file}:toy"]
    assert task.label == "toy (yours)" and task.model.startswith("TwoLayer@") and task.official.startswith("toy@")
    assert any(d.startswith("A model of yours:") for d in config.deviations)
    data = arena(config)
    board = leaderboard(data, config)
    assert sorted(board.algorithm) == ["FedAvg", "SCAFFOLD-II"] and set(board.dataset) == {"toy (yours)"}
    assert board.final_loss.notna().all() and (board.final_loss < 10).all()
    points, rows = trials("FedAvg", ENTRIES["FedAvg"], 2), data.query("kind == 'trial' and algorithm == 'FedAvg'")
    for point, score in zip(points, rows.score):  # every trial's run on seed 0, read back from the cache by its key
        assert score == final(cache.load(config.run_config(ENTRIES["FedAvg"], f"{user_file}:toy", 0, point)),
                              "train_loss", fraction=config.tail)
    run = config.run_config(ENTRIES["FedAvg"], f"{user_file}:toy", 1, min(zip(rows.score, points))[1])
    assert run.cacheable and (run.dataset, run.model) == (task.official, task.model)
    cached = cache.load(run)  # the chosen point's held-out run
    curve = data.query("kind == 'curve' and algorithm == 'FedAvg' and seed == 1")
    assert cached is not None and cached.train_loss.tolist() == curve.train_loss.tolist()
    # a function returning the dataset, and the module itself, are the same data and model: the same digests
    again = ArenaConfig.for_profile("smoke", **TINY, datasets=[f"{user_file}:make_toy"],
                                    user_model=f"{user_file}:net").tasks()[f"{user_file}:make_toy"]
    assert (again.official, again.model) == ("make_toy@" + task.official.partition("@")[2],
                                             "net@" + task.model.partition("@")[2])


def test_a_run_on_them_registers_them_again_where_it_is_unpickled(user_file, tmp_path):
    """A worker process gets the run config pickled: unpickling imports the user's file and registers the same
    names; a file whose data differ there (unseeded draws) is refused in one line."""
    config = ArenaConfig.for_profile("smoke", **TINY, datasets=[f"{user_file}:toy"], user_model=f"{user_file}:net")
    run = config.run_config(ENTRIES["FedAvg"], f"{user_file}:toy", 0, {"client_lr": 0.1})
    (tmp_path / "run.pkl").write_bytes(pickle.dumps(run))
    script = ("import pickle, sys; from replicate.runs import config; run = pickle.load(open(sys.argv[1], 'rb')); "
              "problem = config.build(run)[0]; print(run.dataset, run.model, problem.dataset.num_clients)")
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path / "run.pkl")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [run.dataset, run.model, "6"]
    user_file.write_text(USER_FILE.replace("SEED", "1"))  # the file now draws other data
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path / "run.pkl")], capture_output=True, text=True)
    assert done.returncode != 0 and "built another dataset in this process" in done.stderr


def test_a_model_that_does_not_fit_and_a_name_of_something_else_are_refused_before_anything_runs(user_file):
    with pytest.raises(ReplicateError, match=r"user_model wide@\w+ cannot train on toy \(yours\)"):
        ArenaConfig.for_profile("smoke", **TINY, datasets=[f"{user_file}:toy"], user_model=f"{user_file}:wide")
    with pytest.raises(ReplicateError, match="must be a FederatedDataset"):
        ArenaConfig.for_profile("smoke", **TINY, datasets=[f"{user_file}:net"])
    with pytest.raises(ReplicateError, match="must be a torch.nn.Module"):
        ArenaConfig.for_profile("smoke", **TINY, datasets=[f"{user_file}:toy"], user_model=f"{user_file}:toy")
    with pytest.raises(ReplicateError, match="defines no 'nothing'"):
        ArenaConfig.for_profile("smoke", **TINY, datasets=[f"{user_file}:nothing"])
    with pytest.raises(ReplicateError, match="is not a file"):
        ArenaConfig.for_profile("smoke", user_model="nowhere.py:Net")
    with pytest.raises(ReplicateError, match="or name a dataset of yours as path/to/file.py:NAME"):
        ArenaConfig.for_profile("smoke", datasets=["mine"])


def test_the_command_line_takes_a_users_model_and_dataset_as_files_and_datasets_by_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a file is named relative to where the user stands, and made absolute
    argv = figures_argv(["--model", "mine.py:Net", "--dataset=mine.py:toy", "--dataset", "mnist_dirichlet0.1",
                         "--profile", "paper"])
    assert argv == ["figures", "arena/leaderboard", "--profile", "paper",
                    "--set", f'user_model="{tmp_path / "mine.py"}:Net"',
                    "--set", f'datasets=["{tmp_path / "mine.py"}:toy", "mnist_dirichlet0.1"]']
    with pytest.raises(ReplicateError, match="one user model at a time"):
        figures_argv(["--model", "a.py:A", "--model", "b.py:B"])
    with pytest.raises(ReplicateError, match="--model takes path/to/file.py:NAME, got 'Net'"):
        figures_argv(["--model", "Net"])
    with pytest.raises(ReplicateError, match="--dataset takes path/to/file.py:NAME or a name"):
        figures_argv(["--dataset"])
