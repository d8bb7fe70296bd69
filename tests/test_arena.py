"""The arena (issue #42): equal budgets counted by hand, equal tuning, held-out seeds, a user's algorithm."""
import json
from dataclasses import replace
import sys
from pathlib import Path

import pytest

from replicate.core.errors import ReplicateError
from replicate.experiments.arena import ArenaConfig, arena, claims, leaderboard
from replicate.experiments.arena import tables as exp_tables
from replicate.experiments.arena.entries import ENTRIES, cost, rounds, trials
from replicate.experiments.arena.tasks import TASKS
from replicate.fl.algorithms import ALGORITHMS
from replicate.fl.algorithms.protocol import EXAMPLES
from replicate.runs import cache
from replicate.runs.measures import final

# (vectors up + down a round, by hand from each paper's algorithm): FedAvg sends the model down and the local model
# up; SCAFFOLD adds the control variate each way (Karimireddy et al., Alg. 1); STEM the momentum direction
# (Khanduri et al., Alg. 1); LocalUpdate the message Σ a_k g_k up; FedAdam the local model up
BY_HAND = {"FedAvg": 2, "FedProx": 2, "SCAFFOLD-I": 4, "SCAFFOLD-II": 4, "STEM": 4, "LocalUpdate heavy-ball": 2,
           "LocalUpdate Nesterov": 2, "FedAdam": 2}


def test_every_registered_algorithm_competes():
    assert {entry.algorithm for entry in ENTRIES.values()} == set(ALGORITHMS)


@pytest.mark.parametrize("name", list(BY_HAND))
def test_equal_budgets_are_counted_as_by_hand(name):
    entry = ENTRIES[name]
    assert cost(entry, "bytes", 20, 24) == BY_HAND[name]
    assert cost(entry, "samples", 20, 24) == 20 * 24  # E steps of b samples, every entry (STEM's round 0 too)
    assert rounds(entry, "rounds", 100, 20, 24) == 100 and rounds(entry, "samples", 100, 20, 24) == 100
    assert rounds(entry, "bytes", 100, 20, 24) == 100 * 2 // BY_HAND[name]  # SCAFFOLD and STEM: 50
    assert rounds(entry, "bytes", 1, 20, 24) == 1  # at least one round


def test_every_entry_gets_the_same_trials_drawn_inside_its_ranges():
    drawn = {name: trials(name, entry, 8) for name, entry in ENTRIES.items()}
    assert {len(points) for points in drawn.values()} == {8}
    assert drawn == {name: trials(name, entry, 8) for name, entry in ENTRIES.items()}  # named streams: repeatable
    for name, points in drawn.items():
        space = ENTRIES[name].space
        assert all(set(p) == set(space) for p in points)
        assert all(space[k].low * 0.999 <= p[k] <= space[k].high * 1.001 for p in points for k in p)
        assert len({tuple(p.items()) for p in points}) == 8


def test_bad_knobs_are_refused_before_anything_runs():
    with pytest.raises(ReplicateError, match="unknown SGD"):
        ArenaConfig.for_profile("smoke", algorithms=["SGD"])
    with pytest.raises(ReplicateError, match="budget_kind"):
        ArenaConfig.for_profile("smoke", budget_kind="flops")
    with pytest.raises(ReplicateError, match="is not a file"):
        ArenaConfig.for_profile("smoke", user_algorithm="nowhere.py:Alg")


TINY = dict(algorithms=["FedAvg", "SCAFFOLD-II"], budget=4, local_steps=3, trials=3, seeds=[0, 1, 2], evals=2)


