"""The vectorized engine against the sequential oracle, and the engine's building blocks."""
from dataclasses import dataclass

import pytest
import torch

from replicate.core import rng
from replicate.fl.algorithms import FedAvg, LocalWork, PlainSGD, Population
from replicate.fl.algorithms.protocol import fused_update
from replicate.data.quadratic import li2020_counterexample, li2020_matrices
from replicate.fl.batches import draw_batch_positions
from replicate.fl.engine import LocalObjective, run
from replicate.core.errors import ReplicateError
from replicate.fl.models import LogisticRegression, Model
from replicate.fl.oracle import run_sequential
from replicate.fl.problems import QuadraticFederatedProblem, SampleProblem
from replicate.fl.schedules import LRSchedule

from conftest import toy_dataset

SCHEMES = ["full", "scheme1", "scheme2", "original", "transformed2", "weighted"]


def population(p: torch.Tensor) -> Population:
    """Sampling sees weights p_k and sizes n_k; these plans only look at p."""
    return Population(p, torch.arange(1, p.numel() + 1))


@dataclass(frozen=True)
class ProxFedAvg(FedAvg):
    """A FedAvg scheme's plan with FedProx's proximal local step, declared (``plain_sgd``) and so taken by
    the generic step and the fused solver alike (μ moved from the old ``ClientUpdate`` into the algorithms,
    and only FedProx/LocalUpdate have one)."""

    prox_mu: float = 0.0

    @property
    def plain_sgd(self) -> PlainSGD:
        return PlainSGD(prox_mu=self.prox_mu)


def fedavg(scheme, clients_per_round=10, prox_mu=0.0):
    return FedAvg(scheme, clients_per_round) if not prox_mu else ProxFedAvg(scheme, clients_per_round,
                                                                             prox_mu=prox_mu)


class Recording:
    """Wraps an algorithm and keeps a copy of every round's uploaded local models."""

    def __init__(self, inner):
        self.inner, self.locals = inner, []

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def client_message(self, state, params, plan, ctx):
        self.locals.append(state["w"].clone())
        return self.inner.client_message(state, params, plan, ctx)


@pytest.mark.parametrize("prox_mu", [0.0, 0.1])
@pytest.mark.parametrize("scheme", SCHEMES)
def test_vectorized_engine_equals_sequential_oracle(scheme, prox_mu):
    problem = SampleProblem(toy_dataset(small_clients=2), LogisticRegression(5, 3))
    algorithm = fedavg(scheme, 5, prox_mu)
    work, objective = LocalWork(7, "steps", 8), LocalObjective(weight_decay=1e-3, clip_norm=0.5)
    schedule = LRSchedule("harmonic", 0.3)
    fast, w_fast = run(problem, algorithm, work, schedule, objective=objective, rounds=4, seed=3,
                       return_params=True)
    slow, w_slow = run_sequential(problem, algorithm, work, schedule, objective=objective, rounds=4, seed=3,
                                  return_params=True)
    torch.testing.assert_close(w_fast, w_slow, rtol=1e-5, atol=1e-6)
    assert fast["train_loss"].tolist() == pytest.approx(slow["train_loss"].tolist(), rel=1e-5)
    assert fast["train_loss"].iloc[-1] < fast["train_loss"].iloc[0]


@pytest.mark.parametrize("scheme", ["full", "scheme1"])
def test_quadratic_engine_equals_oracle_and_closed_form(scheme):
    problem = QuadraticFederatedProblem(li2020_counterexample())
    update = LocalWork(3)
    _, fast = run(problem, FedAvg(scheme, 3), update, LRSchedule("constant", 0.4), rounds=5, return_params=True)
    _, slow = run_sequential(problem, FedAvg(scheme, 3), update, LRSchedule("constant", 0.4), rounds=5,
                             return_params=True)
    torch.testing.assert_close(fast, slow)
    A, b = li2020_matrices()  # the paper's A_k, b_k: F_k(w) = ½wᵀA_k w − b_kᵀw + (μ/2)‖w‖², μ = 2e-4
    w = torch.linspace(-1, 1, A.shape[-1], dtype=torch.float64)
    paper_F = (w @ A.sum(0) @ w - 2 * w @ b.sum(0)) / 10 + 1e-4 * w @ w
    assert float(problem.objective(w)) == pytest.approx(float(paper_F), rel=1e-12)
    w_star = torch.linalg.solve(A.sum(0) + 5 * 2e-4 * torch.eye(A.shape[-1], dtype=torch.float64), b.sum(0))
    torch.testing.assert_close(problem.w_star, w_star)
    if scheme == "full":  # one round by hand: average of 3 plain GD steps per device
        w = torch.zeros(A.shape[-1], dtype=torch.float64)
        locals_ = []
        for k in range(5):
            v = w.clone()
            for _ in range(3):
                v = v - 0.4 * (A[k] @ v - b[k] + 2e-4 * v)
            locals_.append(v)
        _, one = run(problem, FedAvg("full"), update, LRSchedule("constant", 0.4), rounds=1, return_params=True)
        torch.testing.assert_close(one, torch.stack(locals_).mean(0))


