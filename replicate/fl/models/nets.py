"""Neural models as pure functions of a flat parameter vector (vmapped over clients).

- ``CNN``: two 5×5 conv layers (each ReLU + 2×2 max-pool), dense hidden layers (ReLU; dropout
  after the last), a dense output layer — the shape of the LEAF/FedAvg FEMNIST CNN ("same" padding) and,
  with ``padding=0``, channels (10, 20) and 50 hidden units, of STEM's MNIST "2 conv + 2 linear"
  LeNet (spec STEM §6.4, PROPOSED; ReLU and max-pool commute, so the order is immaterial); with
  channels (6, 16) and hidden layers (120, 84), of STEM's CIFAR-10 "2 conv + 3 linear" LeNet-5
  (spec STEM §6.4, PROPOSED: 62,006 parameters for 3×32×32 inputs).
- ``CharLSTM`` lives in ``lstm.py`` (its own batched and fused paths).
- ``ConvDropout``: Reddi et al.'s EMNIST CNN (two 3×3 convs, one pool, two dropouts), the model of
  Charles & Konečný's FEMNIST experiments (Keras' Glorot-normal initialisation, as there).
- ``MLP``: one hidden layer, dense(hidden) → tanh → dense(classes): a small smooth non-convex
  model (the lecture notes' Theorem 2 experiment), through the generic ``torch.func`` path.

Weights are initialised as PyTorch's layer defaults (uniform ±1/√fan_in) from the run's
``init`` stream, except ``ConvDropout``'s (its source's Keras defaults).
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from replicate.fl.models.base import Model


def max_pool2(x: torch.Tensor) -> torch.Tensor:
    """2×2 max-pooling, stride 2, as ``F.max_pool2d(x, 2)``. Where autograd records nothing (evaluation) it is the
    maximum of each window's four strided views: a maximum is exact, so the same values bit for bit (NaN too),
    and 4-5× faster on a CPU; where it records (training) ``F.max_pool2d`` itself, whose gradient goes to each
    window's first maximum (ties are common: identical background patches)."""
    if torch.is_grad_enabled():
        return F.max_pool2d(x, 2)
    h, w = x.shape[-2] // 2 * 2, x.shape[-1] // 2 * 2  # an odd last row or column is dropped, as there
    return torch.maximum(torch.maximum(x[..., 0:h:2, 0:w:2], x[..., 0:h:2, 1:w:2]),
                         torch.maximum(x[..., 1:h:2, 0:w:2], x[..., 1:h:2, 1:w:2]))


def _uniform_init(shapes: dict, fan_in: dict, generator, dtype) -> torch.Tensor:
    parts = []
    for name, shape in shapes.items():
        bound = 1.0 / math.sqrt(fan_in[name])
        parts.append((torch.rand(math.prod(shape), generator=generator, dtype=dtype, device=generator.device) * 2 - 1)
                     * bound)
    return torch.cat(parts)


def _side(n: int, padding: int) -> int:
    """Side after two (5×5 conv, 2×2 pool) stages: a conv adds 2·padding − 4 ("same": 0), a pool halves."""
    for _ in range(2):
        n = (n + 2 * padding - 4) // 2
    return n


class CNN(Model):
    """conv(c1, 5×5) → pool → conv(c2, 5×5) → pool → dense(hidden) … → dropout → dense(classes);
    ``hidden`` is one width or a tuple of widths (one dense ReLU layer each, ``fc1``, ``fc2``, …)."""

    eval_batch_size = 512

    def __init__(self, in_shape: tuple[int, int, int], num_classes: int, channels=(32, 64),
                 hidden: int | tuple[int, ...] = 2048, dropout: float = 0.0, padding: int = 2):
        c, h, w = in_shape
        c1, c2 = channels
        widths = (hidden,) if isinstance(hidden, int) else tuple(hidden)
        self.in_shape, self.num_classes, self.padding = tuple(in_shape), num_classes, int(padding)
        self.dropout, self.dropout_shape = float(dropout), (widths[-1],)
        self.shapes = {"conv1.w": (c1, c, 5, 5), "conv1.b": (c1,), "conv2.w": (c2, c1, 5, 5), "conv2.b": (c2,)}
        self._fan_in = {"conv1.w": c * 25, "conv1.b": c * 25, "conv2.w": c1 * 25, "conv2.b": c1 * 25}
        fan_in = c2 * _side(h, padding) * _side(w, padding)
        for i, width in enumerate((*widths, num_classes), start=1):
            self.shapes |= {f"fc{i}.w": (width, fan_in), f"fc{i}.b": (width,)}
            self._fan_in |= {f"fc{i}.w": fan_in, f"fc{i}.b": fan_in}
            fan_in = width
        self.dense = len(widths) + 1

    def init(self, generator, dtype=torch.float32):
        return _uniform_init(self.shapes, self._fan_in, generator, dtype)

    def forward(self, params, x, noise=None):
        x = x.reshape(x.shape[0], *self.in_shape)
        h = max_pool2(F.relu(F.conv2d(x, params["conv1.w"], params["conv1.b"], padding=self.padding)))
        h = max_pool2(F.relu(F.conv2d(h, params["conv2.w"], params["conv2.b"], padding=self.padding)))
        h = h.flatten(1)
        for i in range(1, self.dense):
            h = F.relu(F.linear(h, params[f"fc{i}.w"], params[f"fc{i}.b"]))
        return F.linear(self.drop(h, noise), params[f"fc{self.dense}.w"], params[f"fc{self.dense}.b"])


