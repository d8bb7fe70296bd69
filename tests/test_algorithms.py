"""The federated algorithms on the engine's protocol, fedjax-style: one round of each worked
out by hand on a tiny quadratic, the identities between algorithms, the engine against the
sequential autograd oracle for every option, masking of finished clients, epoch batches,
stragglers, and bad settings."""
from __future__ import annotations

import dataclasses
import functools
import math

import pandas as pd
import pytest
import torch

from replicate.core.errors import ReplicateError
from replicate.data.federated import FederatedDataset, Split
from replicate.fl import batches as fl_batches
from replicate.fl.algorithms import FedAdam, FedAvg, FedProx, LocalUpdate, LocalWork, RoundPlan, Scaffold
from replicate.fl.algorithms import sampling
from replicate.fl.algorithms import ALGORITHMS, example, protocol
from replicate.fl.algorithms.protocol import PlainSGD, descend_, fused_update
from replicate.fl.engine import LocalObjective, run
from replicate.fl.models import LogisticRegression
from replicate.fl.oracle import SEQUENTIAL, run_sequential
from replicate.data.quadratic import QuadraticClients
from replicate.fl.problems import QuadraticFederatedProblem, SampleProblem
from replicate.fl.schedules import LRSchedule

from conftest import toy_dataset

# engine vs oracle in float64: both do the same arithmetic up to summation order
RTOL64, ATOL64 = 1e-10, 1e-12

# ---------------------------------------------------------------- tiny problems

H = torch.tensor([[[2.0, 0.5], [0.5, 1.0]],
                  [[1.0, -0.3], [-0.3, 3.0]],
                  [[1.5, 0.0], [0.0, 0.5]]], dtype=torch.float64)
R = torch.tensor([[1.0, 0.0], [0.0, -1.0], [0.5, 0.5]], dtype=torch.float64)
P = torch.tensor([0.2, 0.3, 0.5], dtype=torch.float64)
X0 = torch.tensor([1.0, -0.5], dtype=torch.float64)


def quadratic(weights=P) -> QuadraticFederatedProblem:
    """Three clients, d = 2, F_k(w) = ½wᵀH_k w − r_kᵀw, full gradients, float64, w0 = X0."""
    return QuadraticFederatedProblem(QuadraticClients.from_linear(H, R, weights), x0=X0)


def grad_k(k, w):
    return H[k] @ w - R[k]


class Problem64(SampleProblem):
    """A sample problem whose data and parameters are float64 (tight engine/oracle tolerances)."""

    def __init__(self, dataset, model):
        def to64(split):
            return None if split is None else Split(x=split.x.double(), y=split.y, offsets=split.offsets)

        super().__init__(FederatedDataset(dataset.name, to64(dataset.train), to64(dataset.test),
                                          dataset.num_classes), model)

    def init(self, seed):
        return super().init(seed).double()


def logistic64(**kwargs) -> Problem64:
    return Problem64(toy_dataset(**kwargs), LogisticRegression(5, 3))


def equal_sizes_dataset(num_clients=8, n=20, features=5, classes=3, seed=0) -> FederatedDataset:
    g = torch.Generator().manual_seed(seed)
    xs = [torch.randn(n, features, generator=g).numpy() for _ in range(num_clients)]
    ys = [torch.randint(0, classes, (n,), generator=g).numpy() for _ in range(num_clients)]
    return FederatedDataset("equal", Split.from_clients(xs, ys), None, classes)


def final_params(problem, algorithm, work, lr=0.3, rounds=1, **kwargs):
    return run(problem, algorithm, work, LRSchedule("constant", lr), rounds=rounds, return_params=True, **kwargs)[1]


# ------------------------------------------------------- one round by hand, per algorithm

ETA = 0.3  # client learning rate


# the quadratic's plain-SGD rounds go to its fused solver unless ``fused=False``: each path by hand
PATHS = {"stacked": dict(execution="stacked", fused=False), "sequential": dict(execution="sequential", fused=False),
         "fused": dict(fused=True)}


@pytest.mark.parametrize("execution", list(PATHS))
def test_fedavg_round_by_hand(execution):
    locals_ = []
    for k in range(3):
        w = X0.clone()
        for _ in range(2):
            w = w - ETA * grad_k(k, w)
        locals_.append(w)
    expected = sum(P[k] * locals_[k] for k in range(3))  # scheme "full": Σ p_k w_k
    got = final_params(quadratic(), FedAvg("full"), LocalWork(2), ETA, **PATHS[execution])
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-14)
    assert (got - X0).abs().max() > 0.1


