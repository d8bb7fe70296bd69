"""Runs as a tensor dimension (``engine.run_batch``, ``fl/batching``): several runs trained as one
stack of clients give each run what it gives alone — for every algorithm, with runs of different
seeds, client rates, schedules, rounds, server settings, clients per round and unequal local work,
through the fused solver, the generic step, the sequential execution and the oracle, dropout included.

Bitwise where the model says so (``Model.batch_exact``: the logistic model, whose fused solver keeps each
run's own arithmetic, ``fl/models/fused_runs.py``; the quadratic), with one intra-op thread as the run
layer's workers compute (with more, a softmax's vectorised chunks fall at other rows of a wider batch).
Elsewhere (the CNN) kernels of another batch shape may sum in another order: float32 to 1e-5 (the
engine-vs-oracle tolerance of tests/test_neural.py)."""
from __future__ import annotations

import pandas as pd
import pytest
import torch

from replicate.core import settings
from replicate.core.errors import ReplicateError
from replicate.core.threads import threads
from replicate.fl.algorithms import FedAdam, FedAvg, FedProx, LocalUpdate, LocalWork, Scaffold, Stem, example
from replicate.fl.algorithms import ALGORITHMS as REGISTERED
from replicate.fl.engine import LocalObjective, RunSpec, run, run_batch
from replicate.fl.models import LogisticRegression
from replicate.fl.oracle import SEQUENTIAL
from replicate.fl.problems import SampleProblem
from replicate.fl.schedules import LRSchedule

from conftest import toy_dataset
from test_algorithms import Problem64, quadratic
from test_neural import cnn, image_dataset

TOL = {torch.float64: (1e-10, 1e-12), torch.float32: (1e-5, 1e-6)}


def logistic64():
    return Problem64(toy_dataset(small_clients=2), LogisticRegression(5, 3))


def logistic32():
    return SampleProblem(toy_dataset(small_clients=2), LogisticRegression(5, 3))


# (problem, [algorithm of each run], local work): runs differ in everything outside the client half
CASES = {
    "fedavg-scheme1": (logistic64, [FedAvg("scheme1", 4), FedAvg("scheme1", 6, server_lr=0.5), FedAvg("scheme1", 3)],
                       LocalWork(3, "steps", 8)),
    "fedavg-scheme2": (logistic64, [FedAvg("scheme2", 4), FedAvg("scheme2", 5), FedAvg("scheme2", 4)],
                       LocalWork(3, "steps", 8)),
    "fedavg-original": (logistic64, [FedAvg("original", 4)] * 3, LocalWork(2, "steps", 8)),
    "fedavg-transformed2": (logistic64, [FedAvg("transformed2", 4), FedAvg("transformed2", 6)] * 2,
                            LocalWork(2, "steps", 8)),
    "fedavg-stragglers": (logistic64, [FedAvg("weighted", 5, straggler_fraction=0.5), FedAvg("weighted", 4)],
                          LocalWork(3, "epochs", 16)),
    "fedavg-full-batch": (logistic64, [FedAvg("full")] * 3, LocalWork(2, "steps", None)),
    "fedprox-stragglers": (logistic64, [FedProx(0.1, 5, straggler_fraction=0.5), FedProx(0.3, 3, "proportional"),
                                        FedProx(0.1, 4, straggler_fraction=0.9, server_lr=0.7)],  # μ differs: a row each
                           LocalWork(3, "epochs", 16)),
    "fedprox-float32": (logistic32, [FedProx(0.2, 4, straggler_fraction=0.5), FedProx(0.05, 6)],
                        LocalWork(2, "epochs", 16)),
    "scaffold-II": (logistic64, [Scaffold(), Scaffold(4, server_lr=0.5), Scaffold(6)], LocalWork(3, "steps", 8)),
    "scaffold-I": (logistic64, [Scaffold(option="I"), Scaffold(5, server_lr=2.0, option="I")],
                   LocalWork(3, "steps", 8)),
    "stem": (logistic64, [Stem(0.5), Stem(4.0), Stem(0.5)], LocalWork(3, "steps", 8)),  # c differs: a row each
    "local-update": (logistic64, [LocalUpdate(0.5, momentum=0.9, nesterov=True, alpha=0.1),  # α differs: a row each
                                  LocalUpdate(1.0, clients_per_round=4, alpha=0.2), LocalUpdate(0.3, alpha=0.1)],
                     LocalWork(3, "steps", 8)),
    "fedadam": (logistic64, [FedAdam(5), FedAdam(4, server_lr=0.05, beta1=0.5)], LocalWork(2, "steps", 8)),
    "quadratic-fedavg": (quadratic, [FedAvg("full"), FedAvg("full", server_lr=0.5), FedAvg("scheme2", 2)],
                         LocalWork(4, "steps", None)),
    "cnn-dropout": (lambda: SampleProblem(image_dataset(), cnn()), [FedAvg("scheme2", 3), FedAvg("scheme2", 4)],
                    LocalWork(2, "epochs", 4)),
    "cnn-fedprox": (lambda: SampleProblem(image_dataset(), cnn()), [FedProx(0.1, 3), FedProx(0.5, 4)],
                    LocalWork(2, "epochs", 4)),  # the generic step with a μ per row
    # rounds of unequal length, run to run (``OWN_PACE``): off the fused solver, runs at their own pace stack rows
    # of other rounds and local steps (mini-batches and dropout noise each from its own round's step)
    "fedprox-own-pace": (logistic64, [FedProx(0.3, 3, "proportional"), FedProx(0.1, 4, straggler_fraction=0.9,
                                      server_lr=0.7), FedProx(0.1, 5, straggler_fraction=0.5)], LocalWork(3, "epochs", 16)),
    "cnn-dropout-own-pace": (lambda: SampleProblem(image_dataset(), cnn()), [FedAvg("weighted", 3, straggler_fraction=0.5),
                             FedAvg("weighted", 4, straggler_fraction=0.5)], LocalWork(3, "epochs", 4)),
}
OWN_PACE = ("fedprox-own-pace", "cnn-dropout-own-pace")
# and every registered algorithm without a case above, three runs of its registered example (new ones unedited)
CASES |= {f"{name}-example": (logistic64, [example(name)] * 3, LocalWork(3, "steps", 8))
          for name, cls in REGISTERED.items() if cls not in {type(a) for _, runs, _ in CASES.values() for a in runs}}
