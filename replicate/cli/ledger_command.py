"""``ledger`` and ``figures --estimate``: the committed run ledger, and what the GPU-scale figures still cost.

    python -m replicate ledger add runs.tar.xz --wall-s 420 --note "one H100"   # runs computed elsewhere, committed
    python -m replicate ledger sync | verify           # into this machine's cache | check every piece
    python -m replicate figures --estimate [--device cuda]   # done / left per GPU-scale figure, in minutes
"""
from __future__ import annotations

from pathlib import Path

from replicate.core.errors import ReplicateError


def add_parser(sub) -> None:
    led = sub.add_parser(
        "ledger", help="the committed run ledger (figures/ledger): add runs computed elsewhere, sync, verify",
        description="add FILE: the runs of a `cache export` archive (from a GPU machine, a cluster) that the "
                    "ledger lacks become a new committed piece (--wall-s: the seconds that machine spent computing "
                    "them, for the estimate's concurrency). sync: copy every ledger run into this machine's run "
                    "cache (done by `figures --profile paper` too). verify: check every piece against index.json. "
                    "`figures --estimate` shows what the GPU-scale figures still cost. See replicate/runs/ledger.py.")
    led.add_argument("action", choices=["add", "sync", "verify"])
    led.add_argument("file", nargs="?", help="add: the archive (cache export --new)")
    led.add_argument("--note", default="", help="add: a note kept beside the piece (e.g. the machine)")
    led.add_argument("--wall-s", type=float, default=None, help="add: seconds the machine spent computing these runs")
    led.add_argument("--machine", default=None, help="add: the processor, for runs whose records do not name it")
    led.set_defaults(func=ledger_command)


def ledger_command(args) -> int:
    from replicate.core import paths, settings

    folder = settings.current().ledger
    if args.action != "add" and folder is not None and not folder.is_dir():  # a typo would read as an empty ledger
        raise ReplicateError(f"REPLICATE_LEDGER={folder} is not a folder: point it at a run ledger (the "
                             "committed one is figures/ledger), or set it to off")
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
            from replicate.experiments import estimate
            from replicate.report import replication as report

            estimate.write_status()
            print(f"wrote {report.write()} (GPU-scale work left)")
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
    raise AssertionError(args.action)  # argparse allows only the three


def estimate_table(device: str = "cuda") -> str:
    """``figures --estimate``: done / left of every GPU-scale figure on ``device``, from the committed ledger."""
    from replicate.experiments import estimate

    rows, rate = estimate.table(device, estimate.reached()), estimate.concurrency(device=device)
    lines = [f"GPU-scale figures' paper profiles on {device} (runs in the ledger / runs of the figure; wall minutes "
             f"at the concurrency measured on the ledger's runs, {rate:.1f} run-seconds per second)",
             "", f"{'figure [panels]':44s} {'tuning':>9s} {'final':>7s} {'spent':>11s} {'left':>13s} {'a round':>9s}"]
    for row in rows:
        left = "done" if row.done else estimate.minutes(row.left_s / rate) + _mark(row) + (
            f" ({row.resumed} resume)" if row.resumed else "")
        lines.append(f"{row.unit.label:44s} {row.tuning[0]:>4d}/{row.tuning[1]:<4d} "
                     f"{row.final[0]:>3d}/{row.final[1]:<3d} "
                     f"{estimate.minutes(row.spent_s / rate):>11s} {left:>13s} "
                     f"{'' if row.done else _short(row.round_s):>9s}")
    total, graphed = estimate.left_s(rows) / rate, estimate.left_s(rows, graphed=True) / rate
    lines += ["", f"left in all: {estimate.minutes(total)} (a run shared by figures counted once"
              + (f"; {estimate.minutes(graphed)} of it ‡" if graphed else "") + f"); * not measured in the ledger on "
              f"{device}: from a bench timing or modelled from op counts and FLOPs (the larger), a lower bound per "
              "step (replicate/experiments/estimate.py); every run counted to its horizon, though a tuning run that "
              "diverges stops where its model turns NaN; "
              + ("‡ modelled so, wholly or in part, for the LSTMs, whose step the GPU replays from a CUDA graph, which "
                 "removes the host dispatch per op the model counts: an estimate, likely high, not a bound, until the "
                 "graphed step is timed (`bench --sections lstm`); " if graphed else "")
              + "a run with a checkpoint in this machine's cache counts from the round it reached; a round: one round "
              "of the figure's shortest-round run left, alone (a run saves its progress at round boundaries only: a "
              "time-limited job shorter than that keeps nothing of it)"]
    return "\n".join(lines)


def _mark(row) -> str:
    """`` *`` for a cost modelled as a lower bound, `` ‡`` where it is (in part) a graphed step's estimate (high)."""
    return "" if row.measured else " ‡" if row.graphed else " *"


def _short(seconds: float) -> str:
    from replicate.experiments import estimate

    return f"{seconds:.1f} s" if seconds < 60 else estimate.minutes(seconds)


__all__ = ["add_parser", "estimate_table", "ledger_command"]
