"""Device placement, checked without a GPU: no tensor of a run may land on torch's default device.

A CUDA run fails wherever a tensor made without a device (so on the CPU), say ``torch.zeros(m, P)``,
meets the CUDA parameters. On a CPU those mistakes are invisible: the default device is the problem's. So the problem is built on the CPU and the run goes under
``torch.device("meta")``: every factory call that relies on the default device (PyTorch's own list
of them) then makes a meta tensor, and ``DefaultDeviceTrap`` fails the call that made it, with
its traceback. Meta tensors must not merely be left to fail where they meet CPU tensors: indexing a
CPU tensor with a meta index returns uninitialised memory without a word (torch 2.13).
``docs/engine.md`` ("Device placement") says what this cannot catch.
"""
from __future__ import annotations

import contextlib
import dataclasses

import pytest
import torch
from torch.overrides import TorchFunctionMode

from replicate.data.quadratic import li2020_counterexample
from replicate.fl import algorithms
from replicate.fl.algorithms import FedAdam, FedAvg, FedProx, LocalUpdate, LocalWork, Scaffold, Stem
from replicate.fl.engine import LocalObjective, RunSpec, run, run_batch
from replicate.fl.dissimilarity import device_gradient_variance
from replicate.fl.models import CNN, MLP, CharLSTM, ConvDropout, LogisticRegression
from replicate.fl.oracle import run_sequential
from replicate.fl.problems import QuadraticFederatedProblem, SampleProblem
from replicate.fl.schedules import LRSchedule

from conftest import toy_dataset
from test_neural import VOCAB, image_dataset, token_dataset


class DefaultDeviceLeak(AssertionError):
    """A tensor was made on the default device instead of the problem's."""


class DefaultDeviceTrap(TorchFunctionMode):
    """Fails any torch call that returns a meta tensor: under ``torch.device("meta")`` with every
    input on the CPU, only a factory call without a device makes one."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for value in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(value, torch.Tensor) and value.is_meta:
                raise DefaultDeviceLeak(f"{getattr(func, '__name__', func)} made a tensor on the default device")
        return out


@contextlib.contextmanager
def default_device_trap():
    """Run the body with the default device set to meta, failing the first tensor made there."""
    with torch.device("meta"), DefaultDeviceTrap():
        yield


@pytest.fixture(autouse=True)
def one_thread():
    """Smoke-size ops gain nothing from a second intra-op thread, which only spins: on a busy 2-core
    machine this file took 203 s with two threads and 10 s with one."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def tokens(**options):
    return CharLSTM(vocab_size=VOCAB, **(dict(embed=3, hidden=5, layers=2) | options))


# every model family at smoke size (LeNet is the CNN with other widths and no padding), data built on the CPU
PROBLEMS = {
    "logistic": lambda: SampleProblem(toy_dataset(6, small_clients=1), LogisticRegression(5, 3)),
    "mlp": lambda: SampleProblem(toy_dataset(6, small_clients=1), MLP(5, 3, hidden=4)),
    "cnn": lambda: SampleProblem(image_dataset(), CNN((1, 8, 8), 3, channels=(2, 3), hidden=8, dropout=0.25)),
    "conv_dropout": lambda: SampleProblem(image_dataset(), ConvDropout((1, 8, 8), 3, channels=(2, 3), hidden=5)),
    "char_lstm": lambda: SampleProblem(token_dataset(), tokens()),
    "char_lstm_tff": lambda: SampleProblem(token_dataset(token_targets=True),
                                           tokens(loss_kind="token", uncounted=(0,))),
    "sent_lstm": lambda: SampleProblem(token_dataset(), tokens(embed=6, head=(4,), frozen_embedding=True)),
    "quadratic": lambda: QuadraticFederatedProblem(li2020_counterexample()),
}

# (algorithm, local work on sample data); quadratic clients always take 2 full-gradient steps
ALGORITHMS = {
    **{f"fedavg_{scheme}": (FedAvg(scheme, 3), LocalWork(2, "steps", 4))
       for scheme in ("full", "scheme1", "scheme2", "original", "transformed2")},
    "fedavg_weighted_stragglers": (FedAvg("weighted", 4, straggler_fraction=0.5), LocalWork(2, "steps", 4)),
    "fedprox_stragglers": (FedProx(0.1, 3, straggler_fraction=0.5), LocalWork(2, "epochs", 8)),
    "fedprox_proportional": (FedProx(0.1, 3, sampling="proportional"), LocalWork(1, "epochs", 8)),
    "scaffold_I": (Scaffold(3, option="I"), LocalWork(2, "steps", 4)),
    "scaffold_II": (Scaffold(option="II"), LocalWork(2, "steps", 4)),
    "stem": (Stem(momentum_c=2.0), LocalWork(2, "steps", 4)),
    "local_update_nesterov_prox": (LocalUpdate(0.5, a=(1.0, 0.5), momentum=0.9, nesterov=True, clients_per_round=3,
                                               alpha=0.1), LocalWork(2, "steps", 4)),
    "local_update_full": (LocalUpdate(1.0, momentum=0.5), LocalWork(2, "steps", None)),
    "fedadam_sampled": (FedAdam(3), LocalWork(2, "steps", 4)),
    "fedadam_full": (FedAdam(None), LocalWork(1, "epochs", 8)),
}
# and every registered algorithm without a case above, as its registered example (a new one is covered unedited)
ALGORITHMS |= {f"{name}_example": (algorithms.example(name), LocalWork(2, "steps", 4))
               for name, cls in algorithms.ALGORITHMS.items() if cls not in {type(a) for a, _ in ALGORITHMS.values()}}


