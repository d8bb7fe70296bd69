"""What only a GPU can show: the engine on a CUDA device. Skipped, with the reason, where there is none;
``REPLICATE_TEST_DEVICE=cpu`` runs the same checks on the CPU (to check the checks).

The CPU suite catches device-placement mistakes (``tests/test_device.py``); what it cannot see is how
CUDA kernels compute. On the device, at smoke size, for every algorithm on the logistic model and the
neural models:
1. **Determinism** (the run cache's promise: same seed, same machine and device, same numbers): a run
   twice gives identical histories and parameters (``core.numerics.device_numerics``: deterministic kernels).
2. **Engine ≡ oracle**: the stacked engine against the client-by-client autograd oracle, float32
   tolerance (TF32 is off during runs, so float32 means float32).
3. **Batched runs ≡ one by one** (``engine.run_batch``), float32 tolerance (CUDA kernels of another batch
   shape may sum in another order; on the CPU the logistic model is bitwise, tests/test_batched_runs.py).
4. The bench's batched-runs workloads run on the device.
5. **The device agrees with the CPU** within ``CROSS_DEVICE_TOL`` (same draws: every stream is a CPU
   generator), the measured gaps kept in ``--junitxml`` properties.
A lent GPU session runs ``python -m pytest -q tests/test_cuda.py tests/test_device.py`` first.
"""
from __future__ import annotations

import os

import pandas as pd
import pytest
import torch

from replicate.fl.algorithms import FedAdam, FedAvg, FedProx, LocalUpdate, LocalWork, Scaffold, Stem, example
from replicate.fl.algorithms import ALGORITHMS as REGISTERED
from replicate.fl.engine import LocalObjective, RunSpec, run, run_batch
from replicate.fl.models import LogisticRegression
from replicate.fl.oracle import SEQUENTIAL
from replicate.fl.problems import SampleProblem
from replicate.fl.schedules import LRSchedule

from conftest import toy_dataset
from test_neural import cnn, image_dataset, lstm, token_dataset

DEVICE = os.environ.get("REPLICATE_TEST_DEVICE") or ("cuda" if torch.cuda.is_available() else None)
pytestmark = pytest.mark.skipif(DEVICE is None, reason="no CUDA device here: these checks run on a GPU machine "
                                                       "(REPLICATE_TEST_DEVICE=cpu runs them on the CPU)")
RTOL, ATOL = 1e-5, 1e-6  # float32, as tests/test_neural.py and tests/test_batched_runs.py

MODELS = {
    "logistic": lambda device=DEVICE: SampleProblem(toy_dataset(small_clients=2), LogisticRegression(5, 3),
                                                    device=device),
    "cnn": lambda device=DEVICE: SampleProblem(image_dataset(), cnn(), device=device),  # with dropout
    "lstm": lambda device=DEVICE: SampleProblem(token_dataset(), lstm(), device=device),
}
# Across devices (the cache keeps them apart; figures may still be compared): the same run on the device
# and on the CPU, relative to the parameters' scale. Every draw is made on the host from CPU generators, so
# both see the same clients, batches and dropout masks; only the kernels' summation order differs. Measured
# on an H100 (torch 2.11, 2026-11-26), 3 rounds: ≤ 9.5e-8 of the parameters' scale, ≤ 1.2e-7 of the train
# loss, for all three models. Before, when mini-batches and dropout were drawn with CUDA's own generator,
# the same seed gave other batches there: 0.24 (logistic), 0.049 (CNN), 0.033 (LSTM) of the scale.
CROSS_DEVICE_TOL = 1e-5
ALGORITHMS = {
    "fedavg-scheme1": (FedAvg("scheme1", 4), LocalWork(3, "steps", 8)),
    "fedavg-transformed2": (FedAvg("transformed2", 4), LocalWork(2, "steps", 8)),
    "fedprox-stragglers": (FedProx(0.1, 5, straggler_fraction=0.5), LocalWork(2, "epochs", 8)),
    "scaffold-I": (Scaffold(4, option="I"), LocalWork(3, "steps", 8)),
    "scaffold-II": (Scaffold(4), LocalWork(3, "steps", 8)),
    "stem": (Stem(2.0), LocalWork(3, "steps", 8)),
    "local-update": (LocalUpdate(0.5, clients_per_round=4, momentum=0.9, nesterov=True, alpha=0.1),
                     LocalWork(3, "steps", 8)),
    "fedadam": (FedAdam(4), LocalWork(2, "steps", 8)),
}
ALGORITHMS |= {f"{name}-example": (example(name), LocalWork(3, "steps", 8)) for name, cls in REGISTERED.items()
               if cls not in {type(a) for a, _ in ALGORITHMS.values()}}  # a new registered algorithm, unedited
