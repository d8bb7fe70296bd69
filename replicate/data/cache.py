"""Derived caches: arrays parsed once from a dataset's files, in ``data_dir()/cache/<dataset>-<key>.npz``.

A cache is only ever a copy of what its source files give, so a cache that cannot be read (an
interrupted write from an older version, a full disk, a copy cut short) is reported with its
path and rebuilt, never trusted and never fatal. ``data fetch NAME`` also removes the corrupt
caches of NAME (:func:`repair`).
"""
from __future__ import annotations

import warnings
import zipfile
import zlib
from pathlib import Path

import numpy as np

from replicate.core import settings
from replicate.core.fileio import atomic_file

# What np.load raises on a damaged .npz: a cut-off zip, a bad member, a bad header.
_DAMAGE = (OSError, EOFError, ValueError, KeyError, zipfile.BadZipFile, zlib.error)


def path(dataset: str, key: str) -> Path:
    return settings.current().data / "cache" / f"{dataset}-{key}.npz"


def _read(file: Path, fields: tuple[str, ...] | None) -> dict[str, np.ndarray]:
    with np.load(file, allow_pickle=False) as z:
        arrays = {name: z[name] for name in (fields if fields is not None else z.files)}
    return arrays


def load(file: Path, fields: tuple[str, ...] | None = None) -> dict[str, np.ndarray] | None:
    """The arrays in ``file`` (all of ``fields`` when given), or None when it is absent or damaged.

    A damaged cache is removed with a ``RuntimeWarning`` naming it, so the caller rebuilds it.
    """
    if not file.is_file():
        return None
    try:
        return _read(file, fields)
    except _DAMAGE as exc:
        why = f"corrupt cache ({type(exc).__name__}: {exc}); rebuilding it"
        warnings.warn(f"{file}: {why}", RuntimeWarning, stacklevel=2)
        file.unlink(missing_ok=True)
        _note_damage(file, why)
        return None


def _note_damage(file: Path, why: str) -> None:
    """Leave a line in ``cache/damaged/`` for a caller whose output the user sees: the warning above reaches
    a notebook kernel's stderr, not the terminal of ``python -m replicate figures`` (``damaged_since``)."""
    try:
        notes = file.parent / "damaged"
        notes.mkdir(exist_ok=True)
        (notes / f"{file.name}.txt").write_text(f"{file}: {why}\n")
    except OSError:  # the warning has been given; a note that cannot be left is no reason to stop
        pass


def damaged_since(start: float) -> list[str]:
    """What ``load`` found damaged (and rebuilds) since ``start`` (a ``time.time()``), one line each."""
    notes = settings.current().data / "cache" / "damaged"
    found = sorted(p for p in notes.glob("*.txt") if p.stat().st_mtime >= start) if notes.is_dir() else []
    return [p.read_text().strip() for p in found]


def save(file: Path, arrays: dict[str, np.ndarray]) -> None:
    with atomic_file(file) as fh:  # a reader never sees half a cache file
        np.savez(fh, **arrays)


def repair(dataset: str) -> list[Path]:
    """Remove every unreadable cache of ``dataset``; the paths removed."""
    removed = []
    for file in sorted((settings.current().data / "cache").glob(f"{dataset}-*.npz")):
        try:
            _read(file, None)
        except _DAMAGE:
            file.unlink(missing_ok=True)
            removed.append(file)
    return removed
