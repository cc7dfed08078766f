"""posenc.arena.evaluate.trained_rows: the learning curve and a learned table's statistics,
written once per trained model beside its evaluation rows."""

from __future__ import annotations

import sqlite3

import pytest

from posenc.arena.cli import main
from posenc.arena.config import BAR


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("arena")
    db = str(tmp / "a.sqlite")
    labels = "learned(max_len=64),sinusoidal(learned_scale=true),lstm:nope,rope,rope+yarn"
    argv = ["--tasks", "copy", "--encodings", labels, "--seeds", "1", "--steps", "16",
            "--train-len", "4", "--eval-lens", "4,5", "--workers", "1", "--db", db,
            "--out", str(tmp / "o")]  # fmt: skip
    assert main(argv) == 0
    with sqlite3.connect(db) as conn:
        found = conn.execute("SELECT encoding, eval_len, metric, value FROM results").fetchall()
    return {(e, m): (n, v) for e, n, m, v in found}


def test_every_trained_model_has_its_training_record(rows):
    """copy trains to the bar: the steps taken (the cap, 16, at this size), learned or not, and
    the check at the cap; at eval_len = train_len, once per trained model."""
    for label in ("learned(max_len=64)", "sinusoidal(learned_scale=true)", "lstm:nope", "rope"):
        assert rows[label, "steps"] == (4, 16.0), label
        assert rows[label, "learned"] in ((4, 0.0), (4, 1.0)), label
        n, v = rows[label, "valid@16"]
        assert n == 4 and 0.0 <= v <= 1.0 and (v >= BAR) == rows[label, "learned"][1]
    assert not any(m.startswith(("steps", "valid@")) for e, m in rows if e == "rope+yarn")


def test_learned_table_statistics(rows):
    """Rows past copy's 2 x 4 + 2 tokens get no gradient: they keep their init exactly."""
    label = "learned(max_len=64)"
    assert rows[label, "table_drift@unseen"][1] == 0.0
    assert rows[label, "table_drift@seen"][1] > 0
    for m in ("table_jump", "table_periodicity"):
        assert rows[label, m][1] > 0 and rows[label, f"{m}@init"][1] > 0
    assert not any(m.startswith("table") for e, m in rows if e != label)


def test_learned_scale_is_recorded(rows):
    s = rows["sinusoidal(learned_scale=true)", "encoding_scale"][1]
    assert s != 1.0 and abs(s - 1.0) < 0.5  # it moved from its init in 16 steps
