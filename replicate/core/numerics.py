"""How torch computes a run's numbers on a device: one context manager, entered by the engine around every
run (``fl.engine.run_batch``), so that one seed gives the same numbers every time on one machine and device."""
from __future__ import annotations

import contextlib

import torch


@contextlib.contextmanager
def device_numerics(device):
    """On CUDA, for the duration of a run: float32 computes in float32 (TF32 off for matrix products and
    for cuDNN convolutions, where PyTorch allows it by default) and kernels are deterministic where
    PyTorch has a deterministic version (``torch.use_deterministic_algorithms(True, warn_only=True)``,
    cuDNN's deterministic algorithms, no autotuning): one seed gives the same numbers every time on one
    machine and device, as the run cache assumes (``tests/test_cuda.py`` checks it on a GPU). Restored
    afterwards. Nothing changes on a CPU."""
    if torch.device(device).type != "cuda":
        yield
        return
    backends = torch.backends
    saved = (backends.cuda.matmul.allow_tf32, backends.cudnn.allow_tf32, backends.cudnn.deterministic,
             backends.cudnn.benchmark, torch.are_deterministic_algorithms_enabled(),
             torch.is_deterministic_algorithms_warn_only_enabled())
    backends.cuda.matmul.allow_tf32 = backends.cudnn.allow_tf32 = False
    backends.cudnn.deterministic, backends.cudnn.benchmark = True, False
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        yield
    finally:
        (backends.cuda.matmul.allow_tf32, backends.cudnn.allow_tf32, backends.cudnn.deterministic,
         backends.cudnn.benchmark) = saved[:4]
        torch.use_deterministic_algorithms(saved[4], warn_only=saved[5])
