"""Carrying cached runs between machines as one compressed file.

``export`` packs cache entries (``runs/<key>.csv|json``, ``to_target/<key>_to_<loss>.csv|json``)
into one xz-compressed tar with a ``manifest.json`` listing, per entry, its config hash, the
sha256 of both files, the device type it ran on and the ``NUMERICS`` versions in force, next to
the cache ``VERSION`` and the exporting checkout's git commit. ``load`` (``cache import``) reads
the whole archive and checks everything before it writes anything: every member is a listed
entry file (no other path, no link), every checksum matches, and every entry's name is the one
this code computes from its recorded config (so an entry of another ``VERSION``, ``NUMERICS`` or
config is refused rather than sitting in the cache under a name nothing reads). Entries already
in the cache with the same results (CSV) are skipped; one with another CSV is never replaced.
``figures/ledger`` (``runs.ledger``) keeps the committed runs as such archives.
"""
from __future__ import annotations

import hashlib
import io
import json
import lzma
import re
import subprocess
import tarfile
import zlib
from dataclasses import dataclass
from pathlib import Path

from replicate.core import paths
from replicate.core import settings
from replicate.core.errors import ReplicateError
from replicate.core.fileio import atomic_file
from replicate.runs import cache, keys
from replicate.runs.config import RunConfig, run_device

FORMAT = 1  # the archive layout; bump when the manifest changes meaning
MANIFEST = "manifest.json"
FOLDERS = ("runs", "to_target")
_MEMBER = re.compile(r"(runs|to_target)/([0-9a-f]{20}(?:_to_[0-9.e+-]+)?)\.(csv|json)")


@dataclass(frozen=True)
class Entry:
    """One cached run: ``folder/name.csv`` and ``folder/name.json`` under the cache folder."""

    folder: str
    name: str

    def path(self, suffix: str, root: Path | None = None) -> Path:
        return (root or settings.current().cache) / self.folder / f"{self.name}{suffix}"

    def member(self, suffix: str) -> str:
        return f"{self.folder}/{self.name}{suffix}"


def entries(names: set[str] | None = None) -> list[Entry]:
    """Cache entries, all of them or those named (a name is a key of ``RunLog.provenance()["run_seconds"]``);
    an entry is there when its CSV is (the JSON is written first)."""
    found = []
    for folder in FOLDERS:
        for csv in sorted((settings.current().cache / folder).glob("*.csv")):
            if (names is None or csv.stem in names) and csv.with_suffix(".json").exists():
                found.append(Entry(folder, csv.stem))
    return found


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _check(entry: Entry, meta: dict) -> str | None:
    """Why this code would not read ``entry`` under its name (None: it would)."""
    if meta.get("version") != keys.VERSION:
        return f"made under cache VERSION {meta.get('version')}, this code's is {keys.VERSION}"
    if (entry.folder == "to_target") != (meta.get("target") is not None):
        return f"a {'full' if meta.get('target') is None else 'stopped'} run stored in {entry.folder}/"
    try:
        name = cache.entry_name(meta)
    except (ReplicateError, TypeError, KeyError, ValueError) as exc:
        return f"its recorded config is not one this code accepts ({exc})"
    if name != entry.name:
        return (f"its recorded config hashes to {name} under this code (another NUMERICS version, "
                "or a config field added or changed since)")
    return None


def _commit() -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(paths.REPO), "rev-parse", "HEAD"], capture_output=True,
                             text=True, timeout=10)
    except OSError:
        return None
    return (out.stdout.strip() or None) if out.returncode == 0 else None


def export(file: Path, names: set[str] | None = None) -> tuple[list[str], list[str]]:
    """Write the entries named (all of the cache for None) into ``file``; returns the names written, and
    those left out because this code would not read them (stale or damaged entries)."""
    items, stale = [], []
    for entry in entries(names):
        data = {suffix: entry.path(suffix).read_bytes() for suffix in (".json", ".csv")}
        meta = json.loads(data[".json"])
        if _check(entry, meta) is not None or cache.damage(entry.path("")) is not None:
            stale.append(entry.name)
            continue
        items.append((entry, data))
    if not items:
        raise ReplicateError(f"nothing to export: {'no' if names is None else 'none of the named'} runs "
                             f"{'are' if names is None else 'is'} in {settings.current().cache}"
                             + (f" ({len(stale)} stale entries, which this code would not read)" if stale else ""))
    write(Path(file), items)
    return [entry.name for entry, _ in items], stale


