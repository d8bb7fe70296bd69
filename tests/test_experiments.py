"""Run configs, the result cache, and the Li et al. quadratic analysis."""
import json

import pytest
import torch

from replicate.core import paths, settings
from replicate.core.machine import cpu_model, describe
from replicate.data.quadratic import li2020_counterexample
from replicate.core.errors import ReplicateError
from replicate.experiments.li2020 import fig2
from replicate.runs import cache, keys
from replicate.fl.algorithms import FedAvg, FedProx, LocalUpdate, Scaffold
from replicate.runs.config import RunConfig, make

QUAD = RunConfig(dataset="quadratic", algorithm=FedAvg("full"), local_steps=5, batch_size=None, client_lr=0.4,
                 lr_schedule="constant", weight_decay=0.0, clip_norm=None, rounds=30)


def test_cache_roundtrip_and_resume(monkeypatch):
    log = cache.RunLog()
    first = cache.run(QUAD, progress=False, log=log)
    stored = settings.current().cache / "runs" / f"{cache.key(QUAD)}.csv"
    assert stored.exists() and json.loads(stored.with_suffix(".json").read_text())["local_steps"] == 5
    calls = []
    monkeypatch.setattr("replicate.fl.engine.run_batch", lambda *a, **k: calls.append(a))
    again = cache.run(QUAD, progress=False, log=log)  # loads, does not recompute
    assert not calls
    assert again["objective"].tolist() == pytest.approx(first["objective"].tolist(), rel=1e-12)
    used = log.provenance()  # one run used twice (a tuned figure scores a run, then plots it): counted once
    assert used["runs"] == 1 and used["runs_from_cache"] == 0 and used["runs_untimed"] == 0
    assert used["runs_compute_s"] == pytest.approx(json.loads(stored.with_suffix(".json").read_text())["elapsed_s"], abs=0.06)
    assert used["runs_compute_by_dataset_s"] == {"quadratic": used["runs_compute_s"]}  # where the time goes
    assert list(used["run_seconds"]) == [stored.stem]
    here = describe("cpu")  # the processor, counted in the record (figures --check compares them)
    assert json.loads(stored.with_suffix(".json").read_text())["machine"] == here and used["machines"] == {here: 1}
    other = cache.RunLog()  # another notebook's log: the run is from the cache there
    cache.run(QUAD, progress=False, log=other)
    assert other.provenance()["runs"] == other.provenance()["runs_from_cache"] == 1
    assert other.provenance()["machines"] == {here: 1}  # read from the sidecar
    pooled = cache.RunLog()
    pooled.mark_computed(QUAD)  # as a worker pool does after computing it for this notebook
    cache.run(QUAD, progress=False, log=pooled)
    assert pooled.provenance()["runs"] == 1 and pooled.provenance()["runs_from_cache"] == 0
    assert cache.RunLog().provenance()["runs"] == 0  # logs are separate objects: nothing global
    assert cache.key(QUAD) != cache.key(QUAD.replace(local_steps=6))
    assert not list((settings.current().cache / "runs").glob("*.tmp"))  # atomic writes leave no temp files


def test_a_numerics_bump_changes_only_the_keys_of_that_model_or_algorithm(monkeypatch):
    lstm = RunConfig("sent140", model="sent_lstm")
    before = (cache.key(QUAD), cache.key(lstm))
    monkeypatch.setitem(keys.NUMERICS, "sent_lstm", keys.NUMERICS.get("sent_lstm", 0) + 1)
    assert cache.key(QUAD) == before[0] and cache.key(lstm) != before[1]
    scaffold = QUAD.replace(algorithm=Scaffold())
    old = cache.key(scaffold)
    monkeypatch.setitem(keys.NUMERICS, "scaffold", keys.NUMERICS["scaffold"] + 1)
    assert cache.key(scaffold) != old and cache.key(QUAD) == before[0]


