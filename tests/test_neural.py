"""Neural models in the engine: a tiny CNN (with dropout) and tiny CharLSTMs on synthetic
federated data. The stacked engine (torch.func.vmap for the CNN, the written-out batched
recurrence for the LSTM), the sequential engine (PyTorch's fused LSTM kernel) and the autograd
oracle must agree, dropout included (its noise comes from the stream (seed, "dropout",
round, step), whatever the execution order); evaluation in chunks equals one chunk."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from replicate.core import rng
from replicate.data.federated import FederatedDataset, Split
from replicate.fl.algorithms import ALGORITHMS as REGISTERED
from replicate.fl.algorithms import FedAvg, FedProx, LocalWork, example
from replicate.fl.engine import LocalObjective, run
from replicate.fl.models import CNN, CharLSTM, ConvDropout
from replicate.fl.oracle import run_sequential
from replicate.fl.problems import SampleProblem
from replicate.fl.schedules import LRSchedule

# float32 models: vmapped batched gradients against per-client autograd differ by summation order
RTOL, ATOL = 1e-5, 1e-6
SIZES = [6, 9, 4, 12, 7]
VOCAB, SEQ = 7, 5


def image_dataset(seed=0) -> FederatedDataset:
    rs = np.random.RandomState(seed)
    xs = [rs.randn(n, 1, 8, 8).astype(np.float32) for n in SIZES]
    ys = [rs.randint(0, 3, n) for n in SIZES]
    return FederatedDataset("images", Split.from_clients(xs, ys), Split.from_clients(xs[:2], ys[:2]), 3)


def token_split(sizes, seed, token_targets) -> Split:
    """Sequences that count up mod VOCAB from a random start (learnable); int64 x, kept as is."""
    g = torch.Generator().manual_seed(seed)
    n = sum(sizes)
    start = torch.randint(0, VOCAB, (n, 1), generator=g)
    seq = (start + torch.arange(SEQ + 1)) % VOCAB
    noise = torch.rand(seq.shape, generator=g) < 0.1  # a few random tokens
    seq = torch.where(noise, torch.randint(0, VOCAB, seq.shape, generator=g), seq)
    x, y = seq[:, :-1].contiguous(), (seq[:, 1:] if token_targets else seq[:, -1]).contiguous()
    offsets = torch.tensor([0, *np.cumsum(sizes)], dtype=torch.int64)
    return Split(x=x, y=y, offsets=offsets)


def token_dataset(token_targets=False, seed=0) -> FederatedDataset:
    return FederatedDataset("tokens", token_split(SIZES, seed, token_targets),
                            token_split([10], seed + 1, token_targets), VOCAB)


def cnn(dropout=0.25):
    return CNN(in_shape=(1, 8, 8), num_classes=3, channels=(2, 3), hidden=8, dropout=dropout)


def lstm(loss_kind="class", **options):
    return CharLSTM(vocab_size=VOCAB, loss_kind=loss_kind, **(dict(embed=3, hidden=5, layers=2) | options))


def conv_dropout():
    return ConvDropout(in_shape=(1, 8, 8), num_classes=3, channels=(2, 3), hidden=5)


PROBLEMS = {
    "cnn": lambda: SampleProblem(image_dataset(), cnn()),
    "conv_dropout": lambda: SampleProblem(image_dataset(), conv_dropout()),
    "lstm": lambda: SampleProblem(token_dataset(), lstm()),
    "lstm_frozen": lambda: SampleProblem(token_dataset(), lstm(frozen_embedding=True, head=(4,))),
}
ALGORITHMS = {
    "fedavg": (FedAvg("scheme2", 3), LocalWork(3, "steps", 4)),
    "fedprox": (FedProx(0.3, 3, straggler_fraction=0.5), LocalWork(2, "epochs", 4)),
}


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("model", PROBLEMS)
def test_stacked_sequential_and_oracle_agree(model, algorithm):
    problem = PROBLEMS[model]()
    assert problem.x.dtype == (torch.float32 if model in ("cnn", "conv_dropout") else torch.int64)
    algo, work = ALGORITHMS[algorithm]
    schedule, objective = LRSchedule("constant", 0.3), LocalObjective(weight_decay=1e-3, clip_norm=5.0)
    kwargs = dict(objective=objective, rounds=2, seed=1, return_params=True)
    stacked, w_stacked = run(problem, algo, work, schedule, execution="stacked", **kwargs)
    sequential, w_sequential = run(problem, algo, work, schedule, execution="sequential", **kwargs)
    oracle, w_oracle = run_sequential(problem, algo, work, schedule, **kwargs)
    torch.testing.assert_close(w_stacked, w_sequential, rtol=RTOL, atol=ATOL)
    torch.testing.assert_close(w_stacked, w_oracle, rtol=RTOL, atol=ATOL)
    for other in (sequential, oracle):
        assert stacked["train_loss"].tolist() == pytest.approx(other["train_loss"].tolist(), rel=RTOL)
    assert (w_stacked - problem.init(1)).abs().max() > 1e-3  # the model really trained
    if model == "cnn":  # dropout was on: without it the same run ends elsewhere
        batch = problem.draw_batches([(torch.arange(3), torch.full((3,), 2), torch.Generator())], work)[0]
        noise = problem.dropout_noise(batch.step(0), rng.seed_for(1, "dropout", 0, 0))
        assert noise is not None and noise.shape == (*batch.step(0)[0].shape, 8)
        _, w_plain = run(SampleProblem(image_dataset(), cnn(dropout=0.0)), algo, work, schedule, **kwargs)
        assert (w_plain - w_stacked).abs().max() > 1e-4


def test_conv_dropout_is_reddis_emnist_cnn():
    """Reddi et al.'s create_conv_dropout_model (spec Charles §7.2): 1,206,590 parameters for
    FEMNIST, Glorot-normal weights and zero biases, and two dropouts driven by one noise vector
    (the pooled features at 0.25, the dense layer at 0.5)."""
    model = ConvDropout((1, 28, 28), 62)
    assert model.num_params == 1_206_590
    assert model.dropout_shape == (64 * 12 * 12 + 128,) and model.rates == (0.25, 0.5)
    params = model.unflatten(model.init(torch.Generator().manual_seed(0)))
    for name, shape in model.shapes.items():
        if name.endswith(".b"):
            assert not params[name].any()
            continue
        receptive = int(np.prod(shape[2:]))
        std = np.sqrt(2.0 / (shape[1] * receptive + shape[0] * receptive))
        if params[name].numel() > 10_000:  # enough samples for the standard deviation to be sharp
            assert float(params[name].std()) == pytest.approx(std, rel=0.02)
        assert float(params[name].abs().max()) <= 2 * std / 0.87962566103423978 + 1e-7
    # the noise's first part masks the pooled features at 0.25, its second the dense layer at 0.5
    # (inverted dropout: kept units are scaled by 1/(1 − p)); written out layer by layer here
    import torch.nn.functional as F
    small = conv_dropout()
    g = torch.Generator().manual_seed(1)
    flat = torch.randn(small.num_params, generator=g) * 0.5  # non-zero biases: every layer shows
    x, noise = torch.randn(4, 1, 8, 8, generator=g), torch.rand(4, small.dropout_shape[0], generator=g)
    w = small.unflatten(flat)
    pooled = F.max_pool2d(F.relu(F.conv2d(F.relu(F.conv2d(x, w["conv1.w"], w["conv1.b"])), w["conv2.w"],
                                          w["conv2.b"])), 2).flatten(1)
    assert pooled.shape[1] == small.flat == 3 * 2 * 2
    dense = F.relu(F.linear(pooled * (noise[:, :small.flat] >= 0.25) / 0.75, w["fc1.w"], w["fc1.b"]))
    expected = F.linear(dense * (noise[:, small.flat:] >= 0.5) / 0.5, w["fc2.w"], w["fc2.b"])
    torch.testing.assert_close(small.forward(w, x, noise), expected)
    assert not torch.allclose(small.forward(w, x, noise), small.forward(w, x))  # masks were drawn


@pytest.mark.parametrize("model", ["cnn", "lstm", "lstm_token"])
def test_evaluation_in_chunks_equals_one_chunk(model):
    if model == "cnn":
        problem = SampleProblem(image_dataset(), cnn())
    else:
        token = model == "lstm_token"
        problem = SampleProblem(token_dataset(token_targets=token), lstm("token" if token else "class"))
    flat = problem.init(2)
    n = problem.x.shape[0]
    problem.model.eval_batch_size = 10_000
    whole = problem.evaluate(flat)
    problem.model.eval_batch_size = 7  # several chunks, the last one short
    assert n % 7 and n > 7
    chunked = problem.evaluate(flat)
    assert set(chunked) == set(whole) == {"train_loss", "train_acc", "test_loss", "test_acc"}
    for key in whole:
        assert chunked[key] == pytest.approx(whole[key], abs=1e-6, rel=0)
    # the metric is the sample mean of the model's per-sample loss
    per_sample = problem.model.per_sample_loss(flat, problem.x, problem.y)
    assert whole["train_loss"] == pytest.approx(float(per_sample.double().mean()), abs=1e-6, rel=0)


@pytest.mark.parametrize("options", [dict(), dict(loss_kind="token"), dict(frozen_embedding=True, head=(4,)),
                                     dict(layers=1, hidden=9)])
def test_lstm_fused_batched_and_vmapped_recurrences_agree(options):
    """Two implementations of one LSTM: PyTorch's fused kernel (one client at a time) and the
    written-out recurrence batched over clients (K > 1) — equal losses and per-client gradients,
    with masked samples."""
    model = lstm(**options)
    g = torch.Generator().manual_seed(5)
    k, b = 4, 6
    flat = torch.stack([model.init(torch.Generator().manual_seed(s)) for s in range(k)])
    x = torch.randint(0, VOCAB, (k, b, SEQ), generator=g)
    y = torch.randint(0, VOCAB, (k, b, SEQ) if model.loss_kind == "token" else (k, b), generator=g)
    mask = torch.ones(k, b)
    mask[1, 3:] = 0
    batched = model.loss_and_grad(flat, x, y, mask)
    fused = [model.loss_and_grad(flat[j:j + 1], x[j:j + 1], y[j:j + 1], mask[j:j + 1]) for j in range(k)]
    torch.testing.assert_close(batched[0], torch.cat([f[0] for f in fused]), rtol=RTOL, atol=ATOL)
    torch.testing.assert_close(batched[1], torch.cat([f[1] for f in fused]), rtol=RTOL, atol=ATOL)
    assert bool((batched[1].abs().sum(1) > 0).all())
    # the masked samples do not count: client 1 on its first 3 samples alone gives the same
    alone = model.loss_and_grad(flat[1:2], x[1:2, :3], y[1:2, :3])
    torch.testing.assert_close(alone[1][0], batched[1][1], rtol=RTOL, atol=ATOL)
    if model.frozen_embedding:  # not a parameter; the same fixed table for every model built alike
        assert "embed" not in model.shapes and torch.equal(model.table("cpu"), lstm(**options).table("cpu"))


def test_token_lstm_gradients_and_training():
    problem = SampleProblem(token_dataset(token_targets=True), lstm("token"))
    assert problem.y.shape == (sum(SIZES), SEQ)
    flat = problem.init(0)
    clients, work = torch.arange(3), LocalWork(1, "steps", 4)
    batch = problem.draw_batches([(clients, torch.ones(3, dtype=torch.int64), torch.Generator().manual_seed(0))],
                                 work)[0].step(0)
    stacked = flat.unsqueeze(0).repeat(3, 1)
    grads = problem.grad(stacked, clients, batch)
    assert grads.shape == (3, problem.model.num_params) and bool(torch.isfinite(grads).all())
    assert bool((grads.abs().sum(1) > 0).all())
    # client 0's gradient equals autograd on its mean per-token loss
    w = flat.clone().requires_grad_(True)
    problem.client_loss(w, 0, batch[0][0]).backward()
    torch.testing.assert_close(grads[0], w.grad, rtol=RTOL, atol=ATOL)
    # a tiny LSTM on plain SGD needs a large step to leave the uniform plateau (ln 7 = 1.95) quickly
    history = run(problem, FedAvg("full"), LocalWork(10, "steps", 4), LRSchedule("constant", 3.0), rounds=6, seed=0)
    losses = history["train_loss"].tolist()
    assert all(np.isfinite(losses)) and losses[0] == pytest.approx(np.log(VOCAB), abs=0.1)
    assert losses[-1] < losses[0] - 0.3


def test_auto_execution_follows_the_measured_rule():
    """execution="auto": a client loop for LSTMs / large models on a CPU (vmap measured 0.09-0.14×
    there), stacked for small models and on CUDA; either way the same maths."""
    from replicate.fl.engine import preferred_execution
    from replicate.fl.models import LogisticRegression

    assert preferred_execution(SampleProblem(token_dataset(), lstm())) == "sequential"
    sent = CharLSTM(vocab_size=VOCAB, embed=300, hidden=100, head=(30,), num_classes=2, frozen_embedding=True)
    assert preferred_execution(SampleProblem(token_dataset(), sent)) == "stacked"  # Sent140's shape
    assert preferred_execution(SampleProblem(image_dataset(), cnn())) == "stacked"  # 22 k-parameter class
    big = CNN(in_shape=(1, 8, 8), num_classes=3, channels=(8, 16), hidden=2048)
    assert big.num_params > 100_000 and preferred_execution(SampleProblem(image_dataset(), big)) == "sequential"
    flat = FederatedDataset("flat", Split.from_clients([np.ones((3, 4), np.float32)] * 2, [np.zeros(3)] * 2),
                            Split.from_clients([np.ones((3, 4), np.float32)], [np.zeros(3)]), 2)
    assert preferred_execution(SampleProblem(flat, LogisticRegression(4, 2))) == "stacked"
    problem = SampleProblem(token_dataset(), lstm())
    work, schedule = LocalWork(3, "steps", 4), LRSchedule("constant", 0.5, 0.0)
    runs = [run(problem, FedAvg(scheme="scheme1", clients_per_round=3), work, schedule, rounds=2, seed=0,
                execution=e, progress=False) for e in ("auto", "sequential")]
    assert runs[0].equals(runs[1])  # "auto" on a CPU is the client loop itself


def test_accuracy_leaves_out_uncounted_targets_and_pools_positions():
    """Reddi et al.'s Shakespeare accuracy: padding and sequence marks are not predictions that count,
    and the accuracy pools the counted positions of all sequences (a sequence with none counts none)."""
    model = lstm("token", uncounted=(0, 6))
    y = torch.tensor([[1, 2, 0, 0], [3, 6, 0, 0], [0, 0, 0, 0]])
    logits = torch.nn.functional.one_hot(torch.tensor([[1, 5, 0, 0], [3, 6, 0, 0], [0, 0, 0, 0]]), VOCAB).float()
    hits, counted = model.hits(logits, y)
    assert hits.tolist() == [1.0, 1.0, 0.0] and counted.tolist() == [2.0, 1.0, 0.0]
    plain = lstm("token")  # without uncounted tokens every position counts
    assert plain.hits(logits, y)[1].tolist() == [4.0, 4.0, 4.0] and plain.hits(logits, y)[0].tolist() == [3, 4, 4]
    classes = cnn()
    hits, counted = classes.hits(torch.eye(3)[[0, 1, 1]], torch.tensor([0, 2, 1]))
    assert hits.tolist() == [1.0, 0.0, 1.0] and counted.tolist() == [1.0, 1.0, 1.0]
    # the problem's accuracy is counted hits over counted positions (2 / 3 here, not the mean of 1/2, 1 and 0)
    problem = SampleProblem(token_dataset(token_targets=True), model)
    problem.x, problem.y = problem.x[:3], torch.cat([y, torch.zeros(3, SEQ - 4, dtype=y.dtype)], 1)
    problem.test = (problem.x, problem.y)
    model.predict = lambda flat, x: torch.cat([logits, torch.nn.functional.one_hot(  # fixed predictions
        torch.zeros(3, SEQ - 4, dtype=torch.int64), VOCAB).float()], 1)[:x.shape[0]]
    metrics = problem.evaluate(problem.init(0))
    assert metrics["train_acc"] == metrics["test_acc"] == pytest.approx(2 / 3)


def test_per_layer_gradients_are_bitwise_the_gradients_of_the_flat_row():
    """Model.loss_and_grad differentiates each layer's own tensor (issue #38: no zero-filled full-width gradient
    per layer); it must give bit for bit what differentiating the flat row's slices gives."""
    from torch.func import grad_and_value, vmap

    from replicate.fl import models

    nets = [models.CNN((1, 28, 28), 10, **models._CNN_PRESETS["lenet"]),
            models.ConvDropout((1, 28, 28), 62, channels=(4, 8), hidden=16)]
    for net in nets:
        g = torch.Generator().manual_seed(0)
        k, b = 4, 6
        flat = net.init(g).unsqueeze(0) + 0.01 * torch.randn(k, net.num_params, generator=g)
        x, y = net.prepare(torch.randn(k * b, *net.in_shape, generator=g),
                           torch.randint(0, net.num_classes, (k * b,), generator=g), net.num_classes)
        x, y = x.view(k, b, *x.shape[1:]), y.view(k, b, *y.shape[1:])
        noise = torch.rand(k, b, *net.dropout_shape, generator=g) if net.dropout else None
        mask = (torch.rand(k, b, generator=g) > 0.3).to(flat.dtype)

        def one(w, xb, yb, mb, nb):
            return (net.per_sample_loss(w, xb, yb, nb) * mb).sum() / mb.sum()

        want_grads, want_losses = vmap(grad_and_value(one), in_dims=(0, 0, 0, 0, 0 if noise is not None else None))(
            flat, x, y, mask, noise)
        losses, grads = net.loss_and_grad(flat, x, y, mask, noise)
        assert torch.equal(losses, want_losses) and torch.equal(grads, want_grads)


