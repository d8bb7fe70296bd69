"""A figure's knobs: the fields of its config dataclass, set from a notebook's ``parameters``
cell, papermill or ``python -m replicate figures --set NAME=VALUE``.

A knob left at ``None`` keeps the profile's value ("paper" = the dataclass defaults, "smoke" =
the config's reduced settings). Every value is checked against the field's type annotation and
a range before anything runs, so a typo costs one clear error line, not a failed batch:

- ``int``/``float``: finite numbers, ≥ 1 (counts, rates, sizes) unless the knob is a seed or
  listed in the config's ``ZERO_ALLOWED`` (e.g. α = 0, decay 0);
- ``tuple[T, ...]``: a list (or one scalar, read as a one-element tuple), each element checked;
  non-empty;
- names listed in the config's ``CHOICES`` must be one of the given values;
- ``data_source`` (configs that mix in :class:`DataChoice`): ``"official"`` or ``"stand-in"``; left at ``None`` it is
  ``REPLICATE_STAND_INS``'s choice (:func:`replicate.core.sources.default`), so a batch or CI machine sets it once.
"""
from __future__ import annotations

import dataclasses
import math
import types
import typing
from typing import Any

from replicate.core.errors import ReplicateError
from replicate.core import sources

PROFILES = ("smoke", "paper")
NOT_KNOBS = ("profile", "deviations")  # set by the runner / derived, never by hand
_NOT_GIVEN = object()


def names(cls) -> tuple[str, ...]:
    """The knobs of a figure config, in declaration order."""
    return tuple(f.name for f in dataclasses.fields(cls) if f.name not in NOT_KNOBS)


def configure(cls, profile: str, overrides: dict[str, Any]):
    """``cls`` at ``profile`` with the non-``None`` ``overrides`` applied, every value checked."""
    if profile not in PROFILES:
        raise ReplicateError(f"profile must be one of {', '.join(PROFILES)}, got {profile!r}")
    valid = names(cls)
    unknown = sorted(set(overrides) - set(valid))
    if unknown:
        raise ReplicateError(f"{cls.__name__} has no parameter(s) {', '.join(unknown)}; "
                             f"valid: {', '.join(valid)}")
    hints = typing.get_type_hints(cls)
    checked = {name: _check(cls, name, hints[name], value)
               for name, value in overrides.items() if value is not None}
    if "data_source" in valid and checked.get("data_source") is None:  # the machine's choice (replicate.data.variants)
        checked["data_source"] = sources.default()
    base = cls() if profile == "paper" else cls.smoke()
    config = dataclasses.replace(base, **checked)
    validate = getattr(config, "validate", None)
    if validate is not None:  # cross-field checks (e.g. every run config it implies is valid)
        validate()
    return config


def _check(cls, name: str, hint, value):
    where = f"{cls.__name__}.{name}"
    choices = {"data_source": sources.CHOICES, **getattr(cls, "CHOICES", {})}.get(name)
    zero_ok = "seed" in name or name in getattr(cls, "ZERO_ALLOWED", ())
    return _coerce(where, hint, value, choices, zero_ok)


def _coerce(where: str, hint, value, choices, zero_ok: bool):
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in args if a is not type(None)]
        if value is None and len(options) < len(args):
            return None
        return _coerce(where, options[0], value, choices, zero_ok)
    if origin is tuple:
        if isinstance(value, str) and value.strip().startswith("["):  # papermill's -p passes a list as its text
            raise ReplicateError(f"{where} takes a list, got the text {value!r}: papermill's -p passes text, so give "
                                 f"lists with -y (e.g. -y '{{{where.rpartition('.')[2]}: {value.strip()}}}')")
        items = list(value) if isinstance(value, (list, tuple)) else [value]
        if not items:
            raise ReplicateError(f"{where} needs at least one value")
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_coerce(where, args[0], v, choices, zero_ok) for v in items)
        if len(items) != len(args):
            raise ReplicateError(f"{where} needs {len(args)} values, got {len(items)}: {value!r}")
        return tuple(_coerce(where, a, v, choices, zero_ok) for a, v in zip(args, items))
    if hint is bool:
        if not isinstance(value, bool):
            raise ReplicateError(f"{where} must be true or false, got {value!r}")
        return value
    if hint in (int, float):
        return _number(where, hint, value, zero_ok)
    if hint is str:
        if not isinstance(value, str):
            raise ReplicateError(f"{where} must be a string, got {value!r}")
        if choices is not None and value not in choices:
            raise ReplicateError(f"{where} must be one of {', '.join(map(str, choices))}; got {value!r}")
        return value
    raise ReplicateError(f"{where}: cannot set a {hint} knob from the outside")  # pragma: no cover


def _number(where: str, kind: type, value, zero_ok: bool):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ReplicateError(f"{where} must be {'an integer' if kind is int else 'a number'}, got {value!r}")
    if kind is int and value != int(value):
        raise ReplicateError(f"{where} must be an integer, got {value!r}")
    value = kind(value)
    if not math.isfinite(value):
        raise ReplicateError(f"{where} must be finite, got {value!r}")
    low = 0 if zero_ok else (1 if kind is int else 0)
    if value < low or (kind is float and not zero_ok and value == 0):
        raise ReplicateError(f"{where} must be {'≥ 0' if zero_ok else '≥ 1' if kind is int else '> 0'}, "
                             f"got {value!r}")
    return value


