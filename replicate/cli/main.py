"""Command line: ``python -m replicate {arena,figures,bench,data,cache,ledger,report}``, one module per verb."""
from __future__ import annotations

import argparse
import sys

from replicate.core.errors import ReplicateError


def _settings(args):
    """This command's settings (``replicate.core.settings``), the edge where the environment is read: every value
    checked before the command does anything (a bad one is one line here, not a failed notebook), then the
    command's own flags applied: `figures`' --executor, --ray-address, --workers and --batch-runs; `data`'s
    --from replaces REPLICATE_DATA_FROM (not read)."""
    from replicate.core import settings

    flags = {name: str(getattr(args, field)) for name, (field, _) in settings.VARIABLES.items()
             if field in ("executor", "ray_address", "workers", "batch_runs")
             and getattr(args, field, None) is not None}
    source = getattr(args, "source", None)  # `data fetch --from DIR` stages from DIR, whatever the variable says
    try:
        read = settings.Settings.read(given=flags, skip=("REPLICATE_DATA_FROM",) if source else ())
    except ReplicateError as exc:  # a flag's bad value is named by the flag the user typed
        message = str(exc)
        for name in flags:
            message = message.replace(f"{name} must", f"--{settings.VARIABLES[name][0].replace('_', '-')} must")
        raise ReplicateError(message) from None
    return read.replace(data_from=None) if source else read


def _report(args) -> int:
    from replicate.report import replication as report

    if args.work:  # the one place that enumerates experiments for the report (report does not import them)
        from replicate.experiments import estimate, work

        print(f"wrote {work.write()}")
        estimate.write_status()
    print(f"wrote {report.write()}")
    return 0


class _OneLine(argparse.ArgumentParser):
    """Refuses a bad command line in one line, as every other refusal is, naming where the usage is."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (`{self.prog} --help` lists the options)\n")


def main(argv=None) -> int:
    import signal
    import threading

    from replicate.cli import bench_command, data_command, figures_command, ledger_command

    # Started as a background job of a non-interactive shell (`nohup … &`, cron) a process inherits SIGINT
    # ignored: take it back, so that `kill -INT` stops a batch as Ctrl-C does (runs saved, one line)
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.default_int_handler)

    argv = list(sys.argv[1:] if argv is None else argv)
    for i, arg in enumerate(argv[:-1]):  # `--time-budget -5m`: argparse takes "-5m" for a flag; parse() refuses it
        if arg == "--time-budget" and argv[i + 1].startswith("-") and argv[i + 1] not in ("-h", "--help"):
            argv[i:i + 2] = [f"--time-budget={argv[i + 1]}"]
            break
    command = argv[0] if argv and not argv[0].startswith("-") else None  # the arena's argv becomes figures'
    if argv[:1] == ["arena"] and not {"-h", "--help"} & set(argv):  # the arena is its notebook, run as figures are
        from replicate.cli import arena

        try:
            argv = arena.figures_argv(argv[1:])
        except ReplicateError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    parser = _OneLine(
        prog="python -m replicate",
        description="The replication package's commands: arena, figures, bench, data, cache, ledger and report "
                    "(`python -m replicate COMMAND --help` describes one).")
    from replicate import __version__

    parser.add_argument("--version", action="version", version=f"replicate {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("arena", help="every algorithm on the same datasets at one budget, tuned alike",
                   usage="python -m replicate arena [-h] [--algorithm FILE:Class | NAME ...] [--model FILE:NAME] "
                         "[--dataset FILE:NAME | NAME ...] [figures' options]",
                   description="Runs notebooks/arena_leaderboard.ipynb as `figures arena/leaderboard` does (the "
                               "leaderboard, its curves and trials as CSVs, the curves and rank map in "
                               "build/figures/arena, or figures/arena at the paper profile). --algorithm FILE:Class "
                               "adds your registered algorithm; --algorithm NAME (repeatable) picks the entries to run "
                               "(default all). --model FILE:NAME trains your torch.nn.Module on every dataset; "
                               "--dataset FILE:NAME adds your FederatedDataset; --dataset NAME (repeatable) picks the "
                               "datasets (default the arena's). Its knobs: replicate/experiments/arena/board.py "
                               "(ArenaConfig); e.g. --set budget_kind=samples.")
    figures_command.add_parser(sub)
    bench_command.add_parser(sub)
    data_command.add_parsers(sub)
    ledger_command.add_parser(sub)
    rep = sub.add_parser("report", help="regenerate REPLICATION.md from figures/",
                         description="regenerate REPLICATION.md and README.md's status table from the committed "
                                     "figures' claims records (figures/**/*.claims.json); computes nothing")
    rep.add_argument("--work", action="store_true",
                     help="first re-enumerate the GPU-scale figures' paper-profile work into figures/gpu_work.json "
                          "(loads the datasets their epoch-based runs train on; counts ops per local step)")
    rep.set_defaults(func=_report)
    args, extra = parser.parse_known_args(argv)
    if extra and isinstance(getattr(args, "names", None), list) and not any(e.startswith("-") for e in extra):
        # `data fetch --dry-run mnist`: argparse gives the names after a flag to no one where a positional (the
        # action) precedes them; they are the command's names all the same
        args.names = [*args.names, *extra]
    elif extra:  # named with the command whose --help lists what it takes
        prog = f"{parser.prog} {command}" if command else parser.prog
        parser.exit(2, f"{prog}: error: unrecognized arguments: {' '.join(extra)} (`{prog} --help` lists its "
                       "options)\n")
    try:
        from replicate.core import settings

        with settings.use(_settings(args)):  # for this command; it hands them to the processes it starts
            return args.func(args)
    except ReplicateError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:  # one line, no traceback: everything finished is already on disk
        from replicate.cli.budget import STATUS, BudgetSpent, Terminated
        from replicate.cli.runner import Interrupted

        message = str(exc) if isinstance(exc, Interrupted | BudgetSpent | Terminated) else \
            "interrupted; rerun the same command to resume"
        print(f"\n{message}", file=sys.stderr)
        return STATUS if isinstance(exc, BudgetSpent | Terminated) else 130

