"""Argument checks shared by the dataset builders, the algorithms' settings and ``RunConfig``; each failure is one
actionable message, raised before anything is computed."""
from __future__ import annotations

import dataclasses
import math
import numbers

from replicate.core.errors import ReplicateError

# The plain annotations ``check_fields`` checks; a field annotated with anything else (a tensor, a tuple, a class)
# is left to its owner's own checks.
_PLAIN = {
    "int": ("an integer", lambda v: _is_integer(v)),
    "float": ("a finite number", lambda v: isinstance(v, numbers.Real) and not _is_bool(v)
              and (isinstance(v, numbers.Integral) or math.isfinite(v))),  # an int is finite (and may overflow a float)
    "str": ("a string", lambda v: isinstance(v, str)),
    "bool": ("True or False", lambda v: _is_bool(v)),
    "None": ("None", lambda v: v is None),
}


def _is_bool(value) -> bool:
    return type(value).__name__ in ("bool", "bool_")  # Python's and NumPy's, without importing NumPy


def _is_integer(value) -> bool:
    return isinstance(value, numbers.Integral) and not _is_bool(value)


def _kinds(annotation) -> list[str] | None:
    """``"int | None"`` → ``["int", "None"]``; None when a part is not a plain type."""
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", str(annotation))
    kinds = [part.strip().replace("NoneType", "None") for part in text.split("|")]
    return kinds if all(kind in _PLAIN for kind in kinds) else None


def check_value(owner: str, name: str, value, annotation) -> None:
    """Refuse ``value`` for field ``name`` of ``owner`` unless it has the field's plain type (an int for ``int``,
    a finite number for ``float``, NumPy's scalars included; never a bool for a number, nor a string for either)."""
    kinds = _kinds(annotation)
    if kinds is not None and not any(_PLAIN[kind][1](value) for kind in kinds):
        wanted = " or ".join(_PLAIN[kind][0] for kind in kinds)
        raise ReplicateError(f"{owner}: {name} must be {wanted}, got {value!r}")


def plain(value):
    """A NumPy scalar as the Python number it holds (a run's key is JSON, which NumPy's scalars are not); any other
    value as it is (an int given for a float stays an int: the keys of runs recorded so stay theirs)."""
    return value.item() if type(value).__module__ == "numpy" and hasattr(value, "item") else value


def make_plain(instance) -> None:
    """Each NumPy scalar in a plain field of a (frozen) dataclass instance made ``plain``."""
    for field in dataclasses.fields(instance):
        value = getattr(instance, field.name)
        if plain(value) is not value and _kinds(field.type) is not None:
            object.__setattr__(instance, field.name, plain(value))


def check_fields(instance) -> None:
    """``check_value`` for every field of a (frozen) dataclass instance, then ``make_plain``."""
    for field in dataclasses.fields(instance):
        check_value(type(instance).__name__, field.name, getattr(instance, field.name), field.type)
    make_plain(instance)


def check_seed(seed, name: str = "seed") -> None:
    if not _is_integer(seed) or not 0 <= seed < 2**32:
        raise ReplicateError(f"{name} must be an integer in [0, 2**32), got {seed!r}")


def check_positive_int(name: str, value) -> None:
    if not _is_integer(value) or value <= 0:
        raise ReplicateError(f"{name} must be a positive integer, got {value!r}")


def check_nonnegative(name: str, value, what: str = "a number") -> None:
    if _is_bool(value) or not isinstance(value, numbers.Real) or not value >= 0:
        raise ReplicateError(f"{name} must be {what} >= 0, got {value!r}")