def write(file: Path, items: list[tuple[Entry, dict[str, bytes]]]) -> None:
    """Write entries (each its ``.json`` and ``.csv`` bytes) into ``file`` with their manifest, atomically."""
    listed, blobs = [], []
    for entry, data in items:
        meta = json.loads(data[".json"])
        listed.append({"folder": entry.folder, "name": entry.name, "device": meta.get("device"),
                       "numerics": cache.numerics(RunConfig.from_dict(meta)),
                       "json_sha256": _sha256(data[".json"]), "csv_sha256": _sha256(data[".csv"])})
        blobs += [(entry.member(suffix), data[suffix]) for suffix in (".json", ".csv")]
    manifest = {"format": FORMAT, "cache_version": keys.VERSION, "numerics": dict(keys.NUMERICS),
                "commit": _commit(), "entries": listed}
    try:
        with atomic_file(file) as out, tarfile.open(fileobj=out, mode="w:xz") as tar:
            for member, data in [(MANIFEST, json.dumps(manifest, indent=1).encode()), *blobs]:
                info = tarfile.TarInfo(member)
                info.size, info.mode = len(data), 0o644
                tar.addfile(info, io.BytesIO(data))
    except OSError as exc:
        raise ReplicateError(f"cannot write {file}: {exc.strerror or exc}") from None


def _read(file: Path) -> dict[str, bytes]:
    """Every member of the archive, by name; refuses anything that is not a plain file at an entry's path."""
    members = {}
    try:
        with tarfile.open(file, mode="r:*") as tar:
            for info in tar:
                if info.name != MANIFEST and not _MEMBER.fullmatch(info.name):
                    raise ReplicateError(f"{file}: member {info.name!r} is not a cache entry (an archive holds "
                                         f"{MANIFEST} and runs/, to_target/ files only); nothing imported")
                if not info.isfile() or info.name in members:
                    raise ReplicateError(f"{file}: member {info.name!r} is not a single plain file; nothing imported")
                members[info.name] = tar.extractfile(info).read()
    except FileNotFoundError:
        raise ReplicateError(f"no such archive: {file}") from None
    except (tarfile.TarError, EOFError, lzma.LZMAError, zlib.error, OSError) as exc:
        why = str(exc).splitlines()[0].rstrip(":") or type(exc).__name__  # tarfile lists every method it tried
        raise ReplicateError(f"{file} is not a complete cache archive ({why}: not a tar.xz that `cache export` "
                             "wrote, or cut short); nothing imported") from None
    return members


def verified(file: Path) -> list[tuple[Entry, dict[str, bytes]]]:
    """Every entry of an archive written by ``write``, each its ``.json`` and ``.csv`` bytes, after every
    check (members, manifest, checksums, cache ``VERSION``, ``NUMERICS``, names): all of them or, on any
    mismatch, a ``ReplicateError`` in one line ending "nothing imported"."""
    file = Path(file)
    members = _read(file)
    if MANIFEST not in members:
        raise ReplicateError(f"{file} has no {MANIFEST}: not a cache archive (truncated?); nothing imported")
    try:
        manifest = json.loads(members.pop(MANIFEST))
        listed = [(Entry(item["folder"], item["name"]), item) for item in manifest["entries"]]
    except (ValueError, KeyError, TypeError) as exc:
        raise ReplicateError(f"{file}: unreadable {MANIFEST} ({exc}); nothing imported") from None
    if manifest.get("format") != FORMAT:
        raise ReplicateError(f"{file}: archive format {manifest.get('format')}, this code reads {FORMAT}")
    if manifest.get("cache_version") != keys.VERSION:
        raise ReplicateError(f"{file} holds runs of cache VERSION {manifest.get('cache_version')}, this code's is "
                             f"{keys.VERSION}: it would not read them (recompute instead); nothing imported")
    unlisted = set(members) - {entry.member(s) for entry, _ in listed for s in (".json", ".csv")}
    if unlisted:
        raise ReplicateError(f"{file}: {sorted(unlisted)[0]} is not in its manifest; nothing imported")
    items = []
    for entry, item in listed:
        data = {suffix: members.get(entry.member(suffix)) for suffix in (".json", ".csv")}
        why = _refusal(entry, item, data)
        if why:
            raise ReplicateError(f"{file}: entry {entry.member('')} refused: {why}; nothing imported")
        items.append((entry, data))
    return items


