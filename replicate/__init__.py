"""replicate: federated optimization, reproducibly — five papers' figures, and experiments of your own.

A ten-line experiment (docs/api.md)::

    import replicate as rp
    data = rp.load_dataset("mnist", partition=rp.partitions.dirichlet(alpha=0.1, clients=100), seed=0)
    config = rp.RunConfig(dataset=data, model=MyNet(), algorithm=rp.FedAvg(scheme="weighted"),
                          rounds=20, local_epochs=1, batch_size=10, client_lr=0.05)
    history = rp.run(config)            # a DataFrame: round, lr, train_loss, train_acc, test_loss, test_acc

The public API:

- ``RunConfig`` — one run: dataset, model, algorithm, local work, rates, rounds, seed;
  ``run(config)`` → its history; ``compare({label: config})`` → one tidy frame; ``COLUMNS`` → what each
  column means.
- Algorithms — ``FedAvg``, ``FedProx``, ``Scaffold``, ``Stem``, ``FedAdam``, ``LocalUpdate``; ``ALGORITHMS``
  maps their names.
- Data — ``load_dataset(name, partition=None, seed=0)``; ``federate(x, y, partition, seed)`` for arrays of
  your own; ``partitions`` (``iid``, ``shards``, ``dirichlet``, ``quantity_skew``, ``natural``, ``describe``,
  ``plot_label_heatmap``); ``datasets()`` lists the registered names.
- Models — a preset's name (``models.PRESETS``: "logistic", "mlp", "cnn", …) or any ``torch.nn.Module``
  (``TorchModule`` wraps it).
- ``ReplicateError`` — every refusal of bad input, in one line naming the fix.

Importing the package loads neither torch nor any data: each name is imported when first used. The figures
of the five papers are made by ``python -m replicate figures`` (README.md).
"""

__version__ = "0.1.0"

import importlib

from replicate.core.errors import ReplicateError, report_in_notebooks

report_in_notebooks()  # a ReplicateError in a notebook cell reads as one line

# name → (module, attribute; None: the module itself)
_API = {
    "RunConfig": ("replicate.runs.config", "RunConfig"),
    "run": ("replicate.runs.api", "run"),
    "compare": ("replicate.runs.api", "compare"),
    "COLUMNS": ("replicate.runs.api", "COLUMNS"),
    "ALGORITHMS": ("replicate.fl.algorithms", "ALGORITHMS"),
    "FedAvg": ("replicate.fl.algorithms", "FedAvg"),
    "FedProx": ("replicate.fl.algorithms", "FedProx"),
    "Scaffold": ("replicate.fl.algorithms", "Scaffold"),
    "Stem": ("replicate.fl.algorithms", "Stem"),
    "FedAdam": ("replicate.fl.algorithms", "FedAdam"),
    "LocalUpdate": ("replicate.fl.algorithms", "LocalUpdate"),
    "load_dataset": ("replicate.data.pooled", "load_dataset"),
    "federate": ("replicate.data.partitions", "federate"),
    "partitions": ("replicate.data.partitions", None),
    "datasets": ("replicate.data", "available"),
    "models": ("replicate.fl.models", None),
    "TorchModule": ("replicate.fl.models.module", "TorchModule"),
}
__all__ = ["ReplicateError", "__version__", *_API]


def __getattr__(name: str):
    if name not in _API:
        raise AttributeError(f"module 'replicate' has no attribute {name!r}")
    module, attribute = _API[name]
    value = importlib.import_module(module)
    value = value if attribute is None else getattr(value, attribute)
    globals()[name] = value  # once: later reads are plain attribute reads
    return value


def __dir__():
    return sorted(set(globals()) | set(_API))