SCHEDULES = [LRSchedule("constant", 0.1), LRSchedule("inverse", 0.2, 1.0), LRSchedule("constant", 0.05)]


def specs(algorithms, rounds=(3, 2, 3, 3)):
    return [RunSpec(a, SCHEDULES[i % 3], seed=i + 1, rounds=rounds[i % 4]) for i, a in enumerate(algorithms)]


def assert_same(batched, alone, dtype, exact=False):
    if exact:
        for i, ((h_batch, w_batch), (h_alone, w_alone)) in enumerate(zip(batched, alone)):
            assert torch.equal(w_batch, w_alone), f"run {i}: {float((w_batch - w_alone).abs().max()):.3g} apart"
            pd.testing.assert_frame_equal(h_batch, h_alone, check_exact=True)
        return
    rtol, atol = TOL[dtype]
    for (h_batch, w_batch), (h_alone, w_alone) in zip(batched, alone):
        pd.testing.assert_frame_equal(h_batch, h_alone, rtol=rtol, atol=atol)
        torch.testing.assert_close(w_batch, w_alone, rtol=rtol, atol=atol)


# every case on every execution path, but the autograd oracle on the CNN (slow; tests/test_neural.py covers it);
# "unfused" (the generic step) at its own pace and in lockstep (``RunOptions.pace``)
PATHS = [(case, execution) for case in CASES for execution in ("stacked", "sequential", "unfused", "lockstep", "oracle")
         if not (case.startswith("cnn") and execution == "oracle")] + [(case, "static") for case in OWN_PACE]


@pytest.mark.parametrize("case, execution", PATHS)
def test_batched_runs_equal_runs_one_by_one(case, execution):
    build, algorithms, work = CASES[case]
    problem = build()
    kwargs = dict(objective=LocalObjective(weight_decay=1e-3, clip_norm=5.0), rounds=3, return_params=True)
    kwargs |= {"trainer": SEQUENTIAL} if execution == "oracle" else {"fused": False} if execution == "unfused" else (
        {"fused": False, "pace": "lockstep"} if execution == "lockstep" else {"execution": execution} | (
            {"fused": False} if execution == "static" else {}))  # static: the CUDA graphs' one shape a round
    runs = specs(algorithms)
    with threads(1):
        batched = run_batch(problem, runs, work, **kwargs)
        alone = [run(problem, s.algorithm, work, s.schedule, **(kwargs | {"seed": s.seed, "rounds": s.rounds}))
                 for s in runs]
    exact = getattr(getattr(problem, "model", None), "batch_exact", True)  # quadratic clients: exact too
    assert exact == (not case.startswith("cnn"))
    assert_same(batched, alone, problem.dtype, exact)
    finals = [tuple(w.tolist()) for _, w in batched]
    assert len(set(finals)) == len(finals)  # the runs really differ



