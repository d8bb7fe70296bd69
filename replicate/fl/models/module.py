"""Any ``torch.nn.Module`` as a model of many clients at once.

The engine trains a round's clients as rows of one ``(m, P)`` tensor; a user's module has named parameters
instead. ``TorchModule`` maps the one to the other: the flat row is cut into the module's parameters (in
``named_parameters`` order) and the module is called on them with ``torch.func.functional_call``, so
``Model.loss_and_grad``'s ``vmap(grad(...))`` differentiates every client's copy at once, as for the presets
(the "model ensembling" pattern of ``torch.func``). The module object itself is never trained in place.

Initialisation is the module's own (each submodule's ``reset_parameters``) under the run's named stream
(seed, "init"), so the same seed gives the same starting model; parameters without a ``reset_parameters``
keep the values the module was built with. The loss is cross-entropy of a class per sample. Layers that keep
state across calls (BatchNorm's running statistics) or draw their own random numbers (``nn.Dropout``) are
refused: every client's step must be a pure function of its parameters and its mini-batch.
"""
from __future__ import annotations

import copy

import torch
from torch.func import functional_call

from replicate.core.errors import ReplicateError
from replicate.fl.models.base import Model


class TorchModule(Model):
    """A ``torch.nn.Module`` mapping a mini-batch ``x`` to class logits, as a flat-parameter ``Model``."""

    def __init__(self, module: torch.nn.Module):
        if not isinstance(module, torch.nn.Module):
            raise ReplicateError(f"model must be a preset's name or a torch.nn.Module, got {type(module).__name__}")
        if any(True for _ in module.buffers()):
            raise ReplicateError(f"{type(module).__name__} keeps buffers (e.g. BatchNorm's running statistics), "
                                 "which clients trained at once cannot share: use GroupNorm or LayerNorm")
        if any(isinstance(m, torch.nn.modules.dropout._DropoutNd) for m in module.modules()):
            raise ReplicateError(f"{type(module).__name__} has an nn.Dropout, which draws its own random numbers: "
                                 "remove it, or use a preset model with dropout (conv_dropout)")
        self.module = copy.deepcopy(module).to(torch.float32)
        self.names = [name for name, p in self.module.named_parameters() if p.requires_grad]
        if not self.names:
            raise ReplicateError(f"{type(module).__name__} has no trainable parameters")
        self.shapes = {name: tuple(p.shape) for name, p in self.module.named_parameters() if p.requires_grad}
        self._fixed = {name: p.detach() for name, p in self.module.named_parameters() if not p.requires_grad}

    def __repr__(self) -> str:
        return f"TorchModule({type(self.module).__name__}, {self.num_params} parameters)"

    def init(self, generator: torch.Generator, dtype=torch.float32) -> torch.Tensor:
        fresh = copy.deepcopy(self.module)
        seed = int(torch.randint(0, 2**62, (1,), generator=generator))
        with torch.random.fork_rng(devices=[]):  # the user's global stream is left as it was
            torch.manual_seed(seed)
            for layer in fresh.modules():
                if hasattr(layer, "reset_parameters"):
                    layer.reset_parameters()
        params = dict(fresh.named_parameters())
        return torch.cat([params[name].detach().reshape(-1) for name in self.names]).to(dtype)

    def check_fits(self, x: torch.Tensor, num_classes: int) -> None:
        """Refuse, in one line and before any training, a module that cannot map this dataset's samples ``x`` to
        ``num_classes`` logits each: one forward pass of two of them."""
        name, sample = type(self.module).__name__, x[:2].detach().to(next(self.module.parameters()).device)
        dtype = sample.dtype if sample.is_floating_point() else torch.float32  # a problem may compute in float64
        try:
            with torch.no_grad():
                out = functional_call(self.module, {key: p.to(dtype) for key, p in self.module.named_parameters()},
                                      (sample,))
        except Exception as exc:  # noqa: BLE001  (a shape mismatch, as torch words it)
            raise ReplicateError(f"{name} cannot take this dataset's samples of shape {tuple(x.shape[1:])}: "
                                 f"{str(exc).strip().splitlines()[0]}") from None
        if not isinstance(out, torch.Tensor) or tuple(out.shape) != (len(sample), num_classes):
            got = f"shape {tuple(out.shape)}" if isinstance(out, torch.Tensor) else f"a {type(out).__name__}"
            raise ReplicateError(f"{name} must map a batch of samples to one logit per class, ({len(sample)}, "
                                 f"{num_classes}) for {len(sample)} samples of this {num_classes}-class dataset; "
                                 f"got {got}")

    def forward(self, params: dict, x: torch.Tensor, noise: torch.Tensor | None = None) -> torch.Tensor:
        return functional_call(self.module, {**self._fixed, **params}, (x,))


def as_model(model) -> Model:
    """A ``Model`` as it is, a ``torch.nn.Module`` wrapped (``TorchModule``)."""
    return model if isinstance(model, Model) else TorchModule(model)