@pytest.mark.parametrize("execution", list(PATHS))
def test_fedprox_round_by_hand(execution):
    mu = 0.5
    locals_ = []
    for k in range(3):
        w0 = X0.clone()  # the anchor w_t
        w1 = w0 - ETA * (grad_k(k, w0) + mu * (w0 - w0))
        w2 = w1 - ETA * (grad_k(k, w1) + mu * (w1 - w0))
        locals_.append(w2)
    expected = sum(P[k] * locals_[k] for k in range(3))  # all K = N = 3 clients, Σ n_k w_k / Σ n_k (p here)
    got = final_params(quadratic(), FedProx(mu, clients_per_round=3), LocalWork(2), ETA, **PATHS[execution])
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-14)
    without_prox = final_params(quadratic(), FedProx(0.0, clients_per_round=3), LocalWork(2), ETA)
    assert (got - without_prox).abs().max() > 1e-3  # μ matters at the second step


def scaffold_by_hand(eta, eta_g=0.5, steps=2, rounds=2, option="II"):
    """SCAFFOLD's x after each round, Algorithm 1 with option I or II, from c = c_i = 0."""
    x, c, c_i = X0.clone(), torch.zeros(2, dtype=torch.float64), torch.zeros(3, 2, dtype=torch.float64)
    expected = []
    for _ in range(rounds):
        ys = []
        for k in range(3):
            y = x.clone()
            for _ in range(steps):
                y = y - eta * (grad_k(k, y) - c_i[k] + c)
            ys.append(y)
        ys = torch.stack(ys)
        if option == "I":  # c_i⁺ = ∇f_i(x), the full local gradient at the server model
            c_plus = torch.stack([grad_k(k, x) for k in range(3)])
        else:
            c_plus = c_i - c + (x - ys) / (steps * eta)
        delta_c = c_plus - c_i
        x = x + eta_g * (ys - x).mean(0)  # η_g · (1/|S|) Σ Δy_i
        c = c + (3 / 3) * delta_c.mean(0)  # c + (|S|/N)(1/|S|) Σ Δc_i
        c_i = c_plus
        expected.append(x.clone())
    return expected


@pytest.mark.parametrize("execution", ["stacked", "sequential", "oracle"])
def test_scaffold_option_one_three_rounds_by_hand(execution):
    expected = scaffold_by_hand(0.25, rounds=3, option="I")
    for rounds in (1, 2, 3):
        kwargs = {"trainer": SEQUENTIAL} if execution == "oracle" else {"execution": execution}
        got = final_params(quadratic(), Scaffold(server_lr=0.5, option="I"), LocalWork(2), 0.25, rounds=rounds,
                           **kwargs)
        torch.testing.assert_close(got, expected[rounds - 1], rtol=0, atol=1e-14)
    option_two = final_params(quadratic(), Scaffold(server_lr=0.5), LocalWork(2), 0.25, rounds=3)
    assert (option_two - expected[2]).abs().max() > 1e-4  # the two options really differ


@pytest.mark.parametrize("execution", ["stacked", "sequential", "oracle"])
def test_fedadam_three_rounds_by_hand(execution):
    """Reddi et al.'s Algorithm 2 (Adam at the server, no bias correction), worked out on the quadratic."""
    eta, beta1, beta2, tau = 0.1, 0.9, 0.99, 1e-3
    x, m, v = X0.clone(), torch.zeros(2, dtype=torch.float64), torch.full((2,), tau ** 2, dtype=torch.float64)
    expected = []
    for _ in range(3):
        deltas = []
        for k in range(3):
            y = x.clone()
            for _ in range(2):
                y = y - ETA * grad_k(k, y)
            deltas.append(y - x)
        delta = torch.stack(deltas).mean(0)  # every client, equal weights
        m = beta1 * m + (1 - beta1) * delta
        v = beta2 * v + (1 - beta2) * delta ** 2
        x = x + eta * m / (v.sqrt() + tau)
        expected.append(x.clone())
    for rounds in (1, 2, 3):
        kwargs = {"trainer": SEQUENTIAL} if execution == "oracle" else {"execution": execution}
        got = final_params(quadratic(), FedAdam(None, server_lr=eta), LocalWork(2), ETA, rounds=rounds, **kwargs)
        torch.testing.assert_close(got, expected[rounds - 1], rtol=0, atol=1e-14)
    assert (expected[2] - X0).abs().max() > 0.1


def test_fedadam_engine_matches_oracle_with_sampling_and_the_fused_solver():
    assert_engine_matches_oracle(logistic64(small_clients=2), FedAdam(4, server_lr=0.05), LocalWork(3, "steps", 8),
                                 executions=("stacked", "sequential"))


