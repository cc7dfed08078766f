#!/usr/bin/env bash
# The speed-up in docs/arena/cluster.md: the same grid with --workers 1, then on a local Ray
# cluster of two single-CPU nodes (head + one worker), inside a network namespace with only
# loopback (so Ray binds 127.0.0.1) and a PID namespace (so everything it started ends with it).
# Run as root from the repository root:  bash docs/arena/cluster/speedup.sh OUTDIR
set -euo pipefail
OUT=${1:-/tmp/arena-speedup}
rm -rf "$OUT" && mkdir -p "$OUT"
GRID="--tasks copy --encodings nope,alibi,rope,sinusoidal --seeds 2 --steps 1000"
{ time posenc arena $GRID --workers 1 --db "$OUT/local.sqlite" --out "$OUT/local"; } 2> "$OUT/local.log"
{ time posenc arena $GRID --workers 2 --db "$OUT/local2.sqlite" --out "$OUT/local2"; } 2> "$OUT/local2.log"
unshare --net --pid --fork --mount-proc --kill-child bash -c "
  set -e; ip link set lo up
  export RAY_USAGE_STATS_ENABLED=0 RAY_worker_niceness=0 HOME=$OUT/home  # a fresh ~/.ray
  mkdir -p \$HOME
  ray start --head --port=6390 --num-cpus=1 --node-ip-address=127.0.0.1 --include-dashboard=false --disable-usage-stats > /dev/null
  ray start --address=127.0.0.1:6390 --num-cpus=1 --node-ip-address=127.0.0.1 --disable-usage-stats > /dev/null
  { time posenc arena $GRID --ray 127.0.0.1:6390 --db $OUT/ray.sqlite --out $OUT/ray; } 2> $OUT/ray.log
  ray stop --force > /dev/null
"
python - "$OUT" <<'PY'
import re, sqlite3, sys
out = sys.argv[1]
q = "SELECT task, encoding, seed, train_len, eval_len, metric, value FROM results ORDER BY 1,2,3,4,5,6"
runs = ("local", "local2", "ray")
rows = {n: sqlite3.connect(f"{out}/{n}.sqlite").execute(q).fetchall() for n in runs}
t = {n: re.search(r"real\s+(\d+)m([\d.]+)s", open(f"{out}/{n}.log").read()) for n in runs}
s = {n: 60 * int(m[1]) + float(m[2]) for n, m in t.items()}
print(f"rows equal: {rows['local'] == rows['local2'] == rows['ray']} ({len(rows['local'])} rows); "
      f"--workers 1: {s['local']:.1f} s; --workers 2: {s['local2']:.1f} s "
      f"(x{s['local'] / s['local2']:.2f}); Ray, 2 single-CPU nodes: {s['ray']:.1f} s "
      f"(x{s['local'] / s['ray']:.2f})")
PY