def test_a_sweep_frame_labels_every_run():
    from replicate.runs import pool

    frame = pool.frame([({"E": 5}, QUAD), ({"E": 1}, QUAD.replace(local_steps=1))], columns=("round", "objective"),
                       progress=False)
    assert list(frame.columns) == ["E", "round", "objective"] and set(frame["E"]) == {1, 5}
    assert len(frame) == 2 * (QUAD.rounds + 1)


def test_unknown_run_parameter_is_named():
    with pytest.raises(ReplicateError, match="local_step"):
        make(dataset="quadratic", local_step=3)
    with pytest.raises(ReplicateError, match="profile"):
        fig2.Fig2Config.for_profile("huge")
    with pytest.raises(ReplicateError, match="no parameter"):
        fig2.Fig2Config.for_profile("smoke", epochs=3)


def test_fedavg_converges_to_the_predicted_fixed_point():
    """Long fixed-lr FedAvg on the quadratic ends at w̃* from the closed form, not at w*."""
    q = li2020_counterexample()
    history = cache.run(QUAD.replace(rounds=4000, client_lr=0.2), progress=False, use_cache=False)
    w_tilde = fig2.fedavg_fixed_point(q, 0.2, 5)
    w_star = q.minimiser
    assert history["distance"].iloc[-1] == pytest.approx(float(torch.linalg.vector_norm(w_tilde - w_star)), rel=1e-3)
    assert float(torch.linalg.vector_norm(w_tilde - w_star)) > 1e-3
    # E = 1 is gradient descent: its fixed point is the optimum
    torch.testing.assert_close(fig2.fedavg_fixed_point(q, 0.2, 1), w_star.to(torch.float64))


def test_theorem5_bound_grid():
    frame = fig2.theorem5(fig2.Fig2Config(theorem5_lrs=(0.01,), theorem5_steps=(2, 5)))
    assert len(frame) == 2 and (frame.y >= frame.bound).all()
    assert (frame.bound > 0).all()
    # a grid: any number of rates by any number of steps, as a notebook's parameters cell may set them
    config = fig2.Fig2Config.for_profile("smoke", theorem5_lrs=[0.005, 0.02], theorem5_steps=[2, 5, 10])
    assert len(fig2.theorem5(config)) == 6


def test_stopped_runs_end_at_the_target_and_are_cached_apart():
    synthetic = RunConfig(dataset="synthetic(1,1)", num_clients=10, algorithm=FedAvg(clients_per_round=3), local_steps=5,
                          batch_size=8, rounds=40)
    full = cache.run(synthetic, progress=False)
    goal = float(full["train_loss"].iloc[8])
    stopped = cache.run(synthetic, stop_loss=goal, progress=False)
    first = int((full["train_loss"] <= goal).idxmax())
    assert len(stopped) == first + 1 and stopped["train_loss"].iloc[-1] <= goal
    assert cache.load(synthetic, stop_loss=goal) is not None and cache.load(synthetic, stop_loss=goal / 2) is None
    assert len(cache.load(synthetic)) == synthetic.rounds + 1  # the full run is untouched


def test_cache_key_covers_the_whole_config_the_device_and_the_extra_metrics():
    """Engine v3's key: every field (defaults included), the device type and the extra metrics'
    key, so CPU and CUDA runs, or runs with and without extra columns, never share an entry."""
    import dataclasses
    import hashlib

    config = {f.name: getattr(QUAD, f.name) for f in dataclasses.fields(QUAD)}
    config["algorithm"] = {"name": "fedavg", **dataclasses.asdict(QUAD.algorithm)}
    payload = json.dumps({"version": keys.VERSION, "config": config, "device": "cpu", "metrics": None,
                          "numerics": {}}, sort_keys=True)
    assert cache.key(QUAD, device="cpu") == hashlib.sha256(payload.encode()).hexdigest()[:20]
    assert cache.key(QUAD, device="cpu") != cache.key(QUAD, device="cuda")
    assert cache.key(QUAD) == cache.key(QUAD, device="cpu")  # this machine has no GPU: the default device

    def probe(problem, params, round_):
        return {"norm": float(params.norm())}

    probe.key = "norm"
    assert cache.key(QUAD, probe) != cache.key(QUAD)
    with pytest.raises(ReplicateError, match="has no 'key' string"):
        cache.key(QUAD, lambda problem, params, round_: {})
    with_norm = cache.run(QUAD, progress=False, extra_metrics=probe)
    assert "norm" in with_norm.columns and "norm" not in cache.run(QUAD, progress=False).columns
    assert cache.load(QUAD, extra_metrics=probe) is not None