def test_a_batch_takes_the_sequential_steps_its_runs_round_steps_count(monkeypatch):
    """The work model of the planner (``batching.round_steps``/``batch_steps``/``own_pace_steps``, issue #38 item 4)
    is what the engine does: a stacked round takes its busiest client's local steps, stragglers' shorter work
    included; in lockstep a batch's round lasts as long as its longest run's, at their own pace the batch as long
    as its longest run alone."""
    from replicate.fl import batching, local_steps

    problem, work = logistic64(), LocalWork(3, "epochs", 16)
    runs = specs([FedProx(0.1, 5, straggler_fraction=0.5), FedProx(0.3, 3, "proportional"),
                  FedProx(0.1, 4, straggler_fraction=0.9)])
    calls = []
    step = local_steps._step
    monkeypatch.setattr(local_steps, "_step", lambda *a, **k: calls.append(1) or step(*a, **k))
    lengths = [batching.round_steps(s.algorithm, problem.population(), work, s.seed, s.rounds) for s in runs]
    for spec, length in zip(runs, lengths):  # each run alone (the generic step: the fused solver steps inside)
        calls.clear()
        run(problem, spec.algorithm, work, spec.schedule, rounds=spec.rounds, seed=spec.seed, fused=False)
        assert len(calls) == int(length.sum()) > 0
    calls.clear()
    run_batch(problem, runs, work, rounds=3, fused=False, pace="lockstep")
    assert len(calls) == batching.batch_steps(lengths)
    for pace, count in (("lockstep", batching.batch_steps), ("own", batching.own_pace_steps)):
        calls.clear()
        run_batch(problem, runs[1:], work, rounds=3, fused=False, pace=pace)
        assert len(calls) == count(lengths[1:])
    assert batching.own_pace_steps(lengths[1:]) < batching.batch_steps(lengths[1:])
    for name in OWN_PACE:  # the cases that test their runs' rows at other rounds and steps really have them
        build, algorithms, case_work = CASES[name]
        case = build()
        counted = [batching.round_steps(s.algorithm, case.population(), case_work, s.seed, s.rounds)
                   for s in specs(algorithms)]
        assert batching.own_pace_steps(counted) < batching.batch_steps(counted), name
    stem = [RunSpec(Stem(c), SCHEDULES[0], seed=i + 1, rounds=3) for i, c in enumerate((0.5, 4.0))]
    calls.clear()  # an algorithm that reads the round's warm-up flag keeps its batches in step whatever is asked
    run_batch(problem, stem, LocalWork(3, "epochs", 16), rounds=3, fused=False, pace="own")
    assert len(calls) == batching.batch_steps([batching.round_steps(s.algorithm, problem.population(),
                                                                    LocalWork(3, "epochs", 16), s.seed, 3) for s in stem])
    assert len({tuple(t.tolist()) for t in lengths}) == 3  # other seeds, other laws, other stragglers: other rounds
    two = lengths[1:]
    assert batching.own_pace_steps(two) == max(int(t.sum()) for t in two) < batching.batch_steps(two) < sum(
        int(t.sum()) for t in two)  # at its own round boundaries a batch would last as long as its longest run
    same_seed = [batching.round_steps(FedProx(mu, 5), problem.population(), work, 7, 3) for mu in (0.1, 0.5)]
    assert batching.batch_steps(same_seed) == int(same_seed[0].sum())  # one seed: the clients of one run
    assert batching.own_pace_steps(same_seed) == batching.batch_steps(same_seed)  # so nothing to save there

