"""Checkpoints of cut-off runs carried from one borrowed GPU session to the next (``.ci/gpu/gpu_queue.py``).

A session stops its runs at a round boundary and saves each run in flight (``replicate.runs.checkpoints``);
what it finished goes back as a run archive (``cache export``), and what it did not as its checkpoints:
``pack`` writes every checkpoint of the cache into tar files of at most ``LIMIT`` bytes each (a session returns
files of at most 16 MiB), each with a manifest of sha256 sums; ``unpack`` puts them into a cache's
checkpoints folder after checking every member, so the next session's same run resumes at the round it reached
instead of round 0. They are not committed (a Shakespeare LSTM's state is ≈ 3 MB): ``.ci/device-bundle``
carries the last session's packs from ``.carry/checkpoints``, and ``.ci/device-check`` unpacks them first.
A checkpoint is data only (``replicate.runs.checkpoints``: JSON and raw tensor bytes, never code) and only a
head start: one that does not check or belongs to another run is ignored when read and the run starts over.
"""
from __future__ import annotations

import hashlib
import io
import json
import re
import tarfile
from pathlib import Path

from replicate.core.errors import ReplicateError
from replicate.core.fileio import atomic_file
from replicate.runs import checkpoints

FORMAT = 1
MANIFEST = "manifest.json"
LIMIT = 15 * 2**20  # bytes a pack may hold: under the 16 MiB a session returns per file, with room for the tar
PARTS = 3  # packs a session may return (it returns 8 files; its log, bench, tests, plan and runs take 5)
_MEMBER = re.compile(r"([0-9a-f]{20}(?:_to_[0-9.e+-]+)?)\.pt")


def pack(folder: Path, limit: int = LIMIT, parts: int = PARTS) -> tuple[list[Path], list[str]]:
    """Write every checkpoint of this cache into ``folder/checkpoints-<i>.tar`` (at most ``parts`` files of
    ``limit`` bytes, largest runs' states first left out); returns the files written and the checkpoints
    left out."""
    sizes = {p: p.stat().st_size for p in checkpoints.folder().glob("*.pt") if _MEMBER.fullmatch(p.name)}
    bins: list[list[Path]] = []
    left = []
    for path in sorted(sizes, key=lambda p: (sizes[p], p.name)):  # smallest first: the most runs carried
        room = [b for b in bins if sum(sizes[p] for p in b) + sizes[path] <= limit]
        if room:
            room[0].append(path)
        elif len(bins) < parts and sizes[path] <= limit:
            bins.append([path])
        else:
            left.append(path.stem)
    written = []
    for i, members in enumerate(bins, start=1):
        blobs = {p.name: p.read_bytes() for p in members}
        manifest = {"format": FORMAT, "checkpoints": {name: hashlib.sha256(data).hexdigest()
                                                      for name, data in blobs.items()}}
        target = Path(folder) / f"checkpoints-{i}.tar"
        with atomic_file(target) as out, tarfile.open(fileobj=out, mode="w") as tar:
            for name, data in [(MANIFEST, json.dumps(manifest, indent=1).encode()), *blobs.items()]:
                info = tarfile.TarInfo(name)
                info.size, info.mode = len(data), 0o644
                tar.addfile(info, io.BytesIO(data))
        written.append(target)
    return written, left


def unpack(file: Path) -> list[str]:
    """The checkpoints of one pack into this cache's checkpoints folder, after checking every member (a plain
    file named as a run's checkpoint, listed in the manifest with its sha256); on any mismatch nothing is
    written and a ``ReplicateError`` says why in one line. A checkpoint this cache already holds and can read
    is kept (a warm machine's own is as recent as the pack's, or more). Returns the runs written."""
    file = Path(file)
    members = {}
    try:
        with tarfile.open(file, mode="r:") as tar:
            for info in tar:
                if not info.isfile() or info.name in members or not (
                        info.name == MANIFEST or _MEMBER.fullmatch(info.name)):
                    raise ReplicateError(f"{file}: member {info.name!r} is not a run's checkpoint; nothing unpacked")
                members[info.name] = tar.extractfile(info).read()
    except FileNotFoundError:
        raise ReplicateError(f"no such checkpoint pack: {file}") from None
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise ReplicateError(f"{file} is not a complete checkpoint pack ({type(exc).__name__}); nothing unpacked") \
            from None
    try:
        manifest = json.loads(members.pop(MANIFEST))
        sums = dict(manifest["checkpoints"])
    except (KeyError, ValueError, TypeError):
        raise ReplicateError(f"{file}: no readable {MANIFEST}; nothing unpacked") from None
    if manifest.get("format") != FORMAT:
        raise ReplicateError(f"{file}: pack format {manifest.get('format')}, this code reads {FORMAT}")
    for name, data in members.items():
        if sums.get(name) != hashlib.sha256(data).hexdigest():
            raise ReplicateError(f"{file}: {name} does not match its manifest's sha256 (damaged or edited); "
                                 "nothing unpacked")
    if set(sums) - set(members):
        raise ReplicateError(f"{file}: {sorted(set(sums) - set(members))[0]} is listed but absent; nothing unpacked")
    written = []
    for name, data in sorted(members.items()):
        if checkpoints.reached_by(Path(name).stem) is not None:  # this cache's own: as recent as the pack's, or more
            continue
        with atomic_file(checkpoints.folder() / name) as out:
            out.write(data)
        written.append(Path(name).stem)
    return written


def reached(carried: Path | None = None) -> dict[str, int]:
    """The round each checkpoint this machine holds reached, by run (its cache entry's name): the cache's own
    (``runs.checkpoints.folder``) and those in the packs of ``carried`` (``.carry/checkpoints``, which the next
    session unpacks); a pack that does not check is left out, as ``unpack`` would refuse it. The queue counts
    such a run from that round."""
    found = {p.stem: data for p in checkpoints.folder().glob("*.pt") if _MEMBER.fullmatch(p.name)
             for data in [p.read_bytes()] if checkpoints.round_of(data) is not None}
    for file in sorted(Path(carried).glob("checkpoints-*.tar")) if carried is not None else []:
        try:
            with tarfile.open(file, mode="r:") as tar:
                members = {i.name: tar.extractfile(i).read() for i in tar if i.isfile()}
            sums = json.loads(members.pop(MANIFEST))["checkpoints"]
        except (tarfile.TarError, EOFError, OSError, KeyError, ValueError, TypeError):
            continue
        if sums.keys() == members.keys() and all(hashlib.sha256(d).hexdigest() == sums[n] for n, d in members.items()):
            for name, data in members.items():
                found.setdefault(Path(name).stem, data)  # the cache's own is as recent, or more
    return {name: r for name, data in found.items() if (r := checkpoints.round_of(data)) is not None}


__all__ = ["LIMIT", "PARTS", "pack", "reached", "unpack"]
