"""Where things live and how this process is set: every environment variable the package reads is read
here and nowhere else (``SETTINGS`` names them all; ``tests/test_project.py`` checks that no other module
reads the environment). The environment is how settings reach the processes a command starts (papermill
kernels, worker processes, Ray tasks), so they are read on demand from it, and ``settings()`` checks every one
at the edge: ``python -m replicate`` calls it before any command does anything, so a bad value is one line
there, not a failed notebook."""
from __future__ import annotations

import os
import re
from pathlib import Path

from replicate.core.errors import ReplicateError

REPO = Path(__file__).resolve().parents[2]


def _env(name: str, default: Path) -> Path:
    """An overridable location, made absolute here: the runner's kernels run in other folders, so a
    relative ``REPLICATE_BUILD=build/x`` must mean the same folder for them as for the caller."""
    value = os.environ.get(name)
    return Path(value).resolve() if value else default


LOCATIONS = ("REPLICATE_BUILD", "REPLICATE_CACHE", "REPLICATE_DATA", "REPLICATE_DATA_FROM", "REPLICATE_LEDGER")


def pin_environment() -> None:
    """Make relative location variables absolute in this process's environment, so the processes it
    starts (papermill kernels run in notebooks/, worker processes anywhere) mean the same folders."""
    for name in LOCATIONS:
        if os.environ.get(name) and os.environ[name] not in ("off", "none"):  # switches, not folders
            os.environ[name] = str(Path(os.environ[name]).resolve())


def data_dir() -> Path:
    """Download/cache root for datasets (`REPLICATE_DATA`, default `<repo>/data`)."""
    return _env("REPLICATE_DATA", REPO / "data")


def local_data_source() -> Path | None:
    """Directory to stage datasets from instead of downloading (`REPLICATE_DATA_FROM`, which must be a folder;
    `none`: no local copy; default `../shared/data` beside the checkout when it exists)."""
    if os.environ.get("REPLICATE_DATA_FROM") == "none":  # no local copy: download
        return None
    if os.environ.get("REPLICATE_DATA_FROM"):
        folder = _env("REPLICATE_DATA_FROM", REPO)
        if not folder.is_dir():  # said before anything is fetched, not silently replaced by a download
            raise ReplicateError(f"REPLICATE_DATA_FROM={os.environ['REPLICATE_DATA_FROM']} is not a folder: point it "
                                 "at the folder holding the dataset files, or unset it to download")
        return folder
    shared = REPO.parent / "shared" / "data"
    return shared if shared.is_dir() else None


def catalog_override() -> Path | None:
    """A JSON file that points catalogue entries at other URLs and checksums (`REPLICATE_CATALOG_OVERRIDE`):
    for tests only, which serve fabricated official files from 127.0.0.1 (``replicate.data.store``)."""
    value = os.environ.get("REPLICATE_CATALOG_OVERRIDE")
    return Path(value).resolve() if value else None


def stand_ins() -> bool:
    """Whether figures read this machine's offline stand-ins instead of the official data (`REPLICATE_STAND_INS`:
    1 or 0, default 0). The default of every figure's ``data_source`` knob (``replicate.data.variants``); a stand-in
    is always labelled where it is used."""
    value = os.environ.get("REPLICATE_STAND_INS", "0")
    if value not in ("0", "1"):
        raise ReplicateError(f"REPLICATE_STAND_INS must be 1 (read the offline stand-ins) or 0 (the official data), "
                             f"got {value!r}")
    return value == "1"


def run_device() -> str | None:
    """The device runs are computed on and read back for (`REPLICATE_DEVICE`: cpu, cuda or cuda:N;
    default: CUDA when present). A CPU machine given `REPLICATE_DEVICE=cuda` reads the CUDA runs
    imported into its cache and refuses to compute any that are missing."""
    value = os.environ.get("REPLICATE_DEVICE")
    if value and not re.fullmatch(r"cpu|cuda(:\d+)?", value):
        raise ReplicateError(f"REPLICATE_DEVICE must be cpu, cuda or cuda:N, got {value!r}")
    return value or None


EXECUTORS = ("local", "ray")


def executor() -> str:
    """Where a sweep's missing runs are computed (`REPLICATE_EXECUTOR`: local, the default, a pool of
    worker processes on this machine; or ray, the Ray cluster at `ray_address()`)."""
    value = os.environ.get("REPLICATE_EXECUTOR") or "local"
    if value not in EXECUTORS:
        raise ReplicateError(f"REPLICATE_EXECUTOR (--executor) must be one of {', '.join(EXECUTORS)}, got {value!r}")
    return value


def ray_address() -> str | None:
    """The Ray cluster the ray executor joins (`RAY_ADDRESS`, Ray's own variable: host:port of its head
    node, ray://host:port, or auto); None: a private cluster of this machine, started for the sweep."""
    return os.environ.get("RAY_ADDRESS") or None