def train(model: str, algorithm: str, **options):
    """Two rounds of ``algorithm`` on ``model``'s problem, built outside the trap, trained inside it."""
    problem = PROBLEMS[model]()
    algo, work = ALGORITHMS[algorithm]
    if model == "quadratic":
        work = LocalWork(2)
    objective = LocalObjective(weight_decay=1e-3, clip_norm=None if model == "quadratic" else 1.0)
    runner = options.pop("runner", run)
    with default_device_trap():
        _, params = runner(problem, algo, work, LRSchedule("constant", 0.05), objective=objective, rounds=2, seed=3,
                           return_params=True, **options)
    assert params.device.type == "cpu" and bool(torch.isfinite(params).all())


# the stacked path is the logistic regression's (fused or not) and the quadratics' own: one execution there
CASES = [(model, algorithm, execution) for model in PROBLEMS for algorithm in ALGORITHMS
         for execution in (("stacked",) if model in ("logistic", "quadratic") else ("stacked", "sequential"))]


def test_every_registered_algorithm_is_checked():
    assert {type(algo) for algo, _ in ALGORITHMS.values()} == set(algorithms.ALGORITHMS.values())
    import importlib
    import pkgutil

    # the registry holds every module's algorithm: a module of the package defining one forgot no `register`
    helpers = {"protocol", "sampling"}
    for module in pkgutil.iter_modules(algorithms.__path__):
        if module.name not in helpers:
            defined = vars(importlib.import_module(f"{algorithms.__name__}.{module.name}")).values()
            assert any(cls in defined for cls in algorithms.ALGORITHMS.values()), f"{module.name} registers none"


@pytest.mark.parametrize("model, algorithm, execution", CASES)
def test_no_tensor_lands_on_the_default_device(model, algorithm, execution):
    train(model, algorithm, execution=execution)


@pytest.mark.parametrize("algorithm", [a for a, (algo, _) in ALGORITHMS.items() if algo.plain_sgd is not None])
def test_generic_step_of_plain_sgd_algorithms_keeps_to_the_problem_device(algorithm):
    train("logistic", algorithm, fused=False)  # the fused solver's opt-out: the generic per-step gradients


@pytest.mark.parametrize("model", ["logistic", "cnn", "char_lstm", "quadratic"])
def test_oracle_keeps_to_the_problem_device(model):
    train(model, "scaffold_I", runner=run_sequential)


def _two_runs(problem, algorithm, work, schedule, *, seed, **options):
    """``run``'s call as a batch of two runs (``engine.run_batch``): the runs the GPU hour trains together,
    with other seeds and rates and, where the algorithm carries one a row each, another μ/α/c."""
    other = {FedProx: {"prox_mu": 0.3}, LocalUpdate: {"alpha": 0.3}, Stem: {"momentum_c": 3.0}}.get(type(algorithm), {})
    if type(algorithm) in (FedProx, LocalUpdate) and not algorithm.proximal:
        other = {}  # no proximal term: batches only with runs without one
    second = dataclasses.replace(algorithm, **other)
    runs = [RunSpec(algorithm, schedule, seed), RunSpec(second, LRSchedule("constant", 0.02), seed + 1)]
    return run_batch(problem, runs, work, **options)[0]


@pytest.mark.parametrize("model, algorithm", [(m, a) for m in PROBLEMS for a in ALGORITHMS])
def test_batched_runs_keep_to_the_problem_device(model, algorithm):
    train(model, algorithm, runner=_two_runs)


@pytest.mark.parametrize("model", ["logistic", "char_lstm", "sent_lstm"])
def test_dissimilarity_keeps_to_the_problem_device(model):
    """FedProx's measure plans its pieces on the host; pieces of 4 rows split most devices."""
    problem = PROBLEMS[model]()
    flat = problem.init(0)
    expected = device_gradient_variance(problem, flat, max_samples=10, piece=4)
    with default_device_trap():
        assert device_gradient_variance(problem, flat, max_samples=10, piece=4) == expected


def test_trap_catches_a_factory_call_without_a_device(monkeypatch):
    """The negative control: one planted ``torch.zeros(m, P)`` without a device fails the run."""
    def client_init(self, server_state, params, plan, ctx):
        m = plan.clients.numel()
        return {"w": params.unsqueeze(0).repeat(m, 1) + torch.zeros(m, params.numel())}

    monkeypatch.setattr(FedAvg, "client_init", client_init)
    with pytest.raises(DefaultDeviceLeak, match="zeros"):
        train("mlp", "fedavg_scheme2")


def test_trap_catches_an_index_made_without_a_device(monkeypatch):
    """A meta index into a CPU tensor raises nothing by itself (it reads garbage): the trap must."""
    def client_init(self, server_state, params, plan, ctx):
        return {"w": params.unsqueeze(0)[torch.zeros(plan.clients.numel(), dtype=torch.int64)]}

    monkeypatch.setattr(FedAvg, "client_init", client_init)
    with pytest.raises(DefaultDeviceLeak):
        train("logistic", "fedavg_full")
