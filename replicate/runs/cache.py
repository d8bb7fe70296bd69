"""Results of runs cached on disk by config hash.

Each run is stored as ``<hash>.csv`` (its per-round metrics) next to
``<hash>.json`` (its full config, the CSV's sha256 and row count, and the sha256 of its own other
fields), both written atomically, so an interrupted batch resumes from the runs it finished and a rerun
with the same config loads instead of recomputing. An entry is verified whenever it is read: one whose
CSV does not match its sidecar (truncated, a flipped byte, emptied), whose sidecar does not match its own
checksum (its time and processor feed the claims records and the GPU estimate) or is gone, or whose
sidecar records no checksum at all (written before the cache recorded them: nothing can verify it), is
moved aside to ``damaged/``, reported in one line, and recomputed; it is never used. Entries are named
by ``replicate.runs.keys`` (bump its ``VERSION`` or ``NUMERICS`` when the engine's numbers change).
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import sys
import time
from pathlib import Path

import pandas as pd
import torch

from replicate.core import settings
from replicate.core.errors import ReplicateError
from replicate.fl import engine
from replicate.core import fileio
from replicate.core.fileio import atomic_write_text, check_writable
from replicate.core.machine import describe
from replicate.core.threads import threads
from replicate.runs import checkpoints, own
from replicate.runs.config import RunConfig, build, run_device
from replicate.runs.runlog import RunLog  # noqa: F401  (cache.RunLog: what a notebook passes on)
# entries are named by runs/keys.py (its versions are read there: keys.VERSION, keys.NUMERICS, keys.DRAWS);
# its functions are the cache's too (cache.key, cache.entry_name, ...)
from replicate.runs.keys import VERSION, entry_name, key, metrics_key, numerics, own_code  # noqa: F401

# pandas < 3 reads a float's shortest text up to one ulp off with its default parser (seen on a GPU machine's
# pandas 2: a cached run then differed from the same run computed); "round_trip" reads it exactly, and pandas 3,
# which the requirements pin, reads it exactly by default and deprecates the option
EXACT_FLOATS = {} if int(pd.__version__.split(".")[0]) >= 3 else {"float_precision": "round_trip"}


def _file(config: RunConfig, stop_loss: float | None, suffix: str, extra_metrics=None):
    """``runs/<key>.csv|json``, or ``to_target/<key>_to_<loss>.csv|json`` for stopped runs."""
    name = key(config, extra_metrics)
    if stop_loss is None:
        return settings.current().cache / "runs" / f"{name}{suffix}"
    return settings.current().cache / "to_target" / f"{name}_to_{stop_loss:g}{suffix}"


def entry(config: RunConfig, stop_loss: float | None = None, extra_metrics=None) -> str:
    """A run's entry name (``RunLog``'s keys): ``<key>`` or ``<key>_to_<loss>``."""
    return _file(config, stop_loss, "", extra_metrics).name


def _with(entry: Path, suffix: str) -> Path:
    return entry.parent / f"{entry.name}{suffix}"  # not with_suffix: "<key>_to_0.29" has a dot of its own


def _sidecars():
    """Each cached run's sidecar, parsed (``None`` for one that cannot be read)."""
    for sidecar in (p for folder in ("runs", "to_target") for p in (settings.current().cache / folder).glob("*.json")):
        try:
            meta = json.loads(sidecar.read_text())
            yield meta if isinstance(meta, dict) else None
        except (OSError, ValueError):
            yield None


def older_entries() -> int:
    """How many cached runs an older cache wrote (their sidecars record another or no ``VERSION``, or no
    checksum): never read again, so a user should hear that they will be recomputed."""
    return sum(meta is None or meta.get("version") != VERSION or "csv_sha256" not in meta for meta in _sidecars())


def datasets_read() -> set[str]:
    """The datasets (their builders' names) that the cached runs read, as their sidecars record them."""
    return {meta["dataset"] for meta in _sidecars() if meta and isinstance(meta.get("dataset"), str)}


def recorded_runs(record: dict) -> dict[str, float] | None:
    """The cache entries a published claims record names, with their compute seconds (``run_seconds``),
    or None where it names none this code can find: never recorded, or recorded under another cache
    ``VERSION`` (the same runs are keyed otherwise now)."""
    return record.get("run_seconds") if record.get("cache_version") == VERSION else None


def is_cached(name: str) -> bool:
    """Whether the run named ``name`` (a key of ``RunLog.provenance()["run_seconds"]``) is in the cache, whole."""
    return any(present(settings.current().cache / folder / name) for folder in ("runs", "to_target"))