@pytest.mark.parametrize("execution", ["stacked", "sequential"])
def test_scaffold_four_rounds_by_hand(execution):
    eta = 0.25  # exact in float32 too: see the next test
    expected = scaffold_by_hand(eta, rounds=4)
    for rounds in (1, 2, 3, 4):  # from round 3 on, c_i is the previous round's c_i⁺ (not their sum)
        got = final_params(quadratic(), Scaffold(server_lr=0.5), LocalWork(2), eta, rounds=rounds,
                           execution=execution)
        torch.testing.assert_close(got, expected[rounds - 1], rtol=0, atol=1e-14)
    assert (expected[1] - expected[0]).abs().max() > 1e-2


def test_scaffold_control_variates_use_the_exact_float64_learning_rate():
    expected = scaffold_by_hand(ETA, rounds=3)  # η = 0.3 is not a float32 number
    got = final_params(quadratic(), Scaffold(server_lr=0.5), LocalWork(2), ETA, rounds=3)
    torch.testing.assert_close(got, expected[2], rtol=0, atol=1e-14)


@pytest.mark.parametrize("momentum,nesterov", [(0.0, False), (0.6, False), (0.6, True)])
def test_local_update_two_rounds_by_hand(momentum, nesterov):
    gamma, eta, a, alpha = ETA, 0.4, (0.5, 2.0), 0.3
    x, v = X0.clone(), torch.zeros(2, dtype=torch.float64)
    expected = []
    for _ in range(2):
        q = torch.zeros(2, dtype=torch.float64)
        for k in range(3):
            w = x.clone()
            message = torch.zeros(2, dtype=torch.float64)
            for s in range(2):
                g = grad_k(k, w) + alpha * (w - x)  # proximal term α(w − x_t) is part of g
                message = message + a[s] * g
                w = w - gamma * g
            q = q + P[k] * message  # full participation, weighted by P
        v = momentum * v - eta * q
        x = x + momentum * v - eta * q if nesterov else x + v
        expected.append(x.clone())
    algorithm = LocalUpdate(server_lr=eta, a=a, momentum=momentum, nesterov=nesterov, alpha=alpha)
    for rounds in (1, 2):
        got = final_params(quadratic(), algorithm, LocalWork(2), gamma, rounds=rounds)
        torch.testing.assert_close(got, expected[rounds - 1], rtol=0, atol=1e-14)


# ------------------------------------------------------------- identities between algorithms

@pytest.mark.parametrize("fused", [True, False])
def test_fedprox_without_mu_or_stragglers_is_weighted_fedavg_bit_for_bit(fused):
    problem = SampleProblem(toy_dataset(small_clients=2), LogisticRegression(5, 3))
    work, schedule = LocalWork(2, "epochs", 5), LRSchedule("constant", 0.2)
    kwargs = dict(objective=LocalObjective(1e-3), rounds=3, seed=5, fused=fused, return_params=True)
    hist_avg, w_avg = run(problem, FedAvg("weighted", 5), work, schedule, **kwargs)
    hist_prox, w_prox = run(problem, FedProx(0.0, 5), work, schedule, **kwargs)
    assert torch.equal(w_prox, w_avg)
    pd.testing.assert_frame_equal(hist_prox, hist_avg, check_exact=True)
    assert hist_avg["train_loss"].iloc[-1] < hist_avg["train_loss"].iloc[0]
    _, w_mu = run(problem, FedProx(0.5, 5), work, schedule, **kwargs)
    assert (w_mu - w_avg).abs().max() > 1e-3


@pytest.mark.parametrize("algorithm, objective", [
    (FedAvg("full"), LocalObjective()),
    (FedProx(0.5, clients_per_round=2, straggler_fraction=0.5), LocalObjective()),  # unequal local steps
    (FedProx(0.2, clients_per_round=3), LocalObjective(weight_decay=0.05, clip_norm=0.8))])
def test_the_quadratic_fused_solver_computes_the_generic_steps_bit_for_bit(algorithm, objective):
    """Its one call a round runs the generic step's own operations (``PlainSGD.step``), so the committed
    quadratic figures keep every number whichever path trains them."""
    schedule = LRSchedule("shifted_inverse", ETA, lr_decay=0.5)
    kwargs = dict(objective=objective, rounds=6, seed=3, return_params=True)
    problem, calls = quadratic(), []

    @functools.wraps(problem.local_gd)
    def counted(*args, **kw):
        calls.append(1)
        return QuadraticFederatedProblem.local_gd(problem, *args, **kw)

    problem.local_gd = counted  # what ``fused_sgd`` hands the engine
    fused, w_fused = run(problem, algorithm, LocalWork(4), schedule, fused=True, **kwargs)
    assert len(calls) == 6  # one call a round: the fused path was taken
    generic, w_generic = run(quadratic(), algorithm, LocalWork(4), schedule, fused=False, **kwargs)
    assert torch.equal(w_fused, w_generic)
    pd.testing.assert_frame_equal(fused, generic, check_exact=True)
    assert (w_fused - X0).abs().max() > 0.1


