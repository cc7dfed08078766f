"""DroPE in the arena (posenc.arena.drope): the label parses, its cell shares the rope model's
group and checkpoint (only the recalibration is its own), the recalibrated model has no
positional encoding, a recalibration killed midway resumes to the uninterrupted weights, and the
recipe is in the cell's hash while every other cell's hash stays."""

from __future__ import annotations

import os

import pytest
import torch

import posenc
import posenc.arena.config as config
import posenc.arena.train as train_mod
from posenc.arena import drope
from posenc.arena.cells import make_cells
from posenc.arena.config import ArenaConfig, on_backbones, task_config, validate_encodings
from posenc.arena.runner import run
from posenc.arena.store import Store
from posenc.arena.tasks import build_task
from posenc.arena.train import model_path, train


def tiny(tmp_path, encodings=("rope", "rope+drope"), **kw):
    kw = dict(dict(steps=30), **kw)
    return ArenaConfig(
        tasks=["copy"], encodings=list(encodings), seeds=1, train_len=3, dim=16, depth=2,
        heads=2, batch_size=8, eval_samples=8, db=str(tmp_path / "a.sqlite"),
        out=str(tmp_path / "out"), checkpoint_seconds=0.0, **kw,
    )  # fmt: skip


def cells_of(cfg):
    tc = task_config(cfg, "copy")
    return tc, {c.label: c for c in make_cells([tc], {"copy": build_task("copy")})}


def test_the_label_parses():
    validate_encodings(["rope+drope", "alibi+drope", "randomized:rope+drope"])
    validate_encodings(["hf-llama:rope+drope"])
    with pytest.raises(ValueError, match="absolute"):
        validate_encodings(["sinusoidal+drope"])
    with pytest.raises(ValueError, match="did you mean 'rope\\+drope'"):
        validate_encodings(["rope+drop"])
    assert "hf-llama:rope+drope" in on_backbones(["rope+drope"], ("posenc", "hf-llama"))


def test_the_cell_is_in_the_rope_group_and_the_recipe_in_its_hash(tmp_path, monkeypatch):
    tc, cells = cells_of(tiny(tmp_path))
    rope, dropped = cells["rope"], cells["rope+drope"]
    assert dropped.group == rope.group and dropped.train_hash == rope.train_hash
    recipe = dropped.cfg["drope"]
    assert recipe["steps"] == round(config.DROPE_FRACTION * tc.steps)
    assert recipe["encoding"] == "nope"
    assert "drope" not in rope.cfg
    monkeypatch.setattr(config, "DROPE_FRACTION", 2 * config.DROPE_FRACTION)
    _, again = cells_of(tiny(tmp_path))
    assert again["rope+drope"].hash != dropped.hash and again["rope"].hash == rope.hash


def test_recalibration_reuses_the_rope_model_and_drops_its_encoding(tmp_path, monkeypatch):
    cfg = tiny(tmp_path, encodings=("rope",))
    with Store(cfg.db) as store:
        run(cfg, {"copy": build_task("copy")}, store)
    calls = []
    real = train_mod.fit

    def counted(name, *args, **kw):
        calls.append(name)
        return real(name, *args, **kw)

    monkeypatch.setattr(train_mod, "fit", counted)
    monkeypatch.setattr(drope, "fit", counted)
    cfg = tiny(tmp_path)  # the same database: rope's rows are in, its model on disk
    with Store(cfg.db) as store:
        assert run(cfg, {"copy": build_task("copy")}, store) > 0
        labels = {r["encoding"] for r in store.all_rows()}
    assert calls == ["copy/rope+drope/seed0 (recalibration)"]  # rope was not trained again
    assert labels == {"rope", "rope+drope"}
    _, cells = cells_of(cfg)
    path = drope.drope_path(cfg.out, cells["rope+drope"])
    ckpt = torch.load(path, weights_only=False)
    assert ckpt["config"]["encoding"] == "nope"
    assert ckpt["arena"]["drope"]["steps"] == round(config.DROPE_FRACTION * cfg.steps)
    rope = torch.load(model_path(cfg.out, cells["rope"]), weights_only=False)["model"]
    assert set(ckpt["model"]) == set(rope)  # the same weights, no encoding in either
    assert any(not torch.equal(ckpt["model"][k], rope[k]) for k in rope)  # trained on


def test_the_dropped_model_starts_from_the_trained_weights_without_positions(tmp_path):
    cfg = tiny(tmp_path, encodings=("t5", "t5+drope"))
    tc, cells = cells_of(cfg)
    task = build_task("copy")
    trained = train(cells["t5"], task, tc, out=cfg.out, device="cpu", checkpoint_seconds=1e9)
    kwargs = drope.dropped_kwargs(cells["t5+drope"].train_cfg["model"])
    dropped = posenc.TransformerLM(**kwargs)
    drope.transfer(trained, dropped)
    assert isinstance(dropped.encoding, posenc.resolve("nope"))
    assert not any(True for _ in dropped.encodings.parameters())  # t5's table is gone
    mine, theirs = dropped.state_dict(), trained.state_dict()
    assert all(torch.equal(v, theirs[k]) for k, v in mine.items())
    with pytest.raises(ValueError, match="differ beyond the encoding"):
        drope.transfer(trained, posenc.TransformerLM(**dict(kwargs, depth=1)))


def test_a_killed_recalibration_resumes_to_the_same_weights(tmp_path, monkeypatch, capsys):
    cfg = tiny(tmp_path, steps=60)
    tc, cells = cells_of(cfg)
    task, cell = build_task("copy"), cells["rope+drope"]
    model = train(cells["rope"], task, tc, out=cfg.out, device="cpu", checkpoint_seconds=0.0)

    def recal(out):
        return drope.recalibrate(model, cell, task, tc, out=out, device="cpu",
                                 checkpoint_seconds=0.0)  # fmt: skip

    whole = recal(str(tmp_path / "whole")).state_dict()
    real, seen = train_mod.train_batch, []

    def dies(*args):
        seen.append(1)
        if len(seen) == 4:
            raise KeyboardInterrupt  # killed during the 4th step
        return real(*args)

    monkeypatch.setattr(train_mod, "train_batch", dies)
    with pytest.raises(KeyboardInterrupt):
        recal(str(tmp_path / "killed"))
    state = drope.drope_path(str(tmp_path / "killed"), cell)[: -len(".ckpt")] + ".train.ckpt"
    assert os.path.exists(state)
    monkeypatch.setattr(train_mod, "train_batch", real)
    resumed = recal(str(tmp_path / "killed")).state_dict()
    assert "(recalibration): resuming at step 3" in capsys.readouterr().err
    assert not os.path.exists(state)
    assert all(torch.equal(resumed[k], v) for k, v in whole.items())
    again = recal(str(tmp_path / "killed")).state_dict()  # done: loaded, not trained again
    assert all(torch.equal(again[k], v) for k, v in whole.items())
