"""Bad input to `python -m replicate figures` is refused before torch or papermill is imported: one line, exit 2.

Each case runs the command as a process, the way a user meets it, and checks its status, that it printed one
line, and that neither torch nor papermill was imported (so the refusal costs a fraction of a second, not the
seconds those imports take; the times themselves are measured, not asserted: BENCHMARKS.md).
"""
import http.server
import json
import subprocess
import sys
import threading

import pytest

PROBE = ("import json, sys\nfrom replicate.cli.main import main\ntry:\n    rc = main(sys.argv[1:])\nexcept SystemExit as exc:\n    rc = exc.code\n"
         "print(json.dumps([m for m in ('torch', 'papermill', 'numpy') if m in sys.modules]))\nsys.exit(rc)")


def refuse(args, env=None):
    import os

    done = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=60,
                          env={**os.environ, **(env or {})})
    return done.returncode, done.stderr.strip().splitlines(), json.loads(done.stdout.strip().splitlines()[-1])


CASES = {
    "an unknown knob": (["figures", "li2020/fig2", "--set", "nope=1"], {}, "has no parameter(s) nope"),
    "a knob out of range": (["figures", "li2020/fig2", "--set", "rounds=-5"], {}, "rounds must be ≥ 1"),
    "an infinite rate": (["figures", "li2020/fig2", "--set", "lr=inf"], {}, "must be a finite number"),
    "nan, as JSON spells it": (["figures", "li2020/fig2", "--set", "lr=NaN"], {}, "must be a finite number"),
    "nan, as Python spells it": (["figures", "li2020/fig2", "--set", "lr=nan"], {}, "must be a finite number"),
    "a list knob given a word": (["figures", "li2020/fig2", "--set", "local_steps=[1, x]"], {}, "not a whole JSON"),
    "a bad time budget": (["figures", "li2020/fig2", "--time-budget", "5x"], {}, "--time-budget expects"),
    "a negative time budget": (["figures", "li2020/fig2", "--time-budget", "-5m"], {}, "got '-5m'"),
    "an unknown profile": (["figures", "li2020/fig2", "--profile", "huge"], {}, "invalid choice"),
    "an unwritable run cache": (["figures", "li2020/fig2"], {"REPLICATE_CACHE": "/proc/replicate-cache"},
                                "the run cache (REPLICATE_CACHE)"),
    "an unwritable out_dir": (["figures", "li2020/fig2", "--set", "out_dir=/proc/replicate-out"], {}, "out_dir"),
    "an out_dir inside the committed figures": (["figures", "li2020/fig2", "--profile", "paper", "--set",
                                                 "out_dir=figures/li2020"], {}, "inside the committed figures/"),
    "a smoke run into a labelled folder": (["figures", "li2020/fig2", "--set", "out_dir=figures/modified/x"], {},
                                           "inside the committed figures/"),
    "a malformed Ray address": (["figures", "li2020/fig2", "--executor", "ray", "--ray-address", "nohost"], {},
                                "must be host:port"),
    "a Ray address nothing listens at": (["figures", "li2020/fig2", "--executor", "ray", "--ray-address",
                                          "127.0.0.1:9"], {}, "no Ray cluster at 127.0.0.1:9"),
    "an estimate for a CPU": (["figures", "--estimate", "--device", "cpu"], {}, "models the GPU-scale figures on a GPU"),
    "a knob for every figure": (["figures", "--set", "rounds=5"], {}, "--set applies to each of the"),
    "a check with a knob set": (["figures", "li2020/fig2", "--check", "--profile", "paper", "--set", "rounds=3"], {},
                                "--check regenerates the committed figures"),
    "an archive that is not there": (["cache", "import", "/nonexistent/runs.tar.xz"], {}, "no such archive"),
    "no workers": (["figures", "li2020/fig2", "--workers", "0"], {}, "--workers must be a positive whole number"),
    "a ledger folder that is not there": (["ledger", "verify"], {"REPLICATE_LEDGER": "/nonexistent/ledger"},
                                          "REPLICATE_LEDGER=/nonexistent/ledger is not a folder"),
    "a bench device that is none": (["bench", "--device", "tpu"], {}, "--device must be cpu or cuda"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_is_one_line_before_any_heavy_import(case):
    args, env, says = CASES[case]
    status, lines, imported = refuse(args, env)
    assert status == 2 and len(lines) == 1 and says in lines[0], lines
    assert "torch" not in imported and "papermill" not in imported


def test_a_listening_port_that_is_not_ray_is_one_line_before_any_heavy_import():
    server = http.server.HTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        status, lines, imported = refuse(["figures", "li2020/fig2", "--executor", "ray", "--ray-address",
                                          f"127.0.0.1:{server.server_port}"])
    finally:
        server.shutdown()
    assert status == 2 and len(lines) == 1 and "not a Ray head node" in lines[0]
    assert "torch" not in imported


def test_every_figures_knob_type_is_read_from_its_config_source():
    """The pre-check reads each figure's config fields from source (``preflight.static_fields``): for every
    figure it finds the same fields, with the same annotations, as the imported class has."""
    import dataclasses

    from replicate.cli import preflight
    from replicate.experiments import catalog, knobs

    for key, located in catalog.FIGURES.items():
        if located is None:
            continue
        static = preflight.static_fields(key)
        assert static is not None, key
        cls = catalog.config_class(key)
        declared = {f.name: f.type for f in dataclasses.fields(cls) if f.name not in knobs.NOT_KNOBS}
        fields = {k: v for k, v in static[0].items() if k not in knobs.NOT_KNOBS}
        assert fields == {k: v if isinstance(v, str) else v.__name__ for k, v in declared.items()}, key
        assert tuple(static[1].get("ZERO_ALLOWED") or ()) == tuple(getattr(cls, "ZERO_ALLOWED", ())), key
