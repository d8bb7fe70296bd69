"""How this process is set: one ``Settings`` object, read from the environment once, at the edge.

The edge is where a process starts doing this package's work: ``python -m replicate`` reads the environment,
applies its command's flags (``--workers``, ``--executor``, …), checks every value (one error naming each bad
one) and runs the command under the result (``use``); a notebook kernel or a process that imports the package
reads it at its first ``current()``. Below the edge nothing reads the environment: code asks ``current()`` for
the settings of its scope, and a caller that wants others for a scope says so (``use``). The environment is
only how settings travel to the processes a command starts that are not ours to call (papermill's kernels:
``child_environment``), and no command writes its own; our worker processes and Ray tasks are handed the object
itself. ``tests/test_project.py`` checks that this module is the one reader of the environment.
"""
from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path

from replicate.core import paths
from replicate.core.errors import ReplicateError

EXECUTORS = ("local", "ray")
FOLDERS = ("build", "cache", "data", "data_from", "ledger", "catalog_override", "progress_file", "stop_file")


@dataclasses.dataclass(frozen=True)
class Settings:
    """Every setting of the package, with the environment variable a user sets it by (docs/settings.md's table)."""

    build: Path = dataclasses.field(default_factory=lambda: paths.REPO / "build")  # REPLICATE_BUILD: executed
    # notebooks, staged figures and, by default, the run cache
    cache: Path | None = None  # REPLICATE_CACHE: the run cache (None: build/cache)
    data: Path = dataclasses.field(default_factory=lambda: paths.REPO / "data")  # REPLICATE_DATA: staged datasets
    data_from: Path | None = None  # REPLICATE_DATA_FROM: a folder to stage datasets from (None: download)
    ledger: Path | None = dataclasses.field(default_factory=lambda: paths.figures_dir() / "ledger")  # REPLICATE_LEDGER:
    # the committed run ledger (None: off)
    catalog_override: Path | None = None  # REPLICATE_CATALOG_OVERRIDE: tests' fabricated official downloads
    stand_ins: bool = False  # REPLICATE_STAND_INS: figures read the offline stand-ins by default
    device: str | None = None  # REPLICATE_DEVICE: cpu, cuda, cuda:N (None: CUDA when present)
    executor: str = "local"  # REPLICATE_EXECUTOR: local worker processes or ray
    ray_address: str | None = None  # RAY_ADDRESS: the Ray cluster (None: a private instance)
    workers: int | None = None  # REPLICATE_WORKERS: local worker processes (None: one per usable core)
    batch_runs: int | None = None  # REPLICATE_BATCH_RUNS: runs trained as one batch (None: the runner's default)
    ray_gpus: float = 1.0  # REPLICATE_RAY_GPUS: GPUs a Ray task of CUDA runs asks for
    checkpoint_s: float = 120.0  # REPLICATE_CHECKPOINT_S: seconds of training between checkpoints (0: never)
    progress_file: Path | None = None  # REPLICATE_PROGRESS: set by the batch runner for a notebook's kernel
    stop_file: Path | None = None  # REPLICATE_STOP_FILE: set by a driver: the file asking its runs to stop

    def __post_init__(self):
        for name in FOLDERS:  # absolute, whoever made them: a kernel starts in notebooks/ (``environment``)
            if (value := getattr(self, name)) is not None:
                object.__setattr__(self, name, Path(value).resolve())
        if self.cache is None:
            object.__setattr__(self, "cache", self.build / "cache")
        errors = [message for check, message in (
            (self.device is None or re.fullmatch(r"cpu|cuda(:\d+)?", self.device),
             f"REPLICATE_DEVICE must be cpu, cuda or cuda:N, got {self.device!r}"),
            (self.executor in EXECUTORS,
             f"REPLICATE_EXECUTOR (--executor) must be one of {', '.join(EXECUTORS)}, got {self.executor!r}"),
            (self.workers is None or self.workers >= 1,
             f"REPLICATE_WORKERS must be a positive whole number, got {self.workers!r}"),
            (self.batch_runs is None or self.batch_runs >= 1,
             f"REPLICATE_BATCH_RUNS must be a positive whole number, got {self.batch_runs!r}"),
            (0 < self.ray_gpus <= 1 or (self.ray_gpus > 1 and float(self.ray_gpus).is_integer()),
             f"REPLICATE_RAY_GPUS must be a fraction in (0, 1] or a whole number, got {self.ray_gpus!r}"),
            (self.checkpoint_s >= 0,
             f"REPLICATE_CHECKPOINT_S must be a number of seconds >= 0, got {self.checkpoint_s!r}"),
            (self.data_from is None or self.data_from.is_dir(),  # said before anything is fetched, not downloaded
             f"REPLICATE_DATA_FROM={self.data_from} is not a folder: point it at the folder holding the dataset "
             "files, or unset it to download")) if not check]
        if errors:
            raise ReplicateError("; ".join(errors))

    def replace(self, **changes) -> Settings:
        """These settings with ``changes`` (checked alike); the build folder carries its default cache along."""
        if "build" in changes and "cache" not in changes and self.cache == self.build / "cache":
            changes["cache"] = None  # derived again from the new build folder (``__post_init__``)
        return dataclasses.replace(self, **changes)

    @classmethod
    def read(cls, environ: Mapping[str, str] | None = None, skip: tuple[str, ...] = (),
             given: Mapping[str, str] | None = None) -> Settings:
        """The settings the environment gives (``os.environ`` by default), each value checked: one
        ``ReplicateError`` naming every bad one. ``given``: values a command's flags give for some variables
        (their text, checked alike); ``skip``: variables left unread (a flag that stands for one otherwise)."""
        env = {name: value for name, value in {**(os.environ if environ is None else environ), **(given or {})}.items()
               if name in VARIABLES and name not in skip and value != ""}
        values, errors = {}, []
        for name, value in env.items():
            field, parse = VARIABLES[name]
            try:
                values[field] = parse(value, name)
            except ReplicateError as error:
                errors.append(str(error))
        values.setdefault("data_from", _shared_data())  # unset: this machine's stand-in folder, if any; `none`: none
        try:  # the values that parsed are checked too: one error names every bad one
            settings = cls(**values)
        except ReplicateError as error:
            errors.append(str(error))
        if errors:
            raise ReplicateError("; ".join(errors))
        return settings

    def environment(self) -> dict[str, str | None]:
        """The variables a process started with them reads these settings back from (None: unset), every
        folder absolute: a papermill kernel starts in notebooks/, so ``REPLICATE_BUILD=build/x`` given
        relative to the caller must reach it as the folder the caller meant."""
        out = {}
        for name, (field, _) in VARIABLES.items():
            value = getattr(self, field)
            if name == "REPLICATE_DATA_FROM" and value is None:
                out[name] = "none"
            elif name == "REPLICATE_LEDGER" and value is None:
                out[name] = "off"
            elif isinstance(value, bool):
                out[name] = "1" if value else "0"
            else:
                out[name] = None if value is None else str(value)
        return out


