"""REPLICATION.md's GPU-scale work table (issue #24 §3): every GPU-scale coverage item states its work, and the
committed counts are today's enumeration of the figures' paper profiles (nothing is run)."""
import json

import pytest

from replicate.core import paths
from replicate.experiments import knobs, work
from replicate.report import coverage, replication
from replicate.runs import pool, tune

COMMITTED = paths.figures_dir() / work.FILE


def _committed() -> list[dict]:
    return json.loads(COMMITTED.read_text())["rows"]


GPU_SCALE = {(f.paper, f.item) for f in work.FIGURES}  # what makes an item GPU-scale: its enumerated work


def test_every_gpu_scale_item_is_a_coverage_item_and_every_row_citing_the_work_is_one():
    items = {(i.paper, i.item) for i in coverage.ITEMS}
    assert GPU_SCALE <= items
    citing = {(i.paper, i.item) for i in coverage.ITEMS if "GPU-scale work table" in i.detail}
    assert citing <= GPU_SCALE and len(citing) >= 6  # the prose of a row sends readers to its enumerated work


def test_the_committed_table_lists_every_gpu_scale_item_with_todays_run_counts():
    rows = _committed()
    assert {(r["paper"], r["item"]) for r in rows} == GPU_SCALE
    assert [r["figure"] for r in rows] == [f.figure for f in work.FIGURES]
    for row, figure in zip(rows, work.FIGURES):
        tuning, final, every = work.runs(figure)  # a real enumeration of the figure's configs
        assert (row["runs"], row["tuning_runs"], row["final_runs"]) == (len(every), tuning, final), figure.figure
        assert row["runs"] == row["tuning_runs"] + row["final_runs"] > 0
        assert sorted({c.rounds for c in every}) == row["rounds"]
        assert row["measured"]  # a measured cost with its source, or "not measured"


def test_fixed_step_figures_count_rounds_times_local_updates():
    """The STEM figures take I local steps a round: their steps need no data and are exact."""
    rows = {r["figure"]: r for r in _committed()}
    for figure in work.FIGURES:
        if figure.paper != "khanduri2021":
            continue
        _, _, every = work.runs(figure)
        assert rows[figure.figure]["sequential_steps"] == sum(c.rounds * c.local_steps for c in every)
    fig2 = next(f for f in work.FIGURES if f.figure.startswith("Fig. 2, CIFAR-10"))
    assert work.runs(fig2)[0:2] == (34 + 6 + 6, 3 * 2)  # 34 STEM (κ̄, c) pairs, 6 rates each, then 2 more seeds



def test_an_epoch_figure_counts_its_busiest_clients_exactly(monkeypatch):
    """FedProx Figures 2/6's LSTM panels: a stacked round lasts as long as its busiest sampled client, so the
    committed sequential steps are today's count from the algorithm's plan (issue #38: the mean client's
    epoch, the earlier count, is ≈ 5× short here), and a GPU job's pieces never take more than the runs alone."""
    from replicate.experiments import requirements

    monkeypatch.setenv("REPLICATE_STAND_INS", "1")  # the GPU work is enumerated on the stand-ins (work.SOURCE)
    figure = next(f for f in work.FIGURES if f.key == "fedprox2020/fig2")
    absent = requirements.missing(figure.key, "paper")
    if absent:
        pytest.skip(f"{', '.join(sorted(absent))} not available: the count reads the clients' sizes")
    row = next(r for r in _committed() if r["figure"] == figure.figure)
    tuning, final = figure.plan()
    _, _, every = work.runs(figure)
    lengths: dict = {}
    steps = [int(work.round_steps(c, lengths).sum()) for c in every]
    assert (row["sequential_steps"], row["steps_per_run"]) == (sum(steps), [min(steps), max(steps)])
    assert (row["batched_steps"], row["own_pace_steps"]) == work.batch_steps(
        list(dict.fromkeys(tuning)), [c for c in every if c not in set(tuning)], lengths)
    assert row["batched_steps"] <= row["sequential_steps"]
    assert row["own_pace_steps"] < row["batched_steps"]  # its pieces mix seeds, whose busiest clients differ
    mean = sum(c.rounds * c.local_epochs * row["epoch_steps"][f"{c.dataset}, b = {c.batch_size}"] for c in every)
    assert row["sequential_steps"] > 3 * mean

