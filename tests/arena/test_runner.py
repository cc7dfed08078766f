"""The arena's grid and its execution: every default label builds and runs at its task's
sizes; --workers 2 equals --workers 1 row for row; a worker killed mid-cell loses nothing; two
runs on one database share the work."""

import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from posenc.arena.backbones import build_model
from posenc.arena.cells import make_cells, model_kwargs, rope_scaling
from posenc.arena.config import TASK_DEFAULTS, ArenaConfig, split_label, task_config
from posenc.arena.corpus import Corpus
from posenc.arena.drope import dropped_kwargs
from posenc.arena.report import MODEL_METRICS
from posenc.arena.runner import run
from posenc.arena.store import Store
from posenc.arena.tasks import TASK_NAMES, build_task

TINY_CORPUS = Corpus(
    name="tiny", train=np.arange(4096) % 251, valid=np.arange(4096) % 241, files=0, digest="0"
)


@pytest.mark.parametrize("task_name", TASK_NAMES)
def test_every_default_label_builds_and_runs_at_the_task_sizes(task_name):
    cfg = ArenaConfig(dim=16, heads=2, depth=1, backbones=("posenc", "hf-llama"))
    tc = task_config(cfg, task_name)
    task = build_task(task_name, corpus=TINY_CORPUS)
    rng = np.random.default_rng(0)
    for label in tc.encodings:  # every default label, on both backbones where it runs there
        base, variant = split_label(label)
        kwargs = model_kwargs(task, base, tc)
        if variant == "drope":  # the trained model with its encoding dropped (test_drope)
            kwargs = dropped_kwargs(kwargs)
        elif variant:
            toks = [task.tokens(e) for e in tc.eval_lens]
            scaling = rope_scaling(variant, task.tokens(tc.train_len), toks, 8)
            kwargs["encoding_kwargs"] = dict(kwargs["encoding_kwargs"], scaling=scaling)
        model = build_model(kwargs).eval()
        for size in (tc.train_len, max(tc.eval_lens)):
            if base == "learned" and size > tc.train_len:
                continue  # an n/a row by design (tested end to end)
            batch = task.sample_batch(rng, 2, size)
            with torch.no_grad():
                logits = model(batch.inputs)
            T = task.tokens(size)
            assert logits.shape == (2, T, task.vocab_size), (label, size)
            assert torch.isfinite(logits).all(), (label, size)


def test_lengths_are_in_the_task_units():
    cfg = ArenaConfig()
    copy, add = task_config(cfg, "copy"), task_config(cfg, "addition")
    assert copy.eval_lens == tuple(range(1, 2 * copy.train_len + 1))  # every size 1..2L
    assert add.eval_lens == tuple(range(1, 2 * add.train_len + 1))  # digits
    assert task_config(cfg, "lm").eval_lens[0] == task_config(cfg, "lm").train_len
    cells = make_cells([copy], {"copy": build_task("copy")})
    assert len(cells) == cfg.seeds * len(TASK_DEFAULTS["copy"]["encodings"])
    learned = model_kwargs(build_task("copy"), "learned", copy)
    assert learned["train_len"] == 2 * copy.train_len  # tokens of the largest instance


def tiny_cfg(db, out, workers, **kw):
    return ArenaConfig(
        tasks=["copy"], encodings=["nope", "alibi", "rope", "rope+ntk"], seeds=2, steps=40,
        train_len=3, dim=16, depth=1, heads=2, batch_size=8, eval_samples=16, db=db, out=out,
        workers=workers, checkpoint_seconds=0.0, **kw,
    )  # fmt: skip


def evaluated(found):
    """The evaluation rows of rows(): without the rows about each model's training."""
    return [r for r in found if not r[5].startswith(MODEL_METRICS)]


def rows(db):
    with sqlite3.connect(db) as conn:
        return sorted(conn.execute(
            "SELECT task, encoding, seed, train_len, eval_len, metric, value, status, reason, "
            "config_hash FROM results").fetchall())  # fmt: skip


def run_cfg(cfg):
    tasks = {"copy": build_task("copy")}
    with Store(cfg.db) as store:
        return run(cfg, tasks, store)


def test_two_workers_equal_one_worker_row_for_row(tmp_path):
    one = tiny_cfg(str(tmp_path / "one.sqlite"), str(tmp_path / "one"), 1)
    two = tiny_cfg(str(tmp_path / "two.sqlite"), str(tmp_path / "two"), 2)
    assert run_cfg(one) == run_cfg(two) > 0
    a, b = rows(one.db), rows(two.db)
    assert a == b and len(evaluated(a)) == 2 * 4 * 6 * 2  # seeds x labels x sizes x metrics