def _folder(value: str, name: str) -> Path:
    return Path(value).resolve()


def _data_from(value: str, name: str):
    return None if value == "none" else Path(value).resolve()


def _whole(value: str, name: str) -> int:
    if not value.isdigit() or int(value) < 1:
        raise ReplicateError(f"{name} must be a positive whole number, got {value!r}")
    return int(value)


def _number(value: str, name: str) -> float:
    try:
        return float(value)
    except ValueError:
        raise ReplicateError(f"{name} must be a number, got {value!r}") from None


def _switch(value: str, name: str) -> bool:
    if value not in ("0", "1"):
        raise ReplicateError(f"{name} must be 1 (read the offline stand-ins) or 0 (the official data), got {value!r}")
    return value == "1"


def _text(value: str, name: str) -> str:
    return value


def _ledger(value: str, name: str):
    return None if value == "off" else Path(value).resolve()


def _shared_data() -> Path | None:
    """This machine's stand-in for the downloads, beside the checkout, when it is there (docs/data.md)."""
    shared = paths.REPO.parent / "shared" / "data"
    return shared if shared.is_dir() else None


VARIABLES = {  # environment variable: (field, parser)
    "REPLICATE_BUILD": ("build", _folder), "REPLICATE_CACHE": ("cache", _folder), "REPLICATE_DATA": ("data", _folder),
    "REPLICATE_DATA_FROM": ("data_from", _data_from), "REPLICATE_LEDGER": ("ledger", _ledger),
    "REPLICATE_CATALOG_OVERRIDE": ("catalog_override", _folder), "REPLICATE_STAND_INS": ("stand_ins", _switch),
    "REPLICATE_DEVICE": ("device", _text), "REPLICATE_EXECUTOR": ("executor", _text),
    "RAY_ADDRESS": ("ray_address", _text),
    "REPLICATE_WORKERS": ("workers", _whole), "REPLICATE_BATCH_RUNS": ("batch_runs", _whole),
    "REPLICATE_RAY_GPUS": ("ray_gpus", _number), "REPLICATE_CHECKPOINT_S": ("checkpoint_s", _number),
    "REPLICATE_PROGRESS": ("progress_file", _folder), "REPLICATE_STOP_FILE": ("stop_file", _folder)}

_process: Settings | None = None  # installed at the edge, or read at this process's first current()
_scope: contextvars.ContextVar[Settings | None] = contextvars.ContextVar("replicate_settings", default=None)


def current() -> Settings:
    """The settings of this scope: those a ``use`` block gives, else this process's (installed by the edge,
    or read from the environment once, at the first call: a notebook kernel's edge)."""
    global _process
    if (scoped := _scope.get()) is not None:
        return scoped
    if _process is None:
        _process = Settings.read()
    return _process


def install(settings: Settings) -> None:
    """This process's settings from now on (the edge: ``python -m replicate``, a worker process's start)."""
    global _process
    _process = settings


def forget() -> None:
    """Read the environment again at the next ``current()`` (a test changes the environment between its cases)."""
    global _process
    _process = None


@contextlib.contextmanager
def use(settings: Settings) -> Iterator[Settings]:
    """``settings`` for the code inside the block (this thread/task only), the others after it. (A second
    Ctrl-C that lands while the block unwinds can leave them in place: a process ends after one; a test resets.)"""
    token = _scope.set(settings)
    try:
        yield settings
    finally:
        _scope.reset(token)


def child_environment(settings: Settings) -> dict[str, str]:
    """The environment to start a process with that reads ``settings`` back (a papermill kernel: no other
    channel reaches it): this process's, with every setting's variable replaced. This process's own
    environment is left alone: two batches of one process, in two threads, each hand their kernels theirs."""
    environment = {name: value for name, value in os.environ.items() if name not in VARIABLES}
    return environment | {name: value for name, value in settings.environment().items() if value is not None}


__all__ = ["EXECUTORS", "Settings", "VARIABLES", "child_environment", "current", "forget", "install", "use"]
