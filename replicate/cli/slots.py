"""``ledger`` and ``figures --plan``: the committed run ledger, and what a GPU slot computes next.

    python -m replicate ledger status                  # done / left per GPU-scale figure, projected minutes
    python -m replicate ledger add runs.tar.xz --wall-s 420 --note "H200 slot"   # a slot's runs, committed
    python -m replicate ledger sync | verify           # into this machine's cache | check every piece
    python -m replicate figures --plan --device cuda --time-budget 10m [--commands]
"""
from __future__ import annotations

from pathlib import Path

from replicate.core.errors import ReplicateError


def add_parser(sub) -> None:
    led = sub.add_parser(
        "ledger", help="the committed run ledger (figures/ledger): add a slot's runs, sync, verify, status",
        description="status: done / left of every GPU-scale figure in the project's priority order, with the "
                    "device minutes spent and projected. add FILE: the runs of a `cache export` archive that the "
                    "ledger lacks become a new committed piece (--wall-s: the slot's seconds of computing, for "
                    "the planner's concurrency). sync: copy every ledger run into this machine's run cache "
                    "(done by `figures --profile paper` too). verify: check every piece against index.json. "
                    "See replicate/runs/ledger.py.")
    led.add_argument("action", choices=["status", "add", "sync", "verify"])
    led.add_argument("file", nargs="?", help="add: the archive (cache export --new)")
    led.add_argument("--note", default="", help="add: a note kept beside the piece (e.g. the slot's machine)")
    led.add_argument("--wall-s", type=float, default=None, help="add: seconds the slot spent computing these runs")
    led.add_argument("--machine", default=None, help="add: the processor, for runs whose records do not name it")
    led.add_argument("--device", default="cuda", help="status: the device type whose runs count (default cuda)")
    led.set_defaults(func=ledger_command)


def ledger_command(args) -> int:
    from replicate.core import paths
    from replicate.runs import ledger

    if args.action != "add" and (args.file or args.note or args.wall_s is not None or args.machine):
        raise ReplicateError(f"ledger {args.action} takes no FILE, --note, --wall-s or --machine (those are for "
                             "ledger add)")
    if args.action == "add":
        if not args.file:
            raise ReplicateError("ledger add needs the archive: python -m replicate ledger add runs.tar.xz")
        written, added, same, conflicts = ledger.add(Path(args.file), args.note, wall_s=args.wall_s,
                                                     machine=args.machine)
        print(f"ledger: {added} runs added in {', '.join(map(str, written)) or 'no new piece'}; {same} already "
              "there" + (f"; {len(conflicts)} already there with other numbers, kept as they were (first "
                         f"computation stays): {', '.join(conflicts[:3])}" if conflicts else ""))
        if written and ledger.root() == paths.figures_dir() / "ledger":  # the committed one: refresh the report
            from replicate.experiments import plan
            from replicate.report import replication as report

            plan.write_status()
            print(f"wrote {report.write()} (GPU slots: done / left)")
        return 0
    if args.action == "sync":
        written, same, replaced = ledger.sync()
        print(f"ledger: {written} runs copied into the run cache, {same} already there"
              + (f", {replaced} cached runs with other numbers moved to replaced/" if replaced else ""))
        return 0
    if args.action == "verify":
        pieces = ledger.index()
        total = sum(len(ledger.verified_piece(piece)) for piece in pieces)
        print(f"ledger: {len(pieces)} pieces, {total} runs, every checksum and name verified ({ledger.root()})")
        return 0
    print(status_table(args.device))
    return 0


