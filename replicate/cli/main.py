"""Command line: ``python -m replicate {arena,figures,bench,data,cache,ledger,report}``."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from replicate.core.errors import ReplicateError


EXIT_STATUS = """exit status:
  0    every notebook named ran and published its figures (with --check: and they agree)
  1    a notebook failed (the others ran; its committed figures were left unchanged), or --check found a
       difference
  2    bad input, said in one line before anything runs: an unknown figure, parameter or value, a setting
       of the environment that does not parse, a wrong option
  75   stopped, to be resumed: the --time-budget was spent, or the command got SIGTERM (a job at its time
       limit, a preempted machine); the runs in flight saved at their next round boundary; rerun the same
       command to go on (a requeueing job script tests for 75)
  130  interrupted by Ctrl-C (SIGINT): the runs in flight saved likewise; rerun the same command to resume"""


def _figures(args) -> int:
    """``figures``: SIGTERM ends it as a spent time budget does, in one line with status 75 (``budget.STATUS``):
    during a batch, after its runs in flight saved (``runner._Signals``); before or after one, at once."""
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
    from replicate.cli import notebooks, slots

    slots.check_plan_arguments(args)
    if args.plan:
        if args.names or args.set or args.check or args.list:
            raise ReplicateError("--plan takes no figures, --set, --check or --list: it plans from the ledger")
        return slots.plan_command(args)
    if args.list:
        for nb in notebooks.discover():
            print(f"{nb.key:28s} notebooks/{nb.path.name:34s} {nb.title}")
        return 0
    from replicate.cli import budget, preflight

    # every refusal of bad input before the heavy imports (torch, papermill): one line, in well under a second
    overrides = preflight.overrides(args.set)
    preflight.check(notebooks.resolve(args.names), args.profile, overrides)
    if args.time_budget is not None:
        args.time_budget = budget.parse(args.time_budget)
    _executor_settings(args)
    from replicate.cli import runner
    if args.check:
        return _check(args, overrides)
    return 1 if runner.run(args.names, args.profile, overrides, log_output=args.verbose,
                           time_budget=args.time_budget) else 0


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
    read = settings.Settings.read(given=flags, skip=("REPLICATE_DATA_FROM",) if source else ())
    return read.replace(data_from=None) if source else read


def _executor_settings(args) -> None:
    """With the ray executor, the cluster is reached before any notebook runs."""
    from replicate.core import settings

    if settings.current().executor == "ray":
        from replicate.runs import ray_executor

        ray_executor.check(settings.current().ray_address)


def _check(args, overrides) -> int:
    from replicate.cli import check, runner
    from replicate.core import paths, settings

    # A reduced-scale command of report/reduced.py (its --set ... out_dir=figures/cpu_scale) is checked against
    # figures/cpu_scale: regenerated with the same knobs into build/check/cpu_scale (so it is labelled reduced).
    out_dir = overrides.get("out_dir")
    reduced = out_dir is not None and Path(out_dir).resolve() == paths.figures_dir().resolve() / "cpu_scale"
    if args.profile != "paper" or (overrides and not reduced):
        raise ReplicateError("--check regenerates the committed figures: use it with --profile paper and no --set, "
                             "or with a reduced-scale command of REPLICATION.md (its --set out_dir=figures/cpu_scale)")
    committed = paths.figures_dir() / "cpu_scale" if reduced else paths.figures_dir()
    fresh = settings.current().build / "check" / ("cpu_scale" if reduced else "")
    failed = runner.run(args.names, "paper", {**overrides, "out_dir": str(fresh)}, log_output=args.verbose,
                        time_budget=args.time_budget)
    results = [check.compare(nb.key, committed, fresh, scale="reduced" if reduced else "paper")
               for nb in runner.resolve(args.names)]
    print(check.report(results))
    return 1 if failed or not all(r.ok for r in results) else 0


def _bench(args) -> int:
    from replicate.cli import bench, bench_batched, bench_executors, bench_noise, bench_pace, bench_stem
    from replicate.core import paths
    from replicate.runs.config import run_device

    sections = {  # name: (heading, table maker), each printed as soon as it is timed
        "engine": ("", lambda: bench.table(bench.run(rounds=args.rounds, device=args.device))),
        "profile": ("", lambda: bench.profile_table(args.device)),
        "lstm": ("FedProx LSTMs:", lambda: bench.lstm_table(bench.lstm_run(device=args.device))),
        "ops": ("", bench.op_table),
        "executors": ("Sweep executors, local pool vs Ray:", lambda: bench_executors.table(bench_executors.run())),
        "stem": (bench_stem.__doc__.strip(), lambda: bench_stem.table(bench_stem.run(device=args.device))),
        "batched": ("## Runs as a tensor dimension\n\n" + bench_batched.__doc__.strip(),
                    lambda: bench_batched.table(bench_batched.run(device=args.device))),
        "noise": (bench_noise.__doc__.strip(), lambda: bench_noise.table(bench_noise.run(device=args.device))),
        "pace": (bench_pace.__doc__.strip(), lambda: bench_pace.table(bench_pace.run(device=args.device))),
    }
    chosen = args.sections or list(sections)
    unknown = [name for name in chosen if name not in sections]
    if unknown:
        raise ReplicateError(f"unknown bench section(s) {', '.join(unknown)}; choose from {', '.join(sections)}")
    device = args.device or str(run_device())
    cuda = device.startswith("cuda")
    if args.record and args.sections is not None and not cuda:  # a lease records what it had time for
        raise ReplicateError("--record with --sections would replace BENCHMARKS.md's other sections: record them "
                             "all (leave out --sections), or leave out --record")
    print(bench.describe_machine(args.device), flush=True)
    parts = []
    for heading, make in (sections[name] for name in chosen):  # in the order asked: a short lease runs the first
        parts.append((heading + "\n\n" if heading else "") + make())
        print("\n" + parts[-1], flush=True)
    text = "\n\n".join(parts)
    if args.record:  # a CUDA recording has its own file: a CPU recording must not erase the last GPU lease's
        from replicate.core.fileio import atomic_write_text

        path = paths.REPO / ("docs/BENCHMARKS.cuda.md" if cuda else "BENCHMARKS.md")
        timed = "" if args.sections is None else f"Sections timed: {', '.join(chosen)} (`--sections`).\n\n"
        other = "" if cuda else "On CUDA (the last lent GPU session): docs/BENCHMARKS.cuda.md.\n\n"
        atomic_write_text(path, f"# Benchmarks{' on CUDA' if cuda else ''}\n\n`python -m replicate bench --record"
                          f"{' --device ' + device if cuda else ''}` — vectorized engine vs sequential oracle, "
                          f"same run, same plans and batches.\n\n{other}"
                          f"{bench.__doc__.split(chr(10), 2)[2].strip()}\n\n"
                          f"Machine: {bench.describe_machine(args.device)}\n\n{timed}{text}\n")
        print(f"recorded in {path}")
    return 0


def _data(args) -> int:
    from replicate.data import store

    if args.action == "fetch" and args.dry_run:
        names = store.registered() if args.all else args.names
        for name in names:
            action, detail = store.fetch_plan(name, args.source)
            print(f"{name:16s} {action:14s} {detail}")
        return 0
    if args.action == "pack":
        if not args.names:
            raise ReplicateError("name the dataset(s) to pack, e.g. "
                                 "`python -m replicate data pack femnist --to .carry/data`")
        for name in args.names:
            path = store.pack(name, args.to)
            print(f"{name}: {path} ({path.stat().st_size / 2**20:.1f} MiB)")
        return 0
    if args.action == "fetch" and args.all:
        report = store.fetch_all(args.source)
        for name, outcome, detail in report:
            print(f"{name:16s} {outcome:14s} {detail}")
        missing = [name for name, outcome, _ in report if outcome == "not available"]
        if missing:
            print(f"not available: {', '.join(missing)}; the notebooks that need them are skipped by name")
        return 0
    if args.action == "fetch":
        if not args.names:
            raise ReplicateError(f"name the dataset(s) to fetch: {', '.join(store.registered())}, or --all "
                                 "(`python -m replicate data list` shows what is staged)")
        for name in args.names:
            folder = store.fetch(name, source=args.source, log=print)
            print(f"{name}: ready in {folder}")
    else:
        names = store.registered()
        width = max(map(len, names), default=0)
        for name in names:
            ds = store.spec(name)
            state = "available" if store.is_available(name) else "not fetched"
            source = "download" if ds.downloadable else "no download"
            print(f"{name:{width}s}  {state:11s}  {ds.status:7s}  {source:11s}  checksums: {ds.checksums}")
    return 0


def _cache(args) -> int:
    from pathlib import Path

    from replicate.core import settings
    from replicate.runs import archive

    if args.action in ("checkpoints-out", "checkpoints-in"):
        return _checkpoints(args)
    if args.action == "import":
        if args.names or args.new:
            raise ReplicateError("cache import takes the archive alone: it imports every run in it")
        written, same, elsewhere = archive.load(Path(args.file))
        print(f"imported {written} runs into {settings.current().cache} ({same} already there, identical)"
              + "".join(f"; {count} of them ran on {device}, which notebooks here read only with "
                        f"REPLICATE_DEVICE={device} (the cache never mixes device types: CPU and CUDA draw "
                        f"different random streams)" for device, count in sorted(elsewhere.items())))
        return 0
    names = None
    if args.names:
        from replicate.cli import runner

        names, unnamed = set(), []
        for nb in runner.resolve(args.names):
            runs = runner.recorded_runs(nb)
            if runs is None:
                unnamed.append(nb.key)
            else:
                names |= runs
        if unnamed:
            print(f"not exported: {', '.join(unnamed)} (no published record of theirs names its runs; rerun them "
                  "to publish one, or export the whole cache: no NAMES)", file=sys.stderr)
    if args.new:
        from replicate.runs import ledger

        new = ledger.new_in_cache()
        names = new if names is None else names & new
    written, stale = archive.export(Path(args.file), names)
    absent = len(names - set(written) - set(stale)) if names is not None else 0
    notes = ([f"{len(stale)} stale entries left out (this code would not read them)"] if stale else []) + \
            ([f"{absent} runs named by the figures' records are not in this cache"] if absent else [])
    size = Path(args.file).stat().st_size
    size = f"{size / 2**20:.1f} MiB" if size >= 2**20 else f"{size / 2**10:.0f} KiB"
    print(f"wrote {args.file} ({size}): {len(written)} runs" + "".join(f"; {n}" for n in notes))
    return 0


def _checkpoints(args) -> int:
    """``cache checkpoints-out DIR``: the cut-off runs' checkpoints packed for the next slot;
    ``cache checkpoints-in PACK...``: unpacked into this cache (``runs/travel.py``)."""
    from pathlib import Path

    from replicate.runs import travel

    if args.action == "checkpoints-out":
        if args.names or args.new:
            raise ReplicateError("cache checkpoints-out takes the folder to write into alone")
        written, left = travel.pack(Path(args.file))
        sizes = ", ".join(f"{f.name} ({f.stat().st_size / 2**20:.1f} MiB)" for f in written) or "no checkpoints"
        print(f"wrote {sizes}" + (f"; left out {len(left)} that did not fit: {', '.join(left)}" if left else ""))
        return 0
    runs = [name for file in [args.file, *args.names] for name in travel.unpack(Path(file))]
    print(f"unpacked {len(runs)} checkpoints: those runs resume where the last slot stopped them")
    return 0


def _report(args) -> int:
    from replicate.report import replication as report

    if args.work:  # the one place that enumerates experiments for the report (report does not import them)
        from replicate.experiments import plan, work

        print(f"wrote {work.write()}")
        plan.write_status()
    print(f"wrote {report.write()}")
    return 0


class _OneLine(argparse.ArgumentParser):
    """Refuses a bad command line in one line, as every other refusal is, naming where the usage is."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (`{self.prog} --help` lists the options)\n")


