"""Dataset statistics as FedProx Table 1 reports them: devices, samples, mean and std per device.

FedProx counts a device's samples *before* its train/test split. Its ``utils/stats.py``
reads ``all_data``, uses ``np.std`` (ddof = 0), and counts test samples in Table 1 (draft
§5.1). :func:`table1_statistics` therefore adds each client's train and test sizes.
:meth:`FederatedDataset.statistics` gives one split only.
"""
from __future__ import annotations

import numpy as np

from replicate.data.federated import FederatedDataset, size_statistics

# FedProx draft Table 1 (seed text §5.1) and the final README, spec §1(c):
# (devices, samples, mean, std).
FEDPROX_DRAFT_TABLE1 = {
    "MNIST": (1000, 69035, 69, 106),
    "EMNIST": (900, 305654, 340, 107),
    "Shakespeare": (143, 517706, 3620, 4115),
    "Sent140": (5726, 215829, 38, 19),
    "EMNIST*": (200, 79059, 395, 873),
}
FEDPROX_FINAL_README = {
    "MNIST": (1000, 69035, 69, 106),
    "FEMNIST": (200, 18345, 92, 159),
    "Shakespeare": (143, 517106, 3616, 6808),
    "Sent140": (772, 40783, 53, 32),
}


def table1_statistics(dataset: FederatedDataset) -> dict:
    """``{"dataset", "devices", "samples", "mean", "std"}`` over each device's train + test
    samples (std with ddof = 0, as FedProx's ``stats.py``).

    A dataset whose test split is pooled (not one part per client) is counted on its
    training samples alone, and ``"counted"`` says so.
    """
    sizes = dataset.train.sizes.numpy().astype(np.float64)
    counted = "train"
    if dataset.test is not None and dataset.test.num_clients == dataset.train.num_clients:
        sizes = sizes + dataset.test.sizes.numpy()
        counted = "train+test"
    return {**size_statistics(dataset.name, sizes), "counted": counted}
