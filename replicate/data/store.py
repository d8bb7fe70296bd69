"""Dataset files on disk: where they come from, how they are checked, where they go.

Every dataset is a :class:`DatasetFiles` entry in a registry keyed by name (:mod:`replicate.data.entries`,
re-exported here; the entries, with their official URLs and where each checksum comes from, are in
:mod:`replicate.data.catalog`).
``fetch`` puts its files into ``settings.current().data/<name>/``: from a local directory (``--from
DIR``, ``REPLICATE_DATA_FROM``, or ``../shared/data`` beside the checkout) holding either the
files, the official archive or the dataset's pack (:func:`pack`: the staged files in one xz tar, for a
machine without internet such as a cluster's compute nodes), else by downloading the files from their mirrors or the
official archive and unpacking it (:mod:`replicate.data.archives`).

Each file is checked against a checksum of its *stored* (uncompressed) bytes, because copies are
often recompressed (the shared MNIST ``.gz`` files are) while their content stays canonical:
a SHA-256 computed from the canonical file, a published MD5 (CIFAR), or, for members of an
archive whose own checksum is published or pinned, the SHA-256 pinned when it was first
unpacked. Files are written to a temporary name and moved into place only once verified, so a
half-written or corrupted file is never read as data.
"""
from __future__ import annotations

import gzip
import os
import zlib
from functools import partial
from pathlib import Path
from typing import BinaryIO, Callable

from replicate.core import settings
from replicate.core.errors import ReplicateError
from replicate.core.fileio import atomic_file
from replicate.data import archives
# the registry of entries, re-exported: the catalog, the CLI and tests name them as store.*
from replicate.data.entries import (_REGISTRY, Archive, DatasetFiles, FileSpec, dataset_dir,  # noqa: F401
                                    fetch_command, register, registered, spec)


def _expected(ds: DatasetFiles, file: FileSpec) -> dict[str, str | None]:
    if file.sha256 or file.md5:
        return {"sha256": file.sha256, "md5": file.md5}
    return {"sha256": archives.pinned(f"{ds.name}/{file.name}"), "md5": None}


def _checked(ds: DatasetFiles, file: FileSpec, actual: dict[str, str], origin: str) -> dict[str, str | None]:
    """Raise if ``actual`` differs from what ``file`` must be; returns what it must be (all None: nothing
    known yet, for a pin to record)."""
    expected = _expected(ds, file)
    bad = archives.mismatch(expected, actual)
    if bad:
        raise ReplicateError(f"{ds.name}: {file.name} from {origin} has {bad}; the file was not used. "
                             f"It is not the official file: replace it, or delete it and fetch again.")
    return expected


def _write_verified(dest: Path, stream: BinaryIO, ds: DatasetFiles, file: FileSpec, origin: str) -> None:
    """Copy ``stream`` to ``dest`` through a temporary file, publishing it only if its checksum
    matches; a failed copy leaves ``dest`` untouched. A file of no known checksum is pinned here, as it
    comes from its source, and only here: never as it lies on disk, which nothing then vouches for."""
    with atomic_file(dest) as out:
        try:
            actual = archives.digests(stream, out, md5=bool(file.md5))
        except (OSError, EOFError, zlib.error) as exc:
            raise ReplicateError(f"{ds.name}: could not read {file.name} from {origin} ({exc}); "
                                 f"the file was not used") from exc
        if not any(_checked(ds, file, actual, origin).values()):
            archives.pin(f"{ds.name}/{file.name}", actual["sha256"], origin)


def _verified(ds: DatasetFiles, file: FileSpec, path: Path) -> bool:
    """Whether the staged ``path`` matches a known checksum of ``file`` (a file with none is not: it is staged
    again from its source)."""
    expected = _expected(ds, file)
    return path.is_file() and any(expected.values()) and archives.mismatch(
        expected, archives.file_digests(path, md5=bool(file.md5))) is None


def _staged(ds: DatasetFiles, file: FileSpec) -> bool:
    """Whether ``file`` is staged with a checksum to check it by (catalogued or pinned): a staged file whose pin
    is gone counts as not staged, since nothing vouches for it as it lies."""
    return (dataset_dir(ds.name) / file.name).is_file() and any(_expected(ds, file).values())


def _find_local(ds: DatasetFiles, source: Path, name: str) -> Path | None:
    """``name.gz`` or ``name`` in ``source`` or one of its dataset sub-folders."""
    for folder in (*(source / d for d in ds.local_dirs), source):
        for candidate in (name + ".gz", name):
            if (folder / candidate).is_file():
                return folder / candidate
    return None