def test_a_stopped_run_leaves_the_batch_and_the_others_go_on():
    problem = logistic64()
    work, algorithms = LocalWork(2, "steps", 8), [FedAvg("scheme2", 4)] * 3
    runs = [RunSpec(a, SCHEDULES[0], seed=i, rounds=6) for i, a in enumerate(algorithms)]
    reference = run(problem, algorithms[0], work, SCHEDULES[0], rounds=6, seed=0)
    target = float(reference["train_loss"].iloc[2])  # run 0 reaches it at round 2
    runs[0] = RunSpec(algorithms[0], SCHEDULES[0], seed=0, rounds=6, stop=lambda row: row["train_loss"] <= target)
    batched = run_batch(problem, runs, work, rounds=6)
    assert batched[0]["round"].tolist() == [0, 1, 2]
    for spec, history in zip(runs[1:], batched[1:]):
        pd.testing.assert_frame_equal(history, run(problem, spec.algorithm, work, spec.schedule, rounds=6,
                                                   seed=spec.seed), rtol=1e-10, atol=1e-12)


def test_runs_with_other_client_settings_are_refused_before_any_compute():
    problem = logistic64()
    runs = [RunSpec(FedProx(0.0), SCHEDULES[0]), RunSpec(FedProx(0.2), SCHEDULES[0])]  # no proximal term vs one
    with pytest.raises(ReplicateError, match="client settings"):
        run_batch(problem, runs, LocalWork(2, "steps", 8), rounds=2)
    runs = [RunSpec(LocalUpdate(a=(1.0, 0.5)), SCHEDULES[0]), RunSpec(LocalUpdate(a=(0.5, 1.0)), SCHEDULES[0])]
    with pytest.raises(ReplicateError, match="client settings"):
        run_batch(problem, runs, LocalWork(2, "steps", 8), rounds=2)
    with pytest.raises(ReplicateError, match="client settings"):
        run_batch(problem, [RunSpec(FedAvg(), SCHEDULES[0]), RunSpec(FedAdam(), SCHEDULES[0])],
                  LocalWork(2, "steps", 8), rounds=2)


# ---------------------------------------------------------------- the run layer: sweeps batch by themselves

def _sweep():
    from replicate.runs.config import RunConfig

    base = RunConfig(dataset="synthetic(1,1)", num_clients=12, algorithm=FedProx(0.1, 4), local_steps=None,
                     local_epochs=2, batch_size=10, client_lr=0.05, rounds=3)
    return [base.replace(seed=s, client_lr=lr) for s in (0, 1) for lr in (0.05, 0.1)] + \
        [base.with_algorithm(prox_mu=1.0),  # another μ: a row each, the same batch
         base.with_algorithm(prox_mu=0.0)]  # no proximal term: another batch


def test_a_sweep_is_grouped_by_what_runs_share(monkeypatch):
    from replicate.runs import batched
    from replicate.runs.pool import Job

    jobs = [Job(c) for c in _sweep()]
    monkeypatch.delenv("REPLICATE_BATCH_RUNS", raising=False)
    assert [len(b) for b in batched.group(jobs)] == [5, 1]  # logistic runs batch by default: bitwise as alone
    assert [len(b) for b in batched.group(jobs, max_runs=16)] == [5, 1]
    assert [len(b) for b in batched.group(jobs, max_runs=3)] == [3, 2, 1]
    assert [len(b) for b in batched.group(jobs, workers=4, max_runs=16)] == [2, 2, 1, 1]  # ⌈6/4⌉: every worker busy
    monkeypatch.setenv("REPLICATE_BATCH_RUNS", "1")
    assert [len(b) for b in batched.group(jobs)] == [1] * 6  # asked for one by one
    monkeypatch.delenv("REPLICATE_BATCH_RUNS")
    neural = [Job(c.replace(model="mlp")) for c in _sweep()]
    assert [len(b) for b in batched.group(neural)] == [1] * 6  # on a CPU: not bitwise, and slower batched
    monkeypatch.setattr(batched.run_config, "run_device", lambda: torch.device("cuda"))
    assert [len(b) for b in batched.group(neural)] == [5, 1]  # on CUDA every model batches (the GPU hour)
    pieces = batched.group(neural, max_runs=3)  # a cut group: runs of one seed share clients, so a piece each
    assert [[job.config.seed for job in piece] for piece in pieces] == [[0, 0, 0], [1, 1], [0]]
    order = [(job.config.client_lr, job.config.algorithm.prox_mu) for job in batched.group(jobs)[0]]
    assert order == sorted(order)  # runs of one rate and μ side by side: one GEMM slice in the fused solver


