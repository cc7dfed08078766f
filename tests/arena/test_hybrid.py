"""The hybrid schedules of the arena (posenc.arena.config.hybrid_kwargs): rnope-swa builds RoPE
layers with a sliding window of half the training length and one global NoPE layer in four, the
label parses and runs through the arena, and it stays on posenc's backbone."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import posenc
from posenc.arena.backbones import build_model
from posenc.arena.cells import model_kwargs
from posenc.arena.config import (
    ArenaConfig,
    hybrid_kwargs,
    on_backbones,
    task_config,
    validate_encodings,
)
from posenc.arena.runner import run
from posenc.arena.store import Store
from posenc.arena.tasks import build_task


@pytest.mark.parametrize(
    "depth, encoding",
    [
        (4, ["rope", "rope", "rope", "nope"]),
        (8, ["rope", "rope", "rope", "nope"] * 2),
        (6, ["rope", "rope", "rope", "nope", "rope", "nope"]),
        (2, ["rope", "nope"]),
        (1, ["nope"]),
    ],
)
def test_one_global_nope_layer_in_four_and_the_last(depth, encoding):
    got = hybrid_kwargs("rnope-swa", depth, 32)
    assert got["encoding"] == encoding
    assert got["window"] == [None if e == "nope" else 16 for e in encoding]
    with pytest.raises(ValueError, match="unknown hybrid"):
        hybrid_kwargs("swa", depth, 32)


def test_the_arena_model_has_the_schedule():
    tc = task_config(ArenaConfig(), "passkey")  # depth 4, L = 32 tokens
    task = build_task("passkey")
    kwargs = model_kwargs(task, "rnope-swa", tc)
    assert "window" not in model_kwargs(task, "rope", tc)  # other cells keep their keys
    model = build_model(kwargs)
    kinds = [type(e) for e in model.encodings]
    rope, nope = posenc.resolve("rope"), posenc.resolve("nope")
    assert kinds == [rope, rope, rope, nope]
    window = task.tokens(tc.train_len) // 2
    assert [b.attn.window for b in model.blocks] == [window, window, window, None]
    tokens = task.sample_batch(np.random.default_rng(0), 2, 64).inputs
    with torch.no_grad():
        assert torch.isfinite(model(tokens)).all()


def test_the_label_parses_and_stays_on_posenc():
    validate_encodings(["rnope-swa"])
    with pytest.raises(ValueError, match="is a schedule: no variant"):
        validate_encodings(["rnope-swa+ntk"])
    assert on_backbones(["rnope-swa", "rope"], ("posenc", "hf-llama")) == [
        "rnope-swa", "rope", "hf-llama:rope",
    ]  # fmt: skip


def test_it_runs_in_the_arena_and_resumes(tmp_path):
    cfg = ArenaConfig(
        tasks=["copy"], encodings=["rnope-swa"], seeds=1, steps=20, train_len=3, dim=16,
        depth=4, heads=2, batch_size=8, eval_samples=8, db=str(tmp_path / "a.sqlite"),
        out=str(tmp_path / "out"),
    )  # fmt: skip
    tasks = {"copy": build_task("copy")}
    with Store(cfg.db) as store:
        assert run(cfg, tasks, store) == 6 * 2 + 3  # sizes 1..6, two metrics; steps, learned, check
        assert run(cfg, tasks, store) == 0  # all in the database: nothing redone