def main(argv=None) -> int:
    import signal
    import threading

    from replicate.cli import slots

    # Started as a background job of a non-interactive shell (`nohup … &`, cron) a process inherits SIGINT
    # ignored: take it back, so that `kill -INT` stops a batch as Ctrl-C does (runs saved, one line)
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.default_int_handler)

    argv = list(sys.argv[1:] if argv is None else argv)
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
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("arena", help="every algorithm on the same datasets at one budget, tuned alike",
                   description="python -m replicate arena [--algorithm path/to/file.py:ClassName] [--algorithm NAME "
                               "...] [--profile paper] [--set NAME=VALUE ...] [figures' options]: runs "
                               "notebooks/arena_leaderboard.ipynb as `figures arena/leaderboard` does (the "
                               "leaderboard, its curves and trials as CSVs, the curves and rank map in "
                               "build/figures/arena, or figures/arena at the paper profile). --algorithm FILE:Class "
                               "adds your registered algorithm; --algorithm NAME (repeatable) picks the entries to run "
                               "(default all). Its knobs: replicate/experiments/arena/board.py (ArenaConfig); e.g. "
                               "--set budget_kind=samples.")
    fig = sub.add_parser("figures", help="run figure notebooks with papermill", epilog=EXIT_STATUS,
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    fig.add_argument("names", nargs="*",
                     help="figures (li2020/fig2), notebooks (li2020_fig2) or papers (li2020); default all")
    fig.add_argument("--profile", default="smoke", choices=["smoke", "paper"],
                     help="smoke: minutes, written to build/figures; paper: full scale, written to figures/")
    fig.add_argument("--list", action="store_true", help="list the available figures and exit")
    fig.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                     help="extra notebook parameter (checked against its parameters cell)")
    fig.add_argument("--check", action="store_true",
                     help="with --profile paper: regenerate into build/check and compare with the committed "
                          "CSVs and claim verdicts within the stated tolerance (replicate/cli/check.py); with a "
                          "reduced-scale command's --set (out_dir=figures/cpu_scale), against figures/cpu_scale")
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
    fig.add_argument("--plan", action="store_true",
                     help="print what the next GPU slot of --time-budget (default 10m) computes, in the project's "
                          "priority order, and the device minutes left (from the committed run ledger)")
    fig.add_argument("--device", default=None, help="with --plan: the device type to plan for (default cuda)")
    fig.add_argument("--commands", action="store_true",
                     help="with --plan: print only the figure commands of the slot's queue, one a line, in priority "
                          "order: the slot's units, then every other unit whose round fits, each with the budget left "
                          "from its projected start (.ci/device-check runs them, giving each the time actually left)")
    fig.set_defaults(func=_figures)
    bench = sub.add_parser(
        "bench", help="time the vectorized engine against the sequential oracle",
        description="Times the same rounds (same client plans and mini-batches) through the vectorized "
                    "engine, the generic per-step path and the sequential per-client oracle on four workloads "
                    "(synthetic(1,1) K = 10 and 100, the MNIST Figure 1a workload, FedProx with 90% stragglers), "
                    "the FedProx LSTMs stacked vs client by client vs the oracle, the ops of one stacked local "
                    "step per model, the local pool vs Ray, STEM's CIFAR-10 round stacked vs client loop and runs "
                    "batched as a tensor dimension (R = 1, 4, 16), each section printed as it is timed (about "
                    "15-30 min on 2 idle cores); --record writes them to BENCHMARKS.md. Speed is measured here, "
                    "never asserted in tests.")
    bench.add_argument("--rounds", type=int, default=5, help="rounds timed per workload (default 5)")
    bench.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")
    bench.add_argument("--record", action="store_true",
                       help="write the result to BENCHMARKS.md (on CUDA: docs/BENCHMARKS.cuda.md)")
    bench.add_argument("--sections", nargs="+", metavar="NAME",
                       help="time only these sections, in this order: engine, profile, lstm, ops, executors, "
                            "stem, batched, noise, pace (default: all, in that order)")
    bench.set_defaults(func=_bench)
    data = sub.add_parser(
        "data", help="fetch or stage datasets",
        description="fetch NAME... | fetch --all: stage dataset files into data/ (or $REPLICATE_DATA), verified "
                    "by checksum: from --from DIR if given (never downloads then), else from $REPLICATE_DATA_FROM "
                    "or ../shared/data when they hold the files or the official archive, else from the official "
                    "URLs. --all reports every registered dataset as ready, staged, downloaded or not available "
                    "(with the reason). list: every registered dataset, whether it is staged, whether it is "
                    "full, partial or lossy, and where its checksums come from. pack NAME... --to DIR: write "
                    "each staged dataset, verified, into DIR/NAME.pack.tar.xz, a lossless travel form that fetch "
                    "stages from as from the files themselves (each file checked again), for a machine without "
                    "internet (a GPU slot: .ci/device-bundle). See data/README.md.")
    data.add_argument("action", choices=["fetch", "list", "pack"], help="fetch, list or pack datasets")
    data.add_argument("names", nargs="*", default=[], help="datasets to fetch or pack (see `data list`)")
    data.add_argument("--all", action="store_true", help="fetch every registered dataset and report each")
    data.add_argument("--to", default=".", help="pack: the folder the packs are written to (default: here)")
    data.add_argument("--from", dest="source", default=None,
                      help="stage from this local directory instead of downloading")
    data.add_argument("--dry-run", action="store_true",
                      help="say what fetch would do for each dataset (staged, copy from a folder, download from "
                           "which URL and how large, or why not available), and do nothing")
    data.set_defaults(func=_data)
    runs = sub.add_parser(
        "cache", help="carry cached runs between machines as one file",
        description="export FILE [NAMES]: write the cached runs behind the named figures (the runs their "
                    "published claims records name; with no NAMES, the whole cache) into one xz-compressed "
                    "archive, each entry with its config hash, checksums, device type and numerics versions. "
                    "import FILE: verify every entry (checksums, cache VERSION, NUMERICS, its hash recomputed "
                    "from its recorded config) and add them to the cache, or refuse the whole archive in one line. "
                    "See replicate/runs/archive.py. checkpoints-out DIR: the cut-off runs' checkpoints as "
                    "DIR/checkpoints-<i>.tar (at most 3 files of 15 MiB); checkpoints-in PACK...: into this cache, "
                    "each member checked, so those runs resume (replicate/runs/travel.py).")
    runs.add_argument("action", choices=["export", "import", "checkpoints-out", "checkpoints-in"])
    runs.add_argument("file", help="the archive (e.g. runs.tar.xz); checkpoints-out: a folder; checkpoints-in: a "
                                   "checkpoint pack")
    runs.add_argument("names", nargs="*", default=[], help="export: figures, notebooks or papers (default: all runs); "
                                                           "checkpoints-in: more packs")
    runs.add_argument("--new", action="store_true",
                      help="export: only the runs the committed ledger lacks (what a GPU slot brings back)")
    runs.set_defaults(func=_cache)
    slots.add_parser(sub)
    rep = sub.add_parser("report", help="regenerate REPLICATION.md from figures/")
    rep.add_argument("--work", action="store_true",
                     help="first re-enumerate the GPU-scale figures' paper-profile work into figures/gpu_work.json "
                          "(loads the datasets their epoch-based runs train on; counts ops per local step)")
    rep.set_defaults(func=_report)
    args, extra = parser.parse_known_args(argv)
    if extra and isinstance(getattr(args, "names", None), list) and not any(e.startswith("-") for e in extra):
        # `data fetch --dry-run mnist`: argparse gives the names after a flag to no one where a positional (the
        # action) precedes them; they are the command's names all the same
        args.names = [*args.names, *extra]
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
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