@pytest.mark.parametrize("scheme", ["transformed2", "original"])
@pytest.mark.parametrize("clip_norm", [0.3, 1e3, None])
def test_fused_linear_solver_equals_the_generic_step(scheme, clip_norm):
    """The linear model's fused solver (class-major layout, one baddbmm per step, clipping
    dropped when provably inactive) against the generic per-step gradient path."""
    problem = SampleProblem(toy_dataset(small_clients=3), LogisticRegression(5, 3))
    assert problem.grad_bound < 1e3  # clip_norm = 1e3 takes the no-clipping branch
    flat = problem.init(4)
    for algorithm, work, objective in (
            (fedavg(scheme, 6), LocalWork(9, "steps", 8), LocalObjective(1e-2, clip_norm)),
            (fedavg(scheme, 6, prox_mu=0.5), LocalWork(5, "steps", 8), LocalObjective(0.0, clip_norm)),
            (fedavg(scheme, 6), LocalWork(3, "steps", None), LocalObjective(1e-3, clip_norm))):
        assert fused_update(Recording(algorithm)) is not None  # fused=True takes LogisticRegression.sgd
        fused, generic = Recording(algorithm), Recording(algorithm)
        kwargs = dict(objective=objective, rounds=1, seed=4, return_params=True)
        _, w_fused = run(problem, fused, work, LRSchedule("constant", 0.7), fused=True, **kwargs)
        _, w_generic = run(problem, generic, work, LRSchedule("constant", 0.7), fused=False, **kwargs)
        torch.testing.assert_close(fused.locals[0], generic.locals[0], rtol=1e-5, atol=1e-6)  # every local model
        torch.testing.assert_close(w_fused, w_generic, rtol=1e-5, atol=1e-6)
        assert (fused.locals[0] - flat).abs().max() > 0.05  # the clients really moved


def test_gradient_norm_bound_holds_on_random_batches():
    problem = SampleProblem(toy_dataset(small_clients=2), LogisticRegression(5, 3))
    flat = torch.randn(12, problem.model.num_params, generator=torch.Generator().manual_seed(0)) * 3
    clients = torch.arange(12)
    batches = problem.draw_batches([(clients, torch.full((12,), 50), torch.Generator().manual_seed(1))],
                                   LocalWork(50, "steps", 4))[0]
    norms = torch.stack([torch.linalg.vector_norm(problem.grad(flat, clients, batches.step(s)), dim=1)
                         for s in range(50)])
    assert float(norms.max()) <= problem.grad_bound
    assert float(norms.max()) > 0.2 * problem.grad_bound  # a bound, but not a vacuous one


def test_logistic_closed_form_gradient_matches_autograd():
    model = LogisticRegression(4, 3)
    g = torch.Generator().manual_seed(0)
    flat = torch.randn(2, model.num_params, generator=g)
    x = torch.randn(2, 6, 4, generator=g)
    y = torch.randint(0, 3, (2, 6), generator=g)
    mask = torch.tensor([[True] * 6, [True] * 4 + [False] * 2])
    losses, grads = model.loss_and_grad(flat, x, y, mask)
    generic_losses, generic = super(LogisticRegression, model).loss_and_grad(flat, x, y, mask)
    torch.testing.assert_close(grads, generic)
    torch.testing.assert_close(losses, generic_losses)
    # client 1 ignores its two padded samples
    w = flat[1].clone().requires_grad_(True)
    loss = model.per_sample_loss(w, x[1, :4], y[1, :4]).mean()
    loss.backward()
    torch.testing.assert_close(grads[1], w.grad)