def test_scaffold_first_round_is_equal_weight_fedavg_on_the_quadratic():
    problem = quadratic(weights=None)  # p_k = 1/3: scheme "full" averages with equal weights
    work = LocalWork(3)
    for rounds, same in ((1, True), (2, False)):
        fedavg = final_params(problem, FedAvg("full"), work, ETA, rounds=rounds)
        scaffold = final_params(problem, Scaffold(), work, ETA, rounds=rounds)
        if same:
            torch.testing.assert_close(scaffold, fedavg, rtol=0, atol=1e-14)
        else:  # the control variates now correct the client drift
            assert (scaffold - fedavg).abs().max() > 1e-3


def test_scaffold_first_round_is_equal_weight_fedavg_with_partial_participation():
    problem = Problem64(equal_sizes_dataset(), LogisticRegression(5, 3))
    work, k = LocalWork(4, "steps", 5), 3
    plan = FedAvg("scheme2", k).plan(problem.population(), work, 1, 0)
    torch.testing.assert_close(plan.weights, torch.full((k,), 1 / k, dtype=torch.float64), rtol=0, atol=1e-15)
    assert torch.equal(plan.clients, Scaffold(k).plan(problem.population(), work, 1, 0).clients)
    for rounds, same in ((1, True), (2, False)):
        fedavg = final_params(problem, FedAvg("scheme2", k), work, 0.3, rounds=rounds, seed=1)
        scaffold = final_params(problem, Scaffold(k), work, 0.3, rounds=rounds, seed=1)
        if same:
            torch.testing.assert_close(scaffold, fedavg, rtol=0, atol=1e-13)
        else:
            assert (scaffold - fedavg).abs().max() > 1e-4


# ------------------------------------------------------------------ engine ≡ oracle

def assert_engine_matches_oracle(problem, algorithm, work, *, rounds=2, seed=3, lr=0.2,
                                 objective=LocalObjective(weight_decay=1e-3, clip_norm=0.5),
                                 fused=(True, False), executions=("stacked",)):
    """Engine runs (each fused/execution option) against the oracle, float64, RTOL64/ATOL64."""
    schedule = LRSchedule("constant", lr)
    slow, w_slow = run_sequential(problem, algorithm, work, schedule, objective=objective, rounds=rounds,
                                  seed=seed, return_params=True)
    for f in fused:
        for execution in executions:
            fast, w_fast = run(problem, algorithm, work, schedule, objective=objective, rounds=rounds, seed=seed,
                               fused=f, execution=execution, return_params=True)
            torch.testing.assert_close(w_fast, w_slow, rtol=RTOL64, atol=ATOL64)
            assert fast["train_loss"].tolist() == pytest.approx(slow["train_loss"].tolist(), rel=RTOL64)
    assert (w_slow - problem.init(seed)).abs().max() > 1e-3  # training really moved the model
    return slow


FEDAVG_CASES = [FedAvg(s, 5) for s in ("full", "scheme1", "scheme2", "original", "transformed2", "weighted")] + [
    FedAvg("weighted", 6, straggler_fraction=0.5)]


@pytest.mark.parametrize("algorithm", FEDAVG_CASES, ids=lambda a: f"{a.scheme}-d{a.straggler_fraction}")
@pytest.mark.parametrize("unit", ["steps", "epochs"])
def test_fedavg_engine_matches_oracle(algorithm, unit):
    work = LocalWork(3, "steps", 8) if unit == "steps" else LocalWork(2, "epochs", 16)
    assert_engine_matches_oracle(logistic64(small_clients=2), algorithm, work, executions=("stacked", "sequential"))


