"""A run killed with SIGKILL leaves no process behind: its `--workers` processes end with it
(however it ends), and its leases are stale, to be taken over at once by a rerun."""

import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from posenc.arena.runner import stale

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads /proc")


def children(pid: int) -> set[int]:
    """Every live descendant of `pid` (zombies count as gone)."""
    parent = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rpartition(")")[2].split()
            except OSError:
                continue
            if fields[0] != "Z":
                parent[int(entry)] = int(fields[1])
    out, todo = set(), [pid]
    while todo:
        p = todo.pop()
        kids = [c for c, pp in parent.items() if pp == p]
        out.update(kids)
        todo += kids
    return out


def comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


def alive(pids) -> set[int]:
    live = set()
    for p in pids:
        try:
            with open(f"/proc/{p}/stat") as f:
                if f.read().rpartition(")")[2].split()[0] != "Z":
                    live.add(p)
        except OSError:
            pass
    return live


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
        for p in alive(children(run.pid)) | ({run.pid} if run.poll() is None else set()):
            os.kill(p, signal.SIGKILL)
    with sqlite3.connect(db) as conn:
        owners = {r[0] for r in conn.execute("SELECT owner FROM leases")}
    assert owners and all(stale(o) for o in owners)  # a rerun takes them over at once
