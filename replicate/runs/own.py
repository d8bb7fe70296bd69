"""A dataset or a ``torch.nn.Module`` of one's own under a name the run cache can key: ``NAME@digest``.

The run cache keys a run by its whole config, and a config names its dataset and model. An object of one's own
gets a name from what it is, registered in this process like a preset (``data.registry``, ``fl.models.MODELS``):

- a dataset: SHA-256 of its classes and arrays (every split's inputs, labels and client offsets), so the same
  samples cut the same way are the same runs, and any other sample or cut names other runs;
- a model: SHA-256 of its structure (``repr``), the parameters it starts from under a fixed seed, its frozen
  parameters, and its code: the source file of each class of one's own in it where the class has one (a
  script, a module), else those classes' methods as compiled (a class defined in a notebook cell). Code outside
  those classes that a method calls is covered only through its file: after editing such a helper in a
  notebook, run with ``use_cache=False``.

The names hold 12 hex digits of the digest, for readable file names; a collision of two different objects
among one user's runs has a chance of about n²/2⁴⁹ for n objects.
"""
from __future__ import annotations

import hashlib
import inspect
import sys
import types
from pathlib import Path

import torch

DIGEST = 12  # hex digits of the SHA-256 kept in a registered name


def digest(*parts) -> str:
    """The first ``DIGEST`` hex digits of the SHA-256 of ``parts`` (tensors by dtype, shape and bytes; bytes as
    they are; anything else by ``str``)."""
    h = hashlib.sha256()
    for part in parts:
        if isinstance(part, torch.Tensor):
            part = part.detach().cpu().contiguous()
            h.update(f"{part.dtype}{tuple(part.shape)}".encode())
            part = part.numpy().tobytes()
        h.update(part if isinstance(part, bytes) else str(part).encode())
    return h.hexdigest()[:DIGEST]


def dataset_name(data, label: str | None = None) -> str:
    """Register ``data`` (a ``FederatedDataset``) as a dataset named ``label@digest`` (``label``: its own name)
    and return that name; the same arrays give the same name in every process."""
    from replicate.data import registry

    splits = [s for s in (data.train, data.test) if s is not None]
    name = f"{label or data.name}@" + digest(data.num_classes, *(t for s in splits for t in (s.x, s.y, s.offsets)))
    if name not in registry.BUILDERS:
        registry.builder(name)(lambda: data)
    return name


class Preset:
    """A module of one's own as the model registry's entries are called: ``(features, classes)`` → a ``Model``."""

    batch_exact = False

    def __init__(self, module: torch.nn.Module):
        from replicate.fl.models.module import TorchModule

        self.model = TorchModule(module)  # refuses buffers and dropout here, before anything runs

    def __call__(self, num_features: int, num_classes: int, **options):
        return self.model


def model_name(module: torch.nn.Module, label: str | None = None, code: bytes | None = None) -> str:
    """Register ``module`` as a model named ``label@digest`` (``label``: its class's name) and return that name.
    ``code``: the bytes that define it (a file), else its classes' own code (module docstring)."""
    from replicate.fl import models

    preset = Preset(module)
    model = preset.model
    fixed = [(key, t) for key, t in model.module.named_parameters() if not t.requires_grad]
    name = f"{label or type(module).__name__}@" + digest(code if code is not None else code_of(module),
                                                         repr(model.module),
                                                         model.init(torch.Generator().manual_seed(0)),
                                                         *(part for pair in fixed for part in pair))
    models.MODELS.setdefault(name, preset)
    return name


def code_of(module: torch.nn.Module) -> bytes:
    """The code of every class of one's own in ``module`` (not torch's): its source file where it has one, else
    its methods' compiled code, nested functions included."""
    parts = []
    for cls in sorted({type(m) for m in module.modules()}, key=lambda c: (c.__module__, c.__qualname__)):
        if cls.__module__.split(".")[0] == "torch":
            continue
        parts.append(f"{cls.__module__}.{cls.__qualname__}".encode())
        file = getattr(sys.modules.get(cls.__module__), "__file__", None)
        if file and Path(file).is_file():
            parts.append(Path(file).read_bytes())
            continue
        for _, method in sorted(vars(cls).items()):
            function = getattr(method, "__func__", method)
            if isinstance(function, types.FunctionType):
                parts.append(_compiled(function.__code__))
    return b"\0".join(parts)


def _compiled(code: types.CodeType) -> bytes:
    """A code object's instructions, names and constants, its nested code objects' included."""
    consts = [_compiled(c) if inspect.iscode(c) else repr(c).encode() for c in code.co_consts]
    return b"|".join([code.co_code, repr(code.co_names).encode(), *consts])


def named(config):
    """``config`` with a dataset and a model of one's own replaced by their registered names (``RunConfig`` as
    it was where both are named already)."""
    dataset, model = config.dataset, config.model
    if not isinstance(dataset, str):
        dataset = dataset_name(dataset)
    if isinstance(model, torch.nn.Module):
        model = model_name(model)
    return config.replace(dataset=dataset, model=model)


__all__ = ["DIGEST", "Preset", "code_of", "dataset_name", "digest", "model_name", "named"]