def integrity(csv: bytes | str) -> dict:
    """What a sidecar records to verify its CSV by: the sha256 of its bytes and its number of rows."""
    data = csv.encode() if isinstance(csv, str) else csv
    return {"csv_sha256": hashlib.sha256(data).hexdigest(), "rows": max(data.count(b"\n") - 1, 0)}


SEAL = "sidecar_sha256"  # a sidecar's checksum of its other fields (``sealed``)
UNCHECKED = "its sidecar records no checksum (an entry of an older cache): nothing can verify it"


def sealed(meta: dict) -> dict:
    """A sidecar's fields with the checksum of the others (``SEAL``, ``core.fileio.seal_of``), as the cache
    writes them: its config, time and processor are then verified when read, as its CSV is."""
    return fileio.sealed(meta, SEAL)


def seal_broken(meta: dict) -> bool:
    """Whether a sidecar's fields changed since it was sealed (one written before sidecars were sealed: no)."""
    return SEAL in meta and meta[SEAL] != fileio.seal_of(meta, SEAL)


def damage(entry: Path) -> str | None:
    """Why the cache entry ``entry`` (``folder/<name>``, no suffix) may not be read (None: it may).
    A sidecar without ``csv_sha256`` (written before the cache recorded checksums) is refused: nothing can
    verify its CSV. One with ``csv_sha256`` but no ``SEAL`` (written before sidecars sealed their own fields)
    has its CSV verified, its other fields as they are."""
    csv, sidecar = _with(entry, ".csv"), _with(entry, ".json")
    try:
        data = csv.read_bytes()
    except FileNotFoundError:
        return "its CSV is missing"
    try:
        meta = json.loads(sidecar.read_text())
    except FileNotFoundError:
        return "its sidecar (.json) is missing"
    except ValueError:
        return "its sidecar (.json) does not parse"
    if not isinstance(meta, dict) or "csv_sha256" not in meta:
        return UNCHECKED
    if seal_broken(meta):
        return "its sidecar (.json) does not match its own checksum"
    found = integrity(data)
    if found["rows"] != meta.get("rows"):
        return f"its CSV has {found['rows']} rows, its sidecar records {meta.get('rows')}"
    return None if found["csv_sha256"] == meta["csv_sha256"] else "its CSV does not match its sidecar's checksum"


def present(entry: Path, vouched: bytes | None = None) -> bool:
    """Whether ``entry`` is in the cache and whole; a damaged one is moved aside (``quarantine``). ``vouched``:
    a verified CSV of this entry the caller is about to write (a ledger's, an archive's): an older cache's
    entry of those very bytes is then not damaged, only not verified here, and is left for the caller to
    replace (False, without a warning)."""
    if not _with(entry, ".csv").exists() and not _with(entry, ".json").exists():
        return False
    why = damage(entry)
    if why is None:
        return True
    if why == UNCHECKED and vouched is not None and _with(entry, ".csv").read_bytes() == vouched:
        return False
    if _with(entry, ".csv").exists():  # a lone sidecar is a write in progress or an interrupted one: left alone
        quarantine(entry, why)
    return False


def quarantine(entry: Path, why: str) -> None:
    """Move a damaged entry's files to ``<cache>/damaged/`` (kept for inspection, never read) and say so on
    stderr in one line: the run is recomputed."""
    aside = settings.current().cache / "damaged"
    aside.mkdir(parents=True, exist_ok=True)
    for suffix in (".csv", ".json"):
        if _with(entry, suffix).exists():
            os.replace(_with(entry, suffix), aside / f"{entry.name}{suffix}")
    print(f"warning: cached run {entry.parent.name}/{entry.name} is damaged ({why}): moved to {aside} and "
          "recomputed, not used", file=sys.stderr, flush=True)


def damaged_since(start: float) -> list[str]:
    """Entries moved aside as damaged since ``start`` (a ``time.time()``), for a caller whose output the user
    sees (a notebook kernel's stderr is not the terminal)."""
    aside = settings.current().cache / "damaged"
    return sorted(p.stem for p in aside.glob("*.csv") if p.stat().st_mtime >= start) if aside.is_dir() else []


def writable(folder: Path) -> None:
    """Before a run computes: the cache ``folder`` it goes into can be written (created if needed), so a
    read-only or misplaced ``REPLICATE_CACHE`` is one line before the compute, not an ``OSError`` after it."""
    if folder in _WRITABLE:
        return
    try:
        check_writable(folder)
    except ReplicateError as exc:
        raise ReplicateError(f"{exc}: runs could not be cached, so none is computed (REPLICATE_CACHE names the "
                             f"run cache; point it at a folder you can write)") from None
    _WRITABLE.add(folder)


