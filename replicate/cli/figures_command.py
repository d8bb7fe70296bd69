"""``python -m replicate figures``: run figure notebooks, check them against the committed ones, or estimate
what the GPU-scale ones still cost."""
from __future__ import annotations

import argparse
from pathlib import Path

from replicate.core.errors import ReplicateError

EXIT_STATUS = """exit status:
  0    every notebook named ran and published its figures (with --check: and they agree)
  1    a notebook failed (the others ran; its committed figures were left unchanged), one of several named
       was skipped for data this machine lacks (said, with the command that fetches it), or --check found
       a difference
  2    bad input, said in one line before anything runs: an unknown figure, parameter or value, a setting
       of the environment that does not parse, a wrong option, or the one figure named reads missing data
  75   stopped, to be resumed: the --time-budget was spent, or the command got SIGTERM (a job at its time
       limit, a preempted machine); the runs in flight saved at their next round boundary; rerun the same
       command to go on (a requeueing job script tests for 75)
  130  interrupted by Ctrl-C (SIGINT): the runs in flight saved likewise; rerun the same command to resume"""


def add_parser(sub) -> None:
    fig = sub.add_parser("figures", help="run figure notebooks with papermill", epilog=EXIT_STATUS,
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    fig.add_argument("names", nargs="*",
                     help="figures (li2020/fig2), notebooks (li2020_fig2) or papers (li2020); default all")
    fig.add_argument("--profile", default="smoke", choices=["smoke", "paper"],
                     help="smoke: minutes, written to build/figures; paper: full scale, written to figures/ "
                          "(with --set: to build/figures, labelled MODIFIED)")
    fig.add_argument("--list", action="store_true",
                     help="list the figures named (a paper: its figures; none: every one) and exit")
    fig.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                     help="a notebook parameter (a knob of its parameters cell, checked against it); repeat it "
                          "for several")
    fig.add_argument("--check", action="store_true",
                     help="with --profile paper: regenerate into build/check and compare with the committed "
                          "CSVs and claim verdicts within the stated tolerance (replicate/cli/check.py); with a "
                          "labelled command's --set (out_dir=figures/cpu_scale or figures/modified), against it")
    fig.add_argument("--time-budget", metavar="DURATION", default=None,
                     help="e.g. 25m, 90s, 1h30m: notebooks whose runs are all cached first, then the others in "
                          "the order given; when the budget is spent, stop as Ctrl-C or SIGTERM does (runs in "
                          "flight saved at their next round boundary, finished runs cached, figures finished so "
                          "far published) and exit with status 75")
    fig.add_argument("--executor", choices=["local", "ray"], default=None,
                     help="where missing runs are computed: local (default; REPLICATE_EXECUTOR) worker processes, "
                          "or ray, the Ray cluster at --ray-address (see docs/cluster.md)")
    fig.add_argument("--ray-address", metavar="HOST:PORT", default=None,
                     help="the Ray cluster's head node (default RAY_ADDRESS; none: a private cluster of this machine)")
    fig.add_argument("--workers", type=int, default=None,
                     help="worker processes of the local executor (default REPLICATE_WORKERS, else one per core)")
    fig.add_argument("--batch-runs", type=int, default=None, metavar="R",
                     help="train up to R runs of a sweep as one batch; 1: one by one (default REPLICATE_BATCH_RUNS, "
                          "else batched where a batch computes bitwise what its runs compute alone, the logistic "
                          "model, and for every model on CUDA, where neural runs agree to float32 "
                          "rounding only: docs/engine.md)")
    fig.add_argument("-v", "--verbose", action="store_true", help="stream notebook output (progress bars)")
    fig.add_argument("--estimate", action="store_true",
                     help="print what each GPU-scale figure's paper profile still costs on --device, from the "
                          "timings of the committed run ledger, each marked measured, estimate or bound")
    fig.add_argument("--device", default=None, help="with --estimate: cuda, the one device it models (default)")
    fig.set_defaults(func=_figures)


