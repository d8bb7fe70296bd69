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
import socket
import sys
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
import zipfile
import zlib
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath
from typing import BinaryIO, Iterator

from replicate.core import settings
from replicate.core.errors import ReplicateError
from replicate.core.fileio import atomic_file, atomic_write_text

_CHUNK = 1 << 20
# What a broken or cut-off archive raises while it is read, besides our own errors.
_READ_ERRORS = (OSError, EOFError, zlib.error, lzma.LZMAError, tarfile.TarError, zipfile.BadZipFile,
                ValueError)


def lock_path() -> Path:
    """The trust-on-first-use pins: ``data_dir()/checksums.lock`` (JSON)."""
    return settings.current().data / "checksums.lock"


def _pins() -> dict:
    try:
        return json.loads(lock_path().read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise ReplicateError(f"{lock_path()}: unreadable checksum pins ({exc}); delete it, then fetch the "
                             f"datasets it pinned again (`python -m replicate data fetch NAME`: each is staged "
                             f"afresh from its source and pinned)") from None


def pinned(key: str) -> str | None:
    """The SHA-256 pinned for ``key`` (``dataset/file``), or None."""
    entry = _pins().get(key)
    return entry["sha256"] if entry else None


def pin(key: str, sha256: str, origin: str) -> None:
    """Record ``sha256`` as the checksum of ``key`` from now on (first successful download). Processes staging
    datasets at once take turns (an exclusive lock on ``checksums.lock.lock``): each reads the pins, adds its
    own and writes them back, so none loses another's (a lost pin makes its file unusable until fetched again)."""
    from filelock import FileLock  # portable (POSIX and Windows) locks

    lock_path().parent.mkdir(parents=True, exist_ok=True)
    with FileLock(lock_path().with_name(lock_path().name + ".lock")):
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
    if isinstance(exc, (TimeoutError, socket.timeout)) or "timed out" in str(exc):
        return f"{url}: the server stopped sending for {TIMEOUT_S} s (a stalled download)"
    if isinstance(exc, urllib.error.URLError):
        return f"{url}: host unreachable ({exc.reason}); is this machine offline?"
    if isinstance(exc, ReplicateError):
        return f"{url}: {exc}"
    return f"{url}: download broke off ({exc})"


TIMEOUT_S = 60  # a server silent this long has stalled: one line, and the bytes received are kept for a resume
_SHOW_EVERY_S = 0.5


class _Meter:
    """Bytes received and the rate, on one self-overwriting stderr line while a terminal watches, then one line."""

    def __init__(self, what: str, done: int, total: int | None):
        self.what, self.start_bytes, self.done, self.total = what, done, done, total
        self.t0 = self.shown = time.monotonic()
        self.live = sys.stderr.isatty()

    def line(self) -> str:
        seconds = max(time.monotonic() - self.t0, 1e-9)
        of = f" of {self.total / 1e6:,.1f}" if self.total else ""
        return (f"{self.what}: {self.done / 1e6:,.1f}{of} MB, "
                f"{(self.done - self.start_bytes) / 1e6 / seconds:,.1f} MB/s"
                + (f" (resumed at {self.start_bytes / 1e6:,.1f} MB)" if self.start_bytes else ""))

    def update(self, n: int) -> None:
        self.done += n
        if self.live and time.monotonic() - self.shown >= _SHOW_EVERY_S:
            self.shown = time.monotonic()
            print("\r" + self.line(), end="", file=sys.stderr, flush=True)

    def finish(self) -> None:
        print(("\r" if self.live else "") + self.line(), file=sys.stderr, flush=True)


def _receive(url: str, part: Path, what: str) -> None:
    """Append ``url``'s body to ``part``, asking the server for the bytes after those ``part`` holds (HTTP Range)
    and starting afresh where it ignores the request; raises OSError unless the whole body arrived."""
    have = part.stat().st_size if part.is_file() else 0
    request = urllib.request.Request(url, headers={"Range": f"bytes={have}-"} if have else {})
    try:
        response = urllib.request.urlopen(request, timeout=TIMEOUT_S)
    except urllib.error.HTTPError as exc:
        if exc.code == 416 and have:  # nothing after what we hold: begin again rather than trust it
            part.unlink()
            return _receive(url, part, what)
        raise
    with response:
        if have and getattr(response, "status", 200) != 206:  # the server sends the whole body again
            have = 0
        headers = getattr(response, "headers", None)
        length = headers.get("Content-Length") if headers is not None else None
        total = have + int(length) if length is not None else None
        meter = _Meter(what, have, total)
        with open(part, "ab" if have else "wb") as out:
            out.truncate(have)
            for chunk in iter(lambda: response.read(_CHUNK), b""):
                out.write(chunk)
                meter.update(len(chunk))
            size = out.tell()
    meter.finish()
    if total is not None and size != total:
        raise OSError(f"connection closed after {size:,} of {total:,} bytes")


def download(urls: tuple[str, ...], dest: Path, what: str) -> str:
    """Download the first of ``urls`` that answers into ``dest``; the URL used.

    Bytes arrive in ``dest.part``, which becomes ``dest`` only once the whole body is there; a download that
    broke off or stalled (``TIMEOUT_S``) keeps it, and the next call resumes after it where the server allows
    (HTTP Range), else starts again. Every failure is named in one line: an unreachable host (no internet),
    an HTTP error, a connection that broke off or stalled. The caller verifies the checksum before unpacking.
    """
    part = dest.with_name(dest.name + ".part")
    dest.parent.mkdir(parents=True, exist_ok=True)
    failures = []
    for url in urls:
        try:
            _receive(url, part, what)
            part.replace(dest)
            return url
        except OSError as exc:  # URLError, HTTPError and socket timeouts are OSErrors
            failures.append(failure(url, exc))
    kept = (f"\n  the {part.stat().st_size:,} bytes received are kept in {part}: the next fetch resumes there"
            if part.is_file() and part.stat().st_size else "")
    raise ReplicateError(f"could not download {what}:\n  " + "\n  ".join(failures) + kept)


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
    elif name.endswith(".tar.xz"):
        yield from _tar_members(archive, "r:xz")
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
        raise ReplicateError(f"{archive}: unknown archive type (expected .tar.gz, .tar.bz2, .tar.xz, .zip or .gz)")


def write_tar_xz(dest: Path, files: dict[str, Path]) -> None:
    """Write ``files`` (member name → path) into the xz tar ``dest``, atomically and deterministically:
    members sorted by name, owner 0, mode 0644, mtime 0, so the same files give the same bytes."""
    with atomic_file(dest) as out, tarfile.open(fileobj=out, mode="w:xz", preset=6) as tar:
        for name in sorted(files):
            info = tar.gettarinfo(str(files[name]), arcname=name)
            info.uid = info.gid = info.mtime = 0
            info.uname = info.gname = ""
            info.mode = 0o644
            with open(files[name], "rb") as fh:
                tar.addfile(info, fh)


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
