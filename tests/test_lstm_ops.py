"""The stacked LSTM's hand-written backward (``lstm.py``: ``_forward``, ``_backward``) against
the formulation it replaced, the recurrence under autograd (``tests/lstm_reference.py``), and its
top-level op count per time step (issue #24 §2)."""
from __future__ import annotations

import pytest
import torch

from replicate.fl.models import CharLSTM
from tests import lstm_reference

VOCAB = 11
SHAPES = {"char": dict(embed=4, hidden=6, layers=2), "token": dict(embed=4, hidden=6, layers=2, loss_kind="token"),
          "sent": dict(embed=5, hidden=3, layers=2, head=(4,), num_classes=2, frozen_embedding=True),
          "one layer": dict(embed=3, hidden=9, layers=1), "three layers": dict(embed=3, hidden=4, layers=3)}


def batch(model, k, b, steps, seed=0):
    g = torch.Generator().manual_seed(seed)
    flat = torch.stack([model.init(torch.Generator().manual_seed(seed + s)) for s in range(k)])
    x = torch.randint(0, VOCAB, (k, b, steps), generator=g)
    y = torch.randint(0, model.num_classes, (k, b, steps) if model.loss_kind == "token" else (k, b), generator=g)
    mask = torch.ones(k, b)
    mask[1, b // 2:] = 0
    return flat, x, y, mask


@pytest.mark.parametrize("shape", SHAPES)
def test_hand_written_backward_equals_the_autograd_recurrence(shape):
    """Same losses and gradients as the recurrence under autograd, float32, to rounding: the two
    sum the same terms in other orders (time-major rows, σ'(x) = s − s² vs s(1 − s))."""
    model = CharLSTM(VOCAB, **SHAPES[shape])
    flat, x, y, mask = batch(model, 3, 5, 12)
    new, old = model.loss_and_grad(flat, x, y, mask), lstm_reference.loss_and_grad(model, flat, x, y, mask)
    torch.testing.assert_close(new[0], old[0], rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(new[1], old[1], rtol=1e-5, atol=1e-7)
    relative = (new[1] - old[1]).norm(dim=1) / old[1].norm(dim=1)
    assert float(relative.max()) < 1e-6
    if model.frozen_embedding:  # the fixed table is float32: no float64 run
        return
    # and in float64, to float64's rounding: the same function, not a near one
    flat64 = flat.double()
    new64, old64 = model.loss_and_grad(flat64, x, y, mask), lstm_reference.loss_and_grad(model, flat64, x, y, mask)
    torch.testing.assert_close(new64[1], old64[1], rtol=1e-12, atol=1e-14)