def test_plans_match_the_papers_formulas():
    p = torch.tensor([0.1, 0.2, 0.3, 0.4], dtype=torch.float64)
    pop, work = population(p), LocalWork(1)
    for seed in range(5):
        s1 = FedAvg("scheme1", 3).plan(pop, work, seed, 0)
        assert s1.weights.sum().item() == pytest.approx(1.0)
        assert set((s1.weights * 3).round().tolist()) <= {1.0, 2.0, 3.0}  # multiplicity / K
        s2 = FedAvg("scheme2", 2).plan(pop, work, seed, 0)
        torch.testing.assert_close(s2.weights, p[s2.clients] * 4 / 2)  # (N/K) p_k
        orig = FedAvg("original", 2).plan(pop, work, seed, 0)
        assert orig.residual == pytest.approx(1 - p[orig.clients].sum().item())
        t2 = FedAvg("transformed2", 2).plan(pop, work, seed, 0)
        torch.testing.assert_close(t2.lr_scale, 4 * p[t2.clients])  # lr · N p_k
        torch.testing.assert_close(t2.weights, torch.full((2,), 0.5, dtype=torch.float64))
        # schemes with the same sampling law see the same clients in the same round
        assert s2.clients.tolist() == orig.clients.tolist() == t2.clients.tolist()


@pytest.mark.parametrize("scheme", ["scheme1", "scheme2"])
def test_schemes_are_unbiased(scheme):
    """E[aggregate] = Σ p_k w_k for fixed local models (Li et al. Lemma 4)."""
    g = torch.Generator().manual_seed(1)
    n, rounds = 8, 6000
    p = torch.rand(n, generator=g, dtype=torch.float64) + 0.2
    p /= p.sum()
    local = torch.randn(n, 3, generator=g, dtype=torch.float64)
    algorithm, pop, work = FedAvg(scheme, 3), population(p), LocalWork(1)
    plans = [algorithm.plan(pop, work, 0, r) for r in range(rounds)]
    samples = torch.stack([plan.aggregate(None, local[plan.clients]) for plan in plans])
    target = p @ local
    stderr = samples.std(0) / rounds ** 0.5
    assert ((samples.mean(0) - target).abs() < 4 * stderr).all()
    # the original scheme is biased towards w_t when Σ_S p_k < 1: checked to fail the same test
    orig = FedAvg("original", 3)
    biased = torch.stack([orig.plan(pop, work, 0, r).aggregate(torch.zeros(3, dtype=torch.float64),
                                                               local[orig.plan(pop, work, 0, r).clients])
                          for r in range(rounds)])
    assert ((biased.mean(0) - target).abs() > 4 * stderr).any()


def test_sampling_is_a_pure_function_of_seed_and_round():
    p, work = population(torch.full((20,), 0.05, dtype=torch.float64)), LocalWork(1)
    a = [FedAvg("scheme1", 5).plan(p, work, 7, r).clients.tolist() for r in range(10)]
    b = [FedAvg("scheme1", 5).plan(p, work, 7, r).clients.tolist() for r in reversed(range(10))][::-1]
    assert a == b
    assert a != [FedAvg("scheme1", 5).plan(p, work, 8, r).clients.tolist() for r in range(10)]
    assert rng.seed_for(1, "init") != rng.seed_for(1, "sampling")


def test_batches_are_distinct_in_range_and_uniform():
    sizes = torch.tensor([30, 5, 12, 400])
    pos, mask = draw_batch_positions(sizes, steps=2000, batch_size=10, generator=torch.Generator().manual_seed(0))
    assert mask is not None and mask[1].sum() == 5 and mask[[0, 2, 3]].all()
    assert sorted(pos[1, 0, :5].tolist()) == [0, 1, 2, 3, 4]  # whole local set when n_k < b
    for k in (0, 2, 3):
        rows = pos[k]
        assert int(rows.max()) < sizes[k] and int(rows.min()) >= 0
        assert all(len(set(r.tolist())) == 10 for r in rows)  # b distinct samples per step
    counts = torch.bincount(pos[2].flatten(), minlength=12).double()  # 12 choose 10: each position ~ 10/12
    expected = 2000 * 10 / 12
    assert ((counts - expected).abs() < 5 * (expected * (2 / 12)) ** 0.5).all()


