"""Runs of a batch at their own pace against lockstep, on FedProx's Shakespeare LSTM.

LEAF Shakespeare's clients are very unequal (an epoch is 322 steps of b = 10 on the mean client, ≈ 1,500 on a
round's busiest), so a stacked round lasts as long as its busiest client, and in lockstep a batch's round as long
as its runs' busiest. The workload has that shape without the data (a machine without it times the same; a step's
time does not depend on which characters the windows hold): the FedProx model (80 characters, embed 8,
2 × 256) over 40 clients of random 80-character windows, their sizes drawn once from a lognormal law with the
mean and spread of LEAF Shakespeare's scaled down 40× (a mean of 8 steps an epoch); FedProx (μ = 0.001), 10
uniformly sampled clients a round, one epoch of b = 10, four runs of four seeds trained as one batch, training
only. Each pace is timed beside its sequential local steps (``fl.batching``: lockstep's per-round maxima summed,
own pace's longest run alone), on the execution runs use on this device (``engine.preferred_execution``: on a CPU
the LSTM's client loop, whose cost is every client's steps whatever the pace; on CUDA the static stack, whose
cost is its sequential steps)."""
from __future__ import annotations

import statistics
import time

import torch

from replicate.fl import batching, engine, models, problems
from replicate.fl.algorithms import FedProx, LocalWork
from replicate.fl.schedules import LRSchedule

RUNS, CLIENTS, ROUNDS = 4, 40, 3
WORK = LocalWork(1, "epochs", 10)


def shaped_problem(device, clients: int = CLIENTS, hidden: int = 256) -> problems.SampleProblem:
    """The FedProx Shakespeare model (``hidden`` units a layer) on ``clients`` clients of unequal sizes (module
    docstring)."""
    from replicate.data.federated import FederatedDataset, Split

    g = torch.Generator().manual_seed(0)
    # LEAF Shakespeare: clients of 3,224 windows on average, a round's largest ≈ 5× its mean; 1/40 of that
    sizes = (torch.randn(clients, generator=g, dtype=torch.float64) + 3.88).exp().round().clamp(10, 800).long()
    offsets = torch.cat([torch.zeros(1, dtype=torch.long), sizes.cumsum(0)])
    total = int(offsets[-1])
    x, y = torch.randint(0, 80, (total, 80), generator=g), torch.randint(0, 80, (total,), generator=g)
    model = models.CharLSTM(80, **{**models._LSTM_PRESETS["char_lstm"], "hidden": hidden})
    return problems.SampleProblem(FederatedDataset("shakespeare-unequal", Split(x=x, y=y, offsets=offsets), None, 80),
                                  model, device=device)


def run(device=None, repeats: int | None = None, runs: int = RUNS, rounds: int = ROUNDS, **shape) -> list[dict]:
    """One row per pace: the batch's seconds (median of ``repeats`` after a warm-up, the paces interleaved;
    default 3 on CUDA, 1 on a CPU, where a batch takes a minute) and its sequential local steps. ``shape``:
    ``shaped_problem``'s (a test's smaller workload)."""
    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    repeats = repeats or (3 if device.type == "cuda" else 1)
    problem = shaped_problem(device, **shape)
    algorithm = FedProx(0.001, 10, sampling="uniform")
    specs = [engine.RunSpec(algorithm, LRSchedule("constant", 0.8), seed=seed) for seed in range(runs)]
    lengths = [batching.round_steps(algorithm, problem.population(), WORK, seed, rounds) for seed in range(runs)]
    execution = engine.preferred_execution(problem)
    paces = {"lockstep": batching.batch_steps(lengths), "own": batching.own_pace_steps(lengths)}
    times = {pace: [] for pace in paces}
    for repeat in range(repeats + 1):  # the first repeat warms up (and captures graphs) and is discarded
        for pace in paces:
            start = time.perf_counter()
            engine.run_batch(problem, specs, WORK, rounds=rounds, eval_every=None, execution=execution, pace=pace)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            if repeat:
                times[pace].append(time.perf_counter() - start)
    alone = sum(int(t.sum()) for t in lengths)
    return [{"pace": pace, "execution": execution, "steps": steps, "alone": alone, "runs": runs, "rounds": rounds,
             "clients": problem.num_clients, "seconds": statistics.median(times[pace])}
            for pace, steps in paces.items()]


def table(results: list[dict]) -> str:
    lock = next(r["seconds"] for r in results if r["pace"] == "lockstep")
    rows = [f"| {r['pace']} | {r['execution']} | {r['steps']:,} (runs one by one: {r['alone']:,}) | "
            f"{r['seconds']:.2f} | {lock / r['seconds']:.2f}× |" for r in results]
    first = results[0]
    return "\n".join([f"{first['runs']} runs × {first['rounds']} rounds as one batch, {first['clients']} unequal "
                      "clients (module docstring):", "",
                      "| pace | execution | sequential local steps | s a batch | vs lockstep |",
                      "|---|---|---:|---:|---:|", *rows])