class FigureConfig:
    """Base of every figure config (a frozen dataclass): ``for_profile`` is the one way a notebook,
    papermill or ``--set`` builds one. Subclasses define ``SMOKE`` (``smoke()``'s knobs; or ``smoke()`` itself
    where it takes more than fixed values) and may define ``validate()``."""

    # SMOKE: ClassVar[dict], the smoke profile's knobs; a ClassVar, else the dataclass makes it a field (a knob).
    # Left undefined here: a config without it has no smoke profile, and ``smoke()`` fails (AttributeError).

    @classmethod
    def smoke(cls):
        """The smoke profile: the paper's settings with ``SMOKE``'s knobs."""
        return cls(**cls.SMOKE)

    @classmethod
    def for_profile(cls, profile: str = "smoke", *, out_dir=_NOT_GIVEN, **overrides):
        """The ``paper`` or ``smoke`` settings with checked overrides (``None`` = the profile's value).

        A notebook also passes its ``out_dir`` (``None``: build/figures), so that a folder its
        ``publish`` could not write is refused in one line here, before any compute.
        """
        config = configure(cls, profile, overrides)
        if out_dir is not _NOT_GIVEN:
            from replicate.report.claims import output_dir  # here: it loads matplotlib, --set checks need none

            output_dir(out_dir)
        return config

    # How runs are computed, not what: changing them keeps the paper's settings (same maths; the engine's
    # execution strategies are tested equal).
    OPERATIONAL = ("workers", "execution")
    # Which data the runs read: a stand-in is labelled as such (figure, record, coverage), not as changed knobs.
    RECORDED_APART = ("data_source",)

    def changed(self) -> dict[str, Any]:
        """The knobs set away from the paper profile (the dataclass defaults), the operational ones aside:
        what makes a paper-profile run not the paper's settings (``report.claims.publish`` labels it)."""
        paper = type(self)()
        return {name: getattr(self, name) for name in names(type(self))
                if name not in self.OPERATIONAL + self.RECORDED_APART and getattr(self, name) != getattr(paper, name)}


@dataclasses.dataclass(frozen=True)
class DataChoice:
    """Mixin of the figure configs whose datasets have an offline stand-in (:mod:`replicate.data.variants`):
    the ``data_source`` knob, and the loader a run reads under it."""

    data_source: str = sources.OFFICIAL  # "official": the paper's data (downloaded); "stand-in": offline copies

    def loader(self, official: str) -> str:
        """The loader runs read for the official dataset ``official``: itself, or its stand-in."""
        from replicate.data import variants  # here: the data layer is heavy, a knob's check needs none of it

        return variants.loader(official, self.data_source)

    def rests_on(self, officials) -> dict:
        """A claim's ``data`` and ``basis`` (``report.claims.check``) when its verdict reads the official datasets
        ``officials``: the loaders its runs read, and "partial-data" where any is a stand-in (a partial or lossy
        copy: the claim is context, shown and counted nowhere, ``report.claims.KIND_RULE``), else "measured"."""
        from replicate.data import variants

        loaders = tuple(dict.fromkeys(self.loader(name) for name in officials))
        return {"data": loaders,
                "basis": "partial-data" if any(variants.is_stand_in(n) for n in loaders) else "measured"}

    def stand_in_loaders(self) -> list[str]:
        """The stand-in loaders its runs read (``report.claims.publish`` labels the figure and record with them)."""
        from replicate.data import variants

        return [n for n in dict.fromkeys(self.dataset_names()) if variants.is_stand_in(n)]

    def stand_ins(self, officials) -> list[str]:
        """``official → stand-in: what it is`` for the datasets among ``officials`` this config substitutes."""
        from replicate.data import variants

        return variants.described(officials) if self.data_source == sources.STAND_IN else []


def check_tune_seeds(config) -> None:
    """``tune_seeds``: the first seeds choose a tuned value, the rest run it; at least one must tune."""
    if not 1 <= config.tune_seeds <= len(config.seeds):
        raise ReplicateError(f"{type(config).__name__}.tune_seeds must be between 1 and the number of seeds "
                             f"({len(config.seeds)}), got {config.tune_seeds}")


def held_out(frame, config):
    """The rows of ``frame`` from the seeds that chose no setting (``config.seeds`` after the first ``tune_seeds``:
    a tuning seed is never a test seed) and the claims' note on them; with no such seed (a one-seed
    smoke run) every row, and the note says so."""
    test = list(config.seeds[config.tune_seeds:])
    if not test:
        return frame, "; on the tuning seed alone (no seed left out of the tuning)"
    note = f"; seed{'s' if len(test) > 1 else ''} {', '.join(map(str, test))}, which chose nothing"
    return frame[frame["seed"].isin(test)], note + (" (one seed)" if len(test) == 1 else "")