class ConvDropout(Model):
    """Reddi et al.'s EMNIST-62 CNN (``create_conv_dropout_model``; Charles & Konečný App. E, spec
    Charles §7.2): conv(32, 3×3) → conv(64, 3×3) → 2×2 max-pool → dropout 0.25 → dense 128 →
    dropout 0.5 → dense(classes); "valid" convolutions, ReLU, Glorot-normal weights, zero biases
    (Keras' defaults there). 1,206,590 parameters for 28×28 inputs and 62 classes.

    Both dropout layers read one noise vector per sample (``dropout_shape``): its first
    ``64·12·12`` values mask the pooled features, the rest the dense layer.
    """

    eval_batch_size = 512
    rates = (0.25, 0.5)  # dropout after the pool and after the dense layer

    def __init__(self, in_shape: tuple[int, int, int], num_classes: int, channels=(32, 64), hidden: int = 128):
        c, h, w = in_shape
        c1, c2 = channels
        self.in_shape, self.num_classes = tuple(in_shape), num_classes
        self.flat = c2 * ((h - 4) // 2) * ((w - 4) // 2)
        self.dropout, self.dropout_shape = self.rates[0], (self.flat + hidden,)
        self.shapes = {"conv1.w": (c1, c, 3, 3), "conv1.b": (c1,), "conv2.w": (c2, c1, 3, 3), "conv2.b": (c2,),
                       "fc1.w": (hidden, self.flat), "fc1.b": (hidden,), "fc2.w": (num_classes, hidden),
                       "fc2.b": (num_classes,)}

    def init(self, generator, dtype=torch.float32):
        parts = []
        for name, shape in self.shapes.items():
            if name.endswith(".b"):
                parts.append(torch.zeros(math.prod(shape), dtype=dtype, device=generator.device))
                continue
            receptive = math.prod(shape[2:])  # 1 for dense layers
            fan_in, fan_out = shape[1] * receptive, shape[0] * receptive
            # Keras' GlorotNormal: a normal truncated at ±2σ, σ rescaled so the truncated one has std √(2/(in+out))
            std = math.sqrt(2.0 / (fan_in + fan_out)) / 0.87962566103423978
            weight = torch.empty(math.prod(shape), dtype=dtype, device=generator.device)
            parts.append(torch.nn.init.trunc_normal_(weight, std=std, a=-2 * std, b=2 * std, generator=generator))
        return torch.cat(parts)

    def forward(self, params, x, noise=None):
        x = x.reshape(x.shape[0], *self.in_shape)
        h = F.relu(F.conv2d(F.relu(F.conv2d(x, params["conv1.w"], params["conv1.b"])), params["conv2.w"],
                            params["conv2.b"]))
        h = max_pool2(h).flatten(1)
        pooled, dense = (None, None) if noise is None else (noise[..., :self.flat], noise[..., self.flat:])
        h = F.relu(F.linear(self.drop(h, pooled, self.rates[0]), params["fc1.w"], params["fc1.b"]))
        return F.linear(self.drop(h, dense, self.rates[1]), params["fc2.w"], params["fc2.b"])


class MLP(Model):
    """dense(hidden) → tanh → dense(classes) on flattened features.

    tanh (not ReLU) keeps the loss twice differentiable everywhere, so its Hessian, and with
    it the smoothness constant L that power iteration estimates, means what Assumption 1 says.
    """

    def __init__(self, num_features: int, num_classes: int, hidden: int = 32):
        self.d, self.c, self.hidden = num_features, num_classes, hidden
        self.shapes = {"fc1.w": (hidden, num_features), "fc1.b": (hidden,), "fc2.w": (num_classes, hidden),
                       "fc2.b": (num_classes,)}
        self._fan_in = {"fc1.w": num_features, "fc1.b": num_features, "fc2.w": hidden, "fc2.b": hidden}

    def init(self, generator, dtype=torch.float32):
        return _uniform_init(self.shapes, self._fan_in, generator, dtype)

    def forward(self, params, x, noise=None):
        h = torch.tanh(F.linear(x.reshape(x.shape[0], -1), params["fc1.w"], params["fc1.b"]))
        return F.linear(h, params["fc2.w"], params["fc2.b"])
