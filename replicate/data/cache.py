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

from replicate.core import paths
from replicate.core.fileio import atomic_file

# What np.load raises on a damaged .npz: a cut-off zip, a bad member, a bad header.
_DAMAGE = (OSError, EOFError, ValueError, KeyError, zipfile.BadZipFile, zlib.error)


def path(dataset: str, key: str) -> Path:
    return paths.data_dir() / "cache" / f"{dataset}-{key}.npz"


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
        warnings.warn(f"{file}: corrupt cache ({type(exc).__name__}: {exc}); rebuilding it",
                      RuntimeWarning, stacklevel=2)
        file.unlink(missing_ok=True)
        return None


def save(file: Path, arrays: dict[str, np.ndarray]) -> None:
    with atomic_file(file) as fh:  # a reader never sees half a cache file
        np.savez(fh, **arrays)


def repair(dataset: str) -> list[Path]:
    """Remove every unreadable cache of ``dataset``; the paths removed."""
    removed = []
    for file in sorted((paths.data_dir() / "cache").glob(f"{dataset}-*.npz")):
        try:
            _read(file, None)
        except _DAMAGE:
            file.unlink(missing_ok=True)
            removed.append(file)
    return removed