@pytest.mark.parametrize("bad, match", [
    (lambda: dict(algorithm="fedsgd"), "not a registered algorithm's settings"),
    (lambda: dict(algorithm=FedProx(prox_mu=-0.1)), "prox_mu"),
    (lambda: dict(algorithm=FedProx(), local_steps=None, local_epochs=0, batch_size=10), "epochs"),
    (lambda: dict(algorithm=FedProx(straggler_fraction=1.5)), r"straggler_fraction must be in \[0, 1\]"),
    (lambda: dict(algorithm=FedAvg("weighted", straggler_fraction=-0.1)), "straggler_fraction"),
    (lambda: dict(local_steps=5, local_epochs=2), "exactly one of local_steps and local_epochs"),
])
def test_bad_run_settings_fail_before_any_compute(bad, match, monkeypatch):
    monkeypatch.setattr("replicate.fl.engine.run_batch", lambda *a, **k: pytest.fail("computed despite bad input"))
    monkeypatch.setattr("replicate.runs.config.dataset", lambda *a: pytest.fail("loaded data"))
    with pytest.raises(ReplicateError, match=match):
        cache.run(RunConfig(dataset="synthetic(1,1)", **bad()), progress=False)


def test_a_run_config_round_trips_through_its_json_form():
    config = RunConfig("synthetic(1,1)", algorithm=LocalUpdate(0.5, a=(1.0, 2.0), momentum=0.9, alpha=0.1),
                       local_steps=2, batch_size=8)
    again = RunConfig.from_dict(json.loads(json.dumps(config.to_dict())))
    assert again == config and cache.key(again) == cache.key(config)
    assert config.with_algorithm(momentum=0.5).algorithm.momentum == 0.5 and config.clients_per_round is None


def test_charles_runs_take_the_same_run_path_uncached():
    from replicate import theory as th
    from replicate.experiments.charles2021.common import local_update_config

    config = local_update_config((1.0, 1.0), 0.1, th.ServerOpt(0.1), rounds=3)
    with pytest.raises(ReplicateError, match="cannot be cached"):
        cache.run(config, problem=object())
    with pytest.raises(ReplicateError, match="dataset='given'"):
        cache.run(config, use_cache=False)


def test_fig2_title_names_the_appendix_its_notebook_cites():
    """Li et al.'s quadratic counterexample is App. C (App. B proves Theorems 2 and 3)."""
    import re

    import matplotlib
    import pandas as pd

    matplotlib.use("Agg")
    curves = [{"panel": p, "series": "E = 1", "x": x, "y": 1.0 + x, "local_steps": 1, "bound": float("nan")}
              for p in ("(a) fixed lr", "(b) decayed lr") for x in (0, 1)]
    theorem = [{"panel": "Theorem 5", "series": "", "x": x, "y": 1.0, "local_steps": 2, "bound": 0.5} for x in (0.01, 0.1)]
    title = fig2.plot_fig2(pd.DataFrame(curves + theorem))._suptitle.get_text()
    notebook = json.loads((paths.notebooks_dir() / "li2020_fig2.ipynb").read_text())
    cited = re.findall(r"App\. ([A-Z])", "".join(notebook["cells"][0]["source"]))
    assert re.findall(r"App\. ([A-Z])", title) == cited == ["C"]


