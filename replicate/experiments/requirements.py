"""Which staged datasets (``python -m replicate data fetch NAME``) a figure reads at a profile.

Derived from the figure's config at that profile, so that a notebook is skipped (nbval, see
``tests/conftest.py``) exactly when a dataset it reads is missing: Li et al.'s Figure 1a needs MNIST
at paper scale but none at smoke scale, whose runs are synthetic. A config names its datasets in a
``datasets`` or ``dataset`` field, or in a ``dataset_names()`` method where its names are not the
loaders' (Charles & Konečný's Table 3 rows).
"""
from __future__ import annotations

from replicate.core.errors import ReplicateError
from replicate.experiments import catalog, knobs

GENERATED = ("synthetic", "quadratic", "given")  # built from a seed, nothing to stage
NOT_HERE = ("cifar100",)  # never available here; the figure shows the paper's numbers only


def staged(name: str) -> tuple[str, ...]:
    """The staged datasets that dataset ``name`` reads: its builder's ``reads`` (``replicate.data.registry``;
    none for a generated one)."""
    from replicate import data  # noqa: F401  (every builder registers on import)
    from replicate.data import registry

    if name.startswith(GENERATED) or name in NOT_HERE:
        return ()
    if name not in registry.READS:
        raise ReplicateError(f"no dataset builder is registered for {name!r}: a figure names its datasets by "
                             "their builders (replicate.data.registry, docs/extending.md)")
    return registry.READS[name]


def dataset_names(config) -> tuple[str, ...]:
    """The dataset names a figure config reads (its ``dataset_names()``, else its dataset fields)."""
    if hasattr(config, "dataset_names"):
        return tuple(config.dataset_names())
    names = tuple(getattr(config, "datasets", ()) or ())
    return names + ((config.dataset,) if isinstance(getattr(config, "dataset", None), str) else ())


def needs(key: str, profile: str = "smoke", overrides: dict | None = None) -> tuple[str, ...]:
    """The staged datasets figure ``key`` (``paper/figure``) reads at ``profile``, sorted."""
    config = knobs.configure(catalog.config_class(key), profile, overrides or {})
    return tuple(sorted({s for name in dataset_names(config) for s in staged(name)}))


def missing(key: str, profile: str = "smoke", overrides: dict | None = None) -> list[str]:
    """The datasets figure ``key`` reads at ``profile`` that are neither staged nor stageable locally."""
    from replicate.data import store

    return [name for name in needs(key, profile, overrides) if not store.is_available(name)]


def _not_available(absent, why: str = "") -> str:
    """The sentence that names the datasets ``absent`` and how to stage them (and this machine's stand-ins)."""
    from replicate.data import variants

    return (f"{', '.join(absent)} {'is' if len(absent) == 1 else 'are'} not available{why}: run "
            f"`python -m replicate data fetch {' '.join(absent)}` (or set REPLICATE_DATA_FROM to a folder with the "
            "files)."
            + "".join(dict.fromkeys(variants.hint(name) for name in absent)))


def skip_reason(key: str, profile: str = "smoke") -> str | None:
    """Why the notebook of ``key`` cannot run at ``profile`` here (a missing dataset), or ``None``."""
    absent = missing(key, profile)
    return _not_available(absent) if absent else None


def blocked(keys, profile: str, overrides: dict | None = None) -> dict[str, str]:
    """The figures of ``keys`` that read a dataset that is neither here nor read by any cached run, so that their
    first run would fail, each with the sentence that says which and how to stage it. A figure whose dataset is
    missing but whose runs may all be cached (from the ledger, or ``cache import``) is left out: it needs no data,
    and its notebook says so if a run turns out not to be cached."""
    absent = {key: missing(key, profile, overrides) for key in keys if catalog.FIGURES.get(key)}  # with a config
    if not any(absent.values()):
        return {}
    from replicate.runs import cache

    cached = set()
    for name in cache.datasets_read():
        try:
            cached.update(staged(name))
        except ReplicateError:  # a run of a dataset of one's own, registered by another program
            continue
    return {key: _not_available(left, ", and no cached run read it") for key, names in absent.items()
            if (left := [name for name in names if name not in cached])}