@pytest.mark.parametrize("unit,b", [("steps", 4), ("steps", 10), ("epochs", 4), ("steps", None)])
def test_runs_drawn_together_draw_what_each_draws_alone(unit, b):
    """batches.draw_runs shares the redraw passes of several runs; each run's batches must not depend on its
    batch-mates: runs of other sizes, step counts and seeds, drawn together and alone, bitwise."""
    from replicate.fl.batches import draw_runs

    work = LocalWork(3, unit, b)
    gen = torch.Generator().manual_seed(5)
    requests = []
    for i in range(6):
        m = int(torch.randint(1, 9, (), generator=gen))
        sizes = torch.randint(1, 12 * (b or 4), (m,), generator=gen)  # below b, keyed, and redrawn clients
        steps = torch.randint(1, 7, (m,), generator=gen)
        offsets = torch.cumsum(sizes, 0) - sizes
        requests.append((sizes, offsets, steps, 100 + i))
    together = draw_runs([(n, o, s, torch.Generator().manual_seed(seed)) for n, o, s, seed in requests], work)
    for (n, o, s, seed), batch in zip(requests, together):
        (alone,) = draw_runs([(n, o, s, torch.Generator().manual_seed(seed))], work)
        assert torch.equal(batch.index, alone.index)
        assert (batch.mask is None) == (alone.mask is None)
        assert batch.mask is None or torch.equal(batch.mask, alone.mask)


def test_the_mini_batch_stream_of_the_committed_figures_does_not_move():
    """Every committed figure trained on these draws: a change to how they are computed (e.g. drawing runs
    together) must leave them bitwise as they were. The digests were taken at commit e969ba4, before runs
    drew together; changing them means every training figure must be recomputed (bump runs.keys.NUMERICS)."""
    import hashlib

    from replicate.fl.batches import draw

    sizes = torch.tensor([3, 10, 25, 40, 41, 97, 400])  # below b, full, keyed and redrawn clients
    digests = []
    for unit in ("steps", "epochs"):
        b = draw(sizes, torch.cumsum(sizes, 0) - sizes, torch.tensor([5, 1, 7, 3, 9, 2, 6]), LocalWork(3, unit, 10),
                 torch.Generator().manual_seed(2020))
        data = b.index.numpy().tobytes() + (b.mask.numpy().tobytes() if b.mask is not None else b"")
        digests.append(hashlib.sha256(data).hexdigest()[:16])
    assert digests == ["1ddb4b85c989c50a", "cb95c9e9719c596c"]


def test_clipping_matches_torch_and_schedules():
    from replicate.fl.sgd import clip_

    g = torch.tensor([[3.0, 4.0], [0.3, 0.4]])
    clip_(g, 1.0)
    assert torch.linalg.vector_norm(g[0]).item() == pytest.approx(1.0, rel=1e-5)
    assert g[1].tolist() == pytest.approx([0.3, 0.4])
    li = LRSchedule("harmonic", 0.1)
    assert [li(r) for r in range(4)] == pytest.approx([0.1, 0.1, 0.05, 0.1 / 3])
    assert LRSchedule("shifted_inverse", 0.4, 1e-2)(100) == pytest.approx(0.4 / 6)


def test_bad_settings_raise_clear_errors():
    with pytest.raises(ReplicateError, match="unknown sampling scheme"):
        FedAvg("scheme3")
    with pytest.raises(ReplicateError, match="exceeds"):
        FedAvg("scheme2", 50).plan(population(torch.full((10,), 0.1, dtype=torch.float64)), LocalWork(1), 0, 0)
    with pytest.raises(ReplicateError, match="local steps"):
        LocalWork(0)
    with pytest.raises(ReplicateError, match="learning rate"):
        LRSchedule("constant", -1.0)
    with pytest.raises(ReplicateError, match="unknown lr schedule"):
        LRSchedule("cosine", 0.1)
    with pytest.raises(ReplicateError, match="'stem' \\(now called 'epoch_cube_root'\\)"):
        LRSchedule("stem", 0.1)