def test_replication_md_has_the_table_and_each_gpu_row_states_its_work():
    text = replication.render()
    assert "### GPU-scale work: what the paper profile of each GPU-scale figure costs" in text
    table = text.split("### GPU-scale work")[1].split("\n## ")[0]
    coverage_rows = [line for line in text.splitlines() if line.startswith("| ")]
    for paper, item in sorted(GPU_SCALE):
        assert f"| {paper} {item} |" in table
        rows = [line for line in coverage_rows if line.startswith((f"| {paper} | {item} |", f"| {paper} | {item} ("))]
        below = [row for row in rows if "paper-profile work:" in row]  # the row below the paper's scale says it
        if all("| reduced scale |" not in row for row in rows):  # published at the paper profile (STEM Figure 5)
            assert rows and not below, rows
            continue
        assert len(below) == 1 and " runs, " in below[0], rows
    committed = (paths.REPO / "REPLICATION.md").read_text()
    assert table in committed, "regenerate REPLICATION.md: python -m replicate report"


def test_flops_per_step_are_the_committed_ones_and_grow_with_the_batch():
    """gpu_work.json's FLOPs of a client's step (what the planner prices a step by where dispatch is cheaper):
    the FEMNIST CNN's at b = 20 as committed, twice that at b = 40; and not zero for an LSTM (one client alone
    would take a fused kernel the counter does not see)."""
    committed = {k: v for r in _committed() for k, v in r["gflop_per_client_step"].items()}
    femnist = work.flops_per_step("conv_dropout", "femnist", 20)
    assert round(femnist / 1e9, 4) == committed["conv_dropout (femnist), b = 20"]
    assert work.flops_per_step("conv_dropout", "femnist", 40) == pytest.approx(2 * femnist, rel=1e-9)
    assert 71.6e6 * 20 < femnist < 1.4 * 71.6e6 * 20  # by hand: ≈ 71.6 MFLOP an image, forward and backward
    assert committed["char_lstm (shakespeare), b = 10"] > 1.0


def test_the_estimate_prices_a_step_by_the_larger_of_dispatch_and_arithmetic():
    from replicate.experiments import estimate as plan

    config = next(c for c in _figure("Fig. 6 / 11, FEMNIST").plan()[0] if c.model == "conv_dropout")
    gflop = next(r["gflop_per_client_step"][work.flops_name(config)] for r in _committed()
                 if r["figure"] == "Fig. 6 / 11, FEMNIST")
    arithmetic = gflop * 1e9 * config.clients_per_round / plan.DEVICE_FLOPS
    dispatch = (78 + plan.NOISE_OPS) * plan.OP_SECONDS * 0.5
    assert arithmetic > dispatch and plan._modelled(config, shared=0.5) == pytest.approx(arithmetic)
    assert plan._modelled(config, shared=1e6) == pytest.approx((78 + plan.NOISE_OPS) * plan.OP_SECONDS * 1e6)


def _figure(name: str):
    return next(f for f in work.FIGURES if f.figure == name)


@pytest.mark.parametrize("model, dataset", [("lenet", "mnist_stem_high"), ("lenet5", "cifar10_stem_moderate")])
def test_ops_per_step_matches_the_committed_count(model, dataset):
    counts = {k.split(" (")[0]: v for r in _committed() for k, v in r["ops_per_step"].items()}
    assert work.ops_per_step(model, dataset) == counts[model]


