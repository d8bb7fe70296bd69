"""The arena's datasets, each trained as the paper that uses it trains it.

A task names the official loader (a stand-in substitutes under the ``data_source`` knob, labelled), the
model its paper trains there, the mini-batch b and how many clients a round samples (None: every client,
as Li et al.'s convex figures and STEM run). Where a round samples K < N clients, every entry samples the
same K uniformly without replacement (the streams are named by (seed, round), so all see the same clients);
an algorithm without sampling (STEM: every worker every round, its paper's setting) is refused there, since
its rounds would touch N clients where the others touch K and no budget would be equal.
"""
from __future__ import annotations

from typing import NamedTuple


class Task(NamedTuple):
    official: str  # the loader of the official data (``data.variants``: a stand-in may substitute)
    model: str  # the model its paper trains on it (``fl.models``)
    batch_size: int  # b
    clients_per_round: int | None  # K; None: every client, every round
    label: str  # as the leaderboard names it
    source: str  # whose setting this is


TASKS: dict[str, Task] = {
    "synthetic(1,1)": Task("synthetic(1,1)", "logistic", 24, None, "synthetic(1,1)", "Li et al. App. D.2"),
    "synthetic(0,0)": Task("synthetic(0,0)", "logistic", 24, None, "synthetic(0,0)", "Li et al. App. D.2"),
    "mnist_balanced": Task("mnist_balanced", "logistic", 64, None, "mnist balanced", "Li et al. App. D.2"),
    # MNIST under Dirichlet label skew (Hsu et al. 2019 §3; replicate.data.pooled): trained as Li et al.'s MNIST
    "mnist_dirichlet0.1": Task("mnist_dirichlet0.1", "logistic", 64, None, "MNIST Dir(0.1)",
                               "Hsu et al. 2019 §3, α = 0.1 (Li et al.'s model and b)"),
    "mnist_dirichlet1": Task("mnist_dirichlet1", "logistic", 64, None, "MNIST Dir(1)",
                             "Hsu et al. 2019 §3, α = 1 (Li et al.'s model and b)"),
    "mnist_fedprox": Task("mnist_fedprox", "logistic", 10, 10, "MNIST (FedProx)", "FedProx §5.1, Table 1"),
    "emnist_tff": Task("emnist_tff", "conv_dropout", 20, 10, "EMNIST-62 (TFF)",
                       "Charles & Konečný §6 (Reddi et al.'s CNN, M = 10, B = 20)"),
    "shakespeare": Task("shakespeare", "char_lstm", 10, 10, "Shakespeare (LEAF)", "FedProx §5.1 (2×256 LSTM)"),
    "sent140": Task("sent140_leaf", "sent_lstm", 10, 10, "Sent140", "FedProx §5.1 (2×100 LSTM, GloVe)"),
    "cifar10": Task("cifar10_stem_moderate", "lenet5", 8, None, "CIFAR-10 (STEM)",
                    "Khanduri et al. §5 (LeNet-5, K = 100, b = 8)"),
}
NEURAL = tuple(name for name, task in TASKS.items() if task.model != "logistic")  # slow on a CPU: a GPU's datasets


def partial(task: Task) -> bool:
    """Whether a round of ``task`` samples some of its clients."""
    return task.clients_per_round is not None


__all__ = ["NEURAL", "TASKS", "Task", "partial"]