def test_a_notebooks_run_log_shows_runs_done_of_total(monkeypatch, tmp_path):
    """In JupyterLab (no batch runner polling a progress file) the figure's RunLog shows runs computed /
    total as a bar: the total is announced by the worker pool, also when it computes the runs in this
    process (one worker, as Charles Fig 6 and STEM Fig 5 do at smoke scale), before the first starts."""
    from replicate.runs import pool

    monkeypatch.delenv("REPLICATE_PROGRESS", raising=False)
    configs = [QUAD.replace(local_steps=steps) for steps in (2, 3, 4)]
    cache.run(configs[0], progress=False)  # already in the cache: no work, not counted
    log = cache.RunLog()
    pool.compute([(c, None) for c in configs], workers=1, progress=False, log=log)
    assert (log._bar.n, log._bar.total) == (0, 2)
    for config in configs:
        cache.run(config, progress=False, log=log)
        assert log._bar.total == 2
    assert (log._bar.n, log.from_cache) == (2, 1)
    cache.run(QUAD.replace(local_steps=7), progress=False, log=log)  # a run nobody announced adds to the total
    assert (log._bar.n, log._bar.total) == (3, 3)
    fig2_log = cache.RunLog()  # a sequential figure announces its runs too
    config = fig2.Fig2Config.for_profile("smoke", local_steps=[1], decay=[0.01], rounds=3, theorem5_lrs=[0.01],
                                         theorem5_steps=[2])
    fig2.fig2(config, progress=False, log=fig2_log)
    assert (fig2_log._bar.n, fig2_log._bar.total) == (2, 2)


def test_a_runs_private_log_leaves_the_batch_progress_file_alone(monkeypatch, tmp_path):
    """A worker process inherits REPLICATE_PROGRESS; its runs' own logs must not overwrite the notebook's."""
    progress_file = tmp_path / "progress.json"
    monkeypatch.setenv("REPLICATE_PROGRESS", str(progress_file))
    cache.run(QUAD.replace(local_steps=2), progress=False)  # as pool._compute calls it
    assert not progress_file.exists()


class _AnnouncedOnly(cache.RunLog):
    """A RunLog that fails when a run starts that nobody announced: its bar's total was wrong."""

    def started(self, entry=None):
        assert entry in self.announced, "a run started that its figure did not announce (runs done / total)"
        super().started(entry)


def test_sequential_figures_announce_their_runs_before_computing_them(monkeypatch):
    from replicate.experiments.notes import convex, nonconvex

    monkeypatch.delenv("REPLICATE_PROGRESS", raising=False)
    config = fig2.Fig2Config.for_profile("smoke", local_steps=[1, 5], decay=[0.01, 0.01], rounds=3,
                                         theorem5_lrs=[0.01], theorem5_steps=[2])
    for figure, config in [(fig2.fig2, config), (convex.convex, convex.ConvexConfig.for_profile("smoke")),
                           (nonconvex.nonconvex, nonconvex.NonconvexConfig.for_profile("smoke"))]:
        log = _AnnouncedOnly()
        figure(config, progress=False, log=log)
        assert log.computed == log.to_compute > 0 and log._bar.n == log._bar.total
        warm = _AnnouncedOnly()  # a second time every run is cached (the notes' runs with their probes' keys)
        figure(config, progress=False, log=warm)
        assert warm.to_compute == warm.computed == 0 and warm.from_cache == warm.runs > 0


def test_a_run_announced_twice_counts_once(monkeypatch):
    """Li et al.'s figures announce their sweep, then read it through pool.frame, which announces again."""
    from replicate.runs import pool

    monkeypatch.delenv("REPLICATE_PROGRESS", raising=False)
    log = cache.RunLog(display=False)
    jobs = [(QUAD.replace(local_steps=s), None) for s in (2, 3)]
    pool.compute(jobs, workers=1, progress=False, log=log)
    pool.frame([({"E": s}, QUAD.replace(local_steps=s)) for s in (2, 3)], progress=False, log=log)
    assert log.to_compute == log.computed == 2