@pytest.mark.parametrize("name", sorted(REGISTERED))
@pytest.mark.parametrize("model", ["logistic64", "lstm", "conv_dropout"])
def test_static_shapes_compute_what_the_stacked_round_computes(model, name):
    """``execution="static"`` (issue #38 item 1: one shape a round, so a GPU can replay the step from a CUDA
    graph) runs a finished client's rows and discards them: every registered algorithm, over epochs of
    unequal clients, ends where the stacked rounds end — bitwise in float64 (the logistic model, generic
    step), to float32 rounding for the neural models (kernels of another batch count)."""
    from test_algorithms import logistic64

    problem = logistic64(small_clients=2) if model == "logistic64" else PROBLEMS[model]()
    algo, work = example(name), LocalWork(2, "epochs", 4)
    plan = algo.plan(problem.population(), work, 1, 1)
    steps = work.steps(problem.sizes[plan.clients], plan.work)
    assert name == "stem" or len(set(steps.tolist())) > 1  # clients finish at different steps
    kwargs = dict(objective=LocalObjective(weight_decay=1e-3, clip_norm=5.0), rounds=2, seed=1, return_params=True,
                  fused=False)
    schedule = LRSchedule("constant", 0.1)
    (h_static, w_static), (h_stacked, w_stacked) = (run(problem, algo, work, schedule, execution=e, **kwargs)
                                                    for e in ("static", "stacked"))
    assert torch.isfinite(w_static).all() and (w_static - problem.init(1)).abs().max() > 1e-4
    if model == "logistic64":
        assert torch.equal(w_static, w_stacked)
        assert h_static.equals(h_stacked)
    else:
        torch.testing.assert_close(w_static, w_stacked, rtol=RTOL, atol=ATOL)
        assert h_static["train_loss"].tolist() == pytest.approx(h_stacked["train_loss"].tolist(), rel=RTOL)


