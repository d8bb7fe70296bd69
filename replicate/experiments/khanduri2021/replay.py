"""GPU runs of STEM Figure 5 replayed on a CPU: does the divergence found on the GPU happen here too?

Every STEM run of Figure 5's paper profile diverged on an H200 (REPLICATION.md, STEM Figure 5). A run
computed on another device is expected to agree within float tolerance for a while and then drift (the
same cross-device drift ``--check`` states for Li et al.'s Figure 4), so "the CPU reproduces it" is a
measurement, not an assumption: ``replay`` recomputes a ledger run's first rounds on this machine (a short run
is the first rounds of the full run: nothing a run computes depends on its total rounds) and compares the
two histories evaluation by evaluation. ``write`` stores the comparisons in ``FILE``; the report renders the
STEM Figure 5 row's sentence from it (``report.facts.stem_fig5``).

    python -m replicate.experiments.khanduri2021.replay   # the two runs below, ≈ 15 min of one core here
"""
from __future__ import annotations

import io
import json
import math
import sys
from dataclasses import replace

import pandas as pd

from replicate.core import paths
from replicate.core.fileio import atomic_write_text

FILE = "khanduri2021/fig5.cpu_replay.json"
AGREE = 1e-2  # relative difference of the training loss within which two evaluations "agree"
# The ledger runs replayed: STEM's finals at the grid's first pair (κ̄ = 0.01, c = 1), seed 0, at I = 100 and
# I = 10, each a few rounds past the evaluation where the GPU run first recorded NaN (round 3 and 36).
RUNS = {"029ad3f1b5fce1e63596": 5, "31eaad6013cf6ad0f7d8": 72}


def _first_nan(history: pd.DataFrame) -> int | None:
    bad = history[~history.train_loss.map(math.isfinite)]
    return None if bad.empty else int(bad["round"].iloc[0])


def replay(name: str, rounds: int, device: str = "cpu") -> dict:
    """Recompute ledger run ``name``'s first ``rounds`` rounds on ``device`` and compare with its GPU history."""
    from replicate.runs import cache, ledger
    from replicate.runs.config import RunConfig

    _, data = ledger.entries()[name]
    meta = json.loads(data[".json"])
    config = RunConfig.from_dict(meta)
    gpu = pd.read_csv(io.BytesIO(data[".csv"]))
    here, _, sidecar = cache.compute(replace(config, rounds=rounds), device=device)
    both = here[["round", "train_loss"]].merge(gpu[["round", "train_loss"]], on="round", suffixes=("_here", "_gpu"))
    finite = both[both.train_loss_here.map(math.isfinite) & both.train_loss_gpu.map(math.isfinite)]
    close = (finite.train_loss_here - finite.train_loss_gpu).abs() <= AGREE * finite.train_loss_gpu.abs()
    apart = finite[~close]
    return {"entry": name, "local_steps": config.local_steps, "seed": config.seed, "client_lr": config.client_lr,
            "momentum_c": config.algorithm.momentum_c, "rounds_replayed": rounds,
            "gpu": {"device": meta.get("device"), "machine": meta.get("machine") or ", ".join(sorted(
                {m for piece in ledger.index() for m in piece.get("machines", ())})), "first_nan": _first_nan(gpu)},
            "here": {"device": device, "machine": sidecar.get("machine"), "first_nan": _first_nan(here)},
            "agree_until": int((finite if apart.empty else finite[finite["round"] < apart["round"].iloc[0]])
                               ["round"].max()) if not finite.empty else None,
            "rows": [{"round": int(r), "here": float(h), "gpu": float(g)}
                     for r, h, g in both[["round", "train_loss_here", "train_loss_gpu"]].itertuples(index=False)]}


def write(runs: dict = RUNS, root=None) -> list[dict]:
    out = [replay(name, rounds) for name, rounds in runs.items()]
    text = json.dumps({"generated_by": "python -m replicate.experiments.khanduri2021.replay", "agree": AGREE,
                       "runs": out}, indent=1)
    atomic_write_text((root or paths.figures_dir()) / FILE, text + "\n")
    return out


if __name__ == "__main__":
    for run in write():
        print(json.dumps({k: v for k, v in run.items() if k != "rows"}), file=sys.stdout)
