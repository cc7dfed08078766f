"""posenc.bench.workers: a bias-case worker process ends with the bench run that started it."""

import os
import signal
import subprocess
import sys
import time

import pytest
from support.procs import alive, children, end

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads /proc")


def test_a_bias_worker_ends_with_its_run():
    """SIGKILL the run while its worker measures (a case of minutes): the worker is gone within
    seconds instead of measuring on for nobody."""
    spec = dict(device="cpu", encoding="alibi", paths=["posenc"], T=[2048] * 200, H=2, Dh=8,
                repeats=50, modes=["fwd"], threads=1)  # fmt: skip
    run = subprocess.Popen([sys.executable, "-c", "from posenc.bench.workers import run_worker; "
                            f"run_worker({spec!r})"])  # fmt: skip
    try:
        deadline, workers = time.time() + 120, set()
        while time.time() < deadline and not workers and run.poll() is None:
            time.sleep(0.05)
            workers = children(run.pid)
        assert workers, "the worker never started"
        time.sleep(3.0)  # measuring by now (or still importing: either way it must end)
        assert alive(workers), "the worker ended by itself: the case is too short to tell"
        os.kill(run.pid, signal.SIGKILL)
        killed = time.time()
        run.wait(timeout=10)
        while alive(workers) and time.time() < killed + 30:
            time.sleep(0.05)
        assert not alive(workers), "the worker measured on after its run was killed"
        assert time.time() - killed < 2.0, f"it lived {time.time() - killed:.1f} s more"
    finally:
        end(run, workers)
