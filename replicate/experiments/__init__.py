"""Figure-level experiments: one package per paper (``li2020``, ``fedprox2020``, ``charles2021``,
``khanduri2021``, ``notes``) with one module per figure or figure family, built on the run layer
(``replicate.runs``: run configs, the result cache, sweeps, tuning, executors) and the theory."""
