"""What a dataset's files are: each registered dataset's entry (its files and their checksums, its mirrors and
official archives, its local folders) by name.

The entries themselves, with their official URLs and where each checksum comes from, are in
:mod:`replicate.data.catalog`, registered on first use; :mod:`replicate.data.store` fetches, checks and stages
the files an entry names (and re-exports these names).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

from replicate.core import settings
from replicate.core.errors import ReplicateError


@dataclass(frozen=True)
class FileSpec:
    """One file as stored under ``data_dir()/<dataset>/``."""

    name: str
    sha256: str | None  # of the stored bytes; None: pinned when first unpacked from its archive
    gzipped: bool = True  # published (and possibly staged) as ``name + ".gz"``
    md5: str | None = None  # a published MD5 of the stored bytes

    @property
    def published_name(self) -> str:
        return self.name + ".gz" if self.gzipped else self.name


@dataclass(frozen=True)
class Archive:
    """An official archive that some of a dataset's files are unpacked from."""

    name: str  # as published, e.g. "fed_emnist.tar.bz2"
    urls: tuple[str, ...]  # tried in order
    members: tuple[tuple[str, str], ...]  # (path inside the archive, FileSpec name)
    sha256: str | None = None  # published checksums of the archive; both None: pinned on first use
    md5: str | None = None


@dataclass(frozen=True)
class DatasetFiles:
    """A dataset's files, where to get them, and what the reference copy is."""

    name: str
    files: tuple[FileSpec, ...]
    mirrors: tuple[str, ...] = ()  # base URLs of the files themselves, tried in order; each ends with "/"
    local_dirs: tuple[str, ...] = ()  # sub-folders of a source directory to look in
    citation: str = ""
    archives: tuple[Archive, ...] = ()
    checksums: str = ""  # where the checksums come from
    no_download: str = ""  # why there is no download, when there is none
    status: str = "full"  # of the files the checksums describe: full, partial or lossy
    size: str = ""

    @property
    def downloadable(self) -> bool:
        return bool(self.mirrors or self.archives)

    def file(self, name: str) -> FileSpec:
        return next(f for f in self.files if f.name == name)


_REGISTRY: dict[str, DatasetFiles] = {}


def register(spec: DatasetFiles) -> DatasetFiles:
    """Make ``spec`` fetchable by name."""
    _REGISTRY[spec.name] = spec
    return spec


def _catalog() -> None:
    from replicate.data import catalog  # noqa: F401  (registers the datasets on first import)

    override = settings.current().catalog_override
    if override is not None and not _OVERRIDDEN:
        _OVERRIDDEN.append(override)
        _override(json.loads(override.read_text()))


_OVERRIDDEN: list = []


def _override(entries: dict) -> None:
    """Test-only (``REPLICATE_CATALOG_OVERRIDE``): ``{name: {"mirrors": [...], "files": {file: {"sha256", "md5"}},
    "archives": {archive: {"urls", "sha256", "md5"}}}}`` replaces those fields of the registered entries, so
    that the real fetch, verify and unpack code runs against fabricated official files on 127.0.0.1."""
    for name, new in entries.items():
        ds = _REGISTRY[name]
        files = tuple(replace(f, **new.get("files", {}).get(f.name, {})) for f in ds.files)
        found = tuple(replace(a, **{k: tuple(v) if k == "urls" else v
                                    for k, v in new.get("archives", {}).get(a.name, {}).items()}) for a in ds.archives)
        _REGISTRY[name] = replace(ds, files=files, archives=found, mirrors=tuple(new.get("mirrors", ds.mirrors)))


def registered() -> list[str]:
    _catalog()
    return sorted(_REGISTRY)


def spec(name: str) -> DatasetFiles:
    _catalog()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ReplicateError(
            f"no downloadable dataset named {name!r}; known: {', '.join(registered())}") from None


def dataset_dir(name: str) -> Path:
    """Where ``fetch(name)`` puts the files: ``settings.current().data/<name>``."""
    return settings.current().data / spec(name).name


def fetch_command(name: str) -> str:
    return f"python -m replicate data fetch {name}"


__all__ = ["Archive", "DatasetFiles", "FileSpec", "dataset_dir", "fetch_command", "register", "registered", "spec"]