def load(file: Path) -> tuple[int, int, dict[str, int]]:
    """Import an archive written by ``export`` into the cache: all of it or, on any mismatch, nothing.
    Returns (entries written, entries already there with the same results, how many entries ran on each
    device type other than this machine's: its notebooks do not read those, as the key holds the device).
    An entry already here is the same when its CSV is: the sidecars of one run computed twice differ in
    its timing (``elapsed_s``) alone. One whose CSV differs is never replaced."""
    new, same, elsewhere = [], 0, {}
    for entry, data in verified(file):
        device = str(json.loads(data[".json"])["device"]).split(":")[0]
        if device != run_device().type:
            elsewhere[device] = elsewhere.get(device, 0) + 1
        here = entry.path(".csv")
        # a damaged one is moved aside and replaced by the archive's
        if cache.present(entry.path(""), vouched=data[".csv"]):
            if here.read_bytes() != data[".csv"]:
                raise ReplicateError(f"{file}: entry {entry.member('')} differs from the one in "
                                     f"{settings.current().cache}; "
                                     "remove that one to take the archive's; nothing imported")
            same += 1
        else:
            new.append((entry, data))
    for entry, data in new:
        put(entry, data)
    return len(new), same, elsewhere


def put(entry: Entry, data: dict[str, bytes]) -> None:
    """Write a verified entry into the cache: its sidecar gains the CSV's checksum and row count where it
    lacks them (runs computed before the cache recorded them) and is sealed (``cache.sealed``), so reading it
    verifies it; the JSON first, as ``cache.store`` writes: an entry is there once its CSV is."""
    meta = json.loads(data[".json"])
    meta.update({key: value for key, value in cache.integrity(data[".csv"]).items() if key not in meta})
    with atomic_file(entry.path(".json")) as out:
        out.write(json.dumps(cache.sealed(meta), indent=1).encode())
    with atomic_file(entry.path(".csv")) as out:
        out.write(data[".csv"])


def _refusal(entry: Entry, item: dict, data: dict) -> str | None:
    """Why an archived entry may not enter this cache (None: it may)."""
    if not _MEMBER.fullmatch(entry.member(".csv")):
        return "not a cache entry's name"
    if data[".json"] is None or data[".csv"] is None:
        return "its files are missing from the archive (truncated?)"
    for suffix in (".json", ".csv"):
        if _sha256(data[suffix]) != item.get(f"{suffix[1:]}_sha256"):
            return f"the {suffix[1:].upper()} does not match its checksum (damaged or edited)"
    try:
        meta = json.loads(data[".json"])
    except ValueError:
        return "its JSON does not parse"
    if cache.seal_broken(meta):
        return "its JSON does not match its own checksum (changed after the cache wrote it)"
    if "csv_sha256" in meta and meta["csv_sha256"] != _sha256(data[".csv"]):
        return "its CSV is not the one its sidecar records (damaged or edited)"
    try:
        numerics = cache.numerics(RunConfig.from_dict(meta))
    except (ReplicateError, TypeError, ValueError, KeyError, AttributeError) as exc:
        return f"its recorded config is not one this code accepts ({exc!r})"
    if item.get("numerics") != numerics:
        return f"computed under NUMERICS {item.get('numerics')}, this code's are {numerics}: recompute it"
    return _check(entry, meta)