def _stage_local(ds: DatasetFiles, path: Path, file: FileSpec, dest: Path) -> None:
    opener = gzip.open if path.name.endswith(".gz") and not file.name.endswith(".gz") else open
    with opener(path, "rb") as stream:
        _write_verified(dest, stream, ds, file, str(path))


def _stage_archive(ds: DatasetFiles, archive: Archive, path: Path, origin: str) -> None:
    """Verify ``path`` as ``archive``, unpack it, and put its members in place, each verified."""
    key = f"{ds.name}/{archive.name}"
    actual = archives.file_digests(path, md5=bool(archive.md5))
    expected = {"sha256": archive.sha256, "md5": archive.md5}
    if not any(expected.values()):
        expected["sha256"] = archives.pinned(key)
    bad = archives.mismatch(expected, actual)
    if bad:
        raise ReplicateError(f"{ds.name}: {archive.name} from {origin} has {bad}; the archive was "
                             f"not used (a changed or incomplete download)")
    folder = dataset_dir(ds.name)
    with archives.unpacked(path, folder, {member for member, _ in archive.members}) as unpacked:
        absent = [member for member, _ in archive.members if not (unpacked / member).is_file()]
        if absent:
            raise ReplicateError(f"{ds.name}: {path} has no member {', '.join(absent)}; "
                                 f"the archive was not used")
        for member, name in archive.members:
            with open(unpacked / member, "rb") as stream:
                _write_verified(folder / name, stream, ds, ds.file(name), f"{origin}:{member}")
    if not (archive.sha256 or archive.md5 or archives.pinned(key)):
        archives.pin(key, actual["sha256"], origin)


PACK_SUFFIX = ".pack.tar.xz"


def pack_name(name: str) -> str:
    """The file name of dataset ``name``'s pack (:func:`pack`)."""
    return name + PACK_SUFFIX


def pack(name: str, dest_dir: str | os.PathLike) -> Path:
    """Write ``dest_dir/<name>.pack.tar.xz``: every staged file of ``name``, verified, as stored, in one
    deterministic xz tar (sorted, owner 0, mtime 0), and return its path.

    One small file for a machine with no internet (a cluster's compute nodes, an air-gapped GPU box): LEAF
    FEMNIST's 94 MB of JSON is 3.2 MB packed, MNIST 9.5 MB against its 11 MB of .gz files. It is lossless
    (the files' own bytes), and staging from it verifies each member against the catalogue's checksum, as
    any other source: a damaged pack is refused, never used. Only datasets whose checksums are in the
    catalogue can be packed (a checksum pinned on this machine would not exist on the other).
    """
    ds, folder = spec(name), ensure(name)
    unknown = [f.name for f in ds.files if not (f.sha256 or f.md5)]
    if unknown:
        raise ReplicateError(f"{name}: {unknown[0]} has no catalogued checksum (it is pinned on this machine "
                             f"only), so a pack of it could not be verified where it is unpacked")
    dest = Path(dest_dir) / pack_name(name)
    archives.write_tar_xz(dest, {f.name: folder / f.name for f in ds.files})
    return dest


def _stage_pack(ds: DatasetFiles, path: Path, files: list[FileSpec]) -> None:
    """Put ``files`` in place from the pack at ``path``, each verified by its catalogued checksum."""
    folder = dataset_dir(ds.name)
    with archives.unpacked(path, folder, {f.name for f in files}) as unpacked:
        absent = [f.name for f in files if not (unpacked / f.name).is_file()]
        if absent:
            raise ReplicateError(f"{ds.name}: the pack {path} has no {absent[0]}; it was not used (make it "
                                 f"again with `python -m replicate data pack {ds.name}`)")
        for file in files:
            with open(unpacked / file.name, "rb") as stream:
                _write_verified(folder / file.name, stream, ds, file, f"{path}:{file.name}")


def _download_file(ds: DatasetFiles, file: FileSpec, dest: Path) -> str:
    """``file`` from the first of its mirrors that answers, verified (uncompressed) into ``dest``."""
    tmp = dataset_dir(ds.name) / ".download" / file.published_name
    failures = []
    for base in ds.mirrors:
        url = base + file.published_name
        try:
            archives.receive(url, tmp, f"{ds.name} {file.published_name}")
            with (gzip.open if file.gzipped else open)(tmp, "rb") as stream:
                _write_verified(dest, stream, ds, file, url)
            return url
        except archives.broken() as exc:
            failures.append(archives.failure(url, exc))
        except ReplicateError as exc:  # the bytes are not the file's: the next mirror may have it
            failures.append(f"{url}: {exc}")
        finally:
            tmp.unlink(missing_ok=True)
    raise ReplicateError(f"{ds.name}: could not download {file.published_name}:\n  " + "\n  ".join(failures)
                         + archives.kept(tmp))


