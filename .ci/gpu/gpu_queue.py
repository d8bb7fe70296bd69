"""This project's own GPU queue: what a short borrowed GPU session computes next, and its checkpoints carried.

Not part of the package: a user with a GPU runs `make figures` or `figures NAME --profile paper`, and
`python -m replicate figures --estimate` tells them what each GPU-scale figure still costs. This project
borrows GPU time in short sessions (minutes, on a machine that keeps nothing, reached by carrying a few
files), so it needs an order, a cut of that order to a session's minutes, and the runs a session cut off
carried to the next one. `.ci/device-check` calls it:

    python .ci/gpu/gpu_queue.py plan --time-budget 10m             # what the next session computes, and why
    python .ci/gpu/gpu_queue.py commands --time-budget 10m         # the figure commands of its queue, one a line
    python .ci/gpu/gpu_queue.py checkpoints-out DIR                # the cut-off runs' checkpoints, packed
    python .ci/gpu/gpu_queue.py checkpoints-in PACK...             # unpacked into this cache, each member checked

The order (``PRIORITY``): STEM Figures 5 and 2–4 first (their runs are minutes each), then Charles &
Konečný's Figure 12 on FEMNIST, FedProx's Sent140 panels, Figure 13, FedProx's Shakespeare panels, Figure 6.
The sessions train on the labelled offline stand-ins (``work.SOURCE``): the official EMNIST-62, Sentiment140
+ GloVe and CIFAR-10 batches are too large to carry.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from replicate.core.errors import ReplicateError  # noqa: E402

CARRIED = ROOT / ".carry" / "checkpoints"  # the last session's packs, carried to the next by .ci/device-bundle
PRIORITY = ("khanduri2021/fig5", "khanduri2021/fig2", "khanduri2021/fig3", "khanduri2021/fig4",
            "charles2021/fig12 [femnist]", "fedprox2020/fig2 [sent140]", "fedprox2020/fig3 [sent140]",
            "fedprox2020/stragglers [sent140]", "charles2021/fig13", "fedprox2020/fig2 [shakespeare]",
            "fedprox2020/fig3 [shakespeare]", "fedprox2020/stragglers [shakespeare]", "charles2021/fig6")
# After STEM's units: STEM Figure 5's paper profile under the second grid (spec §6.7, docs/stem_grid.md), which
# the estimate does not track (a grid beside the figure's default). Its runs come back in the session's export, and
# the ledger then serves them; `--set out_dir=figures/modified/second_grid` publishes it on the CPU machine.
AFTER_STEM = ("python -m replicate figures khanduri2021/fig5 --profile paper --set stem_momentum=a0 "
              "--set out_dir=build/second_grid",)


def command(unit) -> str:
    """The notebook command that computes ``unit``'s runs, on the stand-ins as ``work`` counts them."""
    from replicate.experiments import catalog, knobs, work

    overrides = unit.overrides()
    if "data_source" in knobs.names(catalog.config_class(unit.key)):
        overrides.setdefault("data_source", work.SOURCE)
    sets = "".join(f" --set '{k}={json.dumps(v)}'" for k, v in overrides.items())
    return f"python -m replicate figures {unit.key} --profile paper{sets}"


def rows(device: str = "cuda"):
    """Every unit's progress (``estimate.table``), in ``PRIORITY`` order, counting the carried checkpoints."""
    import travel
    from replicate.experiments import estimate

    by_label = {row.unit.label: row for row in estimate.table(device, travel.reached(CARRIED))}
    return [by_label[label] for label in PRIORITY]


def _round_fits(row, seconds: float) -> bool:
    """Whether one of ``row``'s runs left can finish a round in ``seconds``: a run saves at round boundaries
    only, so a session keeps nothing of a round it cannot finish."""
    return row.round_s <= seconds


def session(rows, budget_s: float, rate: float):
    """The units the next session works on, in priority order, with the seconds each is projected to take (the
    last one cut at the budget). A unit none of whose runs can finish a round in the time the session has left
    for it is passed over: the session could save nothing of it."""
    chosen, left, taken = [], budget_s, set()
    for row in rows:
        if row.done or left <= 0 or not _round_fits(row, left):
            continue
        need = sum(s for key, s in row.left.items() if key not in taken) / rate
        taken |= set(row.left)
        chosen.append((row, min(need, left)))
        left -= need
    return chosen