def status_table(device: str = "cuda") -> str:
    from replicate.experiments import plan

    rows, rate = plan.table(device, plan.head_starts()), plan.concurrency()
    lines = [f"GPU-scale work on {device}, in the order GPU slots take it (runs in the ledger / runs of the "
             "figure; minutes of a slot at the measured concurrency "
             f"{rate:.1f} run-seconds per second)",
             "", f"{'figure [panels]':44s} {'tuning':>9s} {'final':>7s} {'spent':>11s} {'left':>13s} {'a round':>9s}"]
    for row in rows:
        left = "done" if row.done else plan.minutes(row.left_s / rate) + _mark(row) + (
            f" ({row.resumed} resume)" if row.resumed else "")
        lines.append(f"{row.unit.label:44s} {row.tuning[0]:>4d}/{row.tuning[1]:<4d} "
                     f"{row.final[0]:>3d}/{row.final[1]:<3d} "
                     f"{plan.minutes(row.spent_s / rate):>11s} {left:>13s} "
                     f"{'' if row.done else _short(row.round_s):>9s}")
    total, graphed = plan.left_s(rows) / rate, plan.left_s(rows, graphed=True) / rate
    lines += ["", f"left in all: {plan.minutes(total)} of slots (a run shared by figures counted once"
              + (f"; {plan.minutes(graphed)} of it ‡" if graphed else "") + f"); * not measured in the ledger on "
              f"{device}: from a bench timing or modelled from op counts and FLOPs (the larger), a lower bound "
              "per step (replicate/experiments/plan.py); every run counted to its horizon, though a tuning run that "
              "diverges stops where its model turns NaN; "
              + ("‡ modelled so, wholly or in part, for the LSTMs, whose step the GPU replays from a CUDA graph, which "
                 "removes the host dispatch per op the model counts: an estimate, likely high, not a bound, until a "
                 "slot times the graphed step (`bench --sections lstm`); " if graphed else "")
              + "a run that resumes from a checkpoint this "
              "machine holds (its cache's or .carry/checkpoints) counts from the round it reached; a round: one round "
              "of the unit's shortest-round run left, its stack alone (a run saves its progress at round boundaries "
              "only: a slot shorter than that keeps nothing of the unit, and the plan passes it over)"]
    return "\n".join(lines)


def _mark(row) -> str:
    """`` *`` for a cost modelled as a lower bound, `` ‡`` where it is (in part) a graphed step's estimate (high)."""
    return "" if row.measured else " ‡" if row.graphed else " *"


def _short(seconds: float) -> str:
    from replicate.experiments import plan

    return f"{seconds:.1f} s" if seconds < 60 else plan.minutes(seconds)


def plan_command(args) -> int:
    """``figures --plan``: the units the next slot takes, or (``--commands``) the shell lines that run them."""
    from replicate.cli import budget
    from replicate.experiments import plan

    device = args.device or "cuda"
    seconds = budget.parse(args.time_budget) if args.time_budget else 600.0
    rows, rate = plan.table(device, plan.head_starts()), plan.concurrency()
    chosen = plan.slot(rows, seconds, rate)
    if args.commands:  # the queue, each line with the slot's time from its projected start on (.ci/device-check
        start = 0.0    # gives each the time actually left, so a unit done early leaves it to the next)
        for row, share in plan.queue(rows, seconds, rate):
            print(f"{row.unit.command()} --time-budget {max(int(seconds - start), 30)}s")
            start += share
        return 0
    print(f"next {device} slot of {plan.minutes(seconds)} (concurrency {rate:.1f}):")
    for row, share in chosen:
        print(f"  {row.unit.label:44s} {plan.minutes(share):>10s} of {plan.minutes(row.left_s / rate)} left"
              + ("" if row.measured else " (modelled, likely high)" if row.graphed else " (modelled)")
              + f"\n      {row.unit.command()}")
    if queued := [row.unit.label for row, share in plan.queue(rows, seconds, rate) if not share]:
        print(f"  then, with the minutes of a unit done sooner than projected: {', '.join(queued)}")
    for row in plan.beyond(rows, seconds):
        takes = (f"its shortest round left takes ≈ {plan.minutes(row.round_s)} (modelled op by op: on the GPU its "
                 "step replays a CUDA graph, not timed there yet, so likely less)" if row.round_graphed else
                 f"a round of each of its runs left takes ≥ {plan.minutes(row.round_s)}"
                 + ("" if row.measured else " (modelled)"))
        print(f"  passed over: {row.unit.label}: {takes}, longer than the slot: a run saves only at its round "
              "boundaries, so the slot would keep nothing of it")
    if not chosen:
        print("  nothing: every GPU-scale figure's runs are in the ledger, or none fits the slot")
    print(f"left after it: {plan.minutes(max(plan.left_s(rows) / rate - seconds, 0))} of slots "
          "(`python -m replicate ledger status`)")
    return 0


def check_plan_arguments(args) -> None:
    if args.device is not None and not args.plan:
        raise ReplicateError("--device goes with --plan (runs compute where REPLICATE_DEVICE says)")
    if args.commands and not args.plan:
        raise ReplicateError("--commands goes with --plan")


__all__ = ["add_parser", "check_plan_arguments", "ledger_command", "plan_command", "status_table"]