def test_held_out_seeds_never_choose_and_the_board_reads_only_them():
    config = ArenaConfig.for_profile("smoke", **TINY)
    data = arena(config)
    chosen = data[data.kind == "curve"].drop_duplicates("algorithm").set_index("algorithm")["chosen"]
    for name in TINY["algorithms"]:
        entry = ENTRIES[name]
        rows = data[(data.kind == "trial") & (data.algorithm == name)]
        for point, score in zip(trials(name, entry, 3), rows["score"]):  # scored on seed 0 alone
            run = cache.load(config.run_config(entry, "synthetic(1,1)", 0, point))
            assert score == final(run, "train_loss", fraction=config.tail)
        best = min(zip(rows["score"], trials(name, entry, 3)))[1]
        assert chosen[name] == ", ".join(f"{k}={v:g}" for k, v in best.items())
    board = leaderboard(data, config)
    assert set(board.seeds) == {2}  # seeds 1 and 2
    fedavg = data[(data.kind == "curve") & (data.algorithm == "FedAvg") & data.seed.isin([1, 2])]
    mean = sum(final(p, "train_loss", fraction=config.tail) for _, p in fedavg.groupby("seed")) / 2
    assert board.set_index("algorithm").loc["FedAvg", "final_loss"] == pytest.approx(mean, rel=1e-12)
    assert board.set_index("algorithm").loc["SCAFFOLD-II", "rounds"] == 2  # half of FedAvg's 4 at equal bytes
    assert all(c.kind == "context" and c.basis == "cross-check" for c in claims(board, config))
    # best-so-far at the budget: each held-out run's best evaluation, then mean / min / max over the seeds
    row = board.set_index("algorithm").loc["FedAvg"]
    best_acc = [p["test_acc"].max() for _, p in fedavg.groupby("seed")]
    best_loss = [p["train_loss"].min() for _, p in fedavg.groupby("seed")]
    assert (row.best_acc, row.best_acc_min, row.best_acc_max) == (pytest.approx(sum(best_acc) / 2), min(best_acc),
                                                                  max(best_acc))
    assert (row.best_loss_min, row.best_loss_max) == (min(best_loss), max(best_loss))
    assert row.best_loss <= row.final_loss + 1e-12 and row.best_acc >= row.final_acc - 1e-12
    # the tables published beside the board: every curve row (all seeds), every trial
    tabled = exp_tables(data)
    assert len(tabled["curves"]) == int((data.kind == "curve").sum())
    assert set(tabled["curves"].seed) == {0, 1, 2} and set(tabled["curves"].held_out) == {True, False}
    assert len(tabled["trials"]) == 3 * len(TINY["algorithms"]) and "kind" not in tabled["trials"]
    assert tabled["trials"]["score"].tolist() == data[data.kind == "trial"]["score"].tolist()


USER_FILE = '''
from dataclasses import dataclass

from replicate.fl.algorithms import FedAvg, register


@register("half_step_avg", example=dict(clients_per_round=4))
@dataclass(frozen=True)
class HalfStepAvg(FedAvg):
    """FedAvg whose server moves half way to the clients' average."""

    server_lr: float = 0.5
    arena_space = {"server_lr": (0.1, 1.0, "linear")}  # tuned beside the client rate
'''


@pytest.fixture
def user_algorithm(tmp_path):
    file = tmp_path / "elsewhere" / "my_algorithms.py"  # outside the package
    file.parent.mkdir()
    file.write_text(USER_FILE)
    yield f"{file}:HalfStepAvg"
    ALGORITHMS.pop("half_step_avg", None)
    EXAMPLES.pop("half_step_avg", None)
    sys.modules.pop("my_algorithms", None)
    sys.path.remove(str(file.parent))