def queue(rows, budget_s: float, rate: float):
    """What a session runs, in priority order: every unit not done whose round fits, with its projected share
    (``session``; 0 for a unit the projection leaves no time). Each gets the time actually left, so a unit done
    sooner than projected leaves its minutes to the next (a projection can be high, and a tuning run that
    diverges stops where its model turns NaN)."""
    share = {id(row): s for row, s in session(rows, budget_s, rate)}
    return [(row, share.get(id(row), 0.0)) for row in rows if not row.done and _round_fits(row, budget_s)]


def beyond(rows, budget_s: float):
    """The units not done whose every run left takes longer for one round than ``budget_s``."""
    return [row for row in rows if not row.done and not _round_fits(row, budget_s)]


def plan(budget_s: float, device: str = "cuda", commands: bool = False) -> str:
    from replicate.experiments import estimate

    table, rate = rows(device), estimate.concurrency(device=device)
    if commands:  # each line with the session's time from its projected start on (.ci/device-check gives each
        lines, start, extras = [], 0.0, list(AFTER_STEM)  # the time actually left, so a unit done early leaves it
        for row, share in queue(table, budget_s, rate):  # to the next)
            budget = f" --time-budget {max(int(budget_s - start), 30)}s"
            if not row.unit.key.startswith("khanduri2021/"):  # STEM's units are first: the second grid follows them
                lines += [extra + budget for extra in extras]
                extras = []
            lines.append(command(row.unit) + budget)
            start += share
        return "\n".join(lines + [f"{extra} --time-budget {max(int(budget_s - start), 30)}s" for extra in extras])
    minutes = estimate.minutes
    lines = [f"next {device} session of {minutes(budget_s)} (concurrency {rate:.1f}):"]
    for row, share in session(table, budget_s, rate):
        lines.append(f"  {row.unit.label:44s} {minutes(share):>10s} of {minutes(row.left_s / rate)} left"
                     + ("" if row.measured else " (modelled, likely high)" if row.graphed else " (modelled)")
                     + f"\n      {command(row.unit)}")
    if queued := [row.unit.label for row, share in queue(table, budget_s, rate) if not share]:
        lines.append(f"  then, with the minutes of a unit done sooner than projected: {', '.join(queued)}")
    for row in beyond(table, budget_s):
        takes = (f"its shortest round left takes ≈ {minutes(row.round_s)} (modelled op by op: on the GPU its step "
                 "replays a CUDA graph, not timed there yet, so likely less)" if row.round_graphed else
                 f"a round of each of its runs left takes ≥ {minutes(row.round_s)}"
                 + ("" if row.measured else " (modelled)"))
        lines.append(f"  passed over: {row.unit.label}: {takes}, longer than the session: a run saves only at its "
                     "round boundaries, so the session would keep nothing of it")
    if not session(table, budget_s, rate):
        lines.append("  nothing: every GPU-scale figure's runs are in the ledger, or none fits the session")
    lines.append(f"left after it: {minutes(max(estimate.left_s(table) / rate - budget_s, 0))} "
                 "(`python -m replicate figures --estimate`)")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python .ci/gpu/gpu_queue.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=["plan", "commands", "checkpoints-out", "checkpoints-in"])
    parser.add_argument("paths", nargs="*", help="checkpoints-out: the folder; checkpoints-in: the packs")
    parser.add_argument("--time-budget", default="10m", help="the session's time (plan, commands)")
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args(argv)
    try:
        if args.action in ("plan", "commands"):
            from replicate.cli import budget

            print(plan(budget.parse(args.time_budget), args.device, commands=args.action == "commands"))
            return 0
        import travel

        if args.action == "checkpoints-out":
            if len(args.paths) != 1:
                raise ReplicateError("checkpoints-out takes the folder to write into alone")
            written, left = travel.pack(Path(args.paths[0]))
            sizes = ", ".join(f"{f.name} ({f.stat().st_size / 2**20:.1f} MiB)" for f in written) or "no checkpoints"
            print(f"wrote {sizes}" + (f"; left out {len(left)} that did not fit: {', '.join(left)}" if left else ""))
            return 0
        runs = [name for file in args.paths for name in travel.unpack(Path(file))]
        print(f"unpacked {len(runs)} checkpoints: those runs resume where the last session stopped them")
        return 0
    except ReplicateError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
