"""The stacked LSTM's gradient as ``replicate/fl/models/lstm.py`` formed it until 2026-11-24:
the recurrence written out step by step under autograd (one ``baddbmm`` and the gates' element-wise
arithmetic per step), ``autograd.grad`` for the derivatives at the gate pre-activations, and each
client's weight gradients as one batched product per layer. Kept here, unchanged, as the reference
the hand-written backward (``lstm.py``'s ``_bptt``) is tested against (``tests/test_lstm_ops.py``)."""
from __future__ import annotations

import torch


def _affine(a, w, bias):
    return torch.baddbmm(bias.unsqueeze(1), a, w)


def _per_batch(a, d):
    k = a.shape[0]
    return torch.bmm(a.reshape(k, -1, a.shape[-1]).transpose(1, 2), d.reshape(k, -1, d.shape[-1]))


def _embedded(model, p, x):
    if model.frozen_embedding:
        return model.table(x.device)[x]
    emb = p["embed"]
    k, v = emb.shape[:2]
    if k == 1:
        return emb[0][x[0]].unsqueeze(0)
    rows = x + v * torch.arange(k, device=x.device).view(k, *([1] * (x.dim() - 1)))
    return emb.reshape(k * v, -1)[rows]


def _written_out(model, p, seq):
    k, b, steps = seq.shape[:3]
    layers = []
    for i in range(model.layers):
        gates_x = _affine(seq.reshape(k, b * steps, -1), p[f"lstm{i}.wx"], p[f"lstm{i}.b"]).view(k, b, steps, -1)
        wh, h, c = p[f"lstm{i}.wh"], seq.new_zeros(k, b, model.hidden), seq.new_zeros(k, b, model.hidden)
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


def _dense(model, p, seq):
    out, dense = (seq if model.loss_kind == "token" else seq[:, :, -1]), []
    for name in [f"head{j}" for j in range(len(model.head))] + ["out"]:
        z = _affine(out.reshape(out.shape[0], -1, out.shape[-1]), p[f"{name}.w"], p[f"{name}.b"])
        z = z.view(*out.shape[:-1], -1)
        dense.append((name, out, z))
        out = z
    return out, dense


def loss_and_grad(model, flat, x, y, mask=None):
    """Mean losses ``(K,)`` and gradients ``(K, P)`` of K > 1 batches, the old way."""
    k, b = y.shape[:2]
    m = torch.ones(k, b, dtype=flat.dtype) if mask is None else mask.to(flat.dtype)
    p = model.unflatten(flat.detach())
    with torch.enable_grad():
        first = _embedded(model, p, x.long()).detach().requires_grad_(True)
        seq, layers = _written_out(model, p, first)
        out, dense = _dense(model, p, seq)
        per_sample = model.loss(out.flatten(0, 1), y.flatten(0, 1)).view(k, b)
        losses = (per_sample * m).sum(1) / m.sum(1)
        learned = [] if model.frozen_embedding else [first]
        wrt = learned + [g for _, _, pre in layers for g in pre] + [z for _, _, z in dense]
        deltas = list(torch.autograd.grad(losses.sum(), wrt))
    grads, d_first = {}, (None if model.frozen_embedding else deltas.pop(0))
    for i, (inputs, outputs, pre) in enumerate(layers):
        d = torch.stack(deltas[:len(pre)], dim=2)
        del deltas[:len(pre)]
        previous = torch.stack([torch.zeros_like(outputs[0])] + outputs[:-1], dim=2).detach()
        grads[f"lstm{i}.wx"], grads[f"lstm{i}.wh"] = _per_batch(inputs.detach(), d), _per_batch(previous, d)
        grads[f"lstm{i}.b"] = d.reshape(k, -1, d.shape[-1]).sum(1)
    for (name, a, _), d in zip(dense, deltas):
        grads[f"{name}.w"], grads[f"{name}.b"] = _per_batch(a.detach(), d), d.reshape(k, -1, d.shape[-1]).sum(1)
    if not model.frozen_embedding:
        rows = x.long() + model.vocab_size * torch.arange(k, device=x.device).view(k, 1, 1)
        table = d_first.new_zeros(k * model.vocab_size, model.embed)
        grads["embed"] = table.index_add_(0, rows.reshape(-1), d_first.reshape(-1, model.embed))
    return losses.detach(), torch.cat([grads[name].reshape(k, -1) for name in model.shapes], dim=1)
