"""Figure-level sweeps: configs, cached runs, and one module per paper."""
