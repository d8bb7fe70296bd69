"""Official archives on disk: download, checksums, trust-on-first-use pins, safe unpacking.

A checksum is either published (the registry entry names where: TFF's loader source, the CIFAR
page) or, where none was ever published (Sentiment140, GloVe, Project Gutenberg), the SHA-256 of
the first successful download, recorded in ``data_dir()/checksums.lock`` and required of every
later download. Unpacking reads ``.tar.gz``, ``.tar.bz2``, ``.zip`` and single-file ``.gz``; it
writes regular files only, all inside a fresh temporary folder (absolute names, ``..`` and links
are refused), so a half-unpacked archive is never seen as data.
"""
from __future__ import annotations

import bz2
import contextlib
import gzip
import hashlib
import json
import lzma
import shutil
import tarfile
import tempfile
import urllib.error
import urllib.request
import zipfile
import zlib
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath
from typing import BinaryIO, Iterator

from replicate.core import paths
from replicate.core.errors import ReplicateError
from replicate.core.fileio import atomic_file, atomic_write_text

_CHUNK = 1 << 20
# What a broken or cut-off archive raises while it is read, besides our own errors.
_READ_ERRORS = (OSError, EOFError, zlib.error, lzma.LZMAError, tarfile.TarError, zipfile.BadZipFile,
                ValueError)


def lock_path() -> Path:
    """The trust-on-first-use pins: ``data_dir()/checksums.lock`` (JSON)."""
    return paths.data_dir() / "checksums.lock"


