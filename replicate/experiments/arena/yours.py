"""Your model and your dataset in the arena, given as your algorithm is: ``path/to/file.py:NAME``.

The file is imported as a module (its folder put on ``sys.path``), as for a user's algorithm (``entries``):

- a **model** (``user_model``): ``NAME`` is a ``torch.nn.Module`` mapping a batch of inputs to class logits, or a
  callable without required arguments that returns one (its class). It trains on every dataset of the arena in
  place of the paper's model (``fl.models.module.TorchModule``: every client's copy at once, initialised by its
  own ``reset_parameters`` under the run's seed);
- a **dataset** (an item of ``datasets``): ``NAME`` is a ``FederatedDataset`` (``replicate.federate``,
  ``replicate.load_dataset``), or a callable without required arguments that returns one. It joins the arena's
  datasets, every client every round, with b = 64 (a run config's default) and logistic regression unless a
  model of yours is given.

Each is registered under ``NAME@digest`` (the digest: SHA-256 of the dataset's arrays; of the model's file, its
structure and the parameters it starts from under a fixed seed), so the arena's runs on it are ordinary cached
runs, keyed by the full config: another dataset or model, or an edit of the model's file, names other runs. The
name is a string that registers itself again wherever a run config is unpickled (a worker process imports the
file and checks that it builds the same digest: data or a model built from unseeded draws are refused there).
"""
from __future__ import annotations

import importlib
import inspect
import sys
from pathlib import Path

import numpy as np
import torch

from replicate.core.errors import ReplicateError
from replicate.runs import own


def is_file(spec: str) -> bool:
    """Whether ``spec`` names an object in a file (``path/to/file.py:NAME``) rather than a registered name."""
    path, colon, name = spec.rpartition(":")
    return bool(colon and name) and path.endswith(".py")


def imported(spec: str, knob: str, what: str = "NAME"):
    """``path/to/file.py:NAME`` → (the file, the module-level object ``NAME``): the file imported as a module, its
    folder put on ``sys.path`` (so worker processes import it too)."""
    path, _, name = spec.rpartition(":")
    file = Path(path)
    if not path or not name or file.suffix != ".py" or not file.is_file():
        raise ReplicateError(f"{knob} takes path/to/file.py:{what}, got {spec!r}"
                             + ("" if not path or file.is_file() else f" ({path} is not a file)"))
    folder = str(file.resolve().parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    try:
        module = importlib.import_module(file.stem)
    except Exception as exc:  # noqa: BLE001 - the user's file: whatever it raises, one line naming it
        raise ReplicateError(f"{file} could not be imported: {type(exc).__name__}: {exc}") from None
    value = getattr(module, name, None)
    if value is None:
        raise ReplicateError(f"{file} defines no {name!r}")
    return file, value


class Entered(str):
    """A registered name of a user's dataset or model: a plain string in a run config (so the run is cached), that
    registers itself again wherever it is unpickled."""

    def __new__(cls, name: str, kind: str, spec: str):
        entered = super().__new__(cls, name)
        entered.kind, entered.spec = kind, spec
        return entered

    def __reduce__(self):
        return _again, (self.kind, self.spec, str(self))


def _again(kind: str, spec: str, name: str) -> Entered:
    entered = (user_dataset if kind == "dataset" else user_model)(spec)
    if entered != name:
        raise ReplicateError(f"{spec} built another {kind} in this process ({entered}, not {name}): build it from "
                             "fixed seeds, so that every process builds the same one")
    return entered


def _made(value, cls, spec: str, knob: str, what: str):
    """``value`` itself if an instance of ``cls``, else what calling it (a function or class) without arguments
    returns."""
    if not isinstance(value, cls) and (inspect.isfunction(value) or inspect.isclass(value)):
        try:
            value = value()
        except Exception as exc:  # noqa: BLE001 - the user's code: whatever it raises, one line naming it
            raise ReplicateError(f"{knob} {spec}: calling it raised {type(exc).__name__}: {exc}") from None
    if not isinstance(value, cls):
        raise ReplicateError(f"{knob} {spec} must be {what}, or a callable without arguments that returns one; "
                             f"got {type(value).__name__}")
    return value


_REGISTERED: dict[tuple[str, str], Entered] = {}  # (kind, spec) → its name, once per process


def user_dataset(spec: str) -> Entered:
    """Register the dataset ``path/to/file.py:NAME`` (``replicate.data.registry``) and return its name."""
    if ("dataset", spec) in _REGISTERED:
        return _REGISTERED[("dataset", spec)]
    from replicate.data.federated import FederatedDataset

    file, value = imported(spec, "datasets")
    data = _made(value, FederatedDataset, spec, "dataset", "a FederatedDataset (replicate.federate)")
    name = own.register_dataset(data, spec.rpartition(":")[2])
    _REGISTERED[("dataset", spec)] = entered = Entered(name, "dataset", spec)
    return entered


def user_model(spec: str) -> Entered:
    """Register the model ``path/to/file.py:NAME`` (``replicate.fl.models.MODELS``) and return its name."""
    if ("model", spec) in _REGISTERED:
        return _REGISTERED[("model", spec)]
    file, value = imported(spec, "user_model")
    module = _made(value, torch.nn.Module, spec, "user_model", "a torch.nn.Module")
    name = own.register_model(module, spec.rpartition(":")[2], code=file.read_bytes())
    _REGISTERED[("model", spec)] = entered = Entered(name, "model", spec)
    return entered


def check_fits(model: str, data, where: str) -> None:
    """A model of yours maps two of ``data``'s training inputs to one logit per class, or is refused naming
    ``where`` (the dataset): a model's input shape fits some datasets only."""
    from replicate.fl import models

    try:
        built = models.for_dataset(model, data)
        out = built.predict(built.init(torch.Generator().manual_seed(0)), data.train.x[:2])
    except Exception as exc:  # noqa: BLE001 - the user's module: whatever it raises, one line naming it
        raise ReplicateError(f"user_model {model} cannot train on {where} (inputs {tuple(data.train.x.shape[1:])}): "
                             f"{type(exc).__name__}: {exc}; choose the datasets it fits (--dataset NAME)") from None
    if tuple(out.shape) != (min(2, len(data.train.x)), data.num_classes):
        raise ReplicateError(f"user_model {model} maps {where}'s inputs to {tuple(out.shape[1:])} outputs, not its "
                             f"{data.num_classes} classes' logits")
    if not np.isfinite(out.detach().numpy()).all():
        raise ReplicateError(f"user_model {model} gives non-finite logits on {where}'s inputs")


__all__ = ["Entered", "check_fits", "imported", "is_file", "user_dataset", "user_model"]
