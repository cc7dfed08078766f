"""A two-node Ray cluster on loopback for the arena's cluster tests.

Run as `unshare --net --pid --fork --mount-proc --kill-child python ray_cluster.py WORKDIR`: in
a network namespace with only loopback up (no packet leaves it) and a PID namespace whose init
is this script (when it ends, or unshare is killed, the kernel ends every process the cluster
started). It starts a head and one worker node
(one CPU each, --node-ip-address=127.0.0.1), then runs three scenarios with the grid of
DRIVER, each writing WORKDIR/<name>.sqlite:

  plain   the grid on the cluster
  node    the worker node's processes killed (SIGKILL) once the first cell is written
  driver  the driver killed once the first cell is written (its tasks must end with it: Ray
          kills a dead driver's job), then run again

and writes WORKDIR/report.json (what was killed, return codes). Every wait is bounded.
"""

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

HEAD_PORT, WORKER_NM_PORT = 6390, 6391
RAY = [sys.executable, "-m", "ray.scripts.scripts"]  # this Python's Ray, not the first on PATH
ADDRESS = f"127.0.0.1:{HEAD_PORT}"
DRIVER = """
import sys
from posenc.arena.config import ArenaConfig
from posenc.arena.runner import run
from posenc.arena.store import Store
from posenc.arena.tasks import build_task
cfg = ArenaConfig(
    tasks=["copy"], encodings=["nope", "alibi", "rope", "rope+ntk"], seeds=2,
    steps=int(sys.argv[3]), train_len=3, dim=16, depth=1, heads=2, batch_size=8,
    eval_samples=16, db=sys.argv[1], out=sys.argv[2], checkpoint_seconds=0.0,
    ray=sys.argv[4] if len(sys.argv) > 4 else None,
)
with Store(cfg.db) as store:
    print(run(cfg, {"copy": build_task("copy")}, store))
"""


def sh(*cmd: str, timeout: float = 120) -> None:
    subprocess.run(cmd, check=True, timeout=timeout, stdout=subprocess.DEVNULL)


def rows(db: str) -> int:
    try:
        with sqlite3.connect(db) as conn:
            return conn.execute("SELECT COUNT(*) FROM results").fetchone()[0]
    except sqlite3.OperationalError:
        return 0


def driver(work: str, name: str, steps: int) -> subprocess.Popen:
    db, out = os.path.join(work, f"{name}.sqlite"), os.path.join(work, name)
    log = open(os.path.join(work, f"{name}.log"), "a")  # noqa: SIM115 - closed with the process
    return subprocess.Popen([sys.executable, "-c", DRIVER, db, out, str(steps), ADDRESS],
                            stdout=log, stderr=subprocess.STDOUT)  # fmt: skip


def wait_for(ready, p: subprocess.Popen, deadline: float) -> bool:
    """Until ready() (the driver still alive)."""
    while time.time() < deadline and p.poll() is None:
        if ready():
            return True
        time.sleep(0.02)
    return False


def node_pids() -> list[int]:
    """The worker node: its raylet (found by its node-manager port) and all its descendants."""
    procs = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                cmd = Path(f"/proc/{d}/cmdline").read_bytes().replace(b"\0", b" ").decode()
                ppid = int(Path(f"/proc/{d}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            procs[int(d)] = (ppid, cmd)
    found = [p for p, (_, cmd) in procs.items()
             if "raylet" in cmd and f"--node_manager_port={WORKER_NM_PORT}" in cmd]  # fmt: skip
    i = 0
    while i < len(found):
        found += [p for p, (pp, _) in procs.items() if pp == found[i] and p not in found]
        i += 1
    return found


def arena_tasks() -> set[int]:
    """The live processes running an arena task (Ray titles them ray::run_on_node)."""
    out = set()
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                state = Path(f"/proc/{d}/stat").read_text().rsplit(")", 1)[1].split()[0]
                if state != "Z" and b"run_on_node" in Path(f"/proc/{d}/cmdline").read_bytes():
                    out.add(int(d))
            except (OSError, IndexError):
                continue
    return out


def seconds_until_no_task(timeout: float = 30.0) -> float | None:
    t0 = time.time()
    while time.time() < t0 + timeout:
        if not arena_tasks():
            return round(time.time() - t0, 2)
        time.sleep(0.1)
    return None


def main(work: str) -> None:
    sh("ip", "link", "set", "lo", "up")
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    os.environ["RAY_worker_niceness"] = "0"  # noqa: SIM112 - Ray's name; its 15 starves cells
    common = ["--node-ip-address=127.0.0.1", "--num-cpus=1", "--disable-usage-stats"]
    sh(*RAY, "start", "--head", f"--port={HEAD_PORT}", "--include-dashboard=false", *common)
    sh(*RAY, "start", f"--address={ADDRESS}", f"--node-manager-port={WORKER_NM_PORT}", *common)
    report = {}
    try:
        p = driver(work, "plain", 40)
        report["plain"] = p.wait(timeout=300)

        p = driver(work, "node", 300)
        wait_for(lambda: rows(os.path.join(work, "node.sqlite")) > 0, p, time.time() + 120)
        victims = node_pids()
        for pid in victims:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        report["node_killed"] = len(victims)
        report["node"] = p.wait(timeout=300)

        p = driver(work, "driver", 300)
        # killed mid-run, while a task runs (between two cells none may)
        db = os.path.join(work, "driver.sqlite")
        started = wait_for(lambda: rows(db) > 0, p, time.time() + 120) and wait_for(
            arena_tasks, p, time.time() + 60
        )
        report["driver_rows_at_kill"] = rows(db) if started else 0
        report["driver_tasks_at_kill"] = len(arena_tasks())
        p.kill()
        p.wait(timeout=30)
        report["driver_tasks_gone_s"] = seconds_until_no_task()  # Ray ends a dead driver's job
        report["driver"] = driver(work, "driver", 300).wait(timeout=300)
    finally:
        with open(os.path.join(work, "report.json"), "w") as f:
            json.dump(report, f)
        subprocess.run([*RAY, "stop", "--force"], timeout=60, capture_output=True)


if __name__ == "__main__":
    main(sys.argv[1])