@pytest.mark.parametrize("unit", ["steps", "epochs"])
@pytest.mark.parametrize("straggler_fraction", [0.0, 0.5, 0.9])
@pytest.mark.parametrize("mu", [0.0, 0.5])
@pytest.mark.parametrize("how", ["uniform", "proportional"])
def test_fedprox_engine_matches_oracle(how, mu, straggler_fraction, unit):
    algorithm = FedProx(mu, 5, sampling=how, straggler_fraction=straggler_fraction)
    work = LocalWork(3, "steps", 8) if unit == "steps" else LocalWork(3, "epochs", 16)
    problem = logistic64(small_clients=2)
    if straggler_fraction:  # the plans really have stragglers
        plans = [algorithm.plan(problem.population(), work, 3, r) for r in range(2)]
        assert any(bool((plan.work < work.amount).any()) for plan in plans)
    assert_engine_matches_oracle(problem, algorithm, work)


@pytest.mark.parametrize("algorithm", [Scaffold(), Scaffold(4, server_lr=0.7), Scaffold(4, option="I")],
                         ids=["full", "partial", "option-I"])
@pytest.mark.parametrize("unit", ["steps", "epochs"])
def test_scaffold_engine_matches_oracle(algorithm, unit):
    work = LocalWork(3, "steps", 8) if unit == "steps" else LocalWork(2, "epochs", 16)
    assert_engine_matches_oracle(logistic64(small_clients=2), algorithm, work, rounds=3, fused=(True,),
                                 executions=("stacked", "sequential"))


@pytest.mark.parametrize("algorithm", [
    LocalUpdate(server_lr=0.2),
    LocalUpdate(server_lr=0.5, a=(0.3, 0.0, 2.0, 1.0), clients_per_round=5),
    LocalUpdate(server_lr=0.3, momentum=0.5, alpha=0.2),
    LocalUpdate(server_lr=0.3, a=(1.0, 0.5, 0.0, 2.0), momentum=0.9, nesterov=True, clients_per_round=4,
                alpha=0.1),
], ids=["plain", "a-sampled", "momentum-prox", "nesterov-a-sampled-prox"])
def test_local_update_engine_matches_oracle(algorithm):
    assert_engine_matches_oracle(logistic64(small_clients=2), algorithm, LocalWork(4, "steps", 8), rounds=3,
                                 fused=(True,), executions=("stacked", "sequential"))


# ---------------------------------------------------------------------- masking

class UnequalWork:
    """Every client trains, with fixed units of work each; counts its steps and records the last one."""

    plain_sgd = None

    def __init__(self, units):
        self.units, self.messages = torch.tensor(units), []

    def server_init(self, params, population):
        return None

    def plan(self, population, work, seed, round_):
        n = population.num_clients
        return RoundPlan(torch.arange(n), torch.full((n,), 1.0 / n, dtype=torch.float64), work=self.units)

    def client_init(self, server_state, params, plan, ctx):
        m = plan.clients.numel()
        return {"w": params.unsqueeze(0).repeat(m, 1), "count": params.new_zeros(m, 1),
                "last": params.new_full((m, 1), -1.0)}

    def client_step(self, state, grad, ctx):
        descend_(state["w"], grad(state["w"]), ctx.lr)
        state["count"].add_(1)
        state["last"].fill_(ctx.step)
        return state

    def client_message(self, state, params, plan, ctx):
        self.messages.append({k: v.clone() for k, v in state.items()})
        return {"w": state["w"]}

    def server_step(self, server_state, params, message, plan, ctx):
        return plan.aggregate(params, message["w"]), server_state


class FunctionalFedAvg(FedAvg):
    """FedAvg written purely: every client function builds new tensors and never writes into its inputs."""

    def client_step(self, state, grad, ctx):
        return {"w": state["w"] - ctx.lr * grad(state["w"])}


@pytest.mark.parametrize("execution", ["stacked", "sequential", "oracle", "stacked-unfused"])
@pytest.mark.parametrize("unit", ["steps", "epochs"])
def test_a_purely_functional_algorithm_moves_on_every_execution_path(execution, unit):
    """The engine continues from what client_step returns (the protocol's promise), on every path."""
    work = LocalWork(3, "steps", 8) if unit == "steps" else LocalWork(2, "epochs", 16)  # epochs: unequal work
    kwargs = {"trainer": SEQUENTIAL} if execution == "oracle" else {
        "execution": execution.split("-")[0], "fused": execution == "stacked"}
    algorithm = FunctionalFedAvg("weighted", 5, straggler_fraction=0.4)
    got = final_params(logistic64(small_clients=2), algorithm, work, rounds=2, seed=3, **kwargs)
    reference = final_params(logistic64(small_clients=2), FedAvg("weighted", 5, straggler_fraction=0.4), work,
                             rounds=2, seed=3, trainer=SEQUENTIAL)
    torch.testing.assert_close(got, reference, rtol=RTOL64, atol=ATOL64)
    assert (reference - logistic64(small_clients=2).init(3)).abs().max() > 1e-3