_WRITABLE: set[Path] = set()  # folders found writable by this process


def plan(jobs, log: RunLog | None) -> list:
    """The jobs (``(config, target, extra_metrics)``, as ``pool.Job``) missing from the cache, announced
    to ``log`` so that its runs done / total is right before the first of them starts; the cache must be
    writable when any is missing (``writable``)."""
    entries = {job: _file(*job[:2], "", *job[2:]) for job in dict.fromkeys(jobs)}
    missing = [job for job, entry in entries.items() if not present(entry)]
    for folder in {entries[job].parent for job in missing}:  # runs/, to_target/
        writable(folder)
    if log is not None:
        log.planned([entries[job].name for job in missing])
    return missing


def load(config: RunConfig, stop_loss: float | None = None, extra_metrics=None) -> pd.DataFrame | None:
    """The cached history of this run, verified (``damage``); None when absent or damaged."""
    entry = _file(config, stop_loss, "", extra_metrics)
    return pd.read_csv(_with(entry, ".csv"), **EXACT_FLOATS) if present(entry) else None


def run(config: RunConfig, *, stop_loss: float | None = None, progress: bool = True, use_cache: bool = True,
        log: RunLog | None = None, problem=None, extra_metrics=None) -> pd.DataFrame:
    """Metrics per round for one config, from the cache when present: the one run path.

    With ``stop_loss`` the run ends at the first evaluated round whose global training loss
    is at most that value (rounds-to-target sweeps); such runs are cached separately.
    ``problem`` serves a ``dataset="given"`` config (built by the caller, so never cached).
    """
    log = log if log is not None else RunLog(progress_file=None, display=False)  # e.g. in a worker process
    # a dataset or a torch.nn.Module of one's own is keyed by its contents, and the run computes with the objects
    # themselves (runs.own); a flat-vector Model object is never keyed
    keyed = own.named(config) if use_cache and problem is None and not config.cacheable else config
    use_cache = use_cache and keyed.cacheable
    if problem is not None and use_cache:
        raise ReplicateError("a run on a given problem cannot be cached: pass use_cache=False")
    entry = _file(keyed, stop_loss, "", extra_metrics) if use_cache else None
    if use_cache and (cached := load(keyed, stop_loss, extra_metrics)) is not None:
        sidecar = json.loads(_with(entry, ".json").read_text())
        log.record(sidecar.get("elapsed_s"), cached=_with(entry, ".csv") not in log.fresh, dataset=config.dataset_name,
                   key=entry.name, machine=sidecar.get("machine"))
        return cached
    device = run_device()
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ReplicateError(f"run {entry.name if entry else config.dataset_name} is not in the cache and runs are "
                             "read for CUDA (REPLICATE_DEVICE), but this machine has none: compute it on a CUDA "
                             "machine and `cache import` it, or unset REPLICATE_DEVICE to compute CPU runs here")
    if use_cache:
        writable(entry.parent)
    log.started(entry.name if entry else None)
    history, text, meta = compute(config, stop_loss=stop_loss, extra_metrics=extra_metrics, device=device,
                                  progress=progress, problem=problem, serialize=use_cache,
                                  checkpoint=entry.name if use_cache else None)
    log.record(meta["elapsed_s"], cached=False, dataset=config.dataset_name, key=entry.name if use_cache else None,
               machine=meta["machine"])
    log.finished()
    if use_cache:
        store(keyed, stop_loss, extra_metrics, text, meta | keyed.to_dict())  # recorded as keyed: names, not objects
    return history


def compute(config: RunConfig, *, stop_loss: float | None = None, extra_metrics=None, device=None,
            progress: bool = False, problem=None, serialize: bool = True,
            checkpoint: str | None = None) -> tuple[pd.DataFrame, str | None, dict]:
    """Compute one run, touching no file but its checkpoint (``checkpoint``: its entry name, to resume from
    and save to, ``runs.checkpoints``): its history, that history as the cache's CSV text (when
    ``serialize``) and its sidecar's fields. A worker anywhere (a process of this machine, a Ray node
    without this checkout) calls it and hands the text and fields back; ``store`` writes them."""
    device = torch.device(device) if device is not None else run_device()
    start = time.perf_counter()
    problem, _, work, _, objective = build(config, device=device, problem=problem)
    (history, text, meta), = train(problem, [(config, stop_loss, extra_metrics)], work, objective, progress=progress,
                                   saved=checkpoints.FileCheckpoints([checkpoint]) if checkpoint else None,
                                   serialize=serialize, start=start)
    return history, text, meta