def test_a_renamed_schedule_keeps_its_runs_cache_entries():
    """The schedules are named by their mathematics (harmonic, shifted_inverse, epoch_cube_root); they were
    named by papers (li2020, li2020_quadratic, stem) when the committed ledger and caches recorded their runs.
    A recorded config reads back under the new name and hashes to the entry it was stored under."""
    from replicate.fl.algorithms import Stem
    from replicate.fl.schedules import FORMER_NAMES
    from replicate.runs import keys
    from replicate.runs.config import RunConfig

    for before, now in FORMER_NAMES.items():
        config = RunConfig(dataset="quadratic", algorithm=Stem(momentum_c=2.0), lr_schedule=now, lr_decay=0.5,
                           local_steps=5, batch_size=None)
        recorded = config.to_dict() | {"lr_schedule": before, "device": "cpu"}
        assert RunConfig.from_dict(recorded) == config
        assert keys.entry_name(recorded) == keys.key(config, device="cpu")
    # the committed key of one STEM Figure 5 tuning run (figures/ledger), recorded with lr_schedule "stem"
    from replicate.experiments.khanduri2021 import samples

    fig5 = samples.Fig5Config.for_profile("paper").run_config("stem", 10, 0, lr=0.01, c=1.0)
    assert fig5.lr_schedule == "epoch_cube_root" and keys.key(fig5, device="cuda") in _ledger_names()


def _ledger_names() -> set:
    from replicate.core import paths
    from replicate.runs import ledger

    return set(ledger.runs(paths.figures_dir() / "ledger"))


class TinyMLP(Model):
    """A model defined by ``forward`` alone: exercises the generic torch.func gradient path
    that CNNs/LSTMs will use, with the same engine loop."""

    def __init__(self, d, h, c):
        self.shapes = {"w1": (d, h), "b1": (h,), "w2": (h, c), "b2": (c,)}

    def init(self, generator, dtype=torch.float32):
        return torch.randn(self.num_params, generator=generator, dtype=dtype) * 0.3

    def forward(self, params, x, noise=None):
        return torch.tanh(x @ params["w1"] + params["b1"]) @ params["w2"] + params["b2"]


def test_generic_model_runs_in_the_same_loop_and_matches_oracle():
    problem = SampleProblem(toy_dataset(small_clients=1), TinyMLP(5, 4, 3))
    work, objective = LocalWork(4, "steps", 6), LocalObjective(weight_decay=1e-3, clip_norm=1.0)
    seen = []
    fast, w_fast = run(problem, FedAvg("scheme2", 4), work, LRSchedule("constant", 0.2), objective=objective,
                       rounds=3, return_params=True,
                       extra_metrics=lambda prob, w, r: seen.append(r) or {"norm": float(w.norm())})
    _, w_slow = run_sequential(problem, FedAvg("scheme2", 4), work, LRSchedule("constant", 0.2),
                               objective=objective, rounds=3, return_params=True)
    torch.testing.assert_close(w_fast, w_slow, rtol=1e-5, atol=1e-6)
    assert seen == [0, 1, 2, 3] and fast["norm"].iloc[-1] == pytest.approx(float(w_fast.norm()), rel=1e-6)


def test_subsets_stay_uniform_when_rows_need_the_keyed_fallback():
    """n = 12, b = 10 (n <= 4b: subsets come from random keys): every 10-subset of 12
    (66 of them) must be equally likely."""
    pos, _ = draw_batch_positions(torch.tensor([12]), steps=6600, batch_size=10,
                                  generator=torch.Generator().manual_seed(5))
    rows = pos[0].sort(dim=1).values
    assert all(len(set(r.tolist())) == 10 for r in rows)
    missing = (torch.arange(12).view(1, 1, 12) != rows.unsqueeze(-1)).all(1)  # the two left out
    pair = missing.nonzero()[:, 1].view(-1, 2)
    counts = torch.bincount(pair[:, 0] * 12 + pair[:, 1], minlength=144).double()
    counts = counts[counts > 0]
    assert counts.numel() == 66
    chi2 = float(((counts - 100) ** 2 / 100).sum())
    assert chi2 < 110  # 65 degrees of freedom: P(chi2 > 110) < 0.001


def test_subsets_stay_uniform_when_repeats_are_redrawn():
    """n = 50, b = 10 (n > 4b: draws with replacement, repeats redrawn until none are left).
    Single positions and pairs of positions must appear equally often (within chance)."""
    steps, n, b = 20000, 50, 10
    pos, _ = draw_batch_positions(torch.tensor([n]), steps=steps, batch_size=b,
                                  generator=torch.Generator().manual_seed(7))
    rows = pos[0]
    assert int(rows.sort(dim=1).values.diff(dim=1).min()) > 0  # distinct within every step
    singles = torch.bincount(rows.flatten(), minlength=n).double()
    expected = steps * b / n
    assert float(((singles - expected) ** 2 / expected).sum()) < 95  # 49 dof: P(chi2 > 95) < 1e-4
    hit = torch.zeros(steps, n).scatter_(1, rows, 1.0)
    pairs = (hit.T @ hit)[torch.triu_indices(n, n, 1).unbind()]  # co-occurrence of i < j
    expected = steps * b * (b - 1) / (n * (n - 1))
    chi2 = float(((pairs - expected) ** 2 / expected).sum())
    assert chi2 < 1224 + 5 * (2 * 1224) ** 0.5  # 1224 dof, about +5 sd


