"""The FedProx / LEAF LSTMs as functions of flat parameters, many clients at once.

``CharLSTM``: an embedding, a stack of LSTM layers, optional dense hidden layers and a dense
output layer on the last output (FedProx Shakespeare: 8-d embedding, 2 × 256, dense over the
80 characters; FedProx Sent140: 300-d embedding, 2 × 100, dense 30, dense over the 2 classes;
spec §1(c) "Models"), or on every output with ``loss_kind="token"`` (next token per position).

Two executions of the same recurrence (gates i, f, g, o as PyTorch orders them, one bias):

- **one model** (a client loop on a CPU, evaluation, the oracle): PyTorch's fused ``torch.lstm``
  kernel (oneDNN on a CPU, cuDNN on CUDA). Measured with one client, batch 10 × 80 characters,
  forward + backward, 2 × 256: several times faster than the written-out loop below, and faster
  still than that loop under ``torch.func``.
- **K clients at once** (the stacked engine, the device gradient variance's per-device gradients): the
  recurrence over a ``(K, T, b, ·)`` time-major state, forward and backward written by hand
  (``_forward``, ``_backward``): per time step and layer 7 ops forward (one batched matrix product,
  then the gates' arithmetic in place) and 3 backward, against 31 when the loop ran under autograd
  (the count is kernel launches on an accelerator, and dispatcher round trips on a CPU; ``python -m
  replicate bench`` records it for every model). Only the dense layers and the loss go through
  autograd; each client's weight gradient is one batched product per layer over its T·b rows. No
  ``vmap`` (measured 4× slower for 10 Shakespeare clients; the gains of the per-layer weight
  gradients and the hand-written backward are in docs/CHANGELOG.md). ``tests/lstm_reference.py``
  keeps the autograd recurrence as the reference it is tested against (equal to float32 rounding;
  to 1e-12 in float64).

``frozen_embedding``: the authors' Sent140 model embeds with frozen GloVe vectors (spec §1(c)).
Without GloVe here, a fixed random table (uniform ±1, drawn once from the stream
(0, "embedding", vocabulary, width), the same for every run and seed, as a pretrained table
would be) stands in; it is not a parameter, so a device trains 245 k weights instead of 7.8 M.
"""
from __future__ import annotations

from typing import NamedTuple

import torch

from replicate.core import rng
from replicate.core.errors import ReplicateError
from replicate.fl.models.base import Model
from replicate.fl.models.nets import _uniform_init

# The stacked recurrence keeps a layer's gate columns as g, i, f, o (tanh on the first H, σ on one
# block of 3H); the parameters keep PyTorch's i, f, g, o. Indices of each order's blocks in the other.
_FROM_PYTORCH, _TO_PYTORCH = (2, 0, 1, 3), (1, 2, 0, 3)


class Recurrence(NamedTuple):
    """One layer's forward pass over K models, what its backward reads (all (K, T or T + 1, b, ·))."""
    inputs: torch.Tensor  # x_t, (K, T, b, fan)
    wh: torch.Tensor  # W_h, gates as g, i, f, o: (K, H, 4H)
    act: torch.Tensor  # tanh(g), σ(i), σ(f), σ(o): (K, T, b, 4H)
    cell: torch.Tensor  # c_{t-1} at position t: (K, T + 1, b, H), position 0 = c_{-1} = 0
    out: torch.Tensor  # h_{t-1} at position t: (K, T + 1, b, H), position 0 = h_{-1} = 0
    tanh_c: torch.Tensor  # tanh(c_t): (K, T, b, H)


