"""A run killed with SIGKILL leaves no process behind: its `--workers` processes end with it
(however it ends), and its leases are stale, to be taken over at once by a rerun."""

import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest
from support.procs import alive, children, comm, end, has_torch, spawned

from posenc.arena.runner import stale

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads /proc")


def test_a_sigkilled_run_leaves_no_worker_and_stale_leases(tmp_path):
    db = tmp_path / "a.sqlite"
    cmd = [sys.executable, "-m", "posenc", "arena", "--tasks", "copy", "--encodings", "nope,rope",
           "--seeds", "1", "--steps", "100000", "--fixed-steps", "--workers", "2", "--db", str(db),
           "--out", str(tmp_path / "o")]  # fmt: skip
    run = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline, workers = time.time() + 180, set()
        while time.time() < deadline and len(workers) < 2:  # both started (named once armed)
            time.sleep(0.5)
            workers = {p for p in children(run.pid) if comm(p) == "posenc-worker"}
        assert len(workers) == 2, "the workers never started"
        everyone = children(run.pid)  # the workers and multiprocessing's resource tracker
        os.kill(run.pid, signal.SIGKILL)
        run.wait(timeout=10)
        deadline = time.time() + 5
        while alive(everyone) and time.time() < deadline:  # before: they trained on for hours
            time.sleep(0.2)
        assert not alive(everyone), f"left behind: {alive(everyone)}"
    finally:
        end(run, workers)
    with sqlite3.connect(db) as conn:
        owners = {r[0] for r in conn.execute("SELECT owner FROM leases")}
    assert owners and all(stale(o) for o in owners)  # a rerun takes them over at once


@pytest.mark.parametrize("launch", ["module", "script"])
def test_a_run_killed_while_its_workers_start_leaves_none(launch, tmp_path):
    """Killed the moment its workers exist (they are still importing torch), a run leaves no
    process behind: each worker ties itself to the run before any heavy import (before: they
    lived on ~10 s until they armed). Both ways a run starts: `python -m posenc` and the
    `posenc` console script (which the worker re-runs as its __main__)."""
    script = tmp_path / "posenc-script"
    script.write_text("import sys\nfrom posenc.cli import main\n\n"
                      "if __name__ == '__main__':\n    sys.exit(main())\n")  # fmt: skip
    head = [sys.executable, *(["-m", "posenc"] if launch == "module" else [str(script)])]
    cmd = [*head, "arena", "--tasks", "copy", "--encodings", "nope,rope", "--seeds", "1",
           "--steps", "100000", "--fixed-steps", "--workers", "2", "--db",
           str(tmp_path / "a.sqlite"), "--out", str(tmp_path / "o")]  # fmt: skip
    early = 0  # attempts killed before a worker had torch loaded (a poll can come too late)
    for attempt in range(3):
        run = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline, workers = time.time() + 180, set()
            while time.time() < deadline and len(workers) < 2 and run.poll() is None:
                time.sleep(0.05)
                workers = spawned(run.pid)
            assert len(workers) == 2, "the workers never started"
            everyone = children(run.pid)
            loaded = any(has_torch(p) for p in workers)
            os.kill(run.pid, signal.SIGKILL)
            killed = time.time()
            run.wait(timeout=10)
            while alive(everyone) and time.time() < killed + 30:
                time.sleep(0.05)
            gone = time.time() - killed
            print(f"{launch} #{attempt}: torch loaded {loaded}; the last of {len(everyone)} "
                  f"processes ended {gone:.2f} s after the kill")  # fmt: skip
            assert not alive(everyone) and gone < 2.0, f"{alive(everyone)} lived {gone:.1f} s"
        finally:
            end(run, workers)
        early += not loaded
        if early:
            break
    assert early, "every kill came after the workers had loaded torch"
