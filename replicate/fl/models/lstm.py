"""The FedProx / LEAF LSTMs as functions of flat parameters, many clients at once.

``CharLSTM``: an embedding, a stack of LSTM layers, optional dense hidden layers and a dense
output layer on the last output (FedProx Shakespeare: 8-d embedding, 2 × 256, dense over the
80 characters; FedProx Sent140: 300-d embedding, 2 × 100, dense 30, dense over the 2 classes;
spec §1(c) "Models"), or on every output with ``loss_kind="token"`` (next token per position).

Two executions of the same recurrence (gates i, f, g, o as PyTorch orders them, one bias):

- **one model** (a client loop on a CPU, evaluation, the oracle): PyTorch's fused ``torch.lstm``
  kernel (oneDNN on a CPU, cuDNN on CUDA). Measured on this project's 2-core CPU, one client,
  batch 10 × 80 characters, forward + backward: 24-32 ms for 2 × 256 against 117 ms for the
  written-out loop below and 550 ms for it under ``torch.func``.
- **K clients at once** (the stacked engine, the dissimilarity's per-device gradients): the
  recurrence written out with one batched matrix product per step over a ``(K, b, ·)`` state;
  one ``autograd.grad`` of the summed losses gives the derivatives at the gate pre-activations,
  and each client's weight gradient is one batched product per layer over its b·T rows. No
  ``vmap`` (measured 4× slower for 10 Shakespeare clients). Forming the weight gradients per
  layer rather than per step (autograd through the weights) made the stacked rounds of
  ``python -m replicate bench`` 1.5× faster (Sent140 1.68 → 1.13 s, Shakespeare 6.8 → 4.5 s)
  and, with the dissimilarity taking devices by size, Sent140's dissimilarity (2,875 devices
  of ≈ 4 tweets) went from 35 to 14 s on this CPU.

``frozen_embedding``: the authors' Sent140 model embeds with frozen GloVe vectors (spec §1(c)).
Without GloVe here, a fixed random table (uniform ±1, drawn once from the stream
(0, "embedding", vocabulary, width), the same for every run and seed, as a pretrained table
would be) stands in; it is not a parameter, so a device trains 245 k weights instead of 7.8 M.
"""
from __future__ import annotations

import torch

from replicate.core import rng
from replicate.fl.models.base import Model
from replicate.fl.models.nets import _uniform_init