def test_a_users_algorithm_file_joins_the_leaderboard(user_algorithm):
    config = ArenaConfig.for_profile("smoke", **TINY | {"algorithms": ["FedAvg"]}, user_algorithm=user_algorithm)
    data = arena(config)
    board = leaderboard(data, config)
    assert list(board.algorithm.sort_values()) == ["FedAvg", "HalfStepAvg"] and board.final_loss.notna().all()
    tried = data.query("kind == 'trial' and algorithm == 'HalfStepAvg'")  # its declared range, drawn as any entry's
    assert tried.server_lr.between(0.1, 1.0).all() and tried.server_lr.nunique() == len(tried) == config.trials
    assert "server_lr=" in board.set_index("algorithm").chosen["HalfStepAvg"]
    file = user_algorithm.rpartition(":")[0]
    for bad, why in (("{'momentum': (0.1, 1.0)}", "names 'momentum', not a field"),
                     ("{'server_lr': (0.0, 1.0)}", "must be \\(low, high\\) with 0 < low < high"),
                     ("{'server_lr': (1.0,)}", "must be"), ("{'server_lr': (0.1, 1.0, 'cubic')}", "must be")):
        broken = Path(file).with_name(f"broken_{abs(hash(bad))}.py")
        broken.write_text(USER_FILE.replace('"half_step_avg"', f'"{broken.stem}"').replace(
            '{"server_lr": (0.1, 1.0, "linear")}', bad))
        with pytest.raises(ReplicateError, match=why):
            ArenaConfig.for_profile("smoke", user_algorithm=f"{broken}:HalfStepAvg")
        ALGORITHMS.pop(broken.stem), EXAMPLES.pop(broken.stem), sys.modules.pop(broken.stem)
    with pytest.raises(ReplicateError, match="defines no 'Nope'"):
        ArenaConfig.for_profile("smoke", user_algorithm=f"{file}:Nope")
    with open(file, "a") as out:  # a class nobody registered cannot name its runs
        out.write("\n\nclass Unregistered(FedAvg):\n    pass\n")
    sys.modules.pop("my_algorithms", None)  # imported again: its first class, defined again, replaces itself
    with pytest.raises(ReplicateError, match="is not registered"):
        ArenaConfig.for_profile("smoke", user_algorithm=f"{file}:Unregistered")
    ALGORITHMS.pop("half_step_avg"), EXAMPLES.pop("half_step_avg"), sys.modules.pop("my_algorithms", None)
    with pytest.raises(ReplicateError, match="is not registered"):
        ArenaConfig.for_profile("smoke", user_algorithm=f"{file}:Unregistered")


@pytest.mark.smoke  # runs the notebook once, through the command line
def test_the_arena_command_takes_a_users_file_as_its_algorithm(user_algorithm, tmp_path, monkeypatch, capsys):
    """Issue #42: `python -m replicate arena --algorithm path/to/file.py:Name`, a file outside the package, named
    relative to where the user stands; `--algorithm NAME` picks the entries it runs against."""
    import pandas as pd

    from replicate.cli.main import main

    file, _, name = user_algorithm.rpartition(":")
    monkeypatch.setenv("REPLICATE_BUILD", str(tmp_path / "build"))
    monkeypatch.chdir(Path(file).parent)  # the notebook runs elsewhere: the path is resolved here
    out = tmp_path / "out"
    assert main(["arena", "--algorithm", f"{Path(file).name}:{name}", "--algorithm", "FedAvg",
                 "--set", "budget=4", "--set", "local_steps=3", "--set", "evals=2",
                 "--set", f"out_dir={json.dumps(str(out))}"]) == 0
    board = pd.read_csv(out / "arena" / "leaderboard.csv")
    assert sorted(board.algorithm) == ["FedAvg", "HalfStepAvg"] and board.final_loss.notna().all()
    curves = pd.read_csv(out / "arena" / "leaderboard.curves.csv")
    trials_ = pd.read_csv(out / "arena" / "leaderboard.trials.csv")
    assert set(curves.algorithm) == set(trials_.algorithm) == {"FedAvg", "HalfStepAvg"}
    held = curves[curves.held_out]
    for row in board.itertuples():  # the board is read from the curves published beside it
        runs = [p for _, p in held[held.algorithm == row.algorithm].groupby("seed")]
        assert row.best_loss == pytest.approx(sum(p.train_loss.min() for p in runs) / len(runs), rel=1e-5)
    assert main(["arena", "--algorithm", "a.py:A", "--algorithm", "b.py:B"]) == 2  # one user file at a time
    assert "one user algorithm at a time" in capsys.readouterr().err


