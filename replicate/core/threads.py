"""One context manager for torch's intra-op thread count, used wherever a run or a figure's sweep
wants a given number of threads (the engine for tiny problems, figures that compute runs in their own
process as the pool's single-threaded workers do)."""
from __future__ import annotations

import contextlib

import torch


@contextlib.contextmanager
def threads(count: int | None):
    """Run with ``count`` intra-op threads (None: leave the setting alone), restoring the caller's after."""
    before = torch.get_num_threads()
    if count is not None:
        torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(before)