def _figures(args) -> int:
    """``figures``: SIGTERM ends it as a spent time budget does, in one line with status 75 (``budget.STATUS``):
    during a batch, after its runs in flight saved (``cli.signals``); before or after one, at once."""
    import signal
    import threading

    from replicate.cli.budget import Terminated

    def terminated(signum, frame):
        raise Terminated("terminated (SIGTERM) outside a notebook: the runs finished are cached; rerun the same "
                         "command to go on")

    if threading.current_thread() is not threading.main_thread():
        return _figures_command(args)
    previous = signal.signal(signal.SIGTERM, terminated)
    try:
        return _figures_command(args)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _figures_command(args) -> int:
    from replicate.cli import notebooks

    if args.device is not None and not args.estimate:
        raise ReplicateError("--device goes with --estimate (runs compute where REPLICATE_DEVICE says)")
    if args.estimate:
        if args.names or args.set or args.check or args.list or args.time_budget:
            raise ReplicateError("--estimate takes no figures, --set, --check, --list or --time-budget: it reads "
                                 "the committed ledger")
        if (args.device or "cuda").split(":")[0] != "cuda":
            raise ReplicateError(f"--estimate models the GPU-scale figures on a GPU (--device cuda), got --device "
                                 f"{args.device} (docs/figures.md gives their hours on a CPU core)")
        from replicate.cli import ledger_command

        print(ledger_command.estimate_table("cuda"))
        return 0
    if args.list:
        for nb in notebooks.resolve(args.names):  # the figures named (a paper: its figures), or every one
            print(f"{nb.key:28s} notebooks/{nb.path.name:34s} {nb.title}")
        return 0
    from replicate.cli import budget, preflight

    # every refusal of bad input before the heavy imports (torch, papermill): one line, in well under a second
    overrides = preflight.overrides(args.set)
    preflight.check(notebooks.resolve(args.names), args.profile, overrides)
    if args.time_budget is not None:
        args.time_budget = budget.parse(args.time_budget)
    _executor_settings(args)
    if args.check:
        return _check(args, overrides)
    from replicate.cli import runner

    return 1 if runner.run(args.names, args.profile, overrides, log_output=args.verbose,
                           time_budget=args.time_budget) else 0


def _executor_settings(args) -> None:
    """With the ray executor, the cluster is reached before any notebook runs."""
    from replicate.core import settings

    if settings.current().executor == "ray":
        from replicate.runs import ray_executor

        ray_executor.check(settings.current().ray_address)


def _check(args, overrides) -> int:
    from replicate.core import paths, settings

    # A labelled command of report/reduced.py (its --set ... out_dir=figures/cpu_scale or figures/modified, or a
    # folder of either) is checked against that folder: regenerated with the same knobs into build/check/<it> (so it
    # is labelled as the committed record is: reduced, or modified).
    out_dir = overrides.get("out_dir")
    labelled = paths.labelled_folder(out_dir) if out_dir is not None else None
    if args.profile != "paper" or (overrides and not labelled):
        raise ReplicateError("--check regenerates the committed figures: use it with --profile paper and no --set, "
                             "or with a labelled command of REPLICATION.md (its --set out_dir=figures/cpu_scale or "
                             "figures/modified)")
    from replicate.cli import check, runner  # after the refusal: these import torch and papermill
    folder = Path(out_dir).resolve().relative_to(paths.figures_dir().resolve()) if labelled else Path()
    committed, fresh = paths.figures_dir() / folder, settings.current().build / "check" / folder
    failed = runner.run(args.names, "paper", {**overrides, "out_dir": str(fresh)}, log_output=args.verbose,
                        time_budget=args.time_budget)
    scale = paths.SCALE_OF_FOLDER.get(labelled, "paper")
    results = [check.compare(nb.key, committed, fresh, scale=scale)
               for nb in runner.resolve(args.names)]
    print(check.report(results))
    return 1 if failed or not all(r.ok for r in results) else 0


__all__ = ["EXIT_STATUS", "add_parser"]