def test_successive_halving_scores_the_eliminated_at_their_last_rung():
    config = ArenaConfig.for_profile("smoke", **TINY | {"algorithms": ["FedAvg"], "budget": 9, "halving_rungs": 2,
                                                       "evals": 9})
    rows = arena(config).query("kind == 'trial'")
    assert sorted(rows.scored_at_round) == [3, 3, 9]  # rungs 9/3 and 9: three trials, one kept


@pytest.mark.smoke  # runs the notebook three times
def test_every_arena_number_is_reproduced_from_the_cache_and_from_nothing(tmp_path, monkeypatch):
    """Issue #42's "every number reproducible (`--check` bitwise)": the arena notebook published once, then
    again from the run cache (re-plotted), then again from an empty cache (recomputed): each time the check
    that `figures --check` applies passes, and the tidy CSV and the claim verdicts are the same bytes."""
    import shutil

    from replicate.cli import check, runner
    from replicate.core import settings

    monkeypatch.setenv("REPLICATE_BUILD", str(tmp_path / "build"))
    outputs = {}
    for name in ("first", "from_cache", "from_nothing"):
        if name == "from_nothing":
            shutil.rmtree(settings.current().cache)
        assert runner.run(["arena/leaderboard"], "smoke", {"out_dir": str(tmp_path / name)}) == 0
        outputs[name] = tmp_path / name
    data = (outputs["first"] / "arena" / "leaderboard.csv").read_bytes()
    verdicts = [c["verdict"] for c in json.loads((outputs["first"] / "arena" / "leaderboard.claims.json")
                                               .read_text())["claims"]]
    assert data.count(b"\n") == 1 + len(ENTRIES) and verdicts  # the board: a row per entry
    for name in ("from_cache", "from_nothing"):
        result = check.compare("arena/leaderboard", outputs["first"], outputs[name], scale="smoke")
        assert result.ok, check.report([result])
        assert (outputs[name] / "arena" / "leaderboard.csv").read_bytes() == data, name
        for table in ("curves", "trials"):
            assert ((outputs[name] / "arena" / f"leaderboard.{table}.csv").read_bytes()
                    == (outputs["first"] / "arena" / f"leaderboard.{table}.csv").read_bytes()), (name, table)
        again = json.loads((outputs[name] / "arena" / "leaderboard.claims.json").read_text())["claims"]
        assert [c["verdict"] for c in again] == verdicts
    curves = outputs["from_nothing"] / "arena" / "leaderboard.curves.csv"  # --check reads the tables too
    import pandas as pd

    table = pd.read_csv(curves)
    table.loc[0, "train_loss"] *= 1.5
    table.to_csv(curves, index=False)
    result = check.compare("arena/leaderboard", outputs["first"], outputs["from_nothing"], scale="smoke")
    assert not result.ok and result.outside == 1 and result.max_rel == pytest.approx(1 / 3), check.report([result])
    curves.unlink()
    assert "missing" in check.compare("arena/leaderboard", outputs["first"], outputs["from_nothing"],
                                      scale="smoke").problem