CASES = [(m, a) for m in MODELS for a in ALGORITHMS if m == "logistic" or a in ("fedavg-scheme1", "fedprox-stragglers",
                                                                                   "stem")]
OPTIONS = dict(objective=LocalObjective(weight_decay=1e-3, clip_norm=5.0), rounds=3, return_params=True)


def one(problem, algorithm, work, seed=1, **kwargs):
    return run(problem, algorithm, work, LRSchedule("constant", 0.1), **(OPTIONS | {"seed": seed} | kwargs))


@pytest.mark.parametrize("model, algorithm", CASES)
def test_a_run_on_the_device_is_deterministic(model, algorithm):
    problem = MODELS[model]()
    algo, work = ALGORITHMS[algorithm]
    (h1, w1), (h2, w2) = one(problem, algo, work), one(problem, algo, work)
    assert w1.device.type == "cpu" and torch.isfinite(w1).all()
    assert torch.equal(w1, w2), f"two runs of one seed on {DEVICE} differ by {float((w1 - w2).abs().max()):.3g}"
    pd.testing.assert_frame_equal(h1, h2, check_exact=True)


@pytest.mark.parametrize("model, algorithm", CASES)
def test_the_engine_equals_the_oracle_on_the_device(model, algorithm):
    problem = MODELS[model]()
    algo, work = ALGORITHMS[algorithm]
    history, w = one(problem, algo, work)
    oracle, w_oracle = one(problem, algo, work, trainer=SEQUENTIAL)
    torch.testing.assert_close(w, w_oracle, rtol=RTOL, atol=ATOL)
    assert history["train_loss"].tolist() == pytest.approx(oracle["train_loss"].tolist(), rel=RTOL)
    assert (w - problem.init(1).cpu()).abs().max() > 1e-4  # it really trained