def _history(config) -> "pd.DataFrame":
    """A made-up run: the figure code tunes on it and plots it; its numbers vary with the config so that a
    choice is made (any choice gives the same count)."""
    import pandas as pd

    level = 1.0 + (hash(config) % 97) / 100
    return pd.DataFrame({"round": [0, 1, 2, 3], "train_loss": [2.0, 1.5, level, level],
                         "train_acc": [0.1, 0.2, 0.3, 0.3], "test_acc": [0.1, 0.2, 0.3, 0.3],
                         "test_loss": [2.0, 1.5, 1.2, 1.2], "dissimilarity": [1.0, 0.9, 0.8, 0.8]})


def _as_ledger_run(cls, **settings):
    """``cls`` at the paper profile on the data the ledger's GPU runs read (``work.SOURCE``: the offline stand-ins)."""
    return cls(**settings, **({"data_source": work.SOURCE} if "data_source" in knobs.names(cls) else {}))


def _same_plan(seen, figure):
    """The figure code asked for as many distinct runs as enumerated, every enumerated tuning run among them
    (its final runs use the rates it chose on the made-up runs, ours the first grid point: same count)."""
    tuning, final = figure.plan()
    assert len(set(seen)) == work.runs(figure)[0] + work.runs(figure)[1]
    assert set(tuning) <= set(seen)


def _recorder(monkeypatch, module):
    """Replace ``module``'s pool and run cache by recorders (``runs.tune``'s, which every tuned figure calls): the
    configs the figure code asks for, none run."""
    seen = []

    class Pool:
        tidy = staticmethod(pool.tidy)  # the figure's frame of the runs read

        @staticmethod
        def compute(jobs, **_):
            seen.extend(job[0] for job in jobs)

    class Cache:
        @staticmethod
        def run(config, **_):
            seen.append(config)
            return _history(config)

    monkeypatch.setattr(module, "pool", Pool)
    monkeypatch.setattr(module, "cache", Cache)
    return seen


@pytest.mark.parametrize("name", ["Fig. 2, CIFAR-10", "Fig. 3, CIFAR-10", "Fig. 5, MNIST"])
def test_the_stem_enumeration_is_what_the_figure_code_runs(monkeypatch, name):
    from replicate.experiments.khanduri2021 import cifar, common, samples

    seen = _recorder(monkeypatch, tune)
    config = _as_ledger_run({"Fig. 2": cifar.Fig2Config, "Fig. 3": cifar.Fig3Config, "Fig. 5": samples.Fig5Config}[name[:6]])
    for part in config.compared() if hasattr(config, "compared") else [config]:
        common.tune_and_run(part, part.updates(), None)
    figure = next(f for f in work.FIGURES if f.figure.startswith(name))
    _same_plan(seen, figure)


@pytest.mark.parametrize("name", ["Fig. 6 / 11", "Fig. 12", "Fig. 13"])
def test_the_charles_enumeration_is_what_the_figure_code_runs(monkeypatch, name):
    from replicate.experiments.charles2021 import neural, tuned

    seen = _recorder(monkeypatch, tune)
    if name == "Fig. 6 / 11":
        tuned.tuned(_as_ledger_run(tuned.Fig6Config))
    else:
        neural.sweep(_as_ledger_run(neural.Fig12Config if name == "Fig. 12" else neural.Fig13Config))
    figure = next(f for f in work.FIGURES if f.figure.startswith(name))
    _same_plan(seen, figure)


def test_the_fedprox_mu_enumeration_is_what_the_figure_code_runs(monkeypatch):
    import pandas as pd

    from replicate.experiments.fedprox2020 import mu
    from replicate.runs import tune

    seen = _recorder(monkeypatch, tune)  # the best μ is tuned through runs.tune

    def runs(labelled, *_, **__):
        seen.extend(c for _, c in labelled)
        return pd.concat([_history(c).assign(**labels) for labels, c in labelled], ignore_index=True)

    monkeypatch.setattr(mu, "runs", runs)
    mu.fig3(_as_ledger_run(mu.Fig3Config, datasets=work.LSTM_PANELS))
    _same_plan(seen, next(f for f in work.FIGURES if f.figure.startswith("Fig. 3 / 7")))