def test_a_killed_worker_loses_nothing(tmp_path):
    """SIGKILL one worker process mid-run: its group is redone in a fresh pool; every row is
    written exactly once and equals an uninterrupted run."""
    ref = tiny_cfg(
        str(tmp_path / "ref.sqlite"),
        str(tmp_path / "ref"),
        1,
    )
    run_cfg(ref)
    cfg = tiny_cfg(str(tmp_path / "k.sqlite"), str(tmp_path / "k"), 2)
    cfg.steps = ref.steps  # same cells
    killed = []

    def killer():
        deadline = time.time() + 120
        while time.time() < deadline and not killed:
            for pid in worker_pids():
                if glob_train_ckpts(cfg.out):  # a worker is mid-training
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
                    return
            time.sleep(0.05)

    t = threading.Thread(target=killer, daemon=True)
    t.start()
    run_cfg(cfg)
    t.join(timeout=5)
    assert killed, "no worker was killed (the run ended first)"
    assert rows(cfg.db) == rows(ref.db)


def worker_pids() -> list[int]:
    me = os.getpid()
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                stat = Path(f"/proc/{d}/stat").read_text().split()
                cmd = Path(f"/proc/{d}/cmdline").read_text()
            except OSError:
                continue
            if int(stat[3]) == me and "spawn_main" in cmd:
                out.append(int(d))
    return out


def glob_train_ckpts(out: str) -> list[str]:
    models = os.path.join(out, "models")
    return [f for f in os.listdir(models) if f.endswith(".train.ckpt")] if os.path.isdir(
        models) else []  # fmt: skip


SHARE = """
import sys
from posenc.arena.tasks import build_task
from posenc.arena.runner import run
from posenc.arena.report import MODEL_METRICS
from posenc.arena.store import Store
from posenc.arena.config import ArenaConfig
cfg = ArenaConfig(
    tasks=["copy"], encodings=["nope", "alibi", "rope", "rope+ntk"], seeds=2, steps=40,
    train_len=3, dim=16, depth=1, heads=2, batch_size=8, eval_samples=16, db=sys.argv[1],
    out=sys.argv[2], workers=1, checkpoint_seconds=0.0,
)
with Store(cfg.db) as store:
    print(run(cfg, {"copy": build_task("copy")}, store))
"""


def test_two_runs_on_one_database_share_the_work(tmp_path):
    """Two processes started together on the same database: every row once, equal to one run,
    and the rows written add up (nothing computed twice and thrown away)."""
    ref = tiny_cfg(str(tmp_path / "ref.sqlite"), str(tmp_path / "ref"), 1)
    run_cfg(ref)
    db, out = str(tmp_path / "s.sqlite"), str(tmp_path / "s")
    env = dict(os.environ, OMP_NUM_THREADS="1")
    procs = [subprocess.Popen([sys.executable, "-c", SHARE, db, out], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]  # fmt: skip
    try:
        outs = [p.communicate(timeout=300) for p in procs]
    finally:  # never leave a run behind
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert all(p.returncode == 0 for p in procs), outs
    assert rows(db) == rows(ref.db)
    written = [int(o.strip().splitlines()[-1]) for o, _ in outs]
    assert sum(written) == len(rows(ref.db)) and min(written) > 0, written  # both worked


def test_a_cell_that_raises_is_recorded_and_the_grid_goes_on(tmp_path, monkeypatch):
    """One label's training raises: every other cell is written, the failure is recorded in
    the database with its error, the run reports it (RuntimeError), and a rerun redoes it."""
    from posenc.arena import workers

    real = workers.train

    def flaky(cell, *args, **kwargs):
        if cell.label == "alibi" and cell.seed == 1:
            raise FloatingPointError("loss became NaN")
        return real(cell, *args, **kwargs)

    cfg = tiny_cfg(str(tmp_path / "f.sqlite"), str(tmp_path / "f"), 1)
    monkeypatch.setattr(workers, "train", flaky)
    with pytest.raises(RuntimeError, match="1 group"):
        run_cfg(cfg)
    with Store(cfg.db) as store:
        assert store.failures() == [("copy", "alibi", 1, 3, "FloatingPointError: loss became NaN")]
    done = rows(cfg.db)
    assert len(evaluated(done)) == 2 * 4 * 6 * 2 - 6 * 2 and not any(
        r[1] == "alibi" and r[2] == 1 for r in done
    )
    monkeypatch.setattr(workers, "train", real)
    # the rerun does only the failed cell: its evaluations, steps, learned and the check at 40
    assert run_cfg(cfg) == 6 * 2 + 3