@pytest.mark.parametrize("model, algorithm", CASES)
def test_batched_runs_equal_runs_one_by_one_on_the_device(model, algorithm):
    problem = MODELS[model]()
    algo, work = ALGORITHMS[algorithm]
    schedules = [LRSchedule("constant", 0.1), LRSchedule("inverse", 0.2, 1.0), LRSchedule("constant", 0.05)]
    specs = [RunSpec(algo, schedules[i], seed=i + 1, rounds=(3, 2, 3)[i]) for i in range(3)]
    batched = run_batch(problem, specs, work, **OPTIONS)
    for spec, (h_batch, w_batch) in zip(specs, batched):
        h_alone, w_alone = run(problem, spec.algorithm, work, spec.schedule, **(OPTIONS | {"seed": spec.seed,
                                                                                         "rounds": spec.rounds}))
        torch.testing.assert_close(w_batch, w_alone, rtol=RTOL, atol=ATOL)
        pd.testing.assert_frame_equal(h_batch, h_alone, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("model", list(MODELS))
def test_the_device_agrees_with_the_cpu_within_the_stated_tolerance(model, record_property):
    algo, work = ALGORITHMS["fedavg-scheme1"]
    (h_dev, w_dev), (h_cpu, w_cpu) = (one(MODELS[model](device), algo, work) for device in (DEVICE, "cpu"))
    scale = float(w_cpu.abs().max())
    param_diff = float((w_dev - w_cpu).abs().max()) / scale
    loss_diff = float(((h_dev["train_loss"] - h_cpu["train_loss"]).abs() / h_cpu["train_loss"].abs()).max())
    record_property("max_param_diff_relative_to_scale", param_diff)  # --junitxml keeps the measured gap
    record_property("max_train_loss_relative_diff", loss_diff)
    assert param_diff <= CROSS_DEVICE_TOL, f"{DEVICE} vs cpu: parameters differ by {param_diff:.3g} of their scale"
    assert loss_diff <= CROSS_DEVICE_TOL, f"{DEVICE} vs cpu: train loss differs by {loss_diff:.3g} (relative)"


def test_the_bench_batched_workloads_run_on_the_device(monkeypatch):
    from replicate.cli import bench_batched

    small = {name: (base, grid[:4], 1) for name, (base, grid, _) in bench_batched.WORKLOADS.items()
             if "LeNet" not in name}  # the LeNet grid needs MNIST; its step is the CNN's
    monkeypatch.setattr(bench_batched, "WORKLOADS", small)
    rows = bench_batched.run(repeats=1, device=DEVICE, sizes=(1, 4))
    assert len(rows) == len(small) and all(row["R=1"] > 0 and row["R=4"] > 0 for row in rows)


@pytest.mark.parametrize("algorithm", ["fedavg-scheme1", "stem"])
def test_the_local_steps_never_wait_for_the_device(algorithm, monkeypatch):
    """Issue #38: no device-to-host read inside a round's local steps (the step counts are read once, before
    them). The CNN with dropout, through ``train_clients``, with CUDA's sync debug mode counting every wait;
    on the CPU (REPLICATE_TEST_DEVICE=cpu) the mode does nothing and the count is 0."""
    problem = MODELS["cnn"]()
    algo, work = ALGORITHMS[algorithm]
    waits = _watch_local_steps(monkeypatch)
    run(problem, algo, work, LRSchedule("constant", 0.05), rounds=2, seed=0, eval_every=None)
    assert waits == [], [str(w.message) for w in waits[:3]]


def _watch_local_steps(monkeypatch) -> list:
    """Every device wait inside ``local_steps._step`` from now on (CUDA's sync debug mode, only around the local
    steps, not the round's set-up); on the CPU the mode does nothing and the list stays empty."""
    import warnings

    from replicate.fl import local_steps

    waits, real_step = [], local_steps._step

    def counted_step(*args, **kwargs):
        if DEVICE.startswith("cuda"):
            torch.cuda.set_sync_debug_mode("warn")
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                out = real_step(*args, **kwargs)
            waits.extend(w for w in caught if "synchroniz" in str(w.message).lower())
            return out
        finally:
            if DEVICE.startswith("cuda"):
                torch.cuda.set_sync_debug_mode("default")

    monkeypatch.setattr(local_steps, "_step", counted_step)
    return waits


def test_the_counter_stream_is_bitwise_the_cpus_on_the_device():
    """replicate.core.counter_rng (issue #38 item 3): int64 products wrap alike on the device, so noise drawn
    there is the CPU's, bit for bit, far into a stream as at its start."""
    from replicate.core import counter_rng

    for key, first in ((0, 0), (2**63 + 12345, 2**40)):
        assert torch.equal(counter_rng.words(key, first, 4096, DEVICE).cpu(), counter_rng.words(key, first, 4096))
    assert torch.equal(counter_rng.uniform(7, (10, 20, 9344), DEVICE).cpu(), counter_rng.uniform(7, (10, 20, 9344)))


def test_a_static_round_replays_the_lstm_step_from_a_cuda_graph():
    """Issue #38 item 1: with one shape a round (``execution="static"``, the LSTMs' choice on CUDA), the stacked
    LSTM gradient is captured once and replayed (``core.cuda_graphs``): the run equals the stacked one to
    float32 rounding (finished clients' rows compute and are discarded), and a replay gives bitwise what the
    eager call gives, for inputs other than the captured ones. On the CPU nothing is captured."""
    from replicate.fl.engine import preferred_execution

    problem = MODELS["lstm"]()
    algo, work = ALGORITHMS["fedprox-stragglers"]  # epochs over unequal clients, stragglers: unequal steps
    assert preferred_execution(problem) == ("static" if DEVICE.startswith("cuda") else problem.cpu_execution())
    (h_static, w_static), (h_stacked, w_stacked) = (one(problem, algo, work, execution=e) for e in ("static", "stacked"))
    torch.testing.assert_close(w_static, w_stacked, rtol=RTOL, atol=ATOL)
    pd.testing.assert_frame_equal(h_static, h_stacked, rtol=RTOL, atol=ATOL)
    if not DEVICE.startswith("cuda"):
        assert problem.graphs is None
        return
    graphs = problem.graphs
    assert graphs.captures >= 1 and graphs.replays > graphs.captures and not graphs._eager, "the step ran eagerly"
    flat = problem.init(2).unsqueeze(0).repeat(4, 1)
    flat += 0.01 * torch.arange(4, device=flat.device, dtype=flat.dtype).unsqueeze(1)
    index = torch.arange(8, device=flat.device).view(4, 2) % problem.x.shape[0]
    for shift in (0, 3):  # the second call replays the first call's graph on other inputs
        rows = (index + shift) % problem.x.shape[0]
        eager = problem.grad(flat + shift, None, (rows, None))
        replayed = problem.grad(flat + shift, None, (rows, None), static=True)
        assert torch.equal(eager, replayed), float((eager - replayed).abs().max())


def test_a_static_round_never_waits_for_the_device(monkeypatch):
    """The graphed LSTM steps after the capture: no device-to-host read inside them (issue #38 item 2)."""
    problem = MODELS["lstm"]()
    algo, work = ALGORITHMS["fedprox-stragglers"]
    run(problem, algo, work, LRSchedule("constant", 0.05), rounds=2, seed=0, eval_every=None,
        execution="static")  # captures the graphs (capturing synchronises once)
    waits = _watch_local_steps(monkeypatch)
    run(problem, algo, work, LRSchedule("constant", 0.05), rounds=2, seed=0, eval_every=None, execution="static")
    assert waits == [], [str(w.message) for w in waits[:3]]
