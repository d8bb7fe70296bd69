"""Dropout noise of one FEMNIST step: the counter stream computed on the run's device
(``core.counter_rng``, what runs use) against the draw it replaced, a CPU ``torch.Generator``'s uniform copied
to the device. Reddi et al.'s CNN at Charles & Konečný's paper settings: M = 10 clients × B = 20 samples ×
9,344 units = 1.9 M values a step."""
from __future__ import annotations

import torch

from replicate.cli.bench import median_s
from replicate.core import counter_rng, rng

SHAPE = (10, 20, 64 * 12 * 12 + 128)  # clients, batch, the two dropouts' units (fl/models/nets.py ConvDropout)


def run(device=None, repeats: int = 20) -> list[dict]:
    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    host = median_s(lambda s: torch.rand(SHAPE, generator=rng.generator(0, "dropout", 0, s)).to(device), repeats,
                    device)
    stream = median_s(lambda s: counter_rng.uniform(rng.seed_for(0, "dropout", 0, s), SHAPE, device), repeats,
                      device)
    return [{"draw": "CPU generator, copied to the device (before)", "ms": host * 1e3},
            {"draw": "counter stream on the device (runs now)", "ms": stream * 1e3}]


def table(results: list[dict]) -> str:
    rows = [f"| {r['draw']} | {r['ms']:.2f} |" for r in results]
    return "\n".join([f"One step's noise, {' × '.join(map(str, SHAPE))} values (median of 20):", "",
                      "| draw | ms a step |", "|---|---:|", *rows])
