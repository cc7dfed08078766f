"""Training checkpoints: a truncated, corrupt or foreign checkpoint is reported and the cell
trained again from scratch, to the same rows as a clean run (never a torch traceback)."""

import os
import pickle
import sqlite3
from pathlib import Path

import pytest

from posenc.arena.config import ArenaConfig
from posenc.arena.runner import run
from posenc.arena.store import Store
from posenc.arena.tasks import build_task


def cfg_at(tmp_path, name):
    return ArenaConfig(
        tasks=["copy"], encodings=["alibi", "rope"], seeds=1, steps=30, train_len=3, dim=16,
        depth=1, heads=2, batch_size=8, eval_samples=16, db=str(tmp_path / f"{name}.sqlite"),
        out=str(tmp_path / name), workers=1, checkpoint_seconds=0.0,
    )  # fmt: skip


def run_rows(cfg):
    with Store(cfg.db) as store:
        run(cfg, {"copy": build_task("copy")}, store)
    with sqlite3.connect(cfg.db) as conn:
        return sorted(conn.execute(
            "SELECT encoding, eval_len, metric, value FROM results").fetchall())  # fmt: skip


@pytest.mark.parametrize("damage", ["truncated", "garbage", "not-a-dict", "empty"])
def test_a_damaged_checkpoint_is_reported_and_trained_again(tmp_path, capsys, damage):
    ref = cfg_at(tmp_path, "ref")
    want = run_rows(ref)
    models = os.path.join(ref.out, "models")
    finals = sorted(f for f in os.listdir(models) if f.endswith(".ckpt"))
    assert len(finals) == 2
    cfg = cfg_at(tmp_path, "damaged")
    os.makedirs(os.path.join(cfg.out, "models"))
    data = Path(models, finals[0]).read_bytes()
    content = {
        "truncated": data[: len(data) // 2],
        "garbage": os.urandom(256),
        "not-a-dict": pickle.dumps(7),
        "empty": b"",
    }[damage]
    for f in finals:  # the finished model and the training state of every cell
        for name in (f, f[: -len(".ckpt")] + ".train.ckpt"):
            Path(cfg.out, "models", name).write_bytes(content)
    capsys.readouterr()
    assert run_rows(cfg) == want
    err = capsys.readouterr().err
    assert err.count("unreadable") == 4 and "training from scratch" in err, err
