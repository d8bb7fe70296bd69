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
# dataset names (figure rows or loaders) by the staged datasets whose files they read
STAGED = {
    ("mnist",): ("mnist",),  # and every mnist_* loader
    # the official EMNIST-62 (replicate.data.variants): Charles & Konečný's FEMNIST, FedProx's three sets
    ("emnist_tff",): ("emnist_tff", "emnist_draft_tff", "emnist_star_tff", "femnist_fedprox_tff"),
    # their stand-in, the partial LEAF FEMNIST copy, and every femnist_* loader
    ("femnist",): ("femnist", "emnist", "emnist_star"),
    ("shakespeare",): ("shakespeare",),
    ("shakespeare_tff",): ("shakespeare_tff",),
    ("sent140_raw", "glove"): ("sent140_leaf",),  # the official Sent140: raw CSVs through LEAF's steps, GloVe
    ("sent140",): ("sent140",),  # its stand-in, LEAF's test split
}


def staged(name: str) -> tuple[str, ...]:
    """The staged datasets that dataset ``name`` reads (none for a generated one)."""
    if name.startswith(GENERATED) or name in NOT_HERE:
        return ()
    for store_names, names in STAGED.items():
        if name in names:
            return store_names
    if name.startswith(("cifar10_stem_", "cifar10_jpg_stem_")):  # STEM's CIFAR-10: the official batches, or the JPEG copy
        return (name.split("_stem_")[0],)
    for prefix in ("mnist_", "femnist_"):
        if name.startswith(prefix):
            return (prefix[:-1],)
    raise ReplicateError(f"no staged dataset is known for {name!r}: add it to replicate/experiments/requirements.py")


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


def missing(key: str, profile: str = "smoke") -> list[str]:
    """The datasets figure ``key`` reads at ``profile`` that are neither staged nor stageable locally."""
    from replicate.data import store

    return [name for name in needs(key, profile) if not store.is_available(name)]


def skip_reason(key: str, profile: str = "smoke") -> str | None:
    """Why the notebook of ``key`` cannot run at ``profile`` here (a missing dataset), or ``None``."""
    absent = missing(key, profile)
    if not absent:
        return None
    return (f"{', '.join(absent)} {'is' if len(absent) == 1 else 'are'} not available: run "
            f"`python -m replicate data fetch {' '.join(absent)}` (or set REPLICATE_DATA_FROM to a folder with the files)")