def _download_archive(ds: DatasetFiles, archive: Archive) -> str:
    tmp = dataset_dir(ds.name) / ".download" / archive.name
    try:
        url = archives.download(archive.urls, tmp, f"{ds.name} archive {archive.name}")
        _stage_archive(ds, archive, tmp, url)
        return url
    finally:
        tmp.unlink(missing_ok=True)


def _stage(ds: DatasetFiles, root: Path | None, explicit: bool) -> list[str]:
    """Put every missing or wrong file of ``ds`` in place; the origins used."""
    folder, origins = dataset_dir(ds.name), []
    missing = [f for f in ds.files if not _verified(ds, f, folder / f.name)]
    for file in list(missing) if root is not None else ():
        local = _find_local(ds, root, file.name)
        if local is not None:
            _stage_local(ds, local, file, folder / file.name)
            origins.append(str(local))
            missing.remove(file)
    for archive in ds.archives:
        wanted = {name for _, name in archive.members} & {f.name for f in missing}
        local = _find_local(ds, root, archive.name) if root is not None and wanted else None
        if local is not None:
            _stage_archive(ds, archive, local, str(local))
            origins.append(str(local))
            missing = [f for f in missing if f.name not in wanted]
    packed = _find_local(ds, root, pack_name(ds.name)) if root is not None and missing else None
    if packed is not None:
        _stage_pack(ds, packed, missing)
        origins.append(str(packed))
        missing = []
    if missing and explicit:
        where = f" or its sub-folder(s) {', '.join(d + '/' for d in ds.local_dirs)}" if ds.local_dirs else ""
        what = (f"the official archive {' or '.join(a.name for a in ds.archives)} (or its unpacked files)"
                if ds.archives else f"the official file(s) ({', '.join(f.published_name for f in missing[:3])}"
                f"{f', … {len(missing)} in all' if len(missing) > 3 else ''})")
        raise ReplicateError(f"{ds.name}: {missing[0].published_name} is not in {root}{where}; copy {what} "
                             f"or its pack {pack_name(ds.name)} (`python -m replicate data pack {ds.name}` where it "
                             f"is staged) there" + (f", or run `{fetch_command(ds.name)}` without --from to download "
                                                    f"them" if ds.downloadable else f". {ds.no_download}"))
    if missing and not ds.downloadable:
        raise ReplicateError(f"{ds.name}: no download exists: {ds.no_download}")
    failures: list[str] = []
    for file in missing:
        if _verified(ds, file, folder / file.name):  # an archive fetched for an earlier file had it
            continue
        sources = [partial(_download_file, ds, file, folder / file.name)] if ds.mirrors else []
        sources += [partial(_download_archive, ds, a) for a in ds.archives
                    if file.name in {name for _, name in a.members}]
        for source in sources:  # the file's own mirrors first, then the archives that hold it
            try:
                origins.append(source())
                break
            except ReplicateError as exc:
                failures.append(str(exc))
        else:
            raise ReplicateError("\n".join(failures) + f"\nWithout internet, copy the official files to a "
                                 f"directory DIR and run `{fetch_command(ds.name)} --from DIR` "
                                 f"(or set REPLICATE_DATA_FROM=DIR).")
    return origins


def fetch(name: str, source: str | os.PathLike | None = None, *,
          log: Callable[[str], None] | None = None) -> Path:
    """Stage dataset ``name`` into ``settings.current().data/<name>/`` and return that folder.

    Files already there with the right checksum are kept. Others are copied from ``source``
    when given (an explicit source never falls back to downloading), else from
    ``settings.current().data_from`` when it holds them or their archive, else downloaded. Every
    file is verified before it is put in place. Derived caches of the dataset that are corrupt
    are removed, so the next load rebuilds them.
    """
    from replicate.data import cache

    ds = spec(name)
    explicit = source is not None
    root = Path(source) if explicit else settings.current().data_from
    if explicit and not root.is_dir():
        raise ReplicateError(f"{name}: source directory {root} does not exist; pass the folder that "
                             f"holds {', '.join(f.published_name for f in ds.files)}")
    for origin in _stage(ds, root, explicit):
        if log is not None:
            log(f"{name}: <- {origin}")
    for path in cache.repair(name):
        if log is not None:
            log(f"{name}: removed the corrupt cache {path}; the next load rebuilds it")
    return dataset_dir(name)


