"""Bad input to ``python -m replicate figures``, refused as a user meets it: each command run as a fresh process,
its wall time from start to exit (the interpreter's own start included: the first row is ``python -c pass``),
its status and the lines it printed. Every refusal is decided before torch or papermill is imported
(``cli/preflight``; ``tests/test_refusals.py`` asserts that, and the status and the one line, never the time)."""
from __future__ import annotations

import http.server
import statistics
import subprocess
import sys
import threading
import time

FIGURE = "li2020/fig2"
CASES = [  # (what, arguments, environment)
    ("an unknown knob", ["--set", "nope=1"], {}),
    ("a knob out of range", ["--set", "rounds=-5"], {}),
    ("an infinite rate", ["--set", "lr=inf"], {}),
    ("a bad time budget", ["--time-budget", "5x"], {}),
    ("an unwritable run cache", [], {"REPLICATE_CACHE": "/proc/replicate-cache"}),
    ("an unwritable out_dir", ["--set", "out_dir=/proc/replicate-out"], {}),
    ("a Ray address nothing listens at", ["--executor", "ray", "--ray-address", "127.0.0.1:9"], {}),
    ("a listening port that is not Ray", ["--executor", "ray", "--ray-address", "127.0.0.1:{port}"], {}),
]


def _timed(args: list[str], env: dict, repeats: int) -> tuple[float, int, int]:
    """Median seconds of ``args`` run as a process, its status and how many lines it printed (the last run's)."""
    from replicate.core import settings

    environment = settings.child_environment(settings.current()) | env
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        done = subprocess.run(args, capture_output=True, text=True, timeout=120, env=environment)
        times.append(time.perf_counter() - start)
    lines = (done.stdout + done.stderr).strip().splitlines()
    return statistics.median(times), done.returncode, len(lines)


class _Quiet(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):  # the probe's HTTP/2 preface is answered 505: expected, not worth a line
        pass


REPEATS = 3


def run(repeats: int = REPEATS) -> list[dict]:
    server = http.server.HTTPServer(("127.0.0.1", 0), _Quiet)  # a web server, not Ray
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        seconds, status, lines = _timed([sys.executable, "-c", "pass"], {}, repeats)
        rows = [{"input": "(the interpreter alone: `python -c pass`)", "s": seconds, "status": status, "lines": lines}]
        for what, args, env in CASES:
            args = [a.format(port=server.server_port) for a in args]
            seconds, status, lines = _timed([sys.executable, "-m", "replicate", "figures", FIGURE, *args], env,
                                            repeats)
            rows.append({"input": what, "s": seconds, "status": status, "lines": lines})
    finally:
        server.shutdown()
    return rows


def table(rows: list[dict]) -> str:
    body = [f"| {r['input']} | {r['s']:.2f} | {r['status']} | {r['lines']} |" for r in rows]
    return "\n".join([f"`python -m replicate figures {FIGURE} …` (median of {REPEATS} processes each):", "",
                      "| bad input | seconds to exit | status | lines |", "|---|---:|---:|---:|", *body])