def test_a_batched_sweep_caches_each_run_as_computed_alone(tmp_path, monkeypatch):
    """The run layer's default batches the five proximal logistic runs (two μ); each cache entry equals,
    bitwise, the run computed alone (as a worker computes it, one thread), and its sidecar records the batch."""
    import json

    from replicate.runs import cache, pool

    configs = _sweep()
    monkeypatch.delenv("REPLICATE_BATCH_RUNS", raising=False)
    log = cache.RunLog(progress_file=None, display=False)
    pool.compute([(c,) for c in configs], workers=1, progress=False, log=log)
    assert log.computed == 5  # the batch of five; the μ = 0 run alone is computed when read
    batched_runs = [cache.load(c) for c in configs[:5]]
    assert all(json.loads((settings.current().cache / "runs" / f"{cache.entry(c)}.json").read_text())["batch"] == 5
               for c in configs[:5])
    monkeypatch.setenv("REPLICATE_BUILD", str(tmp_path / "alone"))
    monkeypatch.setenv("REPLICATE_BATCH_RUNS", "1")
    log = cache.RunLog(progress_file=None, display=False)
    pool.compute([(c,) for c in configs], workers=1, progress=False, log=log)
    assert log.computed == 0  # one by one: each computed when read
    with threads(1):
        for config, history in zip(configs[:5], batched_runs):
            pd.testing.assert_frame_equal(history, cache.run(config, progress=False), check_exact=True)


def test_wide_logistic_runs_batch_bitwise_whatever_their_rows_alignment():
    """60 features (a product past ATen's small-matrix path, into the BLAS), 5 clients a run: in the stack every
    other run starts off a 16-byte boundary, where MKL on an AVX2 CPU rounds the logits product otherwise
    (docs/engine.md (4)); each run still computes bitwise what it computes alone. On a CPU, runs whose step is
    not the fused plain SGD (SCAFFOLD here) are not batched by default: their generic GEMM has no such care."""

    from replicate.core.threads import threads
    from replicate.fl.algorithms import Scaffold
    from replicate.runs import batched, cache
    from replicate.runs.config import RunConfig

    base = RunConfig(dataset="synthetic(1,1)", num_clients=30, rounds=4, local_steps=5, batch_size=10,
                     algorithm=FedAvg("scheme1", 5))
    configs = [base.replace(seed=s, client_lr=lr) for s in (0, 1) for lr in (0.05, 0.1)]
    with threads(1):
        together = batched.compute([(c, None, None) for c in configs], "cpu")
        for config, (text, meta) in zip(configs, together):
            assert cache.compute(config)[1] == text and meta["batch"] == 4
    assert batched.default_runs(base) == batched.MAX_RUNS
    assert batched.default_runs(base.replace(algorithm=Scaffold(5))) == 1
    assert batched.default_runs(base.replace(model="mlp")) == 1


def test_the_run_layer_reaches_the_engine_by_one_route(monkeypatch):
    """Issue #41 item 4: a run computed alone (``cache.compute``) and a batch of one (``batched.compute``) are one
    route, ``cache.train`` → ``engine.run_batch``: the same CSV text and sidecar fields, and neither calls
    ``engine.run`` (the second route it was)."""
    from replicate.fl import engine
    from replicate.runs import batched, cache

    config = _sweep()[0]
    monkeypatch.setattr(engine, "run", lambda *a, **k: pytest.fail("engine.run: a second route"))
    with threads(1):
        _, text, meta = cache.compute(config)
        (text_b, meta_b), = batched.compute([(config, None, None)], "cpu")
    assert text == text_b
    drop = ("elapsed_s",)
    assert {k: v for k, v in meta.items() if k not in drop} == {k: v for k, v in meta_b.items() if k not in drop}


def test_a_run_computes_the_same_numbers_whatever_threads_its_caller_uses():
    """A CPU's reductions split across intra-op threads round differently (an MLP differs at 1 vs 2 threads
    from round 1: this one by 2.6e-9 after 2 rounds when
    engine.run_batch used its caller's threads), and a run's cache key names no thread count: every run computes with one thread, whoever
    computes it (this process at 2 threads, a single-threaded worker, batched or alone: ``cache.train``)."""
    from replicate.runs import cache

    config = _sweep()[0].replace(model="mlp", rounds=2)
    texts = []
    for count in (2, 1):  # a batch of runs takes the same route (the test above)
        with threads(count):
            texts.append(cache.compute(config)[1])
    assert texts[0] == texts[1]


