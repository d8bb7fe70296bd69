"""Run configs, the result cache, and the Li et al. quadratic analysis."""
import json

import pytest
import torch

from replicate.core import paths
from replicate.data.quadratic import li2020_counterexample
from replicate.core.errors import ReplicateError
from replicate.experiments.li2020 import fig2
from replicate.experiments.runs import cache
from replicate.experiments.runs.config import RunConfig, make

QUAD = RunConfig(dataset="quadratic", scheme="full", local_steps=5, batch_size=None, lr=0.4,
                 lr_schedule="constant", weight_decay=0.0, clip_norm=None, rounds=30)


def test_cache_roundtrip_and_resume(monkeypatch):
    cache.reset_usage()
    first = cache.run(QUAD, progress=False)
    stored = paths.cache_dir() / "runs" / f"{cache.key(QUAD)}.csv"
    assert stored.exists() and json.loads(stored.with_suffix(".json").read_text())["local_steps"] == 5
    calls = []
    monkeypatch.setattr("replicate.fl.engine.run", lambda *a, **k: calls.append(a))
    again = cache.run(QUAD, progress=False)  # loads, does not recompute
    assert not calls
    assert again["objective"].tolist() == pytest.approx(first["objective"].tolist(), rel=1e-12)
    used = cache.usage()  # both uses counted, the compute time of the first carried by the second
    assert used["runs"] == 2 and used["runs_from_cache"] == 1 and used["runs_untimed"] == 0
    assert used["runs_compute_s"] == pytest.approx(2 * json.loads(stored.with_suffix(".json").read_text())["elapsed_s"], abs=0.11)
    cache.mark_computed(QUAD)  # as a worker pool does after computing it for this notebook
    cache.run(QUAD, progress=False)
    assert cache.usage()["runs"] == 3 and cache.usage()["runs_from_cache"] == 1
    assert cache.key(QUAD) != cache.key(QUAD.replace(local_steps=6))
    assert not list((paths.cache_dir() / "runs").glob("*.tmp"))  # atomic writes leave no temp files


def test_run_many_labels_varying_fields():
    frame = cache.run_many([QUAD, QUAD.replace(local_steps=1)], progress=False)
    assert set(frame["local_steps"]) == {1, 5}
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
    history = cache.run(QUAD.replace(rounds=4000, lr=0.2), progress=False, use_cache=False)
    w_tilde = fig2.fedavg_fixed_point(q, 0.2, 5)
    w_star = q.optimum()
    assert history["distance"].iloc[-1] == pytest.approx(float(torch.linalg.vector_norm(w_tilde - w_star)), rel=1e-3)
    assert float(torch.linalg.vector_norm(w_tilde - w_star)) > 1e-3
    # E = 1 is gradient descent: its fixed point is the optimum
    torch.testing.assert_close(fig2.fedavg_fixed_point(q, 0.2, 1), w_star.to(torch.float64))


def test_theorem5_bound_grid():
    frame = fig2.theorem5(fig2.Fig2Config(theorem5_lrs=(0.01,), theorem5_steps=(2, 5)))
    assert len(frame) == 2 and (frame.y >= frame.bound).all()
    assert (frame.bound > 0).all()


def test_stopped_runs_end_at_the_target_and_are_cached_apart():
    synthetic = RunConfig(dataset="synthetic(1,1)", num_clients=10, clients_per_round=3, local_steps=5,
                          batch_size=8, rounds=40)
    full = cache.run(synthetic, progress=False)
    goal = float(full["train_loss"].iloc[8])
    stopped = cache.run(synthetic, stop_loss=goal, progress=False)
    first = int((full["train_loss"] <= goal).idxmax())
    assert len(stopped) == first + 1 and stopped["train_loss"].iloc[-1] <= goal
    assert cache.load(synthetic, stop_loss=goal) is not None and cache.load(synthetic, stop_loss=goal / 2) is None
    assert len(cache.load(synthetic)) == synthetic.rounds + 1  # the full run is untouched
