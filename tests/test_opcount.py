"""Kernel launches per local step do not grow with the models stacked (issue #24 §2): the
top-level ATen ops of one step of every model preset (``bench.OP_MODELS``) are counted at 2 and 20
stacked models and must be equal; the stacked LSTM's recurrence stays within 10 ops per time step
and layer, forward and backward. Counts, not timings: exact on any machine with this torch."""
from __future__ import annotations

import pytest
import torch

from replicate.cli import bench
from replicate.fl.models import MLP, opcount


def total(model, k, **options):
    return sum(opcount.step_ops(model, *bench.step_inputs(model, k, **options)).values())


@pytest.mark.parametrize("name", bench.OP_MODELS)
def test_ops_per_step_do_not_grow_with_models_stacked(name):
    model = bench.OP_MODELS[name]()
    assert total(model, 2) == total(model, 20) > 0


@pytest.mark.parametrize("name", [n for n in bench.OP_MODELS if n.startswith(("char_lstm", "sent_lstm"))])
def test_lstm_recurrence_is_at_most_ten_ops_per_time_step_and_layer(name):
    model = bench.OP_MODELS[name]()
    short, long = (total(model, 3, steps=steps) for steps in (3, 6))
    assert (long - short) / 3 / model.layers <= 10


def test_the_count_sees_ops_that_grow_with_models():
    """A negative control: a model whose gradient loops over the stacked models is caught."""
    class Looping(MLP):
        def grad(self, flat, x, y, mask=None, noise=None):
            return torch.cat([MLP.grad(self, flat[j:j + 1], x[j:j + 1], y[j:j + 1]) for j in range(flat.shape[0])])

    model = Looping(6, 3, hidden=4)
    flat, x, y, _ = bench.step_inputs(MLP(6, 3, hidden=4), 2)
    small = sum(opcount.step_ops(model, flat, x, y).values())
    flat, x, y, _ = bench.step_inputs(MLP(6, 3, hidden=4), 4)
    assert sum(opcount.step_ops(model, flat, x, y).values()) > small
    counts = opcount.step_ops(MLP(6, 3, hidden=4), flat, x, y)
    assert counts["aten::addcmul_"] == 1 and not any(name.startswith("aten::select") for name in counts)