def _pins() -> dict:
    try:
        return json.loads(lock_path().read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise ReplicateError(f"{lock_path()}: unreadable checksum pins ({exc}); delete it to pin "
                             f"the next downloads afresh") from None


def pinned(key: str) -> str | None:
    """The SHA-256 pinned for ``key`` (``dataset/file``), or None."""
    entry = _pins().get(key)
    return entry["sha256"] if entry else None


def pin(key: str, sha256: str, origin: str) -> None:
    """Record ``sha256`` as the checksum of ``key`` from now on (first successful download)."""
    pins = _pins()
    pins[key] = {"sha256": sha256, "origin": origin,
                 "recorded": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}
    atomic_write_text(lock_path(), json.dumps(pins, indent=1, sort_keys=True) + "\n")


def digests(stream: BinaryIO, out: BinaryIO | None = None, md5: bool = True) -> dict[str, str]:
    """SHA-256 (and MD5 unless ``md5=False``) of everything read from ``stream``, copied to
    ``out`` when given."""
    hashes = {"sha256": hashlib.sha256(), **({"md5": hashlib.md5()} if md5 else {})}
    for chunk in iter(lambda: stream.read(_CHUNK), b""):
        for h in hashes.values():
            h.update(chunk)
        if out is not None:
            out.write(chunk)
    return {algo: h.hexdigest() for algo, h in hashes.items()}


def file_digests(path: Path, md5: bool = True) -> dict[str, str]:
    with open(path, "rb") as fh:
        return digests(fh, md5=md5)


def mismatch(expected: dict[str, str], actual: dict[str, str]) -> str | None:
    """``"SHA-256 <actual>, expected <expected>"`` for the first differing checksum, else None."""
    for algo, want in expected.items():
        if want and actual[algo] != want:
            return f"{algo.upper().replace('SHA', 'SHA-')} {actual[algo]}, expected {want}"
    return None


def failure(url: str, exc: Exception) -> str:
    """One line saying why ``url`` gave nothing usable."""
    if isinstance(exc, urllib.error.HTTPError):
        return f"{url}: HTTP {exc.code} {exc.reason}"
    if isinstance(exc, urllib.error.URLError):
        return f"{url}: host unreachable ({exc.reason}); is this machine offline?"
    if isinstance(exc, ReplicateError):
        return f"{url}: {exc}"
    return f"{url}: download broke off ({exc})"


def download(urls: tuple[str, ...], dest: Path, what: str) -> str:
    """Download the first of ``urls`` that answers into ``dest`` (atomically); the URL used.

    Every failure is named: an unreachable host (no internet), an HTTP error, a connection that
    broke off. Nothing is left at ``dest`` unless the whole body arrived.
    """
    failures = []
    for url in urls:
        try:
            with urllib.request.urlopen(url, timeout=60) as response, atomic_file(dest) as out:
                headers = getattr(response, "headers", None)
                expected = headers.get("Content-Length") if headers is not None else None
                shutil.copyfileobj(response, out, _CHUNK)
                if expected is not None and out.tell() != int(expected):
                    raise OSError(f"connection closed after {out.tell()} of {expected} bytes")
            return url
        except OSError as exc:  # URLError and HTTPError are OSErrors
            failures.append(failure(url, exc))
    raise ReplicateError(f"could not download {what}:\n  " + "\n  ".join(failures))


def _member_path(name: str, archive: Path) -> PurePosixPath:
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts or not path.parts:
        raise ReplicateError(f"{archive}: member {name!r} would land outside the target folder; "
                             f"the archive was not unpacked")
    return path


def _tar_members(archive: Path, mode: str) -> Iterator[tuple[PurePosixPath, BinaryIO]]:
    with tarfile.open(archive, mode) as tar:
        for member in tar:
            path = _member_path(member.name, archive)
            if member.isdir():
                continue
            if not member.isfile():
                raise ReplicateError(f"{archive}: member {member.name!r} is a link or device, "
                                     f"not a file; the archive was not unpacked")
            yield path, tar.extractfile(member)


def _zip_members(archive: Path) -> Iterator[tuple[PurePosixPath, BinaryIO]]:
    with zipfile.ZipFile(archive) as zf:
        for info in zf.infolist():
            path = _member_path(info.filename, archive)
            if info.is_dir():
                continue
            if (info.external_attr >> 16) & 0o170000 == 0o120000:
                raise ReplicateError(f"{archive}: member {info.filename!r} is a symbolic link; "
                                     f"the archive was not unpacked")
            with zf.open(info) as fh:
                yield path, fh


def _members(archive: Path) -> Iterator[tuple[PurePosixPath, BinaryIO]]:
    name = archive.name
    if name.endswith((".tar.gz", ".tgz")):
        yield from _tar_members(archive, "r:gz")
    elif name.endswith(".tar.bz2"):
        yield from _tar_members(archive, "r:bz2")
    elif name.endswith(".tar"):
        yield from _tar_members(archive, "r:")
    elif name.endswith(".zip"):
        yield from _zip_members(archive)
    elif name.endswith(".gz"):
        with gzip.open(archive, "rb") as fh:
            yield PurePosixPath(name[:-3]), fh
    elif name.endswith(".bz2"):
        with bz2.open(archive, "rb") as fh:
            yield PurePosixPath(name[:-4]), fh
    else:
        raise ReplicateError(f"{archive}: unknown archive type (expected .tar.gz, .tar.bz2, .zip or .gz)")


@contextlib.contextmanager
def unpacked(archive: Path, work_dir: Path, wanted: set[str] | None = None) -> Iterator[Path]:
    """Unpack ``archive`` (only the members named in ``wanted``, when given; every name is still
    checked) into a fresh temporary folder under ``work_dir``; yield that folder and remove it
    afterwards. A truncated or corrupt archive raises one line naming the file."""
    work_dir.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(dir=work_dir, prefix=f".unpack-{archive.name}."))
    try:
        try:
            for path, stream in _members(archive):
                if wanted is not None and path.as_posix() not in wanted:
                    continue
                target = folder.joinpath(*path.parts)
                target.parent.mkdir(parents=True, exist_ok=True)
                with open(target, "wb") as out:
                    shutil.copyfileobj(stream, out, _CHUNK)
        except _READ_ERRORS as exc:
            raise ReplicateError(f"{archive}: truncated or corrupt archive ({type(exc).__name__}: "
                                 f"{exc}); delete it and fetch again") from None
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