@pytest.fixture
def unstaged():
    """A registered dataset whose files are not staged here: building it is refused, as a missing download is."""
    from replicate.data import registry

    @registry.builder("unstaged_for_bench")
    def build(seed: int = 0):
        raise ReplicateError("unstaged_for_bench is not staged: run `python -m replicate data fetch` first")

    yield "unstaged_for_bench"
    registry.BUILDERS.pop("unstaged_for_bench"), registry.READS.pop("unstaged_for_bench")


def test_bench_times_every_solver_on_the_same_workload(capsys, unstaged):
    """The benchmark command's table (no timing asserted: only that every solver ran and the ratios are its own)."""
    from replicate.cli import bench
    from replicate.runs.config import RunConfig

    tiny = {"tiny": (RunConfig("synthetic(1,1)", num_clients=20, local_steps=2, batch_size=4), (3,)),
            "unavailable": (RunConfig(unstaged), (3,))}
    try:
        rows = bench.run(rounds=1, repeats=1, device="cpu", workloads=tiny)
    except ReplicateError:
        pytest.fail("a workload that cannot be built (e.g. data not staged) must be skipped, not raise")
    assert [r["workload"] for r in rows] == ["tiny"]
    row = rows[0]
    assert all(row[f"{s}_s_per_round"] > 0 for s in bench.SOLVERS)
    assert row["speedup"] == pytest.approx(row["oracle_s_per_round"] / row["fused_s_per_round"])
    assert "| tiny | 3 |" in bench.table(rows)
    progress = capsys.readouterr().err  # each time as measured, for a run cut off before its table
    assert all(f"timed tiny, K=3: {s} {row[f'{s}_s_per_round']:.4f} s/round" in progress for s in bench.SOLVERS)
    profiled = bench.step_profile(tiny["tiny"][0].with_algorithm(clients_per_round=3), steps=3)
    assert sum(profiled["shares"].values()) == pytest.approx(1.0) and profiled["ms_per_step"] > 0


def test_bench_times_training_alone_and_the_lstm_executions(monkeypatch, unstaged):
    """No evaluation inside the timed runs (eval_every=None gives an empty history), and the LSTM
    table times stacked, client loop and oracle on the same workload (Sent140 when staged)."""
    from replicate.cli import bench
    from replicate.data import store
    from replicate.runs.config import RunConfig

    def no_evaluation(*args, **kwargs):
        raise AssertionError("a benchmark run evaluated the model inside its timing")

    monkeypatch.setattr(SampleProblem, "evaluate", no_evaluation)
    bench.run(rounds=1, repeats=1, device="cpu",
              workloads={"tiny": (RunConfig("synthetic(1,1)", num_clients=20, local_steps=2, batch_size=4), (3,))})
    problem = SampleProblem(toy_dataset(), LogisticRegression(5, 3))
    assert run(problem, fedavg("scheme1", 3, 0.0), LocalWork(2, "steps", 4), LRSchedule("constant", 0.1),
               rounds=2, eval_every=None).empty
    if not store.is_available("sent140"):
        pytest.skip("Sent140 (LEAF) is not staged: the LSTM benchmark rows need it")
    tiny = bench.LSTM_WORKLOADS["Sent140 LSTM 2×100 (frozen embedding), 20 steps"].replace(local_steps=1)
    monkeypatch.setattr(bench, "LSTM_WORKLOADS", {"tiny sent140": tiny, "missing": RunConfig(unstaged)})
    rows = bench.lstm_run(rounds=1, repeats=1, device="cpu")
    assert [r["workload"] for r in rows] == ["tiny sent140"] and rows[0]["auto"] == "stacked"
    assert all(rows[0][s] > 0 for s in bench.LSTM_SOLVERS)
    assert rows[0]["speedup"] == pytest.approx(rows[0]["oracle"] / rows[0]["stacked"])
    assert "| tiny sent140 |" in bench.lstm_table(rows)


