"""LocalUpdate in the engine: FedAvg is its (a = 1_K, η = γ) case, the vectorized run
matches the sequential oracle and the theory reference, and its sampling is seeded."""
import numpy as np
import pytest
import torch

from replicate.fl import engine

from replicate import theory as th
from replicate.fl.algorithms import FedAvg
from replicate.fl.algorithms.local_update import LocalUpdate
from replicate.data.quadratic import li2020_counterexample
from replicate.fl.engine import ClientUpdate, run
from replicate.core.errors import ReplicateError
from replicate.experiments.charles2021 import run_local_update
from replicate.fl.models import LogisticRegression
from replicate.fl.oracle import run_sequential
from replicate.fl.problems import QuadraticFederatedProblem, SampleProblem
from replicate.fl.schedules import LRSchedule

from conftest import toy_dataset


@pytest.mark.parametrize("prox_mu", [0.0, 0.1])
def test_fedavg_is_local_update_with_ones_and_eta_equal_gamma(prox_mu):
    problem = SampleProblem(toy_dataset(), LogisticRegression(5, 3))
    update = ClientUpdate(steps=7, batch_size=8, prox_mu=prox_mu)
    schedule = LRSchedule("constant", 0.3)
    _, fedavg = run(problem, FedAvg("full"), update, schedule, rounds=4, seed=2, return_params=True)
    _, ours = run(problem, LocalUpdate.fedavg(0.3), update, schedule, rounds=4, seed=2, return_params=True)
    torch.testing.assert_close(ours, fedavg, rtol=1e-5, atol=1e-6)
    _, other = run(problem, LocalUpdate.fedavg(0.15), update, schedule, rounds=4, seed=2, return_params=True)
    assert (other - fedavg).abs().max() > 1e-3  # η ≠ γ is a different algorithm


def test_fedavg_is_local_update_on_the_quadratic_in_float64():
    problem = QuadraticFederatedProblem.li2020(li2020_counterexample())
    update, schedule = ClientUpdate(steps=5), LRSchedule("constant", 0.4)
    _, fedavg = run(problem, FedAvg("full"), update, schedule, rounds=6, return_params=True)
    _, ours = run(problem, LocalUpdate(server_lr=0.4, a=(1.0,) * 5), update, schedule, rounds=6, return_params=True)
    torch.testing.assert_close(ours, fedavg, rtol=0, atol=1e-14)


@pytest.mark.parametrize("scheme", ["full", "scheme1"])
def test_server_step_equals_model_averaging_for_normalised_plans(scheme):
    # x − γ Σ_j w_j Σ_s g_js = Σ_j w_j (x − γ Σ_s g_js) whenever Σ_j w_j = 1
    problem = SampleProblem(toy_dataset(), LogisticRegression(5, 3))
    flat = problem.init(0).to(torch.float64)
    problem.x_prepared = problem.x_prepared.to(torch.float64)
    sampler, update, gamma = FedAvg(scheme, clients_per_round=6), ClientUpdate(steps=4, batch_size=8), 0.2
    for round_ in range(3):
        plan = sampler.plan(problem.weights(), seed=1, round_=round_)
        generator = torch.Generator().manual_seed(round_)
        batches = problem.draw_batches(plan.clients, update.steps, update.batch_size, generator)
        local, message = engine.local_update(problem, flat, plan, update, gamma, batches, torch.ones(4))
        ours, _ = LocalUpdate.fedavg(gamma).server_step(flat, local, message, plan, torch.zeros_like(flat))
        averaged, _ = sampler.server_step(flat, local, message, plan, None)
        torch.testing.assert_close(ours, averaged, rtol=0, atol=1e-12)


def test_engine_equals_sequential_oracle_with_coefficients_momentum_and_sampling():
    problem = SampleProblem(toy_dataset(small_clients=2), LogisticRegression(5, 3))
    algorithm = LocalUpdate(server_lr=0.5, a=(0.3, 0.0, 2.0, 1.0), momentum=0.9, nesterov=True, clients_per_round=5)
    update = ClientUpdate(steps=4, batch_size=8, prox_mu=0.2)
    schedule = LRSchedule("constant", 0.1)
    fast, w_fast = run(problem, algorithm, update, schedule, rounds=5, seed=4, return_params=True)
    slow, w_slow = run_sequential(problem, algorithm, update, schedule, rounds=5, seed=4, return_params=True)
    torch.testing.assert_close(w_fast, w_slow, rtol=1e-5, atol=1e-6)
    assert fast["train_loss"].iloc[-1] < fast["train_loss"].iloc[0]


@pytest.mark.parametrize("a,alpha,server", [
    (th.ones(5), 0.0, th.ServerOpt(0.05)),
    ((0.3, 0.0, 2.0, 1.0), 0.5, th.ServerOpt(0.02, 0.9, nesterov=True)),
    (th.basis(5), 0.0, th.ServerOpt(0.05, 0.6)),
])
def test_engine_matches_the_theory_reference(a, alpha, server):
    problem = th.random_problem(d=4, clients=5, mu=1.0, L=10.0, zeta=1.0, rng=np.random.default_rng(0))
    ours = run_local_update(problem, np.ones(4), np.asarray(a), 0.05, server, rounds=40, alpha=alpha)
    reference = th.local_update(problem, np.ones(4), np.asarray(a), 0.05, server, rounds=40, alpha=alpha)
    torch.testing.assert_close(ours, reference, rtol=0, atol=1e-13)
    assert (ours[-1] - ours[0]).norm() > 0.1


def test_message_is_sum_of_gradients_not_model_delta():
    # Appendix A: with tiny γ the server still moves by η Σ_k g_k ≈ η K ∇f(x)
    quadratic = li2020_counterexample()
    problem = QuadraticFederatedProblem.li2020(quadratic)
    x0 = problem.init(0)
    _, x1 = run(problem, LocalUpdate(server_lr=0.1), ClientUpdate(steps=3), LRSchedule("constant", 1e-9),
                rounds=1, return_params=True)
    grad = problem.weights().to(x0.dtype) @ quadratic.grad_clients(x0.expand(problem.num_clients, -1))
    torch.testing.assert_close(x1, x0 - 0.1 * 3 * grad, rtol=0, atol=1e-9)  # O(γ) local drift
    assert (x1 - x0).norm() > 1e-2


def test_sampling_is_seeded_distinct_and_follows_P():
    p = torch.tensor([0.55, 0.3, 0.05, 0.05, 0.05], dtype=torch.float64)
    algorithm = LocalUpdate(clients_per_round=2)
    plans = [algorithm.plan(p, seed=7, round_=r) for r in range(400)]
    again = algorithm.plan(p, seed=7, round_=3)
    assert torch.equal(again.clients, plans[3].clients)
    assert all(pl.clients.unique().numel() == 2 and torch.all(pl.weights == 0.5) for pl in plans)
    counts = torch.bincount(torch.cat([pl.clients for pl in plans]), minlength=5)
    assert counts[0] > counts[1] > counts[2:].max()
    full = LocalUpdate().plan(p, seed=7, round_=0)
    assert torch.equal(full.clients, torch.arange(5)) and torch.equal(full.weights, p)


def test_invalid_configurations_are_rejected():
    with pytest.raises(ReplicateError):
        LocalUpdate(a=(0.0, 0.0))
    with pytest.raises(ReplicateError):
        LocalUpdate(nesterov=True)
    with pytest.raises(ReplicateError):
        LocalUpdate(a=(1.0, 1.0)).coefficients(3)
    with pytest.raises(ReplicateError):
        LocalUpdate(clients_per_round=9).plan(torch.full((4,), 0.25), 0, 0)
