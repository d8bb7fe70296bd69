"""The paper's data, or this machine's stand-in for it: one switch, never a silent substitution.

A figure names the dataset the paper used, built from an official download (``python -m replicate
data fetch``). Some machines cannot download it (this project's offline CI): they hold *stand-ins*,
copies that are partial (20 of LEAF FEMNIST's 35 train files, LEAF's Sent140 test split) or lossy
(CIFAR-10 re-encoded as JPEG), with no download of their own. A figure reads them only when its
``data_source`` knob says ``"stand-in"`` (default: ``REPLICATE_STAND_INS=1``, the setting
``Settings.stand_ins`` of :mod:`replicate.core.settings`); the run configs then name the stand-in's loader, so a run
on official data and one on a stand-in never share a cache entry, and the figure, its claims
record and the coverage table say which one it read.
"""
from __future__ import annotations

from replicate.core.errors import ReplicateError
from replicate.core.sources import CHOICES, OFFICIAL, STAND_IN, default  # noqa: F401 (variants.default, ...)

# The loader of each official dataset a figure reads → the loader of this machine's stand-in for it, and what
# the stand-in is (for labels).
STAND_INS = {
    # Charles & Konečný's FEMNIST: TFF's federated EMNIST-62 (3,400 writers)
    "emnist_tff": ("femnist", "the partial LEAF FEMNIST copy (105 writers of 3,400)"),
    # FedProx draft's EMNIST: 900 writers of EMNIST-62 (spec §1(c) PROPOSED)
    "emnist_draft_tff": ("femnist", "the partial LEAF FEMNIST copy (105 writers, not 900)"),
    # FedProx draft's EMNIST* and the final paper's FEMNIST, their recipes over EMNIST-62's letters
    "emnist_star_tff": ("emnist_star", "letters from the partial LEAF FEMNIST copy (≈ 118 images a letter)"),
    "femnist_fedprox_tff": ("femnist_fedprox", "letters from the partial LEAF FEMNIST copy (≈ 120 images a class)"),
    # FedProx's Sent140: the raw Sentiment140 CSVs through LEAF's steps, GloVe 300-d embedding
    "sent140_leaf": ("sent140", "LEAF's Sent140 test split only, with a random frozen embedding"),
    # STEM's CIFAR-10: the official python batches
    "cifar10_stem_high": ("cifar10_jpg_stem_high", "CIFAR-10 re-encoded as JPEG (lossy)"),
    "cifar10_stem_moderate": ("cifar10_jpg_stem_moderate", "CIFAR-10 re-encoded as JPEG (lossy)"),
}



def staged_stand_ins() -> dict[str, str]:
    """The same by staged dataset (``data fetch`` names): each official download → the staged dataset its
    stand-in reads, derived from ``STAND_INS`` and what each builder reads (``registry.READS``)."""
    from replicate.data import load  # noqa: F401  (imports every builder, so READS is complete)
    from replicate.data.registry import READS

    return {official: stand_in for loader, (other, _) in STAND_INS.items()
            for official in READS[loader] for stand_in in READS[other]}


def hint(staged: str) -> str:
    """A sentence for the error about a missing official dataset: where this machine holds its stand-in, how to
    choose it (empty when it holds none)."""
    from replicate.data import store

    stand_in = staged_stand_ins().get(staged)
    if stand_in is None or not store.is_available(stand_in):
        return ""
    return (f" This machine holds an offline stand-in for it ({stand_in}: {store.spec(stand_in).status}): "
            "REPLICATE_STAND_INS=1, or the figure's data_source=\"stand-in\", reads it, labelled as such.")


def check(choice: str) -> str:
    if choice not in CHOICES:
        raise ReplicateError(f"data_source must be one of {', '.join(CHOICES)}, got {choice!r}")
    return choice


def loader(official: str, choice: str) -> str:
    """The loader a run reads for ``official`` under ``choice``: the official one, or its stand-in."""
    if check(choice) == STAND_IN and official in STAND_INS:
        return STAND_INS[official][0]
    return official


def is_stand_in(name: str) -> bool:
    """Whether loader ``name`` reads a stand-in (it has no official download)."""
    return any(name == stand_in for stand_in, _ in STAND_INS.values())


def described(names) -> list[str]:
    """``official → stand-in: what it is`` for each official loader among ``names`` that has a stand-in."""
    return [f"{n} → {STAND_INS[n][0]}: {STAND_INS[n][1]}" for n in dict.fromkeys(names) if n in STAND_INS]
