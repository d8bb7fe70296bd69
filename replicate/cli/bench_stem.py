"""STEM on CIFAR-10 (Khanduri et al.'s Figures 2 and 3, skipped when neither CIFAR-10 copy is
staged): the LeNet-5 over all 100 workers, (b, I) = (8, 61) and (64, 7), one intra-op thread (as the
figures' runs use), the engine stacked and its client loop. A regular round (two gradients per local
step) is timed as a 2-round run less the 1-round run (the warm-up round: STEM's initial batch B = b·I),
once, in wall and in CPU seconds (what an idle core takes where the machine is shared); evaluation excluded.
"""
from __future__ import annotations

import time

import torch

from replicate.cli.bench import _markdown, _timed
from replicate.core.errors import ReplicateError
from replicate.core.threads import threads
from replicate.fl import engine
from replicate.fl.algorithms import Stem
from replicate.runs.config import RunConfig, build, run_device


def _stem_cifar(batch_size: int, local_updates: int) -> RunConfig:
    from replicate.data.shards import cifar10_stem_name

    return RunConfig(dataset=cifar10_stem_name("moderate"), model="lenet5", algorithm=Stem(momentum_c=10.0),
                     local_steps=local_updates, batch_size=batch_size, client_lr=0.1, lr_schedule="epoch_cube_root",
                     lr_decay=batch_size * local_updates / 490, weight_decay=0.0, clip_norm=None)


STEM_WORKLOADS = {"STEM CIFAR-10 LeNet-5, K=100, b=8, I=61 (Fig. 2)": (8, 61),
                  "STEM CIFAR-10 LeNet-5, K=100, b=64, I=7 (Fig. 3)": (64, 7)}


def run(device=None) -> list[dict]:
    """One row per STEM CIFAR-10 workload: seconds of a regular round stacked and in the client loop,
    and of the warm-up round (stacked), with one intra-op thread."""
    device = torch.device(device) if device else run_device()
    results = []
    with threads(1):
        for name, (b, i) in STEM_WORKLOADS.items():
            config = _stem_cifar(b, i)
            try:
                problem, algorithm, work, schedule, objective = build(config, device=device)
            except ReplicateError as exc:
                print(f"skipping {name}: {exc}")
                continue
            row = {"workload": name, "dataset": config.dataset}
            for solver in ("stacked", "sequential"):
                wall, cpu = [], []
                for rounds in (1, 2):
                    start, start_cpu = time.perf_counter(), time.process_time()
                    engine.run(problem, algorithm, work, schedule, objective=objective, rounds=rounds, seed=0,
                               eval_every=None, execution=solver)
                    if device.type == "cuda":
                        torch.cuda.synchronize()
                    wall.append(time.perf_counter() - start)
                    cpu.append(time.process_time() - start_cpu)
                row[solver], row[f"{solver}_warmup"] = wall[1] - wall[0], wall[0]
                _timed(name, solver, row[solver])
                row[f"{solver}_cpu"] = cpu[1] - cpu[0]
            row["stacked_gain"] = row["sequential"] / row["stacked"]
            results.append(row)
    return results


def table(results: list[dict]) -> str:
    """Wall seconds, and the process's CPU seconds beside them: on a shared machine the CPU time is what
    one idle core would take."""
    return _markdown(["workload", "data", "stacked s/round (CPU s)", "client loop s/round (CPU s)",
                      "warm-up round (stacked) s", "stacked vs client loop (CPU)"],
                     [[r["workload"], r["dataset"], f"{r['stacked']:.1f} ({r['stacked_cpu']:.1f})",
                       f"{r['sequential']:.1f} ({r['sequential_cpu']:.1f})", f"{r['stacked_warmup']:.1f}",
                       f"{r['sequential_cpu'] / r['stacked_cpu']:.2f}×"] for r in results])
