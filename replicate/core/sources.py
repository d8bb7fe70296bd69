"""The two sources a figure's data may come from: the paper's official download, or this machine's stand-in.

Kept on the ground floor, apart from the data layer that loads them (``replicate.data.variants``), so that a
knob naming one is checked before anything heavy is imported (``experiments.knobs``).
"""
from __future__ import annotations

from replicate.core import settings

OFFICIAL, STAND_IN = "official", "stand-in"
CHOICES = (OFFICIAL, STAND_IN)


def default() -> str:
    """The ``data_source`` knob's value when a notebook leaves it at ``None``: ``REPLICATE_STAND_INS``."""
    return STAND_IN if settings.current().stand_ins else OFFICIAL
