"""The committed run ledger: runs computed elsewhere (a GPU, a cluster) kept in git, read before computing.

The paper profile of the GPU-scale figures is computed where a GPU is, and its runs must reach every clone
so that ``make figures`` and ``--check`` publish from them rather than recompute them on a laptop. The
ledger is ``figures/ledger/`` (the ``ledger`` setting):

- pieces ``<device>/<date>-<digest>.tar.xz``, each an archive as ``cache export`` writes it
  (``runs.archive``: every entry's JSON and CSV with their sha256, the cache ``VERSION`` and ``NUMERICS``,
  and on reading, every entry's name recomputed from its recorded config);
- ``index.json``: each piece's file, sha256, run count, the machines its runs computed on and a note.

**What it promises.** A piece is read only if its bytes match the index's sha256, and an entry only if
its checksums and name verify: damage, and an edit of a piece alone (even with its manifest rewritten
to fit), is refused in one line and nothing of that piece is used. Editing a piece *and* the index
together is a deliberate change that git shows in review; the ledger does not defend against that.
Each run is in the ledger once: a run computed again (another machine, another GPU model: CUDA runs of
one key agree across models within float32 rounding only) is not added; the first one stays.

``sync`` copies the ledger into this machine's run cache before computing (``figures --profile
paper`` and ``--check``): a cached entry whose CSV differs from the ledger's is moved
to ``<cache>/replaced/`` and the ledger's taken, so every clone publishes from the same runs. ``add``
makes a machine's archive (``cache export --new``) a new piece of the runs the ledger lacks.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import time
from pathlib import Path

from replicate.core import settings
from replicate.core.errors import ReplicateError
from replicate.core.fileio import atomic_write_text
from replicate.runs import archive, cache

INDEX = "index.json"
FORMAT = 1


def root() -> Path | None:
    return settings.current().ledger


def index(folder: Path | None = None) -> list[dict]:
    """The pieces the ledger lists, oldest first (none when it has no index)."""
    folder = folder or root()
    if folder is None or not (folder / INDEX).is_file():
        return []
    try:
        data = json.loads((folder / INDEX).read_text())
        pieces = data["pieces"]
        assert data.get("format") == FORMAT and all({"file", "sha256"} <= set(p) for p in pieces)
    except (ValueError, KeyError, TypeError, AssertionError):
        raise ReplicateError(f"{folder / INDEX} is not a ledger index this code reads (format {FORMAT})") from None
    return pieces


def verified_piece(piece: dict, folder: Path | None = None) -> list[tuple[archive.Entry, dict[str, bytes]]]:
    """A listed piece's entries, after its bytes are checked against the index's sha256 and every entry
    against its manifest (``archive.verified``)."""
    folder = folder or root()
    path = folder / piece["file"]
    if Path(piece["file"]).is_absolute() or ".." in Path(piece["file"]).parts:
        raise ReplicateError(f"{folder / INDEX}: piece {piece['file']!r} lies outside the ledger")
    try:
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
    except FileNotFoundError:
        raise ReplicateError(f"ledger piece {path} is listed in {INDEX} but missing") from None
    if digest != piece["sha256"]:
        raise ReplicateError(f"ledger piece {path} does not match its sha256 in {INDEX} (damaged or edited): "
                             "none of its runs is used")
    return archive.verified(path)


def entries(folder: Path | None = None) -> dict[str, tuple[archive.Entry, dict[str, bytes]]]:
    """Every run of the ledger by entry name, verified (a damaged piece raises, naming it)."""
    folder = folder or root()
    found = {}
    for piece in index(folder):
        for entry, data in verified_piece(piece, folder):
            found.setdefault(entry.name, (entry, data))
    return found


def runs(folder: Path | None = None) -> dict[str, dict]:
    """Every run of the ledger by entry name: its sidecar's fields (config, device, machine, elapsed_s) and
    ``trained``: whether its last training loss is finite (a diverged run stops computing early)."""
    return {name: json.loads(data[".json"]) | {"trained": _finite_end(data[".csv"])}
            for name, (_, data) in entries(folder).items()}


def _finite_end(csv: bytes) -> bool:
    header, *rows = csv.decode().strip().splitlines()
    column = header.split(",").index("train_loss") if "train_loss" in header.split(",") else None
    if column is None or not rows:
        return True
    try:
        return math.isfinite(float(rows[-1].split(",")[column]))
    except ValueError:
        return False


def add(file: Path, note: str = "", folder: Path | None = None, wall_s: float | None = None,
        machine: str | None = None) -> tuple[list[Path], int, int, list[str]]:
    """Make the runs of an archive that the ledger lacks a new piece (one per device type). Returns the
    pieces written, the runs added, the runs already there with the same CSV, and the names already there
    with another CSV (not added: the first computation stays). ``wall_s``: the seconds the machine spent
    computing the archive's runs, kept with ``run_s`` (their recorded run-seconds) for the estimate's concurrency;
    ``machine``: the processor, for runs whose sidecars do not name it (computed before they did)."""
    folder = folder or root()
    if folder is None:
        raise ReplicateError("the ledger is off (REPLICATE_LEDGER=off): nothing to add to")
    known = {name: data[".csv"] for name, (_, data) in entries(folder).items()}
    new, same, conflicts = {}, 0, []
    for entry, data in archive.verified(Path(file)):
        if entry.name in known:
            if known[entry.name] == data[".csv"]:
                same += 1
            else:
                conflicts.append(entry.name)
            continue
        device = str(json.loads(data[".json"])["device"]).split(":")[0]
        new.setdefault(device, []).append((entry, data))
        known[entry.name] = data[".csv"]
    written, pieces = [], index(folder)
    for device, items in sorted(new.items()):
        digest = hashlib.sha256("".join(sorted(e.name + hashlib.sha256(d[".csv"]).hexdigest()
                                               for e, d in items)).encode())
        relative = Path(device) / f"{time.strftime('%Y-%m-%d', time.gmtime())}-{digest.hexdigest()[:12]}.tar.xz"
        archive.write(folder / relative, sorted(items, key=lambda item: item[0].name))
        machines = sorted({json.loads(d[".json"]).get("machine") or machine or "not recorded" for _, d in items})
        pieces.append({"file": relative.as_posix(),
                       "sha256": hashlib.sha256((folder / relative).read_bytes()).hexdigest(),
                       "runs": len(items), "device": device, "machines": machines, "note": note,
                       "added": time.strftime("%Y-%m-%dT%H:%MZ", time.gmtime()),
                       "run_s": round(sum(json.loads(d[".json"]).get("elapsed_s") or 0 for _, d in items), 1)}
                      | ({"wall_s": wall_s} if wall_s and len(new) == 1 else {}))
        written.append(folder / relative)
    if written:
        atomic_write_text(folder / INDEX, json.dumps({"format": FORMAT, "pieces": pieces}, indent=1,
                                                     ensure_ascii=False) + "\n")
    return written, sum(len(items) for items in new.values()), same, conflicts


def sync(folder: Path | None = None) -> tuple[int, int, int]:
    """Copy every ledger run into this machine's run cache. Returns (written, already there with the same
    CSV, replaced: cached with another CSV, moved to ``<cache>/replaced/``)."""
    folder = folder or root()
    if folder is None:
        return 0, 0, 0
    written = same = replaced = 0
    for entry, data in entries(folder).values():
        here = entry.path(".csv")
        if cache.present(entry.path(""), vouched=data[".csv"]):  # a damaged one is moved aside (``cache.quarantine``)
            if here.read_bytes() == data[".csv"]:
                same += 1
                continue
            aside = settings.current().cache / "replaced"
            aside.mkdir(parents=True, exist_ok=True)
            for suffix in (".json", ".csv"):
                os.replace(entry.path(suffix), aside / f"{entry.name}{suffix}")
            replaced += 1
        archive.put(entry, data)
        written += 1
    return written, same, replaced


def new_in_cache(folder: Path | None = None) -> set[str]:
    """Names of the cached runs the ledger lacks (what this machine adds: ``cache export --new``)."""
    folder = folder or root()
    known = set(entries(folder)) if folder is not None else set()
    return {entry.name for entry in archive.entries() if entry.name not in known}


__all__ = ["INDEX", "add", "entries", "index", "new_in_cache", "root", "runs", "sync", "verified_piece"]
