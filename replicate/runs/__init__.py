"""The run layer shared by every paper's figures.

- ``config``: a training run as one frozen ``RunConfig``, and how to build it
- ``cache``: results of runs cached on disk by config hash
- ``pool``: the runs a figure is missing, computed side by side in worker processes, and
  runs stopped at a target loss
"""
