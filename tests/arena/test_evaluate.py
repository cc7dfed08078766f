"""posenc.arena.evaluate: the training record (trained_rows: the learning curve and a learned
table's statistics, written once per trained model beside its evaluation rows), and the
positions a randomized encoding draws at evaluation (one subset per instance)."""

from __future__ import annotations

import sqlite3

import numpy as np
import pytest
import torch

from posenc.arena import evaluate as evaluate_mod
from posenc.arena.backbones import build_model
from posenc.arena.cells import make_cells, model_kwargs
from posenc.arena.cli import main
from posenc.arena.config import RANDOMIZED_DRAWS, STOP, ArenaConfig, task_config
from posenc.arena.tasks import build_task
from posenc.arena.train import per_instance


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
        assert n == 4 and 0.0 <= v <= 1.0 and (v >= STOP) == rows[label, "learned"][1]
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


@pytest.mark.parametrize("label", ["randomized:rope", "randomized:sinusoidal", "rope", "alibi"])
def test_a_randomized_encoding_draws_positions_per_instance(label):
    """Evaluation and validation run a batch through per_instance: a randomized encoding draws
    one position subset per instance, so a batch of one instance repeated gets as many outputs
    as draws (the model's default [T] positions: one draw, one output for every row), and the
    exact match of a size averages over draws. Other encodings run as the model does."""
    task = build_task("copy")
    tc = task_config(ArenaConfig(tasks=["copy"], train_len=4, dim=16, depth=1, heads=2), "copy")
    torch.manual_seed(0)
    model = build_model(model_kwargs(task, label, tc)).eval()
    batch = task.sample_batch(np.random.default_rng(0), 1, 4)
    x, mask = batch.inputs.repeat(32, 1), batch.mask.repeat(32, 1)
    with torch.no_grad():
        torch.manual_seed(1)
        ours = per_instance(model, x, mask)  # [32, T, V]
        torch.manual_seed(1)
        default = model(x)
    assert torch.equal(default, default[:1].expand_as(default))  # the batch shares one draw
    distinct = len({tuple(row.flatten().tolist()) for row in ours.round(decimals=4)})
    if label.startswith("randomized:"):
        assert distinct > 16, distinct  # C(sample_len, T) draws: repeats are rare
    else:
        assert distinct == 1 and torch.allclose(ours, default, atol=1e-6)


@pytest.mark.parametrize("train", [True, False])
@pytest.mark.parametrize("task_name", ["copy", "addition"])
def test_a_short_instance_draws_as_if_alone_in_a_padded_batch(task_name, train):
    """Training batches mix sizes, right-padded to the longest. per_instance gives each row
    positions of its own length, so a short row's draw is the draw it gets in a batch of its
    own: from one random state, its logits in the padded batch (row 0) equal its logits alone.
    With the model's default positions a short row trained on the first few positions of the
    longest row's draw, and measured ~0.5-0.75 exact match at one digit of addition where that
    draw gave 1.00."""
    task = build_task(task_name)
    tc = task_config(ArenaConfig(tasks=[task_name], train_len=5, dim=16, depth=1, heads=2),
                     task_name)  # fmt: skip
    torch.manual_seed(0)
    model = build_model(model_kwargs(task, "randomized:rope", tc)).train(train)
    batch = task.sample(np.random.default_rng(0), np.array([1, 5, 3, 5]))  # right-padded
    short = task.tokens(1)
    drawn, sample = [], model.encoding.sample_positions
    model.encoding.sample_positions = lambda p: drawn.append(sample(p)) or drawn[-1]
    with torch.no_grad():
        torch.manual_seed(1)
        padded = per_instance(model, batch.inputs, batch.mask)[0, :short]
        torch.manual_seed(1)
        alone = per_instance(model, batch.inputs[:1, :short], batch.mask[:1, :short])[0]
        torch.manual_seed(1)
        model(batch.inputs)  # the default positions: one draw over the longest row
    # the same logits: the same draw, and the padding after the instance is never attended
    assert torch.allclose(padded, alone, atol=1e-5)
    assert torch.equal(drawn[0][0, :short], drawn[1][0])
    assert not torch.equal(drawn[2][:short], drawn[1][0])


def test_only_randomized_cells_changed_their_hash_for_it():
    """Per-instance draws change what a randomized cell measures: its config says so (and its
    hash moves, so an old database refuses to mix them); no other cell's config has the key.
    Its evaluation's draws per instance are in the cell's config, not the training's."""
    tasks = {t: build_task(t) for t in ("copy", "addition")}
    cells = make_cells([task_config(ArenaConfig(), t) for t in tasks], tasks)
    for cell in cells:
        randomized = cell.label.startswith("randomized:")
        assert (cell.train_cfg.get("draws") == "per instance, own length") == randomized, cell.label
        assert cell.cfg.get("eval_draws") == (RANDOMIZED_DRAWS if randomized else None)
        assert "eval_draws" not in cell.train_cfg


@pytest.mark.parametrize("label", ["randomized:rope", "rope"])
def test_evaluation_reads_a_randomized_instance_under_several_draws(label, monkeypatch):
    """A randomized model's output on an instance is random: evaluation runs each instance
    RANDOMIZED_DRAWS times (rows of one forward draw independently: per_instance), so that its
    exact match is the mean over them; a deterministic encoding runs each instance once."""
    task = build_task("copy")
    tc = task_config(ArenaConfig(tasks=["copy"], train_len=4, dim=16, depth=1, heads=2,
                                 eval_samples=5), "copy")  # fmt: skip
    (cell,) = [c for c in make_cells([tc], {"copy": task}) if c.label == label and c.seed == 0]
    model = build_model(cell.train_cfg["model"]).eval()
    seen = []
    monkeypatch.setattr(evaluate_mod, "per_instance",
                        lambda m, x, mask: seen.append(x) or per_instance(m, x, mask))  # fmt: skip
    evaluate_mod.evaluate(model, task, cell, 4, tc, "cpu")
    draws = RANDOMIZED_DRAWS if label.startswith("randomized:") else 1
    inputs = torch.cat(seen)
    assert torch.equal(inputs, evaluate_mod.eval_batch(task, tc, 4).inputs.repeat(draws, 1))