def test_each_dataset_trains_its_papers_model_and_clients():
    """Issue #42: the datasets of the five documents, each with the model its paper trains there; where its paper
    samples K of N clients a round, every entry samples the same K (FedAvg averaging them as FedProx's code
    does), and STEM, whose every worker takes part each round, does not run there (a deviation says so)."""
    from replicate.data.registry import READS
    from replicate.experiments.arena.tasks import NEURAL, TASKS

    assert all(task.official in READS or task.official.startswith("synthetic") for task in TASKS.values())
    assert {d: TASKS[d].model for d in NEURAL} == {"emnist_tff": "conv_dropout", "shakespeare": "char_lstm",
                                                   "sent140": "sent_lstm", "cifar10": "lenet5"}
    full = ArenaConfig.for_profile("smoke").run_config(ENTRIES["FedAvg"], "synthetic(1,1)", 1, {"client_lr": 0.1})
    assert (full.algorithm.scheme, full.algorithm.clients_per_round, full.model) == ("full", 100, "logistic")  # all 100
    if not _staged("mnist_fedprox"):
        pytest.skip("MNIST is not staged: the sampled runs' configs read its clients")
    config = ArenaConfig.for_profile("smoke", datasets=["mnist_fedprox", "synthetic(1,1)"], num_clients=4,
                                     algorithms=["FedAvg", "FedProx", "STEM"])  # neither builder cuts clients
    assert config.clients_of("mnist_fedprox") is None and config.clients_of("synthetic(1,1)") is None
    assert ("STEM", "mnist_fedprox") not in config.pairs() and ("STEM", "synthetic(1,1)") in config.pairs()
    assert any(d.startswith("Not run: STEM on mnist_fedprox") for d in config.deviations)
    assert len(config.pairs()) == 5 and set(config.grid().groups) == set(config.pairs())
    sampled = config.run_config(ENTRIES["FedAvg"], "mnist_fedprox", 1, {"client_lr": 0.1})
    assert (sampled.algorithm.scheme, sampled.algorithm.clients_per_round, sampled.batch_size) == ("weighted", 10, 10)
    prox = config.run_config(ENTRIES["FedProx"], "mnist_fedprox", 1, {"client_lr": 0.1, "prox_mu": 0.1})
    assert (prox.algorithm.clients_per_round, prox.algorithm.sampling) == (10, "uniform")


def test_a_neural_dataset_runs_its_papers_model_in_the_arena(monkeypatch):
    """STEM's CIFAR-10 (its LeNet-5, every worker every round) at a CPU's size: two workers, one round."""
    monkeypatch.setenv("REPLICATE_STAND_INS", "1")
    if not _staged("cifar10_jpg_stem_moderate"):
        pytest.skip("no CIFAR-10 copy is staged")
    config = ArenaConfig.for_profile("smoke", datasets=["cifar10"], num_clients=2, algorithms=["FedAvg", "STEM"],
                                     budget=1, local_steps=1, trials=1, seeds=[0, 1], evals=1)
    run = config.run_config(ENTRIES["STEM"], "cifar10", 1, trials("STEM", ENTRIES["STEM"], 1)[0])
    assert (run.model, run.dataset, run.num_clients, run.batch_size) == ("lenet5", "cifar10_jpg_stem_moderate", 2, 8)
    curves = arena(config).query("kind == 'curve'")
    assert set(curves.algorithm) == {"FedAvg", "STEM"} and curves.train_loss.notna().all()


def _staged(loader: str) -> bool:
    from replicate.data import load, store  # noqa: F401  (load registers every builder's reads)
    from replicate.data.registry import READS

    return all(store.is_available(name) for name in READS[loader])


def test_the_gpu_arena_is_sized_and_its_documented_command_is_its_settings():
    """Issue #42's GPU profile: docs/arena.md's command runs ``ArenaConfig.GPU``, and its size is gpu_work.json's."""
    import re

    from replicate.core import paths
    from replicate.experiments import work

    sized = json.loads((paths.figures_dir() / work.FILE).read_text())["arena"]
    assert sized["settings"] == {k: list(v) if isinstance(v, tuple) else v for k, v in ArenaConfig.GPU.items()}
    assert sized["runs"] == sized["tuning_runs"] + sized["final_runs"] > 0
    assert 0 < sized["batched_steps"] <= sized["sequential_steps"]
    assert "docs/arena.md" in (paths.REPO / "README.md").read_text()  # the README links the arena's page
    page = (paths.REPO / "docs" / "arena.md").read_text()
    command = re.search(r"`python -m replicate arena --profile paper --set budget=(\d+) --set 'datasets=(\[.*?\])'`",
                        page)
    assert command and json.loads(command[2]) == list(ArenaConfig.GPU["datasets"])
    assert int(command[1]) == ArenaConfig.GPU["budget"]
    assert (f"{sized['runs']:,} runs counted as" in page and f"{sized['sequential_steps']:,} sequential" in page
            and f"{sized['batched_steps']:,} as batched runs" in page)