@pytest.mark.parametrize("name", list(ALGORITHMS))
def test_every_registered_algorithm_matches_the_oracle(name):
    """Issue #41 item 3: the registry is the test table; each algorithm's registered example (the settings that
    exercise its options) trains as the oracle does on both execution paths, fused solver included where taken."""
    assert_engine_matches_oracle(logistic64(small_clients=2), example(name), LocalWork(3, "steps", 8), rounds=2,
                                 executions=("stacked", "sequential"))


def test_an_algorithm_registers_where_it_is_defined(monkeypatch):
    """``register`` is the only table: a class registered outside the package is known by its name (and is then
    in every test that iterates the registry); a second class under a taken name is refused."""
    monkeypatch.setattr(protocol, "ALGORITHMS", dict(protocol.ALGORITHMS))
    monkeypatch.setattr(protocol, "EXAMPLES", dict(protocol.EXAMPLES))

    @protocol.register("half_step_fedavg", example=dict(clients_per_round=3))
    @dataclasses.dataclass(frozen=True)
    class Mine(FedAvg):
        pass

    assert protocol.ALGORITHMS["half_step_fedavg"] is Mine and protocol.example("half_step_fedavg") == Mine("scheme1", 3)
    with pytest.raises(ValueError, match="two algorithms registered as 'fedavg'"):
        protocol.register("fedavg", example={})(Mine)


def test_a_new_algorithm_module_is_registered_without_editing_the_package(monkeypatch, tmp_path):
    """docs/extending.md: an algorithm is its module and its test. A module dropped into the package's folder
    is imported by the package (``discover``) and so registers itself."""
    import sys

    from replicate.fl import algorithms

    monkeypatch.setattr(protocol, "ALGORITHMS", dict(protocol.ALGORITHMS))
    monkeypatch.setattr(protocol, "EXAMPLES", dict(protocol.EXAMPLES))
    (tmp_path / "toy_twice_fedavg.py").write_text(
        "import dataclasses\n"
        "from replicate.fl.algorithms import fedavg, protocol\n\n\n"
        "@protocol.register('toy_twice_fedavg', example=dict(clients_per_round=2))\n"
        "@dataclasses.dataclass(frozen=True)\n"
        "class TwiceFedAvg(fedavg.FedAvg):\n"
        "    pass\n")
    monkeypatch.setattr(algorithms, "__path__", [*algorithms.__path__, str(tmp_path)])
    monkeypatch.delitem(sys.modules, f"{algorithms.__name__}.toy_twice_fedavg", raising=False)
    assert "toy_twice_fedavg" not in protocol.ALGORITHMS
    algorithms.discover()
    assert protocol.ALGORITHMS["toy_twice_fedavg"].__name__ == "TwiceFedAvg"
    sys.modules.pop(f"{algorithms.__name__}.toy_twice_fedavg", None)


@dataclasses.dataclass(frozen=True)
class HalfStepFedAvg(FedAvg):
    """A user's FedAvg variant that overrides the client step alone (half the step), keeping ``plain_sgd``."""

    def client_step(self, state, grad, ctx):
        descend_(state["w"], grad(state["w"]), ctx.lr * 0.5)
        return state


def test_an_override_of_the_client_step_alone_is_honoured_where_a_fused_solver_exists():
    """Issue #41 item 1: on a logistic problem the engine used to hand a plain-SGD algorithm's local solve to the
    fused solver from ``plain_sgd`` alone, so a subclass overriding ``client_step`` silently trained plain SGD. The
    fused path is now taken only when the step is the declaration's, so the override runs on every path (and the
    update is stated once: FedAvg and FedProx step through their ``plain_sgd``)."""
    problem, work = logistic64(small_clients=2), LocalWork(3, "steps", 8)
    variant = HalfStepFedAvg("full", 5)
    assert fused_update(variant) is None and fused_update(FedAvg("full", 5)) == PlainSGD()
    assert fused_update(FedProx(0.5, 5)) == PlainSGD(prox_mu=0.5)
    assert_engine_matches_oracle(problem, variant, work, executions=("stacked", "sequential"))
    plain = final_params(problem, FedAvg("full", 5), work, rounds=2, fused=True)
    half = final_params(problem, variant, work, rounds=2, fused=True)
    assert (half - plain).abs().max() > 1e-3  # the half step, not the plain one


