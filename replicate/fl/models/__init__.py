"""Models over flat parameter vectors, many clients at once: the papers' logistic regression
(with its fused solver), the neural networks of the later figures and a small MLP."""
import torch

from replicate.core.errors import ReplicateError
from replicate.fl.models.base import Model
from replicate.fl.models.linear import LogisticRegression
from replicate.fl.models.linear_step import clip_may_act
from replicate.fl.models.lstm import CharLSTM
from replicate.fl.models.nets import CNN, MLP, ConvDropout

MODELS = {"logistic": LogisticRegression, "cnn": CNN, "char_lstm": CharLSTM, "mlp": MLP}


def build(name: str, num_features: int, num_classes: int, **options) -> Model:
    """The model a run config names, for a dataset's feature count and classes."""
    check_preset(name)
    if name not in MODELS:
        raise ReplicateError(f"model {name!r} is sized by its dataset (image shape, vocabulary): use for_dataset")
    return MODELS[name](num_features, num_classes, **options)


# The authors' LSTMs (FedProx code, spec §3): the papers print the hidden sizes swapped; Sent140
# embeds with frozen GloVe, here a frozen random table (no GloVe: ``lstm`` module docstring).
_LSTM_PRESETS = {"char_lstm": dict(embed=8, hidden=256, layers=2),  # Shakespeare: next character
                 # TFF's Shakespeare (Reddi et al.; Charles & Konečný): the next character at every position,
                 # accuracy over real characters only (the dataset's meta["uncounted"]: pad, OOV, begin, end)
                 "char_lstm_tff": dict(embed=8, hidden=256, layers=2, loss_kind="token"),
                 "sent_lstm": dict(embed=300, hidden=100, layers=2, head=(30,),  # Sent140: 2 classes
                                   frozen_embedding=True)}


# Image CNNs by name (``for_dataset``): the FEMNIST-style CNN, STEM's MNIST LeNet and its CIFAR-10 LeNet-5
# (2 conv + 3 linear; spec STEM §6.4, PROPOSED)
_CNN_PRESETS = {"cnn": {}, "lenet": dict(channels=(10, 20), hidden=50, padding=0),
                "lenet5": dict(channels=(6, 16), hidden=(120, 84), padding=0)}
# Reddi et al.'s EMNIST CNN with two dropouts (Charles & Konečný's FEMNIST model, spec Charles §7.2)
_IMAGE_MODELS = {"cnn": CNN, "lenet": CNN, "lenet5": CNN, "conv_dropout": ConvDropout}


# Every preset a run config may name (``for_dataset`` sizes it for the dataset)
PRESETS = tuple(dict.fromkeys([*MODELS, *_IMAGE_MODELS, *_LSTM_PRESETS]))
_WIDENED = ("mlp", *_LSTM_PRESETS)  # the presets whose hidden width a run may set


def check_preset(name: str, hidden: int | None = None) -> None:
    """Refuse an unknown preset, or a hidden width for a preset that has none, before any data loads. A module of
    one's own named by its contents (``NAME@digest``, ``runs.own``) is a cache name, not a preset: not checked."""
    if "@" in name:
        return
    if name not in PRESETS and name not in MODELS:
        raise ReplicateError(f"unknown model {name!r}; the presets are {', '.join(PRESETS)}, or pass a "
                             "torch.nn.Module of your own")
    if hidden is not None and name not in _WIDENED:
        raise ReplicateError(f"model {name!r} has no hidden width to set (hidden={hidden}); "
                             f"{', '.join(_WIDENED)} have one")
    if hidden is not None and hidden < 1:
        raise ReplicateError(f"hidden (the width of {name!r}'s hidden layer) must be >= 1, got {hidden}")


def graphed(name: str) -> bool:
    """Whether the model a run config names replays its stacked step from a CUDA graph on a GPU
    (``Model.graphed``: the LSTMs), so that a step costs its kernels, not one host dispatch per op."""
    return name in _LSTM_PRESETS or bool(getattr(MODELS.get(name), "graphed", False))


def for_dataset(name: str, dataset, hidden: int | None = None) -> Model:
    """The model ``name`` sized for a federated dataset: features and classes for the dense
    models, the image shape for the CNN, the vocabulary for the LSTMs (``hidden`` overrides
    an LSTM's width: the FedProx paper's text says 100 for Shakespeare, its code 256)."""
    if name in _LSTM_PRESETS:
        vocabulary = dataset.meta.get("vocab_size") or len(dataset.meta.get("vocabulary", ()))
        if not vocabulary or dataset.train.x.dtype != torch.int64:
            raise ReplicateError(f"model {name!r} reads token sequences; dataset {dataset.name!r} has none")
        options = dict(_LSTM_PRESETS[name], **({} if hidden is None else {"hidden": hidden}))
        if options.get("loss_kind") == "token":
            options["uncounted"] = tuple(dataset.meta.get("uncounted", ()))
        if options.get("frozen_embedding") and dataset.meta.get("vectors") is not None:
            options["vectors"] = dataset.meta["vectors"]  # the dataset's own embedding (Sent140: GloVe)
        classes = None if name.startswith("char_lstm") else dataset.num_classes
        return CharLSTM(vocabulary, num_classes=classes, **options)
    if hidden is not None and name != "mlp":
        raise ReplicateError(f"model {name!r} has no hidden width to set (hidden={hidden})")
    if dataset.train.x.dtype == torch.int64:
        raise ReplicateError(f"dataset {dataset.name!r} holds token sequences: use char_lstm or sent_lstm, "
                             f"not {name!r}")
    if name in _IMAGE_MODELS:
        shape = tuple(dataset.meta.get("image_shape") or dataset.train.x.shape[1:])
        if len(shape) != 3:
            raise ReplicateError(f"model {name!r} needs (C, H, W) images; dataset {dataset.name!r} has inputs {shape}")
        return _IMAGE_MODELS[name](shape, dataset.num_classes, **_CNN_PRESETS.get(name, {}))
    return build(name, dataset.num_features, dataset.num_classes, **({} if hidden is None else {"hidden": hidden}))


__all__ = ["CNN", "CharLSTM", "ConvDropout", "MLP", "LogisticRegression", "MODELS", "Model", "PRESETS", "build",
           "check_preset", "clip_may_act", "for_dataset", "graphed"]
