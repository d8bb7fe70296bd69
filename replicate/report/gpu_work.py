"""REPLICATION.md's two tables of the GPU-scale figures: what each paper profile costs, and what is left.

Both render ``figures/gpu_work.json`` (the report reads it and never imports experiments): its ``rows`` are
``experiments.work``'s enumeration of each figure's paper-profile runs, its ``estimate`` is
``experiments.estimate``'s done / left against the committed run ledger.
"""
from __future__ import annotations


def cell(text: str) -> str:
    """A markdown table cell: pipes escaped, one line."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def _steps(n: float) -> str:
    return f"{n:,.0f}" if n < 1e6 else f"{n / 1e6:,.1f} M"


def work_of(rows: list[dict]) -> str:
    """A coverage row's sentence: the work of its paper profile (its rows of the GPU-scale work table)."""
    parts = [f"{r['runs']} runs, {_steps(r['sequential_steps'])} sequential local steps "
             f"({_steps(r['own_pace_steps'])} batched as on one GPU)"
             + (f" ({r['figure'].split(',')[0]})" if len(rows) > 1 else "") for r in rows]
    return "paper-profile work: " + "; ".join(parts) + " (GPU-scale work table below)"


def _epochs(row: dict) -> str:
    """One epoch in steps per dataset: the clients' mean / the busiest sampled client's."""
    busiest = row["round_epoch_steps"]
    return "; ".join(f"{name}: {mean:g} / {busiest[name]:g}" for name, mean in row["epoch_steps"].items())


WORK_TEXT = (
    "Enumerated from each figure's config at the paper profile without running anything "
    "(`replicate/experiments/work.py`; `python -m replicate report --work` refreshes `figures/gpu_work.json`): "
    "every distinct run, the tuning grid on the tuning seeds plus the final runs on the other seeds (a final run "
    "on a tuning seed is a tuning run). *Local steps* are sequential, counted exactly without training: a "
    "round's clients step together when stacked, so a round takes as many steps as its busiest sampled client "
    "(`runs.batched.round_steps`, from the algorithm's own sampling and stragglers and the clients' sizes). "
    "*In lockstep*: the runs trained in batches of at most 8, cut for 2 workers (`--batch-runs 8 --workers 2`; "
    "`experiments.work.BATCHING`), each round as long as its batch's longest run's; *at their own pace*: the "
    "same batches, each run beginning its next round as soon as its own clients finish (the engine's own pace, "
    "`fl.batching.own_pace_steps`: a batch lasts as long as its longest run alone), in lockstep for STEM, whose "
    "client step reads the warm-up round (`protocol.own_pace`). *Epoch in steps*: the mean over the training "
    "clients of ⌈n_k/b⌉, and the busiest sampled client's per round (the figure's steps over its rounds × "
    "epochs; what the estimate prices). *Ops per step*: top-level ATen ops of one stacked plain-SGD local step "
    "(`fl/models/opcount.py`; counted at narrowed widths and the data's own sequence length; STEM evaluates two "
    "gradients a step, about twice these). *Measured cost*: where the model's step was timed, and the seconds a "
    "run took as its records hold them: the CPU-scale figures' claims records and the GPU runs in the committed "
    "ledger; nothing in this table is projected. *Runs* are split into those before the rates are chosen (the "
    "grids on the tuning seeds, and FedProx's μ = 0 on every seed) and after. A row counts its figure alone: "
    "figures share runs where their configs coincide (FedProx Figure 4 is Figure 3's runs, STEM Figure 3 holds "
    "Figure 2's, Figure 12's seed-0 runs are among Figure 13's tuning runs), so rows do not add up.")


def work_table(rows: list[dict]) -> list[str]:
    """The GPU-scale work table (``rows``)."""
    lines = ["### GPU-scale work: what the paper profile of each GPU-scale figure costs", "", WORK_TEXT, "",
             "| item | figure (panels) | runs (before + after the choice) | rounds | local steps per run | sequential "
             "local steps (figure): alone / in lockstep / at their own pace | epoch in steps: mean ⌈n_k/b⌉ / "
             "busiest sampled client | ops per local step | measured cost (source) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lo, hi = r["steps_per_run"]
        lines.append(
            f"| {r['paper']} {r['item']} | {cell(r['figure'])} | {r['runs']} ({r['tuning_runs']} + "
            f"{r['final_runs']}) | {', '.join(f'{n:,}' for n in r['rounds'])} | "
            f"{_steps(lo) if lo == hi else _steps(lo) + '-' + _steps(hi)} | {_steps(r['sequential_steps'])} / "
            f"{_steps(r['batched_steps'])} / {_steps(r['own_pace_steps'])} | "
            f"{cell(_epochs(r) or '— (fixed I steps)')} | "
            f"{cell('; '.join(f'{k}: {v}' for k, v in r['ops_per_step'].items()))} | {cell(r['measured'])} |")
    return lines + [""]


def estimate_table(estimate: dict) -> list[str]:
    """Done / left of every GPU-scale figure against the committed ledger (``estimate``)."""
    lines = ["### GPU-scale work left: runs in the committed ledger, and an estimate of the rest", "",
             "Runs computed on a GPU are committed in `figures/ledger/` "
             f"({estimate['ledger_runs']} runs on {estimate['device']}); `python -m replicate figures --estimate` "
             "prints this table from it. Tuning runs are counted by key; a final run (its rates chosen by the "
             "tuning) when the ledger holds its config with any rates. Minutes are wall minutes of one GPU at the "
             f"concurrency measured on the ledger's runs ({estimate['concurrency']:g} run-seconds per second); "
             "*left* rests on the ledger's own timings of that model, else (†) on a bench timing or the larger of "
             "op counts and FLOPs (a lower bound per step), or (‡), wholly or in part, on the op counts of the "
             "LSTMs, whose step the GPU replays from a CUDA graph, which removes the host dispatch per op the model "
             "counts: an estimate, likely high, not a bound, until the graphed step is timed. Every run is counted "
             "to its horizon, though a tuning run that diverges stops where its model turns NaN (the STEM Figure 5 "
             "grid's 68 pairs computed 5 % of their rounds). A run shared by two figures is counted in both rows, "
             f"once in the total: **{estimate['left_min'] / 60:,.1f} GPU-hours left**"
             + (f", {estimate['graphed_min'] / 60:,.1f} of them ‡" if estimate.get("graphed_min") else "")
             + ". *A round*: minutes of one round of the figure's shortest-round run left, alone: a run saves its "
             "progress at round boundaries only, so a time-limited job (`--time-budget`, a SLURM limit) shorter "
             "than that keeps nothing of it.", "",
             "| figure [panels] | tuning runs | final runs | minutes spent | minutes left | a round (min) |",
             "|---|---|---|---|---|---|"]
    for r in estimate["rows"]:
        done = r["left_min"] == 0 and r["tuning"][0] == r["tuning"][1] and r["final"][0] == r["final"][1]
        mark = "" if r["measured"] else " ‡" if r.get("graphed") else " †"
        left = "done" if done else f"{r['left_min']:,.1f}{mark}"
        lines.append(f"| {r['figure']} | {r['tuning'][0]} / {r['tuning'][1]} | {r['final'][0]} / {r['final'][1]} | "
                     f"{r['spent_min']:,.1f} | {left} | {'' if done else format(r.get('round_min', 0.0), ',.2f')} |")
    return lines + [""]


__all__ = ["WORK_TEXT", "cell", "estimate_table", "work_of", "work_table"]
