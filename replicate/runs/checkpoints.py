"""Checkpoints of runs in flight, beside the run cache: a run cut off resumes where it stopped.

``<cache>/checkpoints/<entry>.pt`` holds a run's state at a round boundary (``fl.resume``), written
atomically every ``REPLICATE_CHECKPOINT_S`` seconds of a batch's training (default 120; 0: never) and
removed once the run is stored. It holds data only (``encode``: a JSON tree and raw tensor bytes, no pickle),
so a file from elsewhere can damage nothing but its own run when read, and its first line carries the sha256 of
the rest, checked whenever the file is read (``decode``): a flipped bit never reaches a resumed model. A stop request
(``request_stop``: a time budget spent, Ctrl-C in the driver) reaches the worker processes as a file they look for at
every round boundary: they save every run in flight and stop within a round, instead of the driver waiting for them or
losing them. A checkpoint that cannot be read, does not match its checksum, or is of another run, is ignored (the run
starts over) and said so.

A run asked to go on as a longer one (``continue_as``: successive halving's survivors, ``runs.tune``) leaves
its last state, before its final evaluation, as the longer run's checkpoint when it ends: that run resumes
there rather than from round 0 (nothing a run computes depends on its total rounds). The request is a file
beside the checkpoints, seen by the worker processes of this machine; where none sees it (a Ray node of its
own), the longer run starts from round 0, as it would without it.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import sys
import time
from pathlib import Path

import torch

from replicate.core import settings
from replicate.core.fileio import atomic_file
from replicate.fl.resume import Checkpoints


def folder() -> Path:
    return settings.current().cache / "checkpoints"


class FileCheckpoints(Checkpoints):
    """The checkpoints of one batch of runs, named by their cache entries."""

    def __init__(self, names: list[str], seconds: float | None = None):
        self.names, self.seconds = names, settings.current().checkpoint_s if seconds is None else seconds
        self.last = time.monotonic()
        self.stop_file = settings.current().stop_file

    def path(self, index: int) -> Path:
        return folder() / f"{self.names[index]}.pt"

    def load(self, index: int) -> dict | None:
        path = self.path(index)
        if not path.exists():
            return None
        try:
            state = decode(path.read_bytes())
            if state.get("name") != self.names[index] or not {"round", "flat", "server", "rows"} <= set(state):
                raise ValueError("not this run's state")
        except Exception as exc:  # noqa: BLE001 - any unreadable checkpoint: start over, never fail the run
            print(f"warning: checkpoint {path.name} is unreadable ({type(exc).__name__}: {exc}): the run starts "
                  "over", file=sys.stderr, flush=True)
            return None
        return state

    def due(self) -> bool:
        if self.seconds and time.monotonic() - self.last >= self.seconds:
            self.last = time.monotonic()
            return True
        return False

    def stop(self) -> bool:
        return bool(self.stop_file) and os.path.exists(self.stop_file)

    def save(self, index: int, state: dict) -> None:
        _write(self.path(index), state, self.names[index])

    def end(self, index: int, state: dict) -> None:
        """Where ``continue_as`` asked, the longer run's checkpoint, unless one as far along is there (a run cut
        off further on): a head start only, so a file that fails leaves the run as it is, said so."""
        try:
            target = _request(self.names[index]).read_text().strip()
        except FileNotFoundError:
            return
        try:
            there = reached_by(target)
            if there is None or there < state["round"]:
                _write(folder() / f"{target}.pt", state, target)
            _request(self.names[index]).unlink(missing_ok=True)
        except OSError as exc:
            print(f"warning: the state of run {self.names[index]} was not kept for {target} ({exc}): that run "
                  "starts from round 0", file=sys.stderr, flush=True)


HEADER = b"replicate checkpoint 2 sha256:"  # then the payload's 64 hex digits and a newline
OLDER = b"replicate checkpoint sha256:"  # format 1: a pickle (torch.save), which can carry code: never loaded
# the tensor types a run's state holds; anything else in a file is refused, not interpreted
DTYPES = {str(t).removeprefix("torch."): t for t in (torch.float16, torch.bfloat16, torch.float32, torch.float64,
                                                    torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8,
                                                    torch.bool)}


def encode(state: dict) -> bytes:
    """A checkpoint file's bytes: ``HEADER``, the sha256 of the payload, a newline, the payload.

    The payload holds data only, so that reading a file made elsewhere runs no code (a pickle, which
    ``torch.save`` writes, may call anything when loaded): an 8-byte length, a JSON tree of the state
    (dicts, lists, numbers, strings; a tensor as its dtype, shape and place in the blob; a frozen
    dataclass, such as a server state, as its class name and fields), then the tensors' raw bytes."""
    blob = bytearray()

    def plain(value):
        if isinstance(value, torch.Tensor):
            data = value.detach().cpu().contiguous()
            raw = data.reshape(-1).view(torch.uint8).numpy().tobytes() if data.numel() else b""
            entry = {"$tensor": [str(data.dtype).removeprefix("torch."), list(data.shape), len(blob), len(raw)]}
            blob.extend(raw)
            return entry
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return {"$dataclass": type(value).__name__,
                    "fields": {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}}
        if isinstance(value, dict):
            return {str(k): plain(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [plain(v) for v in value]
        if hasattr(value, "item") and not isinstance(value, (str, bytes)):  # a numpy scalar in a history row
            return value.item()
        return value

    tree = json.dumps(plain(state), allow_nan=True).encode()
    payload = len(tree).to_bytes(8, "little") + tree + bytes(blob)
    return HEADER + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload


def decode(data: bytes) -> dict:
    """The state a checkpoint file's bytes hold, once they match their checksum; a ``ValueError`` says why not
    (damaged, cut short, not a checkpoint, or of format 1, whose pickle is never loaded). Nothing in the file is
    run: a dataclass comes back as ``{"$dataclass": name, "fields": …}``, for the run to rebuild from its own
    class (``fl.resume.restore``)."""
    head, _, payload = data.partition(b"\n")
    if head.startswith(OLDER):
        raise ValueError("it is of an older format, a pickle, which could run code when loaded: not loaded")
    if not head.startswith(HEADER):
        raise ValueError("no checksum line")
    if hashlib.sha256(payload).hexdigest().encode() != head[len(HEADER):]:
        raise ValueError("its bytes do not match their sha256")
    size = int.from_bytes(payload[:8], "little")
    tree, blob = json.loads(payload[8:8 + size]), memoryview(payload)[8 + size:]

    def value(node):
        if isinstance(node, list):
            return [value(v) for v in node]
        if not isinstance(node, dict):
            return node
        if "$tensor" in node:
            dtype, shape, at, length = node["$tensor"]
            if dtype not in DTYPES or at + length > len(blob) or \
                    length != math.prod(shape) * DTYPES[dtype].itemsize:
                raise ValueError(f"a tensor of type {dtype!r} or shape {shape} that does not fit the file")
            raw = torch.frombuffer(bytearray(blob[at:at + length]), dtype=torch.uint8) if length else \
                torch.empty(0, dtype=torch.uint8)
            return raw.view(DTYPES[dtype]).reshape(shape)
        if "$dataclass" in node:
            return {"$dataclass": str(node["$dataclass"]), "fields": value(node.get("fields", {}))}
        return {k: value(v) for k, v in node.items()}

    state = value(tree)
    if not isinstance(state, dict):
        raise ValueError("not a run's state")
    return state


def _write(path: Path, state: dict, name: str) -> None:
    with atomic_file(path) as out:
        out.write(encode({**state, "name": name}))


def _request(name: str) -> Path:
    return folder() / f"{name}.then"


def continue_as(name: str, longer: str) -> None:
    """When the run ``name`` ends, its last state becomes the checkpoint of the run ``longer`` (its config with
    more rounds), which then resumes there."""
    with atomic_file(_request(name)) as out:
        out.write(longer.encode())


def withdraw(name: str, longer: str, at: int, keep: bool = False) -> None:
    """The request ``continue_as(name, longer)`` gone (the run ``name`` ended, or was stored already), and with
    it the state it left at round ``at`` unless ``keep`` (the longer run is computed next); a checkpoint of
    ``longer`` at another round is some other computation's, and stays."""
    _request(name).unlink(missing_ok=True)
    if not keep and reached_by(longer) == at:
        clear(longer)


def reached_by(name: str) -> int | None:
    """The round the checkpoint of run ``name`` reached, or None (none, or unreadable)."""
    try:
        return round_of((folder() / f"{name}.pt").read_bytes())
    except OSError:
        return None


def round_of(data: bytes) -> int | None:
    """The round a checkpoint's bytes reached (its run resumes there), or None if they do not load or do not
    match their checksum."""
    try:
        return int(decode(data)["round"])
    except Exception:  # noqa: BLE001 - an unreadable checkpoint is no head start (and is ignored when loaded)
        return None


def clear(name: str) -> None:
    """The run ``name`` is stored: its checkpoint is no longer needed."""
    (folder() / f"{name}.pt").unlink(missing_ok=True)


def stop_file() -> Path:
    """A stop file of this driver process's own, for the runs it starts (their ``stop_file`` setting)."""
    return folder() / f"stop.{os.getpid()}"


def request_stop(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch()


__all__ = ["FileCheckpoints", "clear", "continue_as", "decode", "encode", "folder", "reached_by",
           "request_stop", "round_of", "stop_file", "withdraw"]