def test_the_estimate_cuts_batches_as_the_gpu_check_does():
    """``work.BATCHING`` (how the estimate counts batched runs) is what .ci/device-check gives a session's runs."""
    script = (paths.REPO / ".ci" / "device-check").read_text()
    assert f"REPLICATE_WORKERS=${{REPLICATE_WORKERS:-{work.BATCHING['workers']}}}" in script
    assert f"REPLICATE_BATCH_RUNS=${{REPLICATE_BATCH_RUNS:-{work.BATCHING['max_runs']}}}" in script


def test_a_gpu_session_gives_each_command_the_time_it_has_left(tmp_path):
    """.ci/device-check runs the queue with the time the session has left, not each line's planned share: a
    unit done sooner than projected leaves its minutes to the next, and a command that reads its stdin does not
    swallow the queue (a stand-in Python records the commands; no GPU, no data)."""
    import subprocess

    calls = tmp_path / "calls"
    fake = tmp_path / "python"
    fake.write_text("#!/usr/bin/env bash\n"
                    f"echo \"$*\" >> {calls}\n"
                    "case \"$*\" in *'gpu_queue.py commands'*)\n"
                    "  echo \"python -m replicate figures a/fig1 --profile paper --time-budget 100s\"\n"
                    "  echo \"python -m replicate figures b/fig2 --profile paper --time-budget 30s\";;\n"
                    "  *'replicate figures '*) cat > /dev/null;;\n"  # a command that reads its stdin
                    "esac\n")
    fake.chmod(0o755)
    out = tmp_path / "out"
    out.mkdir()
    env = {"PATH": "/usr/bin:/bin", "OUT": str(out), "PYTHON": str(fake), "STEPS": "figures",
           "FIGURES_LIMIT": "200", "REPLICATE_DATA_FROM": str(tmp_path)}
    subprocess.run(["bash", str(paths.REPO / ".ci" / "device-check"), "4m"], env=env, check=True,
                   capture_output=True, timeout=60)
    ran = [line.split() for line in calls.read_text().splitlines() if line.startswith("-m replicate figures ")
           and "--plan" not in line]
    assert [words[3] for words in ran] == ["a/fig1", "b/fig2"]
    budgets = [int(words[-1].rstrip("s")) for words in ran]
    assert all(170 <= b <= 180 for b in budgets), budgets  # the step's 200 s less 20, not the lines' 100 and 30
    assert all(words.count("--time-budget") == 1 for words in ran)


@pytest.mark.parametrize("key, owner", [("charles2021/fig6", "charles2021.tuned.Fig6Config"),
                                        ("khanduri2021/fig2", "khanduri2021.common.StemRuns"),
                                        ("fedprox2020/fig3", "fedprox2020.mu.Fig3Config")])
def test_the_enumeration_reads_the_figures_own_grid(monkeypatch, key, owner):
    """Issue #41 item 2: a tuned figure states its grid once (``grid()``, a ``runs.tune.Grid``) and the GPU-work
    enumeration derives its runs from it: shrink the grid where the figure declares it, and the count follows
    with no edit to experiments/work.py."""
    import dataclasses
    import importlib

    module, cls = owner.rsplit(".", 1)
    cls = getattr(importlib.import_module(f"replicate.experiments.{module}"), cls)
    figure = next(f for f in work.FIGURES if f.key == key)
    before = work.runs(figure)[0]
    declared = cls.grid

    def first_only(self, *args):
        grid = declared(self, *args)
        return dataclasses.replace(grid, groups={g: c[:1] for g, c in grid.groups.items()})

    monkeypatch.setattr(cls, "grid", first_only)
    shrunk = work.runs(figure)[0]
    assert shrunk < before
    monkeypatch.setattr(cls, "grid", declared)
    assert work.runs(figure)[0] == before