def _positive_int(name: str) -> int | None:
    """The environment variable ``name`` as a positive whole number; None when unset or empty."""
    value = os.environ.get(name)
    if not value:
        return None
    if not value.isdigit() or int(value) < 1:
        raise ReplicateError(f"{name} must be a positive whole number, got {value!r}")
    return int(value)


def workers() -> int | None:
    """Worker processes of the local executor (`REPLICATE_WORKERS`); None: one per usable CPU core."""
    return _positive_int("REPLICATE_WORKERS")


def batch_runs() -> int | None:
    """Runs the sweep runner may train as one batch (`REPLICATE_BATCH_RUNS`, `--batch-runs`; 1: one by one).
    None when unset: the runner's default (``runs.batched.default_runs``: batched where rows compute bitwise
    as runs alone, or on CUDA)."""
    return _positive_int("REPLICATE_BATCH_RUNS")


def ray_gpus() -> float:
    """GPUs a Ray task of CUDA runs asks for (`REPLICATE_RAY_GPUS`, default 1; a fraction such as 0.25
    packs four runs on one GPU)."""
    value = os.environ.get("REPLICATE_RAY_GPUS") or "1"
    try:
        gpus = float(value)
    except ValueError:
        gpus = -1.0
    if not 0 < gpus <= 1 and not (gpus > 1 and gpus.is_integer()):
        raise ReplicateError(f"REPLICATE_RAY_GPUS must be a fraction in (0, 1] or a whole number, got {value!r}")
    return gpus


def build_dir() -> Path:
    """Scratch space outside git: executed notebooks, staged figures, result cache."""
    return _env("REPLICATE_BUILD", REPO / "build")


def cache_dir() -> Path:
    return _env("REPLICATE_CACHE", build_dir() / "cache")


def figures_dir() -> Path:
    """Committed paper-scale outputs."""
    return REPO / "figures"


def ledger_dir() -> Path | None:
    """The committed run ledger (`REPLICATE_LEDGER`, default `figures/ledger`; `off`: none, as the number
    guard runs, which must recompute from nothing): runs computed elsewhere, a GPU slot's, read before
    computing (``replicate.runs.ledger``)."""
    value = os.environ.get("REPLICATE_LEDGER")
    if value == "off":
        return None
    return _env("REPLICATE_LEDGER", figures_dir() / "ledger")


def notebooks_dir() -> Path:
    return REPO / "notebooks"


def within(path: str | os.PathLike, root: str | os.PathLike) -> bool:
    """True when ``path`` is ``root`` or lies under it, once both are resolved (``..``, links, cwd)."""
    return Path(path).resolve().is_relative_to(Path(root).resolve())


def checkpoint_s() -> float:
    """Seconds of a batch's training between checkpoints (`REPLICATE_CHECKPOINT_S`, default 120; 0: never)."""
    value = os.environ.get("REPLICATE_CHECKPOINT_S") or "120"
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if seconds < 0:
        raise ReplicateError(f"REPLICATE_CHECKPOINT_S must be a number of seconds >= 0, got {value!r}")
    return seconds


# Set by a driver for the processes it starts, not by users: the file a notebook's kernel writes its runs'
# progress to (the batch runner polls it), and the file that asks worker processes to stop at a round boundary.
PROGRESS_FILE, STOP_FILE = "REPLICATE_PROGRESS", "REPLICATE_STOP_FILE"


def progress_file() -> str | None:
    return os.environ.get(PROGRESS_FILE) or None


def stop_file() -> Path | None:
    value = os.environ.get(STOP_FILE)
    return Path(value) if value else None


SETTINGS = {"REPLICATE_BUILD": build_dir, "REPLICATE_CACHE": cache_dir, "REPLICATE_DATA": data_dir,
            "REPLICATE_DATA_FROM": local_data_source, "REPLICATE_LEDGER": ledger_dir,
            "REPLICATE_CATALOG_OVERRIDE": catalog_override, "REPLICATE_STAND_INS": stand_ins,
            "REPLICATE_DEVICE": run_device, "REPLICATE_EXECUTOR": executor, "RAY_ADDRESS": ray_address,
            "REPLICATE_WORKERS": workers, "REPLICATE_BATCH_RUNS": batch_runs, "REPLICATE_RAY_GPUS": ray_gpus,
            "REPLICATE_CHECKPOINT_S": checkpoint_s, PROGRESS_FILE: progress_file, STOP_FILE: stop_file}


def settings(skip=()) -> dict:
    """Every setting's value as this process reads it (``SETTINGS``: variable → reader), each checked: one
    ``ReplicateError`` naming every bad value at once (``skip``: variables a command's own flag replaces)."""
    values, errors = {}, []
    for name, read in SETTINGS.items():
        if name in skip:
            continue
        try:
            values[name] = read()
        except ReplicateError as error:
            errors.append(str(error))
    if errors:
        raise ReplicateError("; ".join(errors))
    return values