def test_graphs_are_a_gpu_matter():
    """On a CPU a problem keeps no graphs and the cache calls its function; on CUDA the LSTMs' step is graphed
    and the engine gives them one shape a round (tests/test_cuda.py replays it there)."""
    from types import SimpleNamespace

    from replicate.core.cuda_graphs import GraphCache
    from replicate.fl.engine import preferred_execution

    assert SampleProblem(token_dataset(), lstm()).graphs is None
    cache = GraphCache(lambda a, b: a * 2 + b)
    assert torch.equal(cache(torch.ones(3), torch.arange(3.0)), torch.tensor([2.0, 3.0, 4.0]))
    assert cache.captures == cache.replays == 0
    on_gpu = {m: preferred_execution(SimpleNamespace(device=torch.device("cuda"), model=make()))
              for m, make in (("lstm", lstm), ("cnn", cnn))}
    assert on_gpu == {"lstm": "static", "cnn": "stacked"}


def test_evaluation_pools_with_the_same_values_as_max_pool2d_and_training_with_max_pool2d_itself():
    """``nets.max_pool2`` outside autograd (evaluation) takes the maximum of each window's four strided views: the
    same values bit for bit as ``F.max_pool2d(x, 2)``, NaN and odd sizes included; under autograd it is
    ``F.max_pool2d``, so training's gradients (each window's first maximum) are unchanged."""
    import torch.nn.functional as F

    from replicate.fl.models.nets import max_pool2

    g = torch.Generator().manual_seed(0)
    for shape in [(3, 6, 24, 24), (2, 4, 7, 9), (2, 3, 5, 4, 6)]:
        x = torch.relu(torch.randn(*shape, generator=g)).round(decimals=1)  # zeros and ties, as after a ReLU
        x.view(-1)[5] = float("nan")
        with torch.no_grad():
            fast = max_pool2(x)
        expected = F.max_pool2d(x.reshape(-1, *shape[-3:]), 2).reshape(*shape[:-2], *fast.shape[-2:])
        assert torch.equal(fast.nan_to_num(-1.0), expected.nan_to_num(-1.0)) and fast.isnan().sum() == 1
    w = torch.relu(torch.randn(2, 3, 8, 8, generator=g)).round(decimals=1).requires_grad_()
    max_pool2(w).sum().backward()
    ours, w.grad = w.grad, None
    F.max_pool2d(w, 2).sum().backward()
    assert torch.equal(ours, w.grad)
    from torch.func import grad_and_value, vmap

    seen = []

    def loss(v):
        seen.append(torch.is_grad_enabled())
        return (v * v).sum()

    with torch.no_grad():  # e.g. FedProx's dissimilarity: per-client gradients inside a no-grad evaluation
        vmap(grad_and_value(loss))(torch.ones(2, 3))
    assert seen == [True]  # the clients' gradients (Model.loss_and_grad) always pool through F.max_pool2d
