"""Neural models as pure functions of a flat parameter vector (vmapped over clients).

- ``CNN``: two 5×5 conv layers (each ReLU + 2×2 max-pool), a dense hidden layer with
  dropout, a dense output layer — the shape of the LEAF/FedAvg FEMNIST CNN and of STEM's
  "2 conv + 2 linear" network (spec STEM §6.4, PROPOSED), with widths as arguments.
- ``CharLSTM``: an embedding, a stack of LSTM layers, optional dense hidden layers and a dense
  output layer on the last output (FedProx/LEAF Shakespeare: 8-d embedding, 2 × 256, dense over
  the 80 characters; FedProx Sent140: 300-d embedding, 2 × 100, dense 30, dense over the 2
  classes), or on every output with ``loss_kind="token"`` (next token per position).
- ``MLP``: one hidden layer, dense(hidden) → tanh → dense(classes): a small smooth non-convex
  model (the lecture notes' Theorem 2 experiment), through the generic ``torch.func`` path.

Weights are initialised as PyTorch's layer defaults (uniform ±1/√fan_in) from the run's
``init`` stream. The LSTM is written out (gates as one matrix product per step) so that
``torch.func`` can vectorise it over clients.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from replicate.fl.models.base import Model


def _uniform_init(shapes: dict, fan_in: dict, generator, dtype) -> torch.Tensor:
    parts = []
    for name, shape in shapes.items():
        bound = 1.0 / math.sqrt(fan_in[name])
        parts.append((torch.rand(math.prod(shape), generator=generator, dtype=dtype) * 2 - 1) * bound)
    return torch.cat(parts)


class CNN(Model):
    """conv(c1, 5×5) → pool → conv(c2, 5×5) → pool → dense(hidden) → dropout → dense(classes)."""

    eval_batch_size = 512

    def __init__(self, in_shape: tuple[int, int, int], num_classes: int, channels=(32, 64), hidden: int = 2048,
                 dropout: float = 0.0):
        c, h, w = in_shape
        c1, c2 = channels
        self.in_shape, self.num_classes = tuple(in_shape), num_classes
        self.dropout, self.dropout_shape = float(dropout), (hidden,)
        flat = c2 * (h // 4) * (w // 4)  # "same" padding keeps H×W, each pool halves it
        self.shapes = {"conv1.w": (c1, c, 5, 5), "conv1.b": (c1,), "conv2.w": (c2, c1, 5, 5), "conv2.b": (c2,),
                       "fc1.w": (hidden, flat), "fc1.b": (hidden,), "fc2.w": (num_classes, hidden),
                       "fc2.b": (num_classes,)}
        self._fan_in = {"conv1.w": c * 25, "conv1.b": c * 25, "conv2.w": c1 * 25, "conv2.b": c1 * 25,
                        "fc1.w": flat, "fc1.b": flat, "fc2.w": hidden, "fc2.b": hidden}

    def init(self, generator, dtype=torch.float32):
        return _uniform_init(self.shapes, self._fan_in, generator, dtype)

    def forward(self, params, x, noise=None):
        x = x.reshape(x.shape[0], *self.in_shape)
        h = F.max_pool2d(F.relu(F.conv2d(x, params["conv1.w"], params["conv1.b"], padding=2)), 2)
        h = F.max_pool2d(F.relu(F.conv2d(h, params["conv2.w"], params["conv2.b"], padding=2)), 2)
        h = F.relu(F.linear(h.flatten(1), params["fc1.w"], params["fc1.b"]))
        return F.linear(self.drop(h, noise), params["fc2.w"], params["fc2.b"])


class CharLSTM(Model):
    """Embedding(vocab, embed) → LSTM(hidden) × layers → dense(h) for h in ``head`` → dense(classes)
    on the last (or every) output; ``num_classes`` defaults to the vocabulary (next character)."""

    eval_batch_size = 256

    def __init__(self, vocab_size: int, embed: int = 8, hidden: int = 256, layers: int = 2,
                 loss_kind: str = "class", num_classes: int | None = None, head: tuple[int, ...] = ()):
        self.vocab_size, self.embed, self.hidden, self.layers = vocab_size, embed, hidden, layers
        self.loss_kind, self.head = loss_kind, tuple(head)
        self.num_classes = vocab_size if num_classes is None else num_classes
        self.shapes = {"embed": (vocab_size, embed)}
        self._fan_in = {"embed": 1.0}  # nn.Embedding draws N(0, 1); uniform ±1 keeps the scale
        for i in range(layers):
            fan = embed if i == 0 else hidden
            self.shapes |= {f"lstm{i}.wx": (fan, 4 * hidden), f"lstm{i}.wh": (hidden, 4 * hidden),
                            f"lstm{i}.b": (4 * hidden,)}
            self._fan_in |= {f"lstm{i}.wx": hidden, f"lstm{i}.wh": hidden, f"lstm{i}.b": hidden}
        fan = hidden
        for j, width in enumerate(self.head):  # Sent140's dense 30 (no activation, as the authors' code)
            self.shapes |= {f"head{j}.w": (fan, width), f"head{j}.b": (width,)}
            self._fan_in |= {f"head{j}.w": fan, f"head{j}.b": fan}
            fan = width
        self.shapes |= {"out.w": (fan, self.num_classes), "out.b": (self.num_classes,)}
        self._fan_in |= {"out.w": fan, "out.b": fan}

    def init(self, generator, dtype=torch.float32):
        return _uniform_init(self.shapes, self._fan_in, generator, dtype)

    def cpu_execution(self) -> str:
        return "sequential"  # a Python loop over time steps: vmap over clients measured 0.09-0.14× on a CPU

    def forward(self, params, x, noise=None):
        seq = params["embed"][x.long()]  # (b, T, embed)
        b, steps = x.shape
        for i in range(self.layers):
            h = seq.new_zeros(b, self.hidden)
            c = seq.new_zeros(b, self.hidden)
            inputs = seq @ params[f"lstm{i}.wx"] + params[f"lstm{i}.b"]  # input part of all gates at once
            outputs = []
            for t in range(steps):
                gates = inputs[:, t] + h @ params[f"lstm{i}.wh"]
                i_g, f_g, g_g, o_g = gates.chunk(4, dim=-1)
                c = torch.sigmoid(f_g) * c + torch.sigmoid(i_g) * torch.tanh(g_g)
                h = torch.sigmoid(o_g) * torch.tanh(c)
                outputs.append(h)
            seq = torch.stack(outputs, dim=1)
        last = seq if self.loss_kind == "token" else seq[:, -1]
        for j in range(len(self.head)):
            last = last @ params[f"head{j}.w"] + params[f"head{j}.b"]
        return last @ params["out.w"] + params["out.b"]


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
