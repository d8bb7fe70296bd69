"""Models as functions of a flat parameter vector, evaluated for many clients at once.

Parameters of K clients are one ``(K, P)`` tensor. A model knows how to split a flat
row into named tensors, how to initialise one, its loss (the model owns it: a class per
sample, or the next token at every position), and how to compute per-client mean loss and
gradient on per-client mini-batches ``x: (K, b, ...)`` whose samples keep their shape
(images ``(C, H, W)``, int64 token sequences). ``Model.loss_and_grad`` is the generic
``torch.func.vmap(grad(...))`` implementation, so a CNN only defines ``forward`` (the LSTM
overrides it with a batched recurrence and PyTorch's fused kernel: ``lstm`` module).

Dropout draws no random numbers inside the model: ``noise`` (uniform [0, 1), one value
per unit of ``dropout_shape`` per sample) comes from the engine's named stream
(seed, "dropout", round, step), so any execution order of the clients gives the same
masks. ``noise=None`` (evaluation) turns dropout off.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch.func import grad_and_value, vmap


class Model:
    """Base class: subclasses define ``shapes``, ``init`` and ``forward(params, x, noise)``."""

    shapes: dict[str, tuple[int, ...]]
    loss_kind: str = "class"  # "class": y (b,) per sample; "token": y (b, T), next token per position
    dropout: float = 0.0  # p; units of ``dropout_shape`` are zeroed with probability p while training
    dropout_shape: tuple[int, ...] | None = None
    eval_batch_size: int = 1024  # samples per evaluation chunk (bounds memory)
    uncounted: tuple[int, ...] = ()  # target tokens left out of the accuracy (padding, sequence marks)
    # Runs batched as one stack of rows (fl/batching) compute bitwise what each computes alone, one thread
    # (tests/test_batched_runs.py); False: kernels of another batch shape may round differently.
    batch_exact: bool = False
    # The stacked gradient may be captured as a CUDA graph and replayed (``core.cuda_graphs``): pure device
    # work, no host sync or host draw inside; the engine then runs it with one shape a round (``static``).
    graphed: bool = False

    @property
    def num_params(self) -> int:
        return sum(math.prod(s) for s in self.shapes.values())

    def unflatten(self, flat: torch.Tensor) -> dict[str, torch.Tensor]:
        """Views of a ``(..., P)`` tensor as named parameters of shape ``(..., *shape)``."""
        out, start = {}, 0
        lead = flat.shape[:-1]
        for name, shape in self.shapes.items():
            size = math.prod(shape)
            out[name] = flat[..., start:start + size].reshape(*lead, *shape)
            start += size
        return out

    fused = False  # a model with a fused local solver (``sgd``) says True: LogisticRegression

    def cpu_execution(self) -> str:
        """How a round's clients run on a CPU (``engine.preferred_execution``): ``vmap`` over clients
        measured slower than a client loop for models past ~100k parameters (FEMNIST CNN 0.61×)."""
        return "sequential" if self.num_params > 100_000 else "stacked"

    def init(self, generator: torch.Generator, dtype=torch.float32) -> torch.Tensor:
        raise NotImplementedError

    def forward(self, params: dict, x: torch.Tensor, noise: torch.Tensor | None = None) -> torch.Tensor:
        raise NotImplementedError

    def drop(self, h: torch.Tensor, noise: torch.Tensor | None, p: float | None = None) -> torch.Tensor:
        """Inverted dropout of ``h`` at rate ``p`` (default ``self.dropout``) with the given uniform
        noise (identity when noise is None)."""
        p = self.dropout if p is None else p
        if noise is None or not p:
            return h
        return h * (noise >= p).to(h.dtype) / (1.0 - p)

    def loss(self, logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Per-sample loss: cross-entropy of the class, or mean cross-entropy of every next token."""
        if self.loss_kind == "token":
            per_token = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1), reduction="none")
            return per_token.view(y.shape).mean(-1)
        return F.cross_entropy(logits, y, reduction="none")

    def hits(self, logits: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-sample correct predictions and predictions counted (float64): 1 of 1 for a class, the
        positions for token targets, less those whose target is in ``uncounted`` (e.g. padding)."""
        hit = (logits.argmax(-1) == y).view(y.shape[0], -1)
        counted = torch.ones_like(hit)
        if self.uncounted:
            counted = ~torch.isin(y, torch.tensor(self.uncounted, device=y.device)).view(y.shape[0], -1)
        return (hit & counted).sum(-1).to(torch.float64), counted.sum(-1).to(torch.float64)

    def per_sample_loss(self, flat: torch.Tensor, x: torch.Tensor, y: torch.Tensor,
                        noise: torch.Tensor | None = None) -> torch.Tensor:
        """Loss of one model (flat ``(P,)``) on each of the samples ``x``."""
        return self.loss(self.forward(self.unflatten(flat), x, noise), y)

    def loss_and_grad(self, flat: torch.Tensor, x: torch.Tensor, y: torch.Tensor,
                      mask: torch.Tensor | None = None, noise: torch.Tensor | None = None):
        """Mean loss and its gradient for each client: ``(K,)`` and ``(K, P)``.

        ``mask`` (K, b) marks real samples when clients have fewer than b samples;
        ``noise`` (K, b, *dropout_shape) drives dropout.
        """
        shapes = list(self.shapes.values())

        def one(parts, xb, yb, mb, nb):
            params = {name: part.reshape(shape) for name, part, shape in zip(self.shapes, parts, shapes)}
            losses = self.loss(self.forward(params, xb, nb), yb)
            return (losses * mb).sum() / mb.sum()

        m = torch.ones(y.shape[:2], dtype=flat.dtype, device=flat.device) if mask is None else mask.to(flat.dtype)
        # The gradient of each layer's own tensor, joined once: differentiating slices of the flat row would
        # build a zero-filled full-width gradient per layer and add them up (the same numbers, many more ops
        # and bytes)
        parts = torch.split(flat, [math.prod(shape) for shape in shapes], dim=-1)
        if noise is None:
            grads, losses = vmap(grad_and_value(lambda w, xb, yb, mb: one(w, xb, yb, mb, None)))(parts, x, y, m)
        else:
            grads, losses = vmap(grad_and_value(one))(parts, x, y, m, noise)
        return losses, torch.cat(grads, dim=-1)

    def prepare(self, x: torch.Tensor, y: torch.Tensor, num_classes: int):
        """Training arrays as ``grad`` consumes them (hook for precomputed layouts)."""
        return x, y

    def grad(self, flat: torch.Tensor, x: torch.Tensor, y: torch.Tensor,
             mask: torch.Tensor | None = None, noise: torch.Tensor | None = None) -> torch.Tensor:
        """Stacked gradients ``(K, P)`` of each client's mean loss on its batch."""
        return self.loss_and_grad(flat, x, y, mask, noise)[1]

    def predict(self, flat: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """Logits of one model on a chunk of evaluation samples (no dropout)."""
        return self.forward(self.unflatten(flat), x)