@pytest.mark.parametrize("execution", ["stacked", "sequential", "oracle"])
def test_a_finished_client_keeps_its_state(execution):
    units = [1, 3, 2]
    algorithm = UnequalWork(units)
    runner = run_sequential if execution == "oracle" else run
    kwargs = {} if execution == "oracle" else {"execution": execution}
    runner(quadratic(), algorithm, LocalWork(3), LRSchedule("constant", ETA), rounds=1, **kwargs)
    (state,) = algorithm.messages
    assert state["count"].squeeze(1).tolist() == units  # exactly its own number of steps
    assert state["last"].squeeze(1).tolist() == [u - 1 for u in units]
    for k, u in enumerate(units):
        w = X0.clone()
        for _ in range(u):
            w = w - ETA * grad_k(k, w)
        torch.testing.assert_close(state["w"][k], w, rtol=0, atol=1e-14)


# ---------------------------------------------------------------------- epoch batches

def test_every_epoch_visits_each_sample_once_with_a_short_last_batch():
    sizes, b, epochs = torch.tensor([7, 10, 3, 16, 8]), 4, 3
    offsets = torch.cat([torch.zeros(1, dtype=torch.int64), sizes.cumsum(0)])[:-1] + 100
    work = LocalWork(epochs, "epochs", b)
    per_epoch = [math.ceil(int(n) / b) for n in sizes]
    for units in (None, torch.tensor([1, 3, 2, 3, 1])):  # full work, and stragglers
        steps = work.steps(sizes, units)
        done = [epochs] * 5 if units is None else units.tolist()
        assert steps.tolist() == [e * pe for e, pe in zip(done, per_epoch)]  # E·⌈n_k/b⌉
        batches = fl_batches.draw(sizes, offsets, steps, work, torch.Generator().manual_seed(0))
        assert batches.index.shape[:2] == (int(steps.max()), 5)
        for j, n in enumerate(sizes.tolist()):
            orders = []
            for e in range(done[j]):
                rows = []
                for position in range(per_epoch[j]):
                    index, mask = batches.step(e * per_epoch[j] + position)
                    real = index[j][mask[j]]
                    last = position == per_epoch[j] - 1
                    assert real.numel() == (n - b * (per_epoch[j] - 1) if last else b)
                    rows.append(real)
                rows = torch.cat(rows)
                assert sorted(rows.tolist()) == list(range(int(offsets[j]), int(offsets[j]) + n))
                orders.append(rows.tolist())
            for s in range(int(steps[j]), int(steps.max())):  # past its count: no samples at all
                assert not bool(batches.step(s)[1][j].any())
            if n >= 7 and len(orders) > 1:
                assert orders[0] != orders[1]  # a fresh permutation every epoch
    with pytest.raises(ReplicateError, match="batch size"):
        LocalWork(2, "epochs")


def test_local_work_counts_steps():
    sizes = torch.tensor([5, 20, 21])
    assert LocalWork(4, "steps", 8).steps(sizes).tolist() == [4, 4, 4]
    assert LocalWork(2, "epochs", 10).steps(sizes).tolist() == [2, 4, 6]
    assert LocalWork(2, "epochs", 10).steps(sizes, torch.tensor([1, 2, 1])).tolist() == [1, 4, 3]
    assert LocalWork(2, "epochs", 10).steps(sizes).dtype == torch.int64


# ---------------------------------------------------------------------- stragglers

@pytest.mark.parametrize("m,fraction,epochs", [(10, 0.3, 5), (7, 0.5, 4), (10, 0.0, 5), (10, 1.0, 5), (5, 0.9, 20)])
def test_stragglers_do_less_work(m, fraction, epochs):
    rounds = [sampling.stragglers(m, fraction, epochs, 11, r) for r in range(20)]
    active = int(round(m * (1 - fraction)))
    for work in rounds:
        assert work.dtype == torch.int64 and work.shape == (m,)
        assert int((work == epochs).sum()) == active
        lagging = work[work != epochs]
        assert bool(((lagging >= 1) & (lagging <= epochs - 1)).all())
    assert all(torch.equal(sampling.stragglers(m, fraction, epochs, 11, r), rounds[r]) for r in range(20))
    if 0 < active < m:  # which clients lag and how far changes with the round and the seed
        assert any(not torch.equal(rounds[0], w) for w in rounds[1:])
        assert any(not torch.equal(sampling.stragglers(m, fraction, epochs, 12, r), rounds[r]) for r in range(20))
    assert sampling.stragglers(4, 0.5, 1, 0, 0).tolist() == [1, 1, 1, 1]  # E = 1: one epoch anyway


