"""The arena's results read for the seeds' claims (posenc.explain.claims.arena)."""

from __future__ import annotations

import pytest

from posenc.explain import claims as C


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
