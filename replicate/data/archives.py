"""Official archives on disk: download (pooch), checksums, trust-on-first-use pins, safe unpacking.

A checksum is either published (the registry entry names where: TFF's loader source, the CIFAR
page) or, where none was ever published (Sentiment140, GloVe, Project Gutenberg), the SHA-256 of
the first successful download, recorded in ``data_dir()/checksums.lock`` and required of every
later download. Downloads go through pooch's HTTP downloader, resumed after a cut where the server allows.
Unpacking reads ``.tar.gz``, ``.tar.bz2``, ``.zip`` and single-file ``.gz``; it writes regular files only, all
inside a fresh temporary folder (absolute names, ``..`` and links are refused), so a half-unpacked archive is
never seen as data. It is not pooch's: on Python < 3.12 pooch's ``Untar`` extracts without a filter.
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
    import requests

    response = getattr(exc, "response", None)
    if isinstance(exc, requests.HTTPError) and response is not None:
        return f"{url}: HTTP {response.status_code} {response.reason}"
    if isinstance(exc, (requests.Timeout, TimeoutError, socket.timeout)) or "timed out" in str(exc):
        return f"{url}: the server stopped sending for {TIMEOUT_S} s (a stalled download)"
    if isinstance(exc, requests.ConnectionError) and not isinstance(exc, requests.exceptions.ChunkedEncodingError):
        return f"{url}: host unreachable ({_reason(exc)}); is this machine offline?"
    if isinstance(exc, ReplicateError):
        return f"{url}: {exc}"
    return f"{url}: download broke off ({exc})"


def _reason(exc: Exception) -> str:
    """The innermost reason a connection failed (requests nests urllib3's), in a few words."""
    while exc.__context__ is not None and exc.args and not isinstance(exc.args[0], str):
        exc = exc.__context__
    return str(exc.args[0] if exc.args else exc)[:120]


def broken() -> tuple[type, ...]:
    """What a download that gave nothing usable raises (``except archives.broken()``: requests loads only then)."""
    import requests

    return (OSError, requests.RequestException)


# requests hands the body over in pieces of this size; a piece cut short by a broken connection is lost with it
# (urllib3 keeps it back until the piece is whole), so a resume starts at most this much earlier
HTTP_CHUNK = 1 << 16
TIMEOUT_S = 60  # a server silent this long has stalled: one line, and the bytes received are kept for a resume
_SHOW_EVERY_S = 0.5


class _Meter:
    """pooch's progress bar protocol (``total``, ``update``, ``reset``, ``close``) as the bytes received and the
    rate: one self-overwriting stderr line while a terminal watches, then one line."""

    def __init__(self, what: str, done: int):
        self.what, self.start_bytes, self.done, self._total = what, done, done, None
        self.t0 = self.shown = time.monotonic()
        self.live = sys.stderr.isatty()

    @property
    def total(self) -> int | None:
        return self._total

    @total.setter
    def total(self, body: int) -> None:  # pooch sets the response's Content-Length: the bytes after those we hold
        self._total = self.start_bytes + body if body else None

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

    def reset(self) -> None:  # pooch, once the body is in: then update(total) fills the bar exactly
        self.done = self.start_bytes

    def close(self) -> None:
        print(("\r" if self.live else "") + self.line(), file=sys.stderr, flush=True)


def _receive(url: str, part: Path, what: str) -> None:
    """Append ``url``'s body to ``part`` through pooch's HTTP downloader, asking for the bytes after those ``part``
    holds (HTTP Range, with If-Range where the first response named its version: pooch itself never resumes) and
    starting afresh where the server sends the whole body again; raises unless the whole body arrived."""
    import pooch
    import requests

    have = part.stat().st_size if part.is_file() else 0
    version = part.with_name(part.name + ".version")  # the ETag or Last-Modified of the body the part began
    meter = _Meter(what, have)
    headers = {"Accept-Encoding": "identity"}  # the bytes as served: Range counts those, the checksum reads those
    if have:
        headers["Range"] = f"bytes={have}-"
        if version.is_file():
            headers["If-Range"] = version.read_text()
    with open(part, "ab") as out:
        def answered(response, *args, **kwargs):  # each response, before its body is read
            if response.is_redirect:  # the body comes with the response it leads to
                return response
            if response.status_code == 206 and not response.headers.get("Content-Range", "").startswith(
                    f"bytes {have}-"):
                out.truncate(0)
                version.unlink(missing_ok=True)
                raise OSError(f"the server resumed at another byte than our {have:,}: the next fetch starts afresh")
            if response.status_code != 206:  # the whole body (again, where we held a part)
                out.truncate(0)
                meter.start_bytes = meter.done = 0
                stamp = response.headers.get("ETag") or response.headers.get("Last-Modified")
                if stamp:
                    version.write_text(stamp)
                else:
                    version.unlink(missing_ok=True)
            return response

        downloader = pooch.HTTPDownloader(progressbar=meter, chunk_size=HTTP_CHUNK, timeout=TIMEOUT_S,
                                          headers=headers, hooks={"response": answered})
        try:
            downloader(url, out, None)
        except requests.HTTPError as exc:
            if exc.response is not None and exc.response.status_code == 416 and have:
                out.close()  # nothing after what we hold: begin again rather than trust it
                part.unlink()
                return _receive(url, part, what)
            raise
        except requests.exceptions.ChunkedEncodingError as exc:  # the body ended short: keep it for a resume
            out.flush()
            if meter.total:
                raise OSError(f"connection closed after {part.stat().st_size:,} of {meter.total:,} bytes") from exc
            raise
    version.unlink(missing_ok=True)  # whole: nothing to resume


def download(urls: tuple[str, ...], dest: Path, what: str) -> str:
    """Download the first of ``urls`` that answers into ``dest``; the URL used.

    Bytes arrive in ``dest.part`` (through pooch's HTTP downloader, with a progress line), which becomes ``dest``
    only once the whole body is there; a download that broke off or stalled (``TIMEOUT_S``) keeps it, and the
    next call resumes after it where the server allows (HTTP Range), else starts again. Every failure is named
    in one line: an unreachable host (no internet), an HTTP error, a connection that broke off or stalled. The
    caller verifies the checksum before using it.
    """
    failures = []
    for url in urls:
        try:
            receive(url, dest, what)
            return url
        except broken() as exc:
            failures.append(failure(url, exc))
    raise ReplicateError(f"could not download {what}:\n  " + "\n  ".join(failures) + kept(dest))


def receive(url: str, dest: Path, what: str) -> None:
    """``url``'s body into ``dest`` (``download`` for one URL); raises one of ``broken()`` (``failure`` says it in
    a line) unless the whole body arrived."""
    part = dest.with_name(dest.name + ".part")
    dest.parent.mkdir(parents=True, exist_ok=True)
    _receive(url, part, what)
    part.replace(dest)


def kept(dest: Path) -> str:
    """The line saying where the bytes of a broken-off download of ``dest`` wait for the next fetch, if any."""
    part = dest.with_name(dest.name + ".part")
    return (f"\n  the {part.stat().st_size:,} bytes received are kept in {part}: the next fetch resumes there"
            if part.is_file() and part.stat().st_size else "")


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
