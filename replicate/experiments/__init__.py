"""Figure-level sweeps: the run layer (``runs``: run configs, result cache, worker pool) and one
package per paper (``li2020``, ``charles2021``) with one module per figure or figure family."""