def test_fedavg_drops_stragglers_and_fedprox_keeps_them():
    problem = SampleProblem(toy_dataset(), LogisticRegression(5, 3))
    pop, p, work = problem.population(), problem.weights(), LocalWork(5, "epochs", 4)
    for r in range(5):
        everyone = FedAvg("weighted", 10).plan(pop, work, 2, r)
        units = sampling.stragglers(10, 0.3, 5, 2, r)
        dropped = FedAvg("weighted", 10, straggler_fraction=0.3).plan(pop, work, 2, r)
        assert dropped.clients.numel() == round(10 * 0.7) < everyone.clients.numel()
        assert torch.equal(dropped.clients, everyone.clients[units == 5])
        torch.testing.assert_close(dropped.weights, p[dropped.clients] / p[dropped.clients].sum())
        assert dropped.work is None  # whoever returns did all E epochs
        kept = FedProx(0.1, 10, straggler_fraction=0.3).plan(pop, work, 2, r)
        assert torch.equal(kept.clients, everyone.clients)
        torch.testing.assert_close(kept.weights, everyone.weights)
        assert torch.equal(kept.work, units) and int((kept.work < 5).sum()) == 3
        steps = work.steps(problem.sizes[kept.clients], kept.work)
        full = work.steps(problem.sizes[kept.clients])
        assert bool((steps[units < 5] < full[units < 5]).all()) and torch.equal(steps[units == 5], full[units == 5])


def test_fedavg_with_every_client_dropped_keeps_the_model():
    problem = SampleProblem(toy_dataset(), LogisticRegression(5, 3))
    algorithm, work = FedAvg("weighted", 4, straggler_fraction=1.0), LocalWork(3, "epochs", 8)
    assert algorithm.plan(problem.population(), work, 0, 0).clients.numel() == 0
    _, w = run(problem, algorithm, work, LRSchedule("constant", 0.5), rounds=2, seed=0, return_params=True)
    assert torch.equal(w, problem.init(0))


# ---------------------------------------------------------------------- bad settings

@pytest.mark.parametrize("build,match", [
    (lambda: FedAvg("scheme3"), "unknown sampling scheme"),
    (lambda: FedProx(sampling="weighted"), "unknown FedProx sampling"),
    (lambda: FedProx(prox_mu=-0.1), "prox_mu"),
    (lambda: LocalUpdate(alpha=-0.1), "proximal strength"),
    (lambda: LocalWork(0, "epochs", 10), "local epochs"),
    (lambda: LocalWork(2, "rounds", 10), "'steps' or 'epochs'"),
    (lambda: LocalWork(2, "epochs"), "need a batch size"),
    (lambda: LocalWork(2, "steps", 0), "batch size"),
    (lambda: FedAvg("weighted", straggler_fraction=1.5), "straggler_fraction"),
    (lambda: FedAvg("weighted", straggler_fraction=-0.1), "straggler_fraction"),
    (lambda: FedAvg("scheme2", straggler_fraction=0.5), "only with"),
    (lambda: FedProx(straggler_fraction=1.5), "straggler_fraction"),
    (lambda: FedProx(straggler_fraction=-0.5), "straggler_fraction"),
    (lambda: Scaffold(server_lr=0.0), "server_lr"),
    (lambda: LocalObjective(weight_decay=-1.0), "weight decay"),
    (lambda: LocalObjective(clip_norm=0.0), "clip_norm"),
])
def test_bad_settings_raise_one_clear_error(build, match):
    with pytest.raises(ReplicateError, match=match):
        build()


def test_bad_runs_fail_before_any_compute():
    calls = []
    problem = SampleProblem(toy_dataset(), LogisticRegression(5, 3))
    problem.grad = lambda *args, **kwargs: calls.append(1)  # any gradient would be compute
    schedule = LRSchedule("constant", 0.1)
    with pytest.raises(ReplicateError, match="exceeds"):
        run(problem, FedProx(0.1, 50), LocalWork(2, "epochs", 4), schedule, rounds=1, fused=False)
    with pytest.raises(ReplicateError, match="local_steps = len"):
        run(problem, LocalUpdate(a=(1.0, 2.0)), LocalWork(3, "steps", 4), schedule, rounds=1)
    with pytest.raises(ReplicateError, match="execution"):
        run(problem, FedAvg("full"), LocalWork(2, "steps", 4), schedule, rounds=1, execution="parallel")
    with pytest.raises(ReplicateError, match="rounds"):
        run(problem, FedAvg("full"), LocalWork(2, "steps", 4), schedule, rounds=0)
    with pytest.raises(ReplicateError, match="full gradients"):
        run(quadratic(), FedAvg("full"), LocalWork(2, "epochs", 4), schedule, rounds=1)
    assert calls == []