def train(problem, jobs: list, work, objective, *, progress: bool = False, saved=None, serialize: bool = True,
          start: float | None = None) -> list[tuple[pd.DataFrame, str | None, dict]]:
    """The one route from run configs to the engine: ``jobs`` (config, target, extra metrics), equal in
    ``runs.batched.batch_key``, trained together by ``engine.run_batch`` (one job: a run alone) on ``problem``
    with ``work`` and ``objective`` (``build``'s), each run's algorithm and schedule its config's, each
    returned as (history, CSV text, sidecar fields). Each run's ``elapsed_s`` is its share of the time since
    ``start`` (default: now; ``compute`` counts its problem's build too)."""
    first = jobs[0][0]
    specs = [engine.RunSpec(config.algorithm, config.schedule(), config.seed, config.rounds,
                            None if target is None else (lambda row, t=target: row["train_loss"] <= t))
             for config, target, _ in jobs]
    start = time.perf_counter() if start is None else start
    desc = (f"{first.dataset_name} {first.algorithm_name} E={work.amount} K={first.clients_per_round}"
            if len(jobs) == 1 else f"{first.dataset_name} {first.algorithm_name} × {len(jobs)} runs")
    # One intra-op thread, whoever computes the run (a worker, this process, a Ray node, a GPU host): a
    # CPU's reductions split across threads round differently (FedProx MNIST differs from round 1 at 1 vs
    # 2 threads), and the key names no thread count. On a busy CPU it is also the faster choice for
    # these small ops (a second thread waiting at every small conv's barrier made a LeNet step 5× slower).
    with threads(1):
        histories = engine.run_batch(problem, specs, work, objective=objective, rounds=first.rounds,
                                     eval_every=first.eval_every, execution=first.execution, progress=progress,
                                     extra_metrics=jobs[0][2], checkpoints=saved, desc=desc)
    share = (time.perf_counter() - start) / len(jobs)  # each run's share of the batch's time
    notes = {"batch": len(jobs)} if len(jobs) > 1 else {}
    return [(history, *entry_of(config, target, metrics, history, share, problem.device, serialize, **notes))
            for (config, target, metrics), history in zip(jobs, histories)]


def entry_of(config: RunConfig, stop_loss: float | None, extra_metrics, history: pd.DataFrame, elapsed: float,
             device, serialize: bool = True, **notes) -> tuple[str | None, dict]:
    """A computed run as ``store`` takes it: the history as the cache's CSV text (when ``serialize``) and
    the sidecar's fields; ``notes`` join them (e.g. ``batch``: how many runs trained together)."""
    text = None
    if serialize:
        buffer = io.StringIO()
        history.to_csv(buffer, index=False)
        text = buffer.getvalue()
    meta = config.to_dict() | {"elapsed_s": round(elapsed, 3), "device": str(device), "machine": describe(device),
                               "extra_metrics": metrics_key(extra_metrics), "version": VERSION} | notes
    if text is not None:
        meta |= integrity(text)
    if stop_loss is not None:
        meta["target"] = stop_loss
    if code := own_code(config):  # the code of one's own in its key, for a process that has not imported it
        meta["code"] = code
    return text, meta


def store(config: RunConfig, stop_loss: float | None, extra_metrics, text: str, meta: dict) -> None:
    """Write a computed run into this machine's cache (sidecar, then CSV, each atomically: the CSV's
    presence means a whole entry), under the key this process gives it."""
    entry = _file(config, stop_loss, "", extra_metrics)
    if "csv_sha256" in meta and integrity(text) != {k: meta[k] for k in ("csv_sha256", "rows")}:
        raise ReplicateError(f"run {entry.name} came back damaged (its CSV does not match its checksum): not stored")
    meta = integrity(text) | meta  # a worker of older code sends none: checksummed here, as it is stored
    if entry_name(meta) != entry.name:  # e.g. a worker on another device type, or running other code
        raise ReplicateError(f"run {entry.name} came back as {entry_name(meta)} (computed on {meta['device']}, "
                             f"cache version {meta['version']}): not stored")
    atomic_write_text(_with(entry, ".json"), json.dumps(sealed(meta), indent=1))
    atomic_write_text(_with(entry, ".csv"), text)
    checkpoints.clear(entry.name)  # stored: its checkpoint is not needed
