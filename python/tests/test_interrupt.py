"""Ctrl-C during a search that must not return a partial plan
(`return_on_interrupt=False`): KeyboardInterrupt is raised promptly, not after the whole
time limit (issue #45)."""

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path


def test_ctrl_c_raises_promptly_when_no_partial_plan_is_wanted():
    script = textwrap.dedent(
        f"""
        import sys, time
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        import memplan
        from test_api import random_problem
        problem = random_problem(4000)
        print("ready", flush=True)
        started = time.monotonic()
        try:
            memplan.plan(problem, "search", time_limit=120, return_on_interrupt=False)
            print("returned", flush=True)
        except KeyboardInterrupt:
            print("interrupted", round(time.monotonic() - started, 1), flush=True)
        """
    )
    # SIGINT's default disposition, as a terminal gives it (see test_api.py).
    child = subprocess.Popen(
        [sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert child.stdout.readline().strip() == "ready"
    time.sleep(2.0)
    sent = time.monotonic()
    child.send_signal(signal.SIGINT)
    out, _ = child.communicate(timeout=90)
    words = out.split()
    assert words[0] == "interrupted", out
    # It stopped soon after the signal, far from the 120 s limit.
    assert time.monotonic() - sent < 60, out