class CharLSTM(Model):
    """Embedding(vocab, embed) → LSTM(hidden) × layers → dense(h) for h in ``head`` → dense(classes)
    on the last (or every) output; ``num_classes`` defaults to the vocabulary (next character)."""

    eval_batch_size = 256

    def __init__(self, vocab_size: int, embed: int = 8, hidden: int = 256, layers: int = 2,
                 loss_kind: str = "class", num_classes: int | None = None, head: tuple[int, ...] = (),
                 frozen_embedding: bool = False, uncounted: tuple[int, ...] = ()):
        self.vocab_size, self.embed, self.hidden, self.layers = vocab_size, embed, hidden, layers
        self.uncounted = tuple(uncounted)
        self.loss_kind, self.head, self.frozen_embedding = loss_kind, tuple(head), bool(frozen_embedding)
        self.num_classes = vocab_size if num_classes is None else num_classes
        self.shapes, self._fan_in, self._tables = {}, {}, {}
        if not self.frozen_embedding:
            self.shapes["embed"] = (vocab_size, embed)
            self._fan_in["embed"] = 1.0  # nn.Embedding draws N(0, 1); uniform ±1 keeps the scale
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
        # Measured per client and step (batch 10): Shakespeare 2 × 256: fused kernel 24-32 ms vs the
        # batched loop 117 ms; 2 × 100 on 80 characters 9 vs 27 ms. Sent140 (25 words, frozen
        # embedding) 7.8 vs 5.1 ms: short sequences of a small LSTM gain from batching the clients.
        return "stacked" if self.hidden <= 128 and self.embed >= 64 else "sequential"

    def table(self, device) -> torch.Tensor:
        """The frozen embedding (vocabulary × width), built once per device."""
        key = str(device)
        if key not in self._tables:
            g = rng.generator(0, "embedding", self.vocab_size, self.embed)
            table = torch.rand(self.vocab_size, self.embed, generator=g, device=g.device) * 2 - 1
            self._tables[key] = table.to(device)
        return self._tables[key]

    # ---- the recurrence ------------------------------------------------------------------

    def _embedded(self, p: dict, x: torch.Tensor) -> torch.Tensor:
        """(K, b, T) tokens → (K, b, T, embed) inputs, with each client's own table when learned."""
        if self.frozen_embedding:
            return self.table(x.device)[x]
        emb = p["embed"]  # (K, V, E)
        k, v = emb.shape[:2]
        if k == 1:
            return emb[0][x[0]].unsqueeze(0)
        rows = x + v * torch.arange(k, device=x.device).view(k, *([1] * (x.dim() - 1)))
        return emb.reshape(k * v, -1)[rows]

    def _fused(self, seq: torch.Tensor, p: dict) -> torch.Tensor:
        """One model's layers through ``torch.lstm``: (b, T, E) → (b, T, H)."""
        b, h = seq.shape[0], self.hidden
        weights = []
        for i in range(self.layers):
            bias = p[f"lstm{i}.b"][0]
            weights += [p[f"lstm{i}.wx"][0].t().contiguous(), p[f"lstm{i}.wh"][0].t().contiguous(), bias,
                        torch.zeros_like(bias)]  # one bias: PyTorch's b_hh stays zero
        zeros = seq.new_zeros(self.layers, b, h)
        out, _, _ = torch.lstm(seq, (zeros, zeros), weights, True, self.layers, 0.0, torch.is_grad_enabled(),
                               False, True)
        return out

    def _written_out(self, p: dict, seq: torch.Tensor):
        """The layers step by step: (K, b, T, E) → (K, b, T, H), and per layer its inputs,
        outputs h_t and gate pre-activations (what ``_bptt`` differentiates)."""
        k, b, steps = seq.shape[:3]
        layers = []
        for i in range(self.layers):
            gates_x = _affine(seq.reshape(k, b * steps, -1), p[f"lstm{i}.wx"], p[f"lstm{i}.b"]).view(k, b, steps, -1)
            wh, h, c = p[f"lstm{i}.wh"], seq.new_zeros(k, b, self.hidden), seq.new_zeros(k, b, self.hidden)
            pre, outputs = [], []
            for t in range(steps):
                gates = torch.baddbmm(gates_x[:, :, t], h, wh)
                pre.append(gates)
                i_g, f_g, g_g, o_g = gates.chunk(4, dim=-1)
                c = torch.sigmoid(f_g) * c + torch.sigmoid(i_g) * torch.tanh(g_g)
                h = torch.sigmoid(o_g) * torch.tanh(c)
                outputs.append(h)
            layers.append((seq, outputs, pre))
            seq = torch.stack(outputs, dim=2)
        return seq, layers

    def _dense(self, p: dict, seq: torch.Tensor):
        """Dense layers on the last (or every) output: logits and each layer's (name, input, output)."""
        out, dense = (seq if self.loss_kind == "token" else seq[:, :, -1]), []
        for name in [f"head{j}" for j in range(len(self.head))] + ["out"]:
            z = _affine(out.reshape(out.shape[0], -1, out.shape[-1]), p[f"{name}.w"], p[f"{name}.b"])
            z = z.view(*out.shape[:-1], -1)
            dense.append((name, out, z))
            out = z
        return out, dense

    def logits(self, p: dict, x: torch.Tensor) -> torch.Tensor:
        """Logits of K models (parameters with a leading K) on their own tokens x: (K, b, T)."""
        seq = self._embedded(p, x.long())
        seq = self._fused(seq[0], p).unsqueeze(0) if seq.shape[0] == 1 else self._written_out(p, seq)[0]
        return self._dense(p, seq)[0]

    def _bptt(self, p: dict, x: torch.Tensor, y: torch.Tensor, m: torch.Tensor):
        """Mean losses ``(K,)`` and gradients ``(K, P)`` of K batches, each under its own model.

        One ``autograd.grad`` (the weights are constants to it) gives the loss's derivative δ at
        every gate pre-activation, dense output and input embedding; each batch's weight gradient
        is then one batched product per layer over its b·T rows (Σ_t x_tᵀ δ_t, Σ_t h_{t-1}ᵀ δ_t).
        Autograd through the weights would instead form and sum a (K, P)-sized gradient at every
        step, which dominated the backward of the dissimilarity's many small devices."""
        k, b = y.shape[:2]
        with torch.enable_grad():
            first = self._embedded(p, x.long()).detach().requires_grad_(True)
            seq, layers = self._written_out(p, first)
            out, dense = self._dense(p, seq)
            per_sample = self.loss(out.flatten(0, 1), y.flatten(0, 1)).view(k, b)
            losses = (per_sample * m).sum(1) / m.sum(1)
            learned = [] if self.frozen_embedding else [first]  # a frozen table needs no input gradient
            wrt = learned + [g for _, _, pre in layers for g in pre] + [z for _, _, z in dense]
            deltas = list(torch.autograd.grad(losses.sum(), wrt))
        grads, d_first = {}, (None if self.frozen_embedding else deltas.pop(0))
        for i, (inputs, outputs, pre) in enumerate(layers):
            d = torch.stack(deltas[:len(pre)], dim=2)  # (K, b, T, 4H)
            del deltas[:len(pre)]
            previous = torch.stack([torch.zeros_like(outputs[0])] + outputs[:-1], dim=2).detach()
            grads[f"lstm{i}.wx"], grads[f"lstm{i}.wh"] = _per_batch(inputs.detach(), d), _per_batch(previous, d)
            grads[f"lstm{i}.b"] = d.reshape(k, -1, d.shape[-1]).sum(1)
        for (name, a, _), d in zip(dense, deltas):
            grads[f"{name}.w"], grads[f"{name}.b"] = _per_batch(a.detach(), d), d.reshape(k, -1, d.shape[-1]).sum(1)
        if not self.frozen_embedding:  # each batch's input gradients onto its own table
            rows = x.long() + self.vocab_size * torch.arange(k, device=x.device).view(k, 1, 1)
            table = d_first.new_zeros(k * self.vocab_size, self.embed)
            grads["embed"] = table.index_add_(0, rows.reshape(-1), d_first.reshape(-1, self.embed))
        return losses.detach(), torch.cat([grads[name].reshape(k, -1) for name in self.shapes], dim=1)

    # ---- the Model interface -------------------------------------------------------------

    def forward(self, params, x, noise=None):
        """One model (unbatched parameters) on samples x: (b, T) → logits."""
        return self.logits({name: t.unsqueeze(0) for name, t in params.items()}, x.unsqueeze(0))[0]

    def loss_and_grad(self, flat, x, y, mask=None, noise=None):
        """Per-client mean loss ``(K,)`` and gradient ``(K, P)`` (no dropout in these models)."""
        k, b = y.shape[:2]
        m = torch.ones(k, b, dtype=flat.dtype, device=flat.device) if mask is None else mask.to(flat.dtype)
        if k > 1:
            return self._bptt(self.unflatten(flat.detach()), x, y, m)
        with torch.enable_grad():  # one model: autograd through the fused kernel
            w = flat.detach().requires_grad_(True)
            logits = self.logits(self.unflatten(w), x)
            per_sample = self.loss(logits.flatten(0, 1), y.flatten(0, 1)).view(k, b)
            losses = (per_sample * m).sum(1) / m.sum(1)
            (grads,) = torch.autograd.grad(losses.sum(), w)
        return losses.detach(), grads


def _affine(a: torch.Tensor, w: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """Each of K models' dense map: (K, rows, fan) @ (K, fan, out) + (K, out)."""
    return torch.baddbmm(bias.unsqueeze(1), a, w)


def _per_batch(a: torch.Tensor, d: torch.Tensor) -> torch.Tensor:
    """Σ over each batch's rows (and steps) of aᵀ d: (K, a's width, d's width)."""
    k = a.shape[0]
    return torch.bmm(a.reshape(k, -1, a.shape[-1]).transpose(1, 2), d.reshape(k, -1, d.shape[-1]))
