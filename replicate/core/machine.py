"""What processor computed a run: named in its cache sidecar, counted in the figure's claims record, and
compared by ``figures --check``.

Why it matters: the same seed gives the same bytes on one machine, but float rounding differs between
processors. On a CPU, PyTorch dispatches its kernels by the instruction set it finds (AVX2, AVX-512) and
the BLAS splits its sums by vector width; on a GPU, by model and library version. So a figure regenerated
on another processor agrees with the committed one within a tolerance (``cli/check.py``), not bitwise, and
a user needs to see which case a comparison is. Measured: the committed default arena's runs computed on an
AMD EPYC and on an Intel Xeon with AVX-512 give synthetic(1,1) losses up to 7 % apart, and one
tuned choice differs (docs/arena.md).
"""
from __future__ import annotations

import platform
from pathlib import Path

import torch


def describe(device) -> str:
    """One line naming the processor and the PyTorch that computed on ``device``: the GPU's name, or the
    CPU's model and the instruction set PyTorch dispatches to (e.g. "Intel(R) Xeon(R) Processor, x86_64
    AVX512, torch 2.13.0")."""
    device = torch.device(device)
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
    else:
        capability = torch.backends.cpu.get_cpu_capability()
        name = f"{cpu_model()}, {platform.machine() or 'cpu'} {capability}".strip(", ")
    return f"{name}, torch {torch.__version__.split('+')[0]}"


def cpu_model(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """The CPU's model name (Linux's /proc/cpuinfo; elsewhere ``platform.processor()``, which may be empty)."""
    try:
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()
