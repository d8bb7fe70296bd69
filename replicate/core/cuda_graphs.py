"""A function of tensors captured once per input shape as a CUDA graph, then replayed.

A stacked LSTM step is ≈ 1,900 small kernels (Shakespeare; Sent140 ≈ 760), and launching them one
by one from Python costs ≈ 11-19 ms of host time a step on an H100, whatever the number of clients
stacked (docs/BENCHMARKS.cuda.md). Captured as a CUDA graph, the same kernels are launched by one
``replay`` call. What replay needs, and ``GraphCache`` gives:

- **fixed shapes and addresses**: each input shape (and dtype, and which inputs are None) has its own
  graph with its own static input buffers; a call copies its tensors into them, replays, and returns a
  clone of the output (the next replay overwrites the static output, and callers keep gradients across
  calls: STEM takes two a step). The engine's ``static`` execution keeps one shape for a whole round
  (``replicate.fl.local_steps.train_clients``), so a run captures one or two graphs, not one a step.
- **no host synchronisation and no host-side random draws inside**: the captured function must be pure
  device work on its inputs (the models' gradients are: dropout noise is an input, drawn by the counter
  stream). A capture that fails says so once on stderr and that shape runs eagerly from then on: the
  numbers are the same either way, only slower (``tests/test_cuda.py`` asserts its graphs were used).

Replay runs the captured kernels with the captured launch parameters, so it computes what the eager
call computes, bitwise (tested on the device). On a CPU there is nothing to capture: the function is
called directly.
"""
from __future__ import annotations

import sys
from typing import Callable

import torch

WARMUP = 2  # eager calls on a side stream before the capture (lazy initialisation, workspaces, caches)


class GraphCache:
    """``fn(*tensors) -> tensor``, replayed from a CUDA graph per input signature (at most ``limit`` kept,
    least recently used dropped first); called directly on a CPU."""

    def __init__(self, fn: Callable[..., torch.Tensor], limit: int = 4):
        self.fn, self.limit = fn, limit
        self._graphs: dict = {}  # signature -> (graph, static inputs, static output)
        self._eager: set = set()  # signatures whose capture failed
        self.replays = self.captures = 0

    def __call__(self, *args: torch.Tensor | None) -> torch.Tensor:
        first = next(a for a in args if a is not None)
        if first.device.type != "cuda":
            return self.fn(*args)
        key = tuple(None if a is None else (tuple(a.shape), a.dtype, a.device) for a in args)
        if key in self._eager:
            return self.fn(*args)
        entry = self._graphs.pop(key, None)
        if entry is None:
            entry = self._capture(key, args)
            if entry is None:
                return self.fn(*args)
            while len(self._graphs) >= self.limit:
                self._graphs.pop(next(iter(self._graphs)))
        self._graphs[key] = entry  # most recently used last
        graph, inputs, output = entry
        for static, a in zip(inputs, args):
            if a is not None:
                static.copy_(a)
        graph.replay()
        self.replays += 1
        return output.clone()

    def _capture(self, key, args):
        inputs = tuple(None if a is None else a.clone() for a in args)
        try:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(WARMUP):
                    self.fn(*inputs)
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                output = self.fn(*inputs)
        except Exception as exc:  # noqa: BLE001 - any capture failure: run this shape eagerly, same numbers
            torch.cuda.synchronize()
            self._eager.add(key)
            print(f"replicate: a CUDA graph of {getattr(self.fn, '__qualname__', self.fn)} could not be captured "
                  f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}); it runs eagerly, "
                  "with the same numbers", file=sys.stderr)
            return None
        self.captures += 1
        return graph, inputs, output