class CharLSTM(Model):
    """Embedding(vocab, embed) → LSTM(hidden) × layers → dense(h) for h in ``head`` → dense(classes)
    on the last (or every) output; ``num_classes`` defaults to the vocabulary (next character)."""

    eval_batch_size = 256
    graphed = True  # ≈ 1,900 kernel launches a stacked Shakespeare step (760 Sent140): one replay on a GPU

    def __init__(self, vocab_size: int, embed: int = 8, hidden: int = 256, layers: int = 2,
                 loss_kind: str = "class", num_classes: int | None = None, head: tuple[int, ...] = (),
                 frozen_embedding: bool = False, uncounted: tuple[int, ...] = (), vectors=None):
        self.vocab_size, self.embed, self.hidden, self.layers = vocab_size, embed, hidden, layers
        # the frozen table's rows (vocab_size × embed, e.g. GloVe); None: a fixed uniform ±1 draw
        self.vectors = None if vectors is None else torch.as_tensor(vectors, dtype=torch.float32)
        if self.vectors is not None and tuple(self.vectors.shape) != (vocab_size, embed):
            raise ReplicateError(f"embedding vectors are {tuple(self.vectors.shape)}, "
                                 f"the model needs ({vocab_size}, {embed})")
        self.uncounted = tuple(uncounted)
        self.loss_kind, self.head, self.frozen_embedding = loss_kind, tuple(head), bool(frozen_embedding)
        self.num_classes = vocab_size if num_classes is None else num_classes
        self.shapes, self._fan_in, self._tables, self._orders = {}, {}, {}, {}
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
        # With the hand-written backward (measured: 10 clients, one thread, CPU time) the rule stands:
        # Shakespeare's clients are faster looped, Sent140's stacked.
        return "stacked" if self.hidden <= 128 and self.embed >= 64 else "sequential"

    def table(self, device) -> torch.Tensor:
        """The frozen embedding (vocabulary × width), built once per device."""
        key = str(device)
        if key not in self._tables and self.vectors is not None:
            self._tables[key] = self.vectors.to(device)
        if key not in self._tables:
            g = rng.generator(0, "embedding", self.vocab_size, self.embed)
            table = torch.rand(self.vocab_size, self.embed, generator=g, device=g.device) * 2 - 1
            self._tables[key] = table.to(device)
        return self._tables[key]

    # ---- the recurrence ------------------------------------------------------------------

    def _embedded(self, p: dict, x: torch.Tensor) -> torch.Tensor:
        """(K, ·, ·) tokens → (K, ·, ·, embed) inputs, with each client's own table when learned
        (the stacked recurrence passes them time-major, (K, T, b): ``_forward``)."""
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

    def _gates(self, w: torch.Tensor, back: bool = False) -> torch.Tensor:
        """A layer's (K, ·, 4H) weights (or gradients) with the gate columns from PyTorch's order
        i, f, g, o to the recurrence's g, i, f, o (``back``: the other way)."""
        key = (str(w.device), back)
        if key not in self._orders:
            self._orders[key] = torch.tensor(_TO_PYTORCH if back else _FROM_PYTORCH, device=w.device)
        index = self._orders[key]
        return w.view(*w.shape[:-1], 4, self.hidden).index_select(-2, index).view(*w.shape)

    def _forward(self, seq: torch.Tensor, wx: torch.Tensor, wh: torch.Tensor, bias: torch.Tensor) -> Recurrence:
        """One layer over time for K models: (K, T, b, fan) inputs → ``Recurrence`` (no autograd).

        Weights in the order g, i, f, o (``_gates``), so one ``tanh_`` covers g and one ``sigmoid_``
        i, f, o. The input projection of every step is one batched product before the loop; then
        each step is 7 ops, in place on preallocated buffers whose per-step views ``unbind`` makes
        once per layer: gates += h_{t-1}·W_h, tanh(g), σ(i, f, o), c = f·c_{t-1}, c += i·g, tanh(c),
        h = o·tanh(c) (the first step, from h = c = 0, skips the product and f·c)."""
        k, steps, b = seq.shape[:3]
        hid = self.hidden
        act = torch.baddbmm(bias.unsqueeze(1), seq.reshape(k, steps * b, -1), wx).view(k, steps, b, 4 * hid)
        cell, out = seq.new_zeros(k, steps + 1, b, hid), seq.new_zeros(k, steps + 1, b, hid)  # position 0: t = −1
        tanh_c = seq.new_empty(k, steps, b, hid)
        rows, tan, sig = act.unbind(1), act.narrow(-1, 0, hid).unbind(1), act.narrow(-1, hid, 3 * hid).unbind(1)
        g_g, i_g, f_g, o_g = (gate.unbind(1) for gate in act.view(k, steps, b, 4, hid).unbind(3))
        c, h, tc = cell.unbind(1), out.unbind(1), tanh_c.unbind(1)
        for t in range(steps):  # c[t], h[t] hold c_{t-1}, h_{t-1}
            if t:
                rows[t].baddbmm_(h[t], wh)
            tan[t].tanh_()
            sig[t].sigmoid_()
            if t:
                torch.mul(f_g[t], c[t], out=c[t + 1])
                c[t + 1].addcmul_(i_g[t], g_g[t])
            else:
                torch.mul(i_g[t], g_g[t], out=c[t + 1])
            torch.tanh(c[t + 1], out=tc[t])
            torch.mul(o_g[t], tc[t], out=h[t + 1])
        return Recurrence(seq, wh, act, cell, out, tanh_c)

    def _backward(self, r: Recurrence, d_out: torch.Tensor) -> torch.Tensor:
        """Derivatives at one layer's gate pre-activations, (K, T·b, 4H) in PyTorch's order i, f, g, o,
        given those at its outputs h_t from above, ``d_out`` (K, T, b, H) (no autograd).

        With σ' = s − s², every factor that does not depend on the incoming derivatives is formed
        for all steps at once before the loop, in a (K, T, b, 2, 4, H) tensor Q whose first row
        multiplies dc_t and second dh_t: [[f, i·(1 − g²), g·σ'(i), c_{t-1}·σ'(f)], [tanh(c)·σ'(o),
        0, 0, 0]]. A step is then 3 ops: dh_t += dG_{t+1}·W_hᵀ; dc_t = f_{t+1}·dc_{t+1} + dh_t·o·(1 −
        tanh²c), one ``addcmul`` onto the previous step's product; and one broadcast product
        Q_t·[dc_t, dh_t], whose H-blocks 1-4 are dG_t (g, i, f, o) and block 0 f_t·dc_t for the
        step before (3H of zeros are its price)."""
        k, steps, b, hid = *r.act.shape[:3], self.hidden
        gates = r.act.view(k, steps, b, 4, hid)
        s = gates.narrow(3, 1, 3)  # σ(i), σ(f), σ(o)
        g_a, i_a, f_a, o_a = gates.unbind(3)
        q = r.act.new_zeros(k, steps, b, 8, hid)  # Q with its (2, 4) flattened
        q.select(3, 0).copy_(f_a)
        torch.mul(i_a, 1 - g_a * g_a, out=q.select(3, 1))
        torch.mul(torch.stack([g_a, r.cell.narrow(1, 0, steps), r.tanh_c], 3), s - s * s, out=q.narrow(3, 2, 3))
        dc_by_dh = o_a - o_a * r.tanh_c * r.tanh_c  # o·(1 − tanh²c)
        z = r.act.new_empty(k, steps, b, 2, hid)  # [dc_t, dh_t]
        z.select(3, 1).copy_(d_out)
        prod = r.act.new_empty(k, steps, b, 8, hid)
        wh_t = r.wh.transpose(1, 2)
        dc, dh, zt = z.select(3, 0).unbind(1), z.select(3, 1).unbind(1), z.view(k, steps, b, 2, 1, hid).unbind(1)
        qt, pt, p_dc = q.view(k, steps, b, 2, 4, hid).unbind(1), prod.view(k, steps, b, 2, 4, hid).unbind(1), \
            dc_by_dh.unbind(1)
        d_gates, carry = prod.view(k, steps, b, 8 * hid).narrow(-1, hid, 4 * hid).unbind(1), prod.select(3, 0).unbind(1)
        for t in reversed(range(steps)):
            if t < steps - 1:
                dh[t].baddbmm_(d_gates[t + 1], wh_t)
                torch.addcmul(carry[t + 1], dh[t], p_dc[t], out=dc[t])
            else:
                torch.mul(dh[t], p_dc[t], out=dc[t])
            torch.mul(qt[t], zt[t], out=pt[t])
        return self._gates(prod.view(k, steps * b, 8 * hid).narrow(-1, hid, 4 * hid), back=True)

    def _layers(self, p: dict, seq: torch.Tensor) -> list[Recurrence]:
        """Every layer's ``Recurrence`` for K models on (K, T, b, E) inputs."""
        layers = []
        for i in range(self.layers):
            r = self._forward(seq, *(self._gates(p[f"lstm{i}.{n}"]) for n in ("wx", "wh")),
                              self._gates(p[f"lstm{i}.b"]))
            layers.append(r)
            seq = r.out.narrow(1, 1, seq.shape[1])
        return layers

    def _dense(self, p: dict, seq: torch.Tensor, time: int):
        """Dense layers on the last (or every) output of (K, ·, ·, H) outputs whose dimension ``time``
        is time: logits and each layer's (name, input, output)."""
        out, dense = (seq if self.loss_kind == "token" else seq.select(time, -1)), []
        for name in [f"head{j}" for j in range(len(self.head))] + ["out"]:
            z = _affine(out.reshape(out.shape[0], -1, out.shape[-1]), p[f"{name}.w"], p[f"{name}.b"])
            z = z.view(*out.shape[:-1], -1)
            dense.append((name, out, z))
            out = z
        return out, dense

    def _per_sample(self, out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """(K, b) losses of the stacked path's logits (time-major (K, T, b, V) for every position)."""
        if self.loss_kind == "token":
            out = out.transpose(1, 2)
        return self.loss(out.flatten(0, 1), y.flatten(0, 1)).view(y.shape[:2])

    def logits(self, p: dict, x: torch.Tensor) -> torch.Tensor:
        """Logits of K models (parameters with a leading K) on their own tokens x: (K, b, T)."""
        if x.shape[0] == 1:
            return self._dense(p, self._fused(self._embedded(p, x.long())[0], p).unsqueeze(0), 2)[0]
        with torch.no_grad():
            seq = self._layers(p, self._embedded(p, x.long().transpose(1, 2)))[-1].out[:, 1:]
        out = self._dense(p, seq, 1)[0]
        return out.transpose(1, 2) if self.loss_kind == "token" else out

    def _bptt(self, p: dict, x: torch.Tensor, y: torch.Tensor, m: torch.Tensor):
        """Mean losses ``(K,)`` and gradients ``(K, P)`` of K batches, each under its own model.

        The layers run forward and backward by hand (``_forward``, ``_backward``: 7 + 3 ops per
        step and layer); autograd only differentiates the dense layers and the loss, giving the
        derivatives at the top layer's outputs. Each batch's weight gradient is then one batched
        product per layer over its T·b rows (Σ_t x_tᵀ δ_t, Σ_t h_{t-1}ᵀ δ_t). The recurrence under
        autograd (31 ops per step and layer) is kept in ``tests/lstm_reference.py``, which checks
        this one against it."""
        k, b = y.shape[:2]
        with torch.no_grad():
            first = self._embedded(p, x.long().transpose(1, 2))  # (K, T, b, E)
            layers = self._layers(p, first)
        steps = first.shape[1]
        with torch.enable_grad():
            top = layers[-1].out.narrow(1, 1, steps).detach().requires_grad_(True)
            out, dense = self._dense(p, top, 1)
            losses = (self._per_sample(out, y) * m).sum(1) / m.sum(1)
            deltas = list(torch.autograd.grad(losses.sum(), [top] + [z for _, _, z in dense]))
        grads, d_out = {}, deltas.pop(0)
        with torch.no_grad():
            for i in reversed(range(self.layers)):
                r = layers[i]
                d = self._backward(r, d_out)
                grads[f"lstm{i}.wx"] = _per_batch(r.inputs, d)
                grads[f"lstm{i}.wh"] = _per_batch(r.out.narrow(1, 0, steps), d)  # h_{t-1}
                grads[f"lstm{i}.b"] = d.sum(1)
                if i or not self.frozen_embedding:  # a frozen table needs no input gradient
                    d_out = torch.bmm(d, p[f"lstm{i}.wx"].transpose(1, 2)).view(k, steps, b, -1)
            for (name, a, _), d in zip(dense, deltas):
                grads[f"{name}.w"], grads[f"{name}.b"] = _per_batch(a.detach(), d), d.reshape(k, -1, d.shape[-1]).sum(1)
            if not self.frozen_embedding:  # each batch's input gradients onto its own table
                rows = x.long().transpose(1, 2) + self.vocab_size * torch.arange(k, device=x.device).view(k, 1, 1)
                table = d_out.new_zeros(k * self.vocab_size, self.embed)
                grads["embed"] = table.index_add_(0, rows.reshape(-1), d_out.reshape(-1, self.embed))
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
