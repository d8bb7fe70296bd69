

# ---------------------------------------------------------------- the run layer: sweeps batch by themselves

def _sweep():
    from replicate.runs.config import RunConfig

    base = RunConfig(dataset="synthetic(1,1)", num_clients=12, algorithm=FedProx(0.1, 4), local_steps=None,
                     local_epochs=2, batch_size=10, client_lr=0.05, rounds=3)
    return [base.replace(seed=s, client_lr=lr) for s in (0, 1) for lr in (0.05, 0.1)] + \
        [base.with_algorithm(prox_mu=1.0)]  # another μ: another batch


def test_a_sweep_is_grouped_by_what_runs_share():
    from replicate.runs import batched
    from replicate.runs.pool import Job

    jobs = [Job(c) for c in _sweep()]
    assert [len(b) for b in batched.group(jobs)] == [4, 1]
    assert [len(b) for b in batched.group(jobs, max_runs=3)] == [3, 1, 1]
    assert [len(b) for b in batched.group(jobs, workers=2)] == [3, 1, 1]  # ⌈5/2⌉ a batch: both workers busy


def test_a_batched_sweep_caches_each_run_as_computed_alone(tmp_path, monkeypatch):
    import json

    from replicate.runs import cache, pool

    configs = _sweep()
    log = cache.RunLog(progress_file=None, display=False)
    pool.compute([(c,) for c in configs], workers=1, progress=False, log=log)
    assert log.computed == 4  # the batch of four; the run alone is computed when read
    batched_runs = [cache.load(c) for c in configs[:4]]
    assert all(json.loads((cache.paths.cache_dir() / "runs" / f"{cache.entry(c)}.json").read_text())["batch"] == 4
               for c in configs[:4])
    monkeypatch.setenv("REPLICATE_BUILD", str(tmp_path / "alone"))
    for config, history in zip(configs[:4], batched_runs):
        pd.testing.assert_frame_equal(history, cache.run(config, progress=False), rtol=1e-5, atol=1e-7)
