"""LocalUpdate in the engine: FedAvg is its (a = 1_K, η = γ) case, the vectorized run
matches the sequential oracle and the theory reference, and its sampling is seeded."""
import numpy as np
import pytest
import torch

from replicate.fl import engine

from replicate import theory as th
from replicate.fl.algorithms import FedAvg, FedProx, LocalWork, Population, RoundContext
from replicate.fl.algorithms.local_update import LocalUpdate
from replicate.data.quadratic import li2020_counterexample
from replicate.fl.engine import run
from replicate.core.errors import ReplicateError
from replicate.experiments.charles2021.common import run_local_update
from replicate.fl.models import LogisticRegression
from replicate.fl.oracle import run_sequential
from replicate.fl.problems import QuadraticFederatedProblem, SampleProblem
from replicate.fl.schedules import LRSchedule

from conftest import toy_dataset


def population(p: torch.Tensor) -> Population:
    """Sampling sees weights p_k and sizes n_k; these plans only look at p."""
    return Population(p, torch.arange(1, p.numel() + 1))


@pytest.mark.parametrize("prox_mu", [0.0, 0.1])
def test_fedavg_is_local_update_with_ones_and_eta_equal_gamma(prox_mu):
    problem = SampleProblem(toy_dataset(), LogisticRegression(5, 3))
    update = LocalWork(7, "steps", 8)
    schedule = LRSchedule("constant", 0.3)
    # μ > 0: FedProx with all N = 12 clients is full participation weighted by p_k = n_k/n
    reference = FedAvg("full") if not prox_mu else FedProx(prox_mu, clients_per_round=problem.num_clients)
    assert torch.equal(reference.plan(problem.population(), update, 2, 0).clients, torch.arange(12))
    _, fedavg = run(problem, reference, update, schedule, rounds=4, seed=2, return_params=True)
    _, ours = run(problem, LocalUpdate(server_lr=0.3, alpha=prox_mu), update, schedule, rounds=4, seed=2,
                  return_params=True)
    torch.testing.assert_close(ours, fedavg, rtol=1e-5, atol=1e-6)
    _, other = run(problem, LocalUpdate(server_lr=0.15, alpha=prox_mu), update, schedule, rounds=4, seed=2,
                   return_params=True)
    assert (other - fedavg).abs().max() > 1e-3  # η ≠ γ is a different algorithm


def test_fedavg_is_local_update_on_the_quadratic_in_float64():
    problem = QuadraticFederatedProblem(li2020_counterexample())
    update, schedule = LocalWork(5), LRSchedule("constant", 0.4)
    _, fedavg = run(problem, FedAvg("full"), update, schedule, rounds=6, return_params=True)
    _, ours = run(problem, LocalUpdate(server_lr=0.4, a=(1.0,) * 5), update, schedule, rounds=6, return_params=True)
    torch.testing.assert_close(ours, fedavg, rtol=0, atol=1e-14)