def test_the_bench_times_both_paces_beside_their_sequential_steps():
    """``bench --sections pace`` (measured on a GPU; timings recorded, not asserted): a batch of runs whose
    rounds differ in length, timed in lockstep and at its own pace beside each pace's steps as ``fl.batching``
    counts them. Here the LSTM 8 units wide, two runs of two rounds."""
    from replicate.cli import bench_pace
    from replicate.fl import batching

    with threads(1):
        rows = bench_pace.run(device="cpu", runs=2, rounds=2, hidden=8)
    problem = bench_pace.shaped_problem(torch.device("cpu"), hidden=8)
    algorithm = FedProx(0.001, 10, sampling="uniform")
    lengths = [batching.round_steps(algorithm, problem.population(), bench_pace.WORK, seed, 2) for seed in range(2)]
    assert [(r["pace"], r["steps"]) for r in rows] == [("lockstep", batching.batch_steps(lengths)),
                                                       ("own", batching.own_pace_steps(lengths))]
    assert rows[1]["steps"] < rows[0]["steps"] and all(r["seconds"] > 0 for r in rows)
    text = bench_pace.table(rows)
    assert "2 runs × 2 rounds as one batch, 40 unequal clients" in text and "| own |" in text


@pytest.mark.parametrize("read", [lambda ctx: int(ctx.step), lambda ctx: 2 if ctx.step == 0 else 1,
                                  lambda ctx: float(ctx.round)], ids=["int(step)", "step == 0", "float(round)"])
def test_an_algorithm_that_reads_the_local_step_without_declaring_lockstep_fails_loudly(read):
    """At their own pace a stack holds rows at other rounds and local steps: ``RoundContext.step`` and ``.round``
    are then no number (``protocol.APART``), and an algorithm that reads one undeclared is told to declare
    ``lockstep``; declared, its batches keep in step and equal its runs alone."""
    import dataclasses

    @dataclasses.dataclass(frozen=True)
    class ReadsStep(FedProx):  # FedProx whose step shrinks with the local step or the round
        def client_step(self, state, grad, ctx):
            state = super().client_step(state, grad, ctx)
            state["w"].mul_(1.0 - 1e-3 / (1 + read(ctx)))
            return state

    @dataclasses.dataclass(frozen=True)
    class Declared(ReadsStep):
        lockstep = True

    build, algorithms, work = CASES["fedprox-own-pace"]
    def runs(cls):
        return [RunSpec(cls(**dataclasses.asdict(a)), s.schedule, s.seed, s.rounds)
                for a, s in zip(algorithms, specs(algorithms))]

    with pytest.raises(ReplicateError, match="declare `lockstep = True`"):
        run_batch(build(), runs(ReadsStep), work, rounds=3)
    with threads(1):
        batched = run_batch(build(), runs(Declared), work, rounds=3, return_params=True)
        alone = [run(build(), s.algorithm, work, s.schedule, rounds=s.rounds, seed=s.seed, return_params=True)
                 for s in runs(Declared)]
    assert_same(batched, alone, torch.float64, exact=True)


def test_the_progress_bar_follows_the_runs_still_training(monkeypatch):
    """The bar shows the round every run still training has reached, so it ends at the longest run's last round
    even where a shorter run, or one its stop hook ended, finished first."""
    from replicate.fl import engine

    bars = []

    class Bar:
        def __init__(self, total, **_):
            self.total, self.n = total, 0
            bars.append(self)

        def update(self, k=1):
            self.n += k

        def close(self):
            pass

    monkeypatch.setattr(engine, "tqdm", Bar)
    problem, work = logistic64(), LocalWork(3, "epochs", 16)
    runs = specs([FedProx(0.1, 5), FedProx(0.3, 3), FedProx(0.1, 4)], rounds=(7, 5, 3))
    runs[1] = RunSpec(runs[1].algorithm, runs[1].schedule, runs[1].seed, runs[1].rounds, stop=lambda row: row["round"] == 2)
    for pace in ("own", "lockstep"):
        run_batch(problem, runs, work, rounds=7, fused=False, pace=pace)
        assert (bars[-1].n, bars[-1].total) == (7, 7), pace
