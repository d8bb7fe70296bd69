"""``python -m replicate data`` (stage datasets, verified) and ``cache`` (carry finished runs between machines)."""
from __future__ import annotations

import sys

from replicate.core.errors import ReplicateError


def add_parsers(sub) -> None:
    data = sub.add_parser(
        "data", help="fetch or stage datasets",
        description="fetch NAME... | fetch --all: stage dataset files into data/ (or $REPLICATE_DATA), verified "
                    "by checksum: from --from DIR if given (never downloads then), else from $REPLICATE_DATA_FROM "
                    "or ../shared/data when they hold the files or the official archive, else from the official "
                    "URLs. --all reports every registered dataset as ready, staged, downloaded or not available "
                    "(with the reason). list: every registered dataset, whether it is staged, whether it is "
                    "full, partial or lossy, and where its checksums come from. pack NAME... --to DIR: write "
                    "each staged dataset, verified, into DIR/NAME.pack.tar.xz, one lossless file that fetch "
                    "stages from as from the files themselves (each file checked again), for a machine without "
                    "internet (a cluster's compute nodes): `data fetch NAME --from DIR` there. See data/README.md.")
    data.add_argument("action", choices=["fetch", "list", "pack"], help="fetch, list or pack datasets")
    data.add_argument("names", nargs="*", default=[], help="datasets to fetch or pack (see `data list`)")
    data.add_argument("--all", action="store_true", help="fetch every registered dataset and report each")
    data.add_argument("--to", default=None, help="pack: the folder the packs are written to (default: the build "
                                                 "folder's packs/, outside the checkout's tracked files)")
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
                    "See replicate/runs/archive.py.")
    runs.add_argument("action", choices=["export", "import"])
    runs.add_argument("file", help="the archive (e.g. runs.tar.xz)")
    runs.add_argument("names", nargs="*", default=[], help="export: figures, notebooks or papers (default: all runs)")
    runs.add_argument("--new", action="store_true",
                      help="export: only the runs the committed ledger lacks (what this machine adds to it)")
    runs.set_defaults(func=_cache)


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
        from replicate.core import settings

        for name in args.names:
            path = store.pack(name, args.to or settings.current().build / "packs")
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
            action = store.fetch_plan(name, None)[0]  # the words of `data fetch --dry-run`
            state = {"staged": "staged", "copy": "stageable"}.get(action, "not fetched")
            source = "download" if ds.downloadable else "no download"
            print(f"{name:{width}s}  {state:11s}  {ds.status:7s}  {source:11s}  checksums: {ds.checksums}")
    return 0


def _cache(args) -> int:
    from pathlib import Path

    from replicate.core import settings

    if args.action == "import":
        if args.names or args.new:
            raise ReplicateError("cache import takes the archive alone: it imports every run in it")
        if not Path(args.file).is_file():  # before the heavy imports
            raise ReplicateError(f"cache import: no such archive {args.file} (a file `cache export` wrote)")
    from replicate.runs import archive

    if args.action == "import":
        written, same, elsewhere = archive.load(Path(args.file))
        print(f"imported {written} runs into {settings.current().cache} ({same} already there, identical)"
              + "".join(f"; {count} of them ran on {device}, which notebooks here read only with "
                        f"REPLICATE_DEVICE={device} (the cache never mixes device types: CPU and CUDA draw "
                        f"different random streams)" for device, count in sorted(elsewhere.items())))
        return 0
    names = None
    if args.names:
        from replicate.cli import runner

        names, unnamed, runless, records = set(), [], [], []
        for nb in runner.resolve(args.names):
            named = _recorded_runs(nb)
            if named is None:
                runless.append(nb.key)
            elif not named:
                unnamed.append(nb.key)
            for record, runs in (named or {}).items():
                names |= runs
                records.append(record)
        if runless:
            print(f"nothing to export for {', '.join(runless)}: they train no runs (tables, closed forms)",
                  file=sys.stderr)
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
            ([f"{absent} runs named by {', '.join(records)} are not in this cache (a paper-profile record names "
              "the runs `--profile paper` computes; `cache import` brings them from where they ran)"]
             if absent else [])
    size = Path(args.file).stat().st_size
    size = f"{size / 2**20:.1f} MiB" if size >= 2**20 else f"{size / 2**10:.0f} KiB"
    print(f"wrote {args.file} ({size}): {len(written)} runs" + "".join(f"; {n}" for n in notes))
    return 0


def _recorded_runs(nb) -> dict[str, set[str]] | None:
    """The cache entries each published claims record of this figure names (``run_seconds``), by the record's
    path: the committed one in figures/ and the last one in build/figures, whatever their profile; a record
    published before records named their runs is left out. None: its records show it trains no runs (a table,
    a closed form: no run provenance at all)."""
    import json
    from pathlib import Path

    from replicate.core import paths, settings
    from replicate.runs import cache

    named, records = {}, []
    for root in (paths.figures_dir(), settings.current().build / "figures"):
        claims = root / nb.paper / f"{nb.figure}.claims.json"
        if not claims.exists():
            continue
        records.append(json.loads(claims.read_text()))
        if (runs := cache.recorded_runs(records[-1])) is not None:
            shown = claims.relative_to(Path.cwd()) if paths.within(claims, Path.cwd()) else claims
            named[str(shown)] = set(runs)
    return None if records and not any("run_seconds" in record for record in records) else named


__all__ = ["add_parsers"]
