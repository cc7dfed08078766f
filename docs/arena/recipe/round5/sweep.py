"""Round 5: the stop's margin and randomized sinusoidal's copy, swept in parallel (3 seeds per
config, one process per model). Run on the device machine's 16 CPU cores (no GPU used):
    PYTHONPATH=src python docs/arena/recipe/round5/sweep.py OUTDIR DEADLINE_S
Writes OUTDIR/round5.jsonl (per model: steps, learned, exact match at L on the evaluation's
instances, the validation curve) as the configs finish or at the deadline."""

import json
import os
import sqlite3
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
RSIN = "randomized:sinusoidal"
CONFIGS = {  # name -> (task, encoding, recipe overrides, environment)
    "rsin_lr1e-3_decay15000": ("copy", RSIN, {"decay": 15000}, {}),
    "rsin_lr5e-4": ("copy", RSIN, {"lr": 5e-4}, {}),
    "rsin_rows": ("copy", RSIN, {}, {"R5_ROWS": "1"}),
    "rrope_rows_reverse": ("reverse", "randomized:rope", {}, {"R5_ROWS": "1"}),
    "nope_reverse": ("reverse", "nope", {}, {}),
}
ONE = """
import sys, json
from posenc.arena import runner
from posenc.arena.cli import load_tasks
from posenc.arena.config import ArenaConfig
from posenc.arena.store import Store
task, enc, over, db = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), sys.argv[4]
cfg = ArenaConfig(tasks=[task], encodings=[enc], seeds=3, workers=3, db=db, out=db + ".out",
                  overrides={task: over})
with Store(db) as store:
    runner.run(cfg, load_tasks(cfg), store)
"""


def summary(name, db, logs):
    task, enc, over, env = CONFIGS[name]
    rows = []
    if os.path.exists(db):
        con = sqlite3.connect(db)
        got = {}
        for seed, metric, L, n, v in con.execute(
            "select seed, metric, train_len, eval_len, value from results"
        ):
            if metric in ("steps", "learned") or (metric == "accuracy" and n == L):
                got.setdefault(seed, {})[metric] = v
        rows = [{"seed": s, **m} for s, m in sorted(got.items())]
    curves = []
    for f in sorted(os.listdir(logs)):
        if f.startswith(name + "."):
            curves.append([float(x) for x in open(os.path.join(logs, f)).read().split()])
    return {"config": name, "task": task, "encoding": enc, "overrides": over, "env": env,
            "models": rows, "curves": curves}  # fmt: skip


def main(out, deadline):
    logs = os.path.join(out, "logs")
    os.makedirs(logs, exist_ok=True)
    procs = {}
    for name, (task, enc, over, env) in CONFIGS.items():
        e = dict(os.environ, R5_CONFIG=name, R5_LOGS=logs, OMP_NUM_THREADS="1", **env)
        e["PYTHONPATH"] = os.path.join(HERE, "site") + os.pathsep + e.get("PYTHONPATH", "")
        db = f"/tmp/r5_{name}.sqlite"
        log = open(os.path.join(out, f"{name}.log"), "w")
        procs[name] = (subprocess.Popen([sys.executable, "-c", ONE, task, enc, json.dumps(over),
                                         db], env=e, stdout=log, stderr=log), db)  # fmt: skip
    t0 = time.time()
    while time.time() - t0 < deadline and any(p.poll() is None for p, _ in procs.values()):
        time.sleep(5)
    for p, _ in procs.values():
        p.kill()
    with open(os.path.join(out, "round5.jsonl"), "w") as f:
        for name, (p, db) in procs.items():
            f.write(json.dumps(summary(name, db, logs) | {"rc": p.returncode}) + "\n")
    print(f"round 5: {time.time() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]))
