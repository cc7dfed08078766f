"""Seed 002's extrapolation claims against an arena results database (read through Store)."""

from __future__ import annotations

from pathlib import Path

import pytest

from posenc.arena.store import Row, Store
from posenc.explain import claims as C
from posenc.explain.claims import seed002


def make_arena(path: Path, sinusoidal_long: float) -> Path:
    with Store(str(path)) as store:
        for seed in (0, 1):
            rows = [
                Row("copy", "sinusoidal", seed, 32, 32, "accuracy", 0.98),
                Row("copy", "sinusoidal", seed, 32, 64, "accuracy", sinusoidal_long),
                Row("copy", "learned", seed, 32, 32, "accuracy", 0.99),
                Row("copy", "learned", seed, 32, 64, "accuracy", None, "n/a", "past max_len"),
            ]
            store.write_cell(
                rows,
                config={},
                config_hash="test",
                wall_time=0.0,
                posenc_version="test",
                torch_version="test",
            )
    return path


def test_arena_claims(tmp_path):
    db = make_arena(tmp_path / "a.db", sinusoidal_long=0.31)
    sin = seed002.claim_002_sinusoidal_extrapolates(32, 64, arena=db)
    learned = seed002.claim_002_learned_cannot(32, 64, arena=db)
    assert sin.verdict == C.FAILS and "0.98 at 32 -> 0.31" in sin.result
    assert learned.verdict == C.HOLDS and "past max_len" in learned.result
    db2 = make_arena(tmp_path / "b.db", sinusoidal_long=0.97)
    assert seed002.claim_002_sinusoidal_extrapolates(32, 64, arena=db2).verdict == C.HOLDS
    with pytest.raises(FileNotFoundError, match="--arena"):
        seed002.claim_002_learned_cannot(32, 64, arena=tmp_path / "missing.db")


def test_not_an_arena_database(tmp_path):
    bad = tmp_path / "bad.db"
    bad.write_text("not sqlite")
    with pytest.raises(ValueError, match="not an arena results database"):
        C.check_all(dim=32, max_pos=64, arena=bad)


def test_extrapolation_direction_and_unlearned_tasks():
    def rows(task, metric, at_l, far):
        return [
            dict(task=task, train_len=16, eval_len=E, metric=metric, value=v, status="ok",
                 reason="", seeds=2)
            for E, v in ((16, at_l), (128, far))
        ]  # fmt: skip

    checks = {
        label.split(",")[0] + "/" + label.split(", ")[2].split(" at")[0]: ok
        for label, ok, _ in C.extrapolates(
            rows("copy", "token_accuracy", 0.52, 0.15)  # accuracy falls: does not
            + rows("sort", "accuracy", 0.30, 0.0)  # not learned at L: not counted
            + rows("reverse", "accuracy", 0.90, 0.85)  # within 25%: extrapolates
            + rows("lm", "ppl", 6.85, 20.7)  # perplexity rises x3: does not
            + rows("lm", "loss@0-16", 1.9, 1.9)  # per-position bands: left to the arena
        )
    }
    assert checks == {
        "copy/token_accuracy": False,
        "sort/accuracy": None,
        "reverse/accuracy": True,
        "lm/ppl": False,
    }
