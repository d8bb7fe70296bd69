"""Models over flat parameter vectors, many clients at once: the papers' logistic regression
(with its fused solver), the neural networks of the later figures and a small MLP."""
from replicate.core.errors import ReplicateError
from replicate.fl.models.base import Model
from replicate.fl.models.linear import LogisticRegression, clip_may_act
from replicate.fl.models.nets import CNN, MLP, CharLSTM

MODELS = {"logistic": LogisticRegression, "cnn": CNN, "char_lstm": CharLSTM, "mlp": MLP}


def build(name: str, num_features: int, num_classes: int, **options) -> Model:
    """The model a run config names, for a dataset's feature count and classes."""
    if name not in MODELS:
        raise ReplicateError(f"unknown model {name!r}; available: {', '.join(MODELS)}")
    return MODELS[name](num_features, num_classes, **options)


__all__ = ["CNN", "CharLSTM", "MLP", "LogisticRegression", "MODELS", "Model", "build", "clip_may_act"]
