"""The arena on a Ray cluster: without Ray, --ray prints the install hint; on a two-node cluster
on loopback (tests/support/ray_cluster.py, in its own network and PID namespaces) a grid equals
the local run row for row, also when the worker node is killed mid-run and when the driver is
killed (its tasks end with it) and run again."""

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from posenc.arena.config import ArenaConfig
from posenc.arena.report import MODEL_METRICS
from posenc.arena.runner import run
from posenc.arena.store import Store
from posenc.arena.tasks import build_task

SUPPORT = Path(__file__).resolve().parents[1] / "support"
NAMESPACES = ["unshare", "--net", "--pid", "--fork", "--mount-proc", "--kill-child"]


def test_without_ray_the_flag_prints_the_install_hint(tmp_path):
    fake = tmp_path / "noray" / "ray"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('No module named ray')\n")
    path = os.pathsep.join(filter(None, [str(fake.parent), os.environ.get("PYTHONPATH")]))
    env = dict(os.environ, PYTHONPATH=path)
    db = tmp_path / "a.sqlite"
    p = subprocess.run(
        [sys.executable, "-m", "posenc.cli", "arena", "--tasks", "copy", "--ray", "--db", str(db)],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert p.returncode == 2, p.stderr
    assert p.stderr.strip().count("\n") == 0, p.stderr  # one line, no traceback
    assert "pip install 'posenc[ray]'" in p.stderr
    assert not db.exists()  # nothing ran


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--cpus-per-cell", "2"], "need --ray"),
        (["--gpus-per-cell", "1"], "need --ray"),
        (["--ray", "--gpus-per-cell", "-1"], "--gpus-per-cell: must be a finite number >= 0"),
        (["--ray", "--gpus-per-cell", "inf"], "--gpus-per-cell: must be a finite number >= 0"),
        (["--ray", "--cpus-per-cell", "0"], "argument --cpus-per-cell: must be an integer >= 1"),
        (["--ray", "--gpus-per-cell", "1"], "needs --device cuda"),
        (["--ray", " "], "--ray"),  # an empty value: refused by the parser, one line
    ],
)
def test_cluster_flags_are_checked_before_anything_runs(flags, message, tmp_path, capsys):
    from posenc.arena.cli import main

    pytest.importorskip("ray", reason="the checks after --ray need ray importable")
    db = tmp_path / "a.sqlite"
    try:
        code = main(["--tasks", "copy", "--db", str(db), *flags])
    except SystemExit as exit_:  # argparse's own refusal
        code = exit_.code
    assert code == 2
    err = capsys.readouterr().err
    assert message in err and err.strip().count("\n") == 0
    assert not db.exists()


def rows(db):
    with sqlite3.connect(db) as conn:
        return sorted(conn.execute(
            "SELECT task, encoding, seed, train_len, eval_len, metric, value, status, reason, "
            "config_hash FROM results").fetchall())  # fmt: skip


def local_rows(tmp_path, steps: int):
    """The grid of ray_cluster.DRIVER, run here with one worker."""
    db = str(tmp_path / f"local{steps}.sqlite")
    cfg = ArenaConfig(
        tasks=["copy"], encodings=["nope", "alibi", "rope", "rope+ntk"], seeds=2, steps=steps,
        train_len=3, dim=16, depth=1, heads=2, batch_size=8, eval_samples=16, db=db,
        out=str(tmp_path / f"local{steps}"), checkpoint_seconds=0.0, workers=1,
    )  # fmt: skip
    with Store(db) as store:
        run(cfg, {"copy": build_task("copy")}, store)
    return rows(db)


def namespaces_work() -> bool:
    try:
        p = subprocess.run([*NAMESPACES, "true"], capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return p.returncode == 0


@pytest.mark.slow
def test_a_grid_on_a_two_node_cluster_equals_the_local_run_through_kills(tmp_path):
    pytest.importorskip("ray", reason="pip install 'posenc[ray]'")
    if not namespaces_work():
        pytest.skip("needs network and PID namespaces (unshare, as root) to keep Ray on loopback")
    work = tmp_path / "cluster"
    work.mkdir()
    home = tmp_path / "home"  # Ray keeps an auth token in ~/.ray: none of the machine's
    home.mkdir()
    env = dict(os.environ, HOME=str(home))
    p = subprocess.run([*NAMESPACES, sys.executable, str(SUPPORT / "ray_cluster.py"), str(work)],
                       env=env, capture_output=True, text=True, timeout=900)  # fmt: skip
    report = json.loads((work / "report.json").read_text())
    assert p.returncode == 0, p.stderr[-3000:]
    assert report["plain"] == report["node"] == report["driver"] == 0, report
    assert report["node_killed"] > 0, report  # the worker node's raylet and workers were killed
    short, long = local_rows(tmp_path, 40), local_rows(tmp_path, 300)
    evaluated = [r for r in short if not r[5].startswith(MODEL_METRICS)]  # + training records
    assert rows(work / "plain.sqlite") == short and len(evaluated) == 2 * 4 * 6 * 2
    assert rows(work / "node.sqlite") == long  # nothing lost or doubled
    assert 0 < report["driver_rows_at_kill"] < len(long), report  # killed mid-run
    assert report["driver_tasks_at_kill"] > 0, report  # its tasks were running: they end with it
    assert report["driver_tasks_gone_s"] is not None and report["driver_tasks_gone_s"] < 10, report
    assert rows(work / "driver.sqlite") == long
