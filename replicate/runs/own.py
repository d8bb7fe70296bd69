"""A dataset or a ``torch.nn.Module`` of one's own under a name the run cache can key: ``NAME@digest``.

The run cache keys a run by its whole config, and a config names its dataset and model. An object of one's own
is named from what it is, and only the key uses the name: the run computes with the object itself.

- a dataset: SHA-256 of its classes, every split's inputs, labels and client offsets, and its ``meta`` (which a
  preset reads: a vocabulary, an image shape, word vectors), so the same samples cut the same way are the same
  runs, and any other sample, cut or meta names other runs;
- a model: SHA-256 of its structure (``repr``), the parameters it starts from under a fixed seed, its frozen
  parameters, every submodule's own attributes (a scale, an activation passed to ``__init__``), and the code of
  every class of one's own in it and in their bases: its methods as compiled, with their default arguments,
  closures and decorators' wrapped functions, its properties and class attributes, and the class's source file
  where it has one. Code outside those classes that a method calls (a helper function) enters only through that
  file: after editing such a helper in a notebook, run with ``use_cache=False``.

The arena registers such names (``register_dataset``, ``register_model``) so that its worker processes build the
objects by name. The names hold 12 hex digits of the digest, for readable file names; a collision of two different
objects among one user's runs has a chance of about n²/2⁴⁹ for n objects.
"""
from __future__ import annotations

import hashlib
import inspect
import re
import sys
import types
from pathlib import Path

import numpy as np
import torch

DIGEST = 12  # hex digits of the SHA-256 kept in a registered name
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")  # a default repr's memory address: another in every process


def digest(*parts) -> str:
    """The first ``DIGEST`` hex digits of the SHA-256 of ``parts``, each length-prefixed (so that ("ab", "c") and
    ("a", "bc") differ): tensors by dtype, shape and raw bytes, bytes as they are, anything else by ``str``."""
    h = hashlib.sha256()
    for part in parts:
        if isinstance(part, np.ndarray):
            part = torch.as_tensor(part)
        if isinstance(part, torch.Tensor):
            flat = part.detach().cpu().contiguous().reshape(-1)
            head, data = f"tensor {flat.dtype} {tuple(part.shape)}", flat.view(torch.uint8).numpy().tobytes()
        elif isinstance(part, bytes):
            head, data = "bytes", part
        else:
            head, data = "text", str(part).encode()
        h.update(f"{head} {len(data)}\n".encode())
        h.update(data)
    return h.hexdigest()[:DIGEST]


def dataset_name(data, label: str | None = None) -> str:
    """``label@digest`` of ``data`` (a ``FederatedDataset``; ``label``: its own name), the same in every process."""
    splits = [("train", data.train), ("test", data.test)]
    parts = [data.num_classes]
    for name, split in splits:
        parts += [name, "none"] if split is None else [name, split.x, split.y, split.offsets]
    for key in sorted(data.meta):
        parts += [key, *_stable(data.meta[key])]
    return f"{label or data.name}@" + digest(*parts)


def model_name(module: torch.nn.Module, label: str | None = None, code: bytes | None = None) -> str:
    """``label@digest`` of ``module`` (``label``: its class's name); ``code``: bytes that define it besides its
    classes (a file the arena imported it from)."""
    from replicate.fl.models.module import TorchModule

    model = TorchModule(module)  # refuses buffers and dropout here, before anything runs
    fixed = [(key, t) for key, t in model.module.named_parameters() if not t.requires_grad]
    attributes = [part for name, sub in module.named_modules() for part in (name, *_attributes(sub))]
    return f"{label or type(module).__name__}@" + digest(code or b"", *code_of(module), repr(model.module),
                                                         model.init(torch.Generator().manual_seed(0)),
                                                         *(part for pair in fixed for part in pair), *attributes)


def code_of(module: torch.nn.Module) -> list:
    """The code of every class of one's own in ``module`` and in their bases (not torch's): each class's methods
    as compiled (defaults, closures and wrapped functions included), its properties and other attributes, and its
    source file where it has one (as it is on disk; the compiled methods are what runs), as ``digest`` parts."""
    return _classes_code({c for m in module.modules() for c in type(m).__mro__ if _own(c)})


def _classes_code(classes) -> list:
    parts = []
    for cls in sorted(classes, key=lambda c: (c.__module__, c.__qualname__)):
        parts += [f"class {cls.__module__}.{cls.__qualname__}".encode(), *_file_of(cls)]
        for name, value in sorted(vars(cls).items()):
            if name in ("__dict__", "__weakref__", "__doc__", "__module__", "__qualname__"):
                continue
            parts += [name, *_stable(value)]
    return parts


def _file_of(obj) -> list:
    """The bytes of the source file ``obj`` was defined in, where it has one."""
    file = getattr(sys.modules.get(obj.__module__), "__file__", None)
    return [Path(file).read_bytes()] if file and Path(file).is_file() else []