def test_sampled_neural_datasets_run_end_to_end_and_too_few_clients_are_refused(monkeypatch):
    """EMNIST-62 (Reddi et al.'s CNN) and Sent140 (FedProx's LSTM), K = 10 sampled, one round each; and a
    ``num_clients`` below the K a paper samples is refused before anything runs (found as a user: it failed in
    the first run's first round)."""
    monkeypatch.setenv("REPLICATE_STAND_INS", "1")
    if not (_staged("femnist") and _staged("sent140")):
        pytest.skip("the EMNIST-62 and Sent140 stand-ins (LEAF's FEMNIST, Sent140) are not staged")
    with pytest.raises(ReplicateError, match="leaves emnist_tff 4 clients, fewer than the 10"):
        ArenaConfig.for_profile("smoke", datasets=["emnist_tff"], num_clients=4, algorithms=["FedAvg"]).validate()
    config = ArenaConfig.for_profile("smoke", datasets=["emnist_tff", "sent140"], num_clients=10,
                                     algorithms=["FedAvg", "FedProx"], budget=1, local_steps=1, trials=1,
                                     seeds=[0, 1], evals=1)
    config.validate()
    assert config.clients_of("sent140") == 10  # every builder but Li's and FedProx's MNIST cuts its clients
    assert replace(config, datasets=("shakespeare",)).clients_of("shakespeare") == 10
    curves = arena(config).query("kind == 'curve'")
    assert set(curves.dataset) == {TASKS["emnist_tff"].label, TASKS["sent140"].label}
    assert set(curves.algorithm) == {"FedAvg", "FedProx"} and curves.train_loss.notna().all()
    first = curves[curves["round"] == 0].groupby(["dataset", "seed"]).train_loss.nunique()
    assert (first == 1).all()  # every entry starts from its seed's one initial model


def test_the_default_arena_covers_mnist_under_dirichlet_label_skew_by_registered_names():
    """Four datasets by default, among them MNIST under Dirichlet(α) label skew (Hsu et al. 2019) at α = 0.1 and 1:
    registered builders (so their runs are cached by name), 100 clients of at least 10 samples, partition seed 0,
    the very partition ``load_dataset("mnist", partition=dirichlet(α, 100, 10), seed=0)`` draws."""
    from replicate import data
    from replicate.data import partitions
    from replicate.data.pooled import load_dataset
    from replicate.data.registry import READS

    default = ArenaConfig().datasets
    assert len(default) >= 4 and {"mnist_dirichlet0.1", "mnist_dirichlet1"} <= set(default)
    assert all(d in TASKS for d in default)
    assert not {"mnist_dirichlet0.1", "mnist_dirichlet1"} & set(ArenaConfig.GPU["datasets"])  # the documents' sets
    assert READS["mnist_dirichlet0.1"] == READS["mnist_dirichlet1"] == ("mnist",)
    assert data.parameters("mnist_dirichlet1") == {"seed": 0}  # the partition's seed, fixed unless data_seed says
    if not _staged("mnist_dirichlet1"):
        pytest.skip("MNIST is not staged")
    for alpha in (0.1, 1.0):
        named = data.load(f"mnist_dirichlet{alpha:g}")
        drawn = load_dataset("mnist", partition=partitions.dirichlet(alpha, clients=100, min_size=10), seed=0)
        assert named.name == f"mnist_dirichlet{alpha:g}" and named.num_clients == 100
        assert int(named.train.sizes.min()) >= 10 and named.meta["partition"]["alpha"] == alpha
        assert all(bool((getattr(named.train, f) == getattr(drawn.train, f)).all()) for f in ("x", "y", "offsets"))
        assert named.test.num_clients == 1 and len(named.test.y) == 10_000  # the official test split, pooled
    skewed = partitions.describe(data.load("mnist_dirichlet0.1"))["classes_per_client"]
    assert skewed.mean() < 7 and partitions.describe(data.load("mnist_dirichlet1"))["classes_per_client"].mean() > 9