# ---- a run whose model is all NaN is not trained further: its history is filled, bitwise as training gives ----

def _nan_init(problem, nan_seeds):
    """``problem`` whose initial model is all NaN for the seeds in ``nan_seeds`` (a run diverged at round 0)."""
    init = problem.init

    def patched(seed):
        w = init(seed)
        return torch.full_like(w, float("nan")) if seed in nan_seeds else w

    problem.init = patched
    return problem


def _trained_to_the_end(monkeypatch, compute):
    """``compute()`` as the engine runs it, and again with absorbed runs trained to the end instead."""
    from replicate.fl import engine

    calls = []
    real = engine.absorbed
    monkeypatch.setattr(engine, "absorbed", lambda flat: calls.append(1) or real(flat))
    filled = compute()
    assert calls, "no run was checked"
    monkeypatch.setattr(engine, "absorbed", lambda flat: False)
    return filled, compute()


def _assert_same_histories(filled, trained, exact=True):
    """Bitwise; else (a CNN batch, whose kernels sum in another order once the NaN run has left it) to float32's
    batched-runs tolerance (tests/test_batched_runs.py)."""
    import pandas as pd

    rtol, atol = (0, 0) if exact else (1e-5, 1e-6)
    for (h_filled, w_filled), (h_trained, w_trained) in zip(filled, trained):
        pd.testing.assert_frame_equal(h_filled, h_trained, check_exact=exact, rtol=rtol or 1e-5, atol=atol or 1e-8)
        torch.testing.assert_close(w_filled, w_trained, equal_nan=True, rtol=rtol, atol=atol)


@pytest.mark.parametrize("name", ["fedavg-scheme1", "fedprox-stragglers", "scaffold-I", "stem", "local-update",
                                  "fedadam", "cnn-dropout"])
def test_an_absorbed_run_is_filled_as_training_it_would_record(monkeypatch, name):
    """Runs of a batch whose model is NaN (seeds 2 and 4) beside finite ones, with a stop hook that fires on a
    filled row: the histories equal training every run to the end, bit for bit, and the NaN runs are filled."""
    from test_batched_runs import CASES, SCHEDULES

    from replicate.fl.engine import RunSpec, run_batch

    build, algorithms, work = CASES[name]
    stop = lambda row: row["round"] >= 3  # noqa: E731  (a target the filled rows reach)
    specs = [RunSpec(a, SCHEDULES[i % 3], seed=i + 1, rounds=5, stop=stop if i == 1 else None)
             for i, a in enumerate(algorithms)] + [RunSpec(algorithms[0], SCHEDULES[1], seed=4, rounds=6)]  # a decaying rate: each filled row's own

    def compute():
        problem = _nan_init(build(), nan_seeds={2, 4})
        return run_batch(problem, specs, work, objective=LocalObjective(weight_decay=1e-3), rounds=5,
                         return_params=True)

    filled, trained = _trained_to_the_end(monkeypatch, compute)
    _assert_same_histories(filled, trained, exact=not name.startswith("cnn"))
    assert list(filled[1][0]["round"]) == [0, 1, 2, 3]  # stopped on a filled row, as training stops
    assert filled[-1][0]["train_loss"].isna().all() and len(filled[-1][0]) == 7
    assert filled[0][0]["train_loss"].notna().all()  # its batch-mates trained


def test_a_run_that_diverges_midway_is_filled_from_where_it_became_nan(monkeypatch):
    """A quadratic at a step size past 2/L grows until it overflows and turns NaN; from that evaluation on
    its rows are filled, bitwise as training it on records."""
    from test_algorithms import quadratic

    from replicate.fl import engine

    def compute():
        return [run(quadratic(), FedAvg("full"), LocalWork(4, "steps", None), LRSchedule("constant", 40.0),
                    rounds=120, return_params=True)]

    fills = []
    real_fill = engine._fill
    monkeypatch.setattr(engine, "_fill", lambda r, *a: fills.append(r.rows[-1]["round"]) or real_fill(r, *a))
    filled, trained = _trained_to_the_end(monkeypatch, compute)
    _assert_same_histories(filled, trained)
    history = filled[0][0]
    first_nan = int(history.loc[history["objective"].isna(), "round"].min())  # overflow, then NaN spreads
    assert len(fills) == 1 and 0 < first_nan <= fills[0] < 100  # it diverged midway and was filled from there
    assert len(history) == 121
