"""``python -m replicate bench``: the engine's speed, measured (BENCHMARKS.md; on CUDA docs/BENCHMARKS.cuda.md)."""
from __future__ import annotations

from replicate.core.errors import ReplicateError


def add_parser(sub) -> None:
    bench = sub.add_parser(
        "bench", help="time the vectorized engine against the sequential oracle",
        description="Times the same rounds (same client plans and mini-batches) through the vectorized "
                    "engine, the generic per-step path and the sequential per-client oracle on four workloads "
                    "(synthetic(1,1) K = 10 and 100, the MNIST Figure 1a workload, FedProx with 90% stragglers), "
                    "the FedProx LSTMs stacked vs client by client vs the oracle, the ops of one stacked local "
                    "step per model, the local pool vs Ray, STEM's CIFAR-10 round stacked vs client loop and runs "
                    "batched as a tensor dimension (R = 1, 4, 16) and how fast bad input is refused, each "
                    "section printed as it is timed (about 15-30 min on 2 idle cores); --record writes them to "
                    "BENCHMARKS.md. Speed is measured here, never asserted in tests.")
    bench.add_argument("--rounds", type=int, default=5, help="rounds timed per workload (default 5)")
    bench.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")
    bench.add_argument("--record", action="store_true",
                       help="write the result to BENCHMARKS.md (on CUDA: docs/BENCHMARKS.cuda.md)")
    bench.add_argument("--sections", nargs="+", metavar="NAME",
                       help="time only these sections, in this order: engine, profile, lstm, ops, executors, "
                            "stem, batched, noise, pace, refusals (default: all, in that order)")
    bench.set_defaults(func=_bench)


def _bench(args) -> int:
    if args.device is not None and args.device.split(":")[0] not in ("cpu", "cuda"):  # before the heavy imports
        raise ReplicateError(f"--device must be cpu or cuda (cuda:N), got {args.device!r}")
    from replicate.cli import (bench, bench_batched, bench_executors, bench_noise, bench_pace, bench_refusals,
                               bench_stem)
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
        "refusals": ("## Bad input, refused\n\n" + bench_refusals.__doc__.strip(),
                     lambda: bench_refusals.table(bench_refusals.run())),
    }
    chosen = args.sections or list(sections)
    unknown = [name for name in chosen if name not in sections]
    if unknown:
        raise ReplicateError(f"unknown bench section(s) {', '.join(unknown)}; choose from {', '.join(sections)}")
    device = args.device or str(run_device())
    cuda = device.startswith("cuda")
    if args.record and args.sections is not None and not cuda:  # a GPU session records what it had time for
        raise ReplicateError("--record with --sections would replace BENCHMARKS.md's other sections: record them "
                             "all (leave out --sections), or leave out --record")
    print(bench.describe_machine(args.device), flush=True)
    parts = []
    for heading, make in (sections[name] for name in chosen):  # in the order asked: a short session runs the first
        parts.append((heading + "\n\n" if heading else "") + make())
        print("\n" + parts[-1], flush=True)
    text = "\n\n".join(parts)
    if args.record:  # a CUDA recording has its own file: a CPU recording must not erase the last GPU one
        from replicate.core.fileio import atomic_write_text

        path = paths.REPO / ("docs/BENCHMARKS.cuda.md" if cuda else "BENCHMARKS.md")
        timed = "" if args.sections is None else f"Sections timed: {', '.join(chosen)} (`--sections`).\n\n"
        other = "" if cuda else "On CUDA: docs/BENCHMARKS.cuda.md.\n\n"
        atomic_write_text(path, f"# Benchmarks{' on CUDA' if cuda else ''}\n\n`python -m replicate bench --record"
                          f"{' --device ' + device if cuda else ''}` — vectorized engine vs sequential oracle, "
                          f"same run, same plans and batches.\n\n{other}"
                          f"{bench.__doc__.split(chr(10), 2)[2].strip()}\n\n"
                          f"Machine: {bench.describe_machine(args.device)}\n\n{timed}{text}\n")
        print(f"recorded in {path}")
    return 0


__all__ = ["add_parser"]