@pytest.mark.parametrize("scheme", ["full", "scheme1"])
def test_server_step_equals_model_averaging_for_normalised_plans(scheme):
    # x − γ Σ_j w_j Σ_s g_js = Σ_j w_j (x − γ Σ_s g_js) whenever Σ_j w_j = 1
    problem = SampleProblem(toy_dataset(), LogisticRegression(5, 3))
    flat = problem.init(0).to(torch.float64)
    problem.x_prepared = problem.x_prepared.to(torch.float64)
    sampler, update, gamma = FedAvg(scheme, clients_per_round=6), LocalWork(4, "steps", 8), 0.2
    ours_algorithm = LocalUpdate(server_lr=gamma, a=(1.0,) * 4)
    objective = engine.LocalObjective()
    for round_ in range(3):
        plan = sampler.plan(problem.population(), update, seed=1, round_=round_)
        steps = update.steps(problem.sizes[plan.clients], plan.work)
        ctx = RoundContext(round=round_, params=flat, steps=steps,
                           lr=torch.full((steps.numel(), 1), gamma, dtype=flat.dtype))
        batches = problem.draw_batches([(plan.clients, steps, torch.Generator().manual_seed(round_))], update)[0]
        # each algorithm's own client functions, on the same mini-batches
        local = engine.train_clients(problem, sampler, sampler.client_init(None, flat, plan, ctx), ctx,
                                     plan.clients, batches, objective)
        velocity = ours_algorithm.server_init(flat, problem.population())
        state = engine.train_clients(problem, ours_algorithm, ours_algorithm.client_init(velocity, flat, plan, ctx),
                                     ctx, plan.clients, batches, objective)
        torch.testing.assert_close(state["w"], local["w"], rtol=0, atol=0)  # same local models
        ours, _ = ours_algorithm.server_step(velocity, flat, ours_algorithm.client_message(state, flat, plan, ctx),
                                             plan, ctx)
        averaged, _ = sampler.server_step(None, flat, sampler.client_message(local, flat, plan, ctx), plan, ctx)
        torch.testing.assert_close(ours, averaged, rtol=0, atol=1e-12)
        assert (averaged - flat).abs().max() > 1e-3  # the round really moved the model


def test_engine_equals_sequential_oracle_with_coefficients_momentum_and_sampling():
    problem = SampleProblem(toy_dataset(small_clients=2), LogisticRegression(5, 3))
    algorithm = LocalUpdate(server_lr=0.5, a=(0.3, 0.0, 2.0, 1.0), momentum=0.9, nesterov=True, clients_per_round=5,
                            alpha=0.2)
    update = LocalWork(4, "steps", 8)
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
    problem = QuadraticFederatedProblem(quadratic)
    x0 = problem.init(0)
    _, x1 = run(problem, LocalUpdate(server_lr=0.1), LocalWork(3), LRSchedule("constant", 1e-9),
                rounds=1, return_params=True)
    grad = problem.weights().to(x0.dtype) @ quadratic.grad_clients(x0.expand(problem.num_clients, -1))
    torch.testing.assert_close(x1, x0 - 0.1 * 3 * grad, rtol=0, atol=1e-9)  # O(γ) local drift
    assert (x1 - x0).norm() > 1e-2


def test_sampling_is_seeded_distinct_and_follows_P():
    p = torch.tensor([0.55, 0.3, 0.05, 0.05, 0.05], dtype=torch.float64)
    pop, work = population(p), LocalWork(1)
    algorithm = LocalUpdate(clients_per_round=2)
    plans = [algorithm.plan(pop, work, seed=7, round_=r) for r in range(400)]
    again = algorithm.plan(pop, work, seed=7, round_=3)
    assert torch.equal(again.clients, plans[3].clients)
    assert all(pl.clients.unique().numel() == 2 and torch.all(pl.weights == 0.5) for pl in plans)
    counts = torch.bincount(torch.cat([pl.clients for pl in plans]), minlength=5)
    assert counts[0] > counts[1] > counts[2:].max()
    full = LocalUpdate().plan(pop, work, seed=7, round_=0)
    assert torch.equal(full.clients, torch.arange(5)) and torch.equal(full.weights, p)


def test_invalid_configurations_are_rejected():
    with pytest.raises(ReplicateError):
        LocalUpdate(a=(0.0, 0.0))
    with pytest.raises(ReplicateError):
        LocalUpdate(nesterov=True)
    with pytest.raises(ReplicateError):
        LocalUpdate(a=(1.0, 1.0)).coefficients(3)
    with pytest.raises(ReplicateError):
        LocalUpdate(clients_per_round=9).plan(population(torch.full((4,), 0.25)), LocalWork(1), 0, 0)
    with pytest.raises(ReplicateError):
        LocalUpdate(a=(1.0, 1.0)).plan(population(torch.full((4,), 0.25)), LocalWork(3), 0, 0)
    with pytest.raises(ReplicateError):
        LocalUpdate(alpha=-0.1)