def fetch_all(source: str | os.PathLike | None = None) -> list[tuple[str, str, str]]:
    """``fetch`` every registered dataset; ``(name, outcome, detail)`` for each, none skipped.

    Outcome is ``ready`` (already staged), ``staged`` (from a local folder), ``downloaded``, or
    ``not available`` with the reason in ``detail``.
    """
    report = []
    for name in registered():
        lines: list[str] = []
        try:
            folder = fetch(name, source, log=lines.append)
        except ReplicateError as exc:
            reason = " ".join(line.strip() for line in str(exc).splitlines()[:2])
            report.append((name, "not available", reason))
            continue
        origins = [line for line in lines if " <- " in line]
        outcome = "downloaded" if any("://" in o for o in origins) else "staged" if origins else "ready"
        report.append((name, outcome, f"{folder} [{spec(name).status}]"))
    return report


def fetch_plan(name: str, source: str | os.PathLike | None = None) -> tuple[str, str]:
    """What ``fetch(name, source)`` would do, without doing it (``data fetch --dry-run``): ``(action, detail)``
    with action ``staged`` (every file in place; checksums are verified by the fetch itself), ``copy`` (from a
    local folder), ``download`` (the URLs and the catalogue's size) or ``not available`` (why)."""
    ds, folder = spec(name), dataset_dir(name)
    missing = [f for f in ds.files if not _staged(ds, f)]
    if not missing:
        return "staged", str(folder)
    root = Path(source) if source is not None else settings.current().data_from
    if root is not None and root.is_dir() and all(_in_source(ds, root, f) for f in missing):
        return "copy", f"from {root} ({len(missing)} file(s))"
    if source is not None:
        return "not available", f"{missing[0].published_name} is not in {root}"
    if not ds.downloadable:
        return "not available", f"no download: {ds.no_download}"
    urls = [a.urls[0] for a in ds.archives] or [ds.mirrors[0] + f.published_name for f in missing]
    return "download", f"{', '.join(urls)} ({ds.size or 'size not recorded'})"


def ensure(name: str) -> Path:
    """The verified folder of ``name``, staging it from the local source if it is there.

    Never downloads and never substitutes other data: if the files are missing and no local
    copy exists, the error says what to do.
    """
    ds, folder = spec(name), dataset_dir(name)
    missing = [f for f in ds.files if not (folder / f.name).is_file()]
    if missing:
        if is_available(name):
            return fetch(name, settings.current().data_from)
        local = (f"`{fetch_command(name)} --from DIR` where DIR holds the official files "
                 f"(or set REPLICATE_DATA_FROM=DIR)")
        if ds.downloadable:
            from replicate.data import variants

            url = (ds.archives[0].urls if ds.archives else ds.mirrors)[0]
            raise ReplicateError(f"{name} is not in {folder}. Run `{fetch_command(name)}` to download it "
                                 f"from {url}, or {local}.{variants.hint(name)}")
        raise ReplicateError(f"{name} is not in {folder} and has no download ({ds.no_download}). "
                             f"Run {local}.")
    unpinned = [f for f in ds.files if not _staged(ds, f)]  # all are on disk here: those without their pin
    if unpinned:  # its pin gone (checksums.lock deleted or edited): what lies on disk is vouched for by nothing
        source = settings.current().data_from
        if source is not None and all(_in_source(ds, source, f) for f in unpinned):
            return fetch(name, source)
        raise ReplicateError(f"{name}: {unpinned[0].name} in {folder} has no checksum to be checked against (its "
                             f"pin in {archives.lock_path()} is gone), so it was not used. Run "
                             f"`{fetch_command(name)}` to stage it again from its source, which pins it afresh.")
    for file in ds.files:
        path = folder / file.name
        _checked(ds, file, archives.file_digests(path, md5=bool(file.md5)), str(path))
    return folder


def is_available(name: str) -> bool:
    """True when ``ensure(name)`` can work without a download (staged or stageable)."""
    ds, source = spec(name), settings.current().data_from
    return all(_staged(ds, f) or (source is not None and _in_source(ds, source, f)) for f in ds.files)


def _in_source(ds: DatasetFiles, source: Path, file: FileSpec) -> bool:
    """True when the local folder ``source`` holds ``file``: itself, an official archive with it, or a pack."""
    return (_find_local(ds, source, file.name) is not None
            or any(_find_local(ds, source, a.name) is not None for a in ds.archives
                   if file.name in {n for _, n in a.members})
            or _find_local(ds, source, pack_name(ds.name)) is not None)