def test_a_new_algorithm_runs_through_the_run_layer_from_its_registry_entry_alone():
    """FedAdam touched its module, the registry and its tests: the run layer needs nothing else."""
    from replicate.fl.algorithms import FedAdam

    config = QUAD.replace(algorithm=FedAdam(None, server_lr=0.05), rounds=5)
    history = cache.run(config, progress=False)
    assert history["objective"].iloc[-1] < history["objective"].iloc[0]
    assert RunConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config


def test_a_cpu_machine_reads_imported_cuda_runs_only_when_told_and_never_computes_them(monkeypatch):
    """REPLICATE_DEVICE=cuda on a machine without CUDA: runs are read under their CUDA key (imported
    ones), a missing one is refused in one line, and CPU and CUDA entries never mix."""
    cpu = cache.run(QUAD, progress=False)
    cpu_entry = settings.current().cache / "runs" / cache.key(QUAD, device="cpu")
    cuda_entry = settings.current().cache / "runs" / cache.key(QUAD, device="cuda")
    for suffix in (".csv", ".json"):  # as `cache import` would bring a CUDA machine's run
        (cuda_entry.parent / f"{cuda_entry.name}{suffix}").write_bytes(
            (cpu_entry.parent / f"{cpu_entry.name}{suffix}").read_bytes())
    monkeypatch.setenv("REPLICATE_DEVICE", "cuda")
    monkeypatch.setattr("replicate.fl.engine.run_batch", lambda *a, **k: pytest.fail("computed a CUDA run on a CPU"))
    assert cache.run(QUAD, progress=False).equals(cpu)  # read, not computed
    with pytest.raises(ReplicateError, match="not in the cache and runs are read for CUDA"):
        cache.run(QUAD.replace(rounds=3), progress=False)
    monkeypatch.setenv("REPLICATE_DEVICE", "gpu")
    with pytest.raises(ReplicateError, match="REPLICATE_DEVICE must be cpu, cuda or cuda:N"):
        cache.run(QUAD, progress=False)


def test_runs_of_an_older_cache_version_are_counted_for_the_user():
    cache.run(QUAD, progress=False)
    assert cache.older_entries() == 0
    old = settings.current().cache / "runs" / "0123456789abcdef0123.json"  # a VERSION 3 sidecar: no "version" field
    old.write_text(json.dumps({"dataset": "quadratic", "scheme": "full", "elapsed_s": 1.0}))
    assert cache.older_entries() == 1


def test_the_processor_is_named_by_model_and_instruction_set(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13\nflags\t: fpu\n")
    assert cpu_model(info) == "AMD EPYC 7B13"
    name = describe("cpu")
    assert torch.backends.cpu.get_cpu_capability() in name and f"torch {torch.__version__.split('+')[0]}" in name


def test_a_figures_title_states_the_settings_it_ran_with():
    """A title states E, K, b or L/μ from the run's own settings, not the paper's (a changed knob shows)."""
    import pandas as pd

    from replicate.experiments import catalog, knobs
    from replicate.experiments.charles2021.common import stated

    fig4 = catalog.config_class("li2020/fig4")
    assert knobs.configure(fig4, "paper", {}).settings() == "E = 10, K = 10, b = 24"
    assert knobs.configure(fig4, "smoke", {"epochs": 3}).settings() == "E = 3, K = 10, b = 24"
    frame = pd.DataFrame({"condition": [100.0, 100.0], "K": [10, 10], "d": [10, 100]})
    assert stated(frame, condition="L/μ", K="K", d="d") == "L/μ = 100, K = 10"  # d has several values: left out
