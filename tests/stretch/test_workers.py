"""`posenc stretch` on worker processes and on a local Ray (in a network namespace with only
loopback up): the same rows as one process."""

import os
import shutil
import sqlite3
import subprocess
import sys

import pytest

from posenc.cli import main

GRID = ["--scalings", "none,yarn,dynamic", "--lengths", "64,256", "--retrieval-lengths", "256",
        "--tasks", "ppl,passkey", "--docs", "1", "--depths", "0.5", "--seeds", "1"]  # fmt: skip


def values(db) -> dict:
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT task, encoding, seed, eval_len, metric, value FROM results")
        return {r[:5]: r[5] for r in rows}


@pytest.fixture(scope="module")
def one_process(tiny_lm_folder, tmp_path_factory):
    d = tmp_path_factory.mktemp("one")
    args = ["stretch", "--model", tiny_lm_folder, *GRID, "--db", str(d / "a.sqlite")]
    assert main([*args, "--out", str(d / "o")]) == 0
    return values(d / "a.sqlite")


def same(got: dict, want: dict) -> None:
    assert got.keys() == want.keys()
    for k, v in want.items():
        assert got[k] == pytest.approx(v, rel=1e-5, abs=1e-6), k


def test_worker_processes_give_the_same_rows(tiny_lm_folder, tmp_path, one_process):
    db = tmp_path / "w.sqlite"
    args = ["stretch", "--model", tiny_lm_folder, *GRID, "--workers", "2"]
    assert main([*args, "--db", str(db), "--out", str(tmp_path / "o")]) == 0
    same(values(db), one_process)


def test_a_local_ray_gives_the_same_rows(tiny_lm_folder, tmp_path, one_process):
    pytest.importorskip("ray")
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        pytest.skip("needs unshare and ip to keep Ray on loopback")
    db = tmp_path / "r.sqlite"
    cmd = [sys.executable, "-m", "posenc", "stretch", "--model", tiny_lm_folder, *GRID,
           "--db", str(db), "--out", str(tmp_path / "o"), "--ray"]  # fmt: skip
    script = "ip link set lo up && exec " + " ".join(f"'{c}'" for c in cmd)
    ns = ["unshare", "--net", "--pid", "--fork", "--mount-proc", "--kill-child", "sh", "-c"]
    home = tmp_path / "home"  # Ray keeps an auth token in ~/.ray: none of the machine's
    home.mkdir()
    env = dict(os.environ, HOME=str(home))
    proc = subprocess.run([*ns, script], capture_output=True, text=True, timeout=600, env=env)
    if (
        proc.returncode != 0
        and "unshare" in proc.stderr
        and "Operation not permitted" in proc.stderr
    ):
        pytest.skip("network namespaces are not permitted here")
    assert proc.returncode == 0, proc.stderr[-2000:]
    same(values(db), one_process)