def _own(cls: type, beside: tuple[str, ...] = ()) -> bool:
    return cls.__module__.split(".")[0] not in ("torch", "builtins", *beside)


def code_digest(obj) -> str | None:
    """The digest of an algorithm's class or a dataset builder of one's own (defined outside this package), as
    ``code_of`` digests a module's classes: a run's key holds it (``runs.keys``), so editing that code names other
    runs. None for this package's own, whose changes ``keys.VERSION`` and ``keys.NUMERICS`` version."""
    if isinstance(obj, type):
        classes = {c for c in obj.__mro__ if _own(c, ("replicate", "dataclasses", "typing", "abc"))}
        return digest(*_classes_code(classes)) if classes else None
    if getattr(obj, "__module__", "replicate").split(".")[0] == "replicate":
        return None
    return digest(*_file_of(obj), *_stable(obj))


def _attributes(module: torch.nn.Module) -> list:
    """A module's own attributes (a scale, an activation given to ``__init__``), nn.Module's bookkeeping aside."""
    return [part for key, value in sorted(vars(module).items()) if not key.startswith("_") and key != "training"
            for part in (key, *_stable(value))]


def _stable(value, depth: int = 0) -> list:
    """``value`` as digest parts that are the same in every process (no memory addresses): tensors and arrays by
    their bytes, functions by their compiled code, containers item by item, anything else by its repr."""
    if depth > 8:
        return [type(value).__qualname__]
    if isinstance(value, (torch.Tensor, np.ndarray)):
        return [value]
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value, key=repr) if isinstance(value, (set, frozenset)) else value
        return [type(value).__name__, len(value), *(p for item in items for p in _stable(item, depth + 1))]
    if isinstance(value, dict):
        return ["dict", *(p for key in sorted(value, key=repr) for p in (repr(key), *_stable(value[key], depth + 1)))]
    if isinstance(value, (staticmethod, classmethod)):
        return _stable(value.__func__, depth + 1)
    if isinstance(value, property):
        return ["property", *(p for f in (value.fget, value.fset, value.fdel) for p in _stable(f, depth + 1))]
    if isinstance(value, types.FunctionType):
        value = inspect.unwrap(value)
        cells = [c.cell_contents for c in value.__closure__ or () if _filled(c)]
        return ["function", value.__qualname__, _compiled(value.__code__),
                *_stable((value.__defaults__, value.__kwdefaults__, cells), depth + 1)]
    if isinstance(value, type) or callable(value) and not isinstance(value, torch.nn.Module):
        return [f"{getattr(value, '__module__', '')}.{getattr(value, '__qualname__', type(value).__qualname__)}"]
    return [_ADDRESS.sub("", repr(value))]  # a number, a string, a submodule held outside _modules: its structure


def _filled(cell) -> bool:
    try:
        cell.cell_contents
    except ValueError:  # an empty cell (a variable not yet bound)
        return False
    return True


def _compiled(code: types.CodeType) -> bytes:
    """A code object's instructions, names and constants, its nested code objects' included."""
    consts = [_compiled(c) if inspect.iscode(c) else _ADDRESS.sub("", repr(c)).encode() for c in code.co_consts]
    return b"|".join([code.co_code, repr(code.co_names).encode(), *consts])


def named(config):
    """``config`` with a dataset and a ``torch.nn.Module`` of one's own replaced by their names: the config the run
    cache keys (the run itself computes with the objects)."""
    dataset, model = config.dataset, config.model
    if not isinstance(dataset, str):
        dataset = dataset_name(dataset)
    if isinstance(model, torch.nn.Module):
        model = model_name(model)
    return config.replace(dataset=dataset, model=model)


class Preset:
    """A module of one's own as the model registry's entries are called: ``(features, classes)`` → a ``Model``."""

    batch_exact = False

    def __init__(self, module: torch.nn.Module):
        from replicate.fl.models.module import TorchModule

        self.model = TorchModule(module)

    def __call__(self, num_features: int, num_classes: int, **options):
        return self.model


def register_dataset(data, label: str | None = None) -> str:
    """``dataset_name``, registered as a builder of that name in this process (``replicate.data.registry``)."""
    from replicate.data import registry

    name = dataset_name(data, label)
    if name not in registry.BUILDERS:
        registry.builder(name)(lambda: data)
    return name


def register_model(module: torch.nn.Module, label: str | None = None, code: bytes | None = None) -> str:
    """``model_name``, registered as a preset of that name in this process (``fl.models.MODELS``)."""
    from replicate.fl import models

    name = model_name(module, label, code)
    models.MODELS.setdefault(name, Preset(module))
    return name


__all__ = ["DIGEST", "Preset", "code_digest", "code_of", "dataset_name", "digest", "model_name", "named",
           "register_dataset", "register_model"]
