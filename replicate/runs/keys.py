"""Cache keys: the hash that names a run's entry, from everything its numbers depend on.

``key`` hashes the whole config, the device type with its ``DRAWS`` version, the extra metrics a run records,
``VERSION`` and the ``NUMERICS`` versions of its model and algorithm: a change to any of them names another
entry, so a result of other numerics is never read as this code's (``replicate.runs.cache`` stores and
verifies the entries; it re-exports these names).
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from replicate.core.errors import ReplicateError
from replicate.fl.schedules import FORMER_NAMES
from replicate.runs.config import RunConfig, run_device

VERSION = 4  # 4: the key holds the full config (the algorithm's own settings), the device type and the extra metrics
# Numerics versions per model or algorithm name: bump an entry when a change alters that model's or
# algorithm's results (a reordered sum is enough: the LSTM runs are chaotic, one rounding apart grows
# to another seed's curve within ten rounds), so only the runs it touches are recomputed. Absent = 0.
# Before this existed, the LSTM backward of commit d499262 changed Sent140's numbers without a bump
# (the runs computed before it were moved aside by hand, build/cache/stale/).
NUMERICS: dict[str, int] = {
    "scaffold": 1,  # 1: c_i ← c_i⁺ (it was c_i + c_i⁺ from the third round on)
    # 1: the stacked LSTM's hand-written backward (equal to the autograd recurrence to
    # float32 rounding), which Sent140's runs train through (``cpu_execution`` picks the stacked path).
    # char_lstm / char_lstm_tff are left at 0: on a CPU their runs train client by client through the
    # fused kernel (unchanged); only their dissimilarity metric, measured and not fed back, moves by rounding.
    "sent_lstm": 1,
    # 1: dropout noise from the counter stream core.counter_rng, computed on the run's device (it was a CPU
    # torch.Generator's uniform, drawn on the host and copied), so a CPU run draws other masks
    "conv_dropout": 1,
}
# Random-draw versions per device type, in the key of that device's runs only (absent = 0): bump one when
# a change alters what that device draws. CUDA 1: mini-batches and dropout noise drawn on the host from
# CPU generators, where CUDA's own generator drew other batches before; CPU draws were unchanged.
# (Dropout noise has since moved to a counter stream computed on the device: NUMERICS "conv_dropout".)
DRAWS: dict[str, int] = {"cuda": 1}


_FORMER = {now: before for before, now in FORMER_NAMES.items()}


def metrics_key(extra_metrics) -> str | None:
    """The name an ``extra_metrics`` hook is cached under: its ``key`` attribute (a string that changes
    whenever what it records changes), so a run with other extra columns is another entry."""
    if extra_metrics is None:
        return None
    name = getattr(extra_metrics, "key", None)
    if not isinstance(name, str) or not name:
        raise ReplicateError(f"extra_metrics {extra_metrics!r} has no 'key' string: a cached run must name what "
                             "its extra columns are")
    return name


def key(config: RunConfig, extra_metrics=None, device: str | None = None, code: dict | None = None) -> str:
    """The hash of everything a run's numbers depend on: the whole config (every field, defaults
    included, so a default that changes meaning cannot alias old entries), the device type (CPU and
    CUDA draw the same streams but sum in another order) with its ``DRAWS`` version, the extra metrics
    recorded, ``VERSION`` and the model's and algorithm's ``NUMERICS`` versions."""
    device = device or run_device().type
    recorded = config.to_dict()
    # a schedule renamed since is hashed under its former name, so that its runs keep their entries
    recorded["lr_schedule"] = _FORMER.get(recorded["lr_schedule"], recorded["lr_schedule"])
    fields = {"version": VERSION, "config": recorded, "device": device,
              "metrics": metrics_key(extra_metrics), "numerics": numerics(config)}
    if DRAWS.get(device):  # only where set, so the keys of the other devices' runs stay as they were
        fields["draws"] = DRAWS[device]
    # only for code of one's own, so the keys of the package's runs stay as they were; ``code``: as a sidecar recorded
    # it (a process that has not imported that code, e.g. `cache export`, names the run as the one that computed it)
    if code := code if code is not None else own_code(config):
        fields["code"] = code
    payload = json.dumps(fields, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()[:20]


def own_code(config: RunConfig) -> dict[str, str]:
    """The digests of the algorithm class and the named dataset builder of one's own that a config uses
    (``runs.own.code_digest``); empty for the package's."""
    from replicate.data.registry import BUILDERS
    from replicate.runs.own import code_digest

    parts = {"algorithm": code_digest(type(config.algorithm)),
             "dataset": code_digest(BUILDERS[config.dataset]) if isinstance(config.dataset, str)
             and config.dataset in BUILDERS else None}
    return {part: code for part, code in parts.items() if code}


def numerics(config: RunConfig) -> dict[str, int]:
    """The ``NUMERICS`` versions in force for this config's model and algorithm (those above 0)."""
    return {name: NUMERICS[name] for name in (config.model, config.algorithm_name) if NUMERICS.get(name)}


def entry_name(meta: dict) -> str:
    """The name this code gives the run a JSON sidecar describes (``<key>`` or ``<key>_to_<loss>``):
    an entry made under another ``VERSION``, ``NUMERICS`` or config has another name."""
    name = key(RunConfig.from_dict(meta), _Named(meta.get("extra_metrics")) if meta.get("extra_metrics") else None,
               device=str(meta["device"]).split(":")[0], code=meta.get("code"))
    return name if meta.get("target") is None else f"{name}_to_{meta['target']:g}"


@dataclass(frozen=True)
class _Named:
    """Stands for an ``extra_metrics`` hook known only by its recorded ``key``."""

    key: str
