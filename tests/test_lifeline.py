"""posenc.lifeline: a worker ends with the run that started it, also when the run was gone
before the worker could tie itself to it."""

import os
import signal
import subprocess
import sys
import time

import pytest
from support.procs import alive

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads /proc")


def test_a_worker_whose_run_died_before_it_tied_itself_ends_there():
    """The run may be gone before its worker reaches posenc.lifeline (no death signal will
    come): die_with sees that the parent is no longer the original one and ends the worker."""
    worker = ("import sys, time; time.sleep(0.5); from posenc.lifeline import die_with; "
              "die_with(int(sys.argv[1])); time.sleep(60)")  # fmt: skip
    run = (f"import os, subprocess, sys; w = subprocess.Popen([sys.executable, '-c', {worker!r},"
           " str(os.getpid())]); print(w.pid, flush=True)")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", run], capture_output=True, text=True, timeout=60)
    pid, t0 = int(out.stdout), time.time()
    try:
        while alive([pid]) and time.time() < t0 + 20:
            time.sleep(0.05)
        assert not alive([pid]), "the orphaned worker lived on"
    finally:
        if alive([pid]):
            os.kill(pid, signal.SIGKILL)
