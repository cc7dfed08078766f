"""Training: a truncated, corrupt or foreign checkpoint is reported and the cell trained again
from scratch, to the same rows as a clean run (never a torch traceback); training to the bar
stops at the first check at the bar, records its steps and curve, resumes with them, and does
not change the training it checks."""

import glob
import os
import pickle
import sqlite3
from pathlib import Path

import pytest
import torch

import posenc.arena.train as train_mod
from posenc.arena.config import BAR, STOP, TASK_DEFAULTS, ArenaConfig, task_config
from posenc.arena.evaluate import eval_batch
from posenc.arena.report import MODEL_METRICS
from posenc.arena.runner import run
from posenc.arena.store import Store
from posenc.arena.tasks import build_task
from posenc.arena.train import validation

REPO = Path(__file__).resolve().parents[2]


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


# ----------------------------------------------------------------------------- to the bar


def bar_cfg(tmp_path, name, **kw):
    """copy at L = 3, the bar checked every 5 steps, a cap of 40."""
    return ArenaConfig(**{**dict(
        tasks=["copy"], encodings=["rope"], seeds=1, steps=40, train_len=3, dim=16, depth=1,
        heads=2, batch_size=8, eval_samples=16, db=str(tmp_path / f"{name}.sqlite"),
        out=str(tmp_path / name), workers=1, checkpoint_seconds=0.0,
        overrides={"copy": {"check_every": 5}},
    ), **kw})  # fmt: skip


def model_rows(cfg) -> dict[str, float]:
    run_rows(cfg)
    with sqlite3.connect(cfg.db) as conn:
        got = conn.execute("SELECT metric, value FROM results WHERE eval_len = train_len")
        return {m: v for m, v in got if m in ("steps", "learned") or m.startswith("valid@")}


@pytest.mark.parametrize("scores, steps", [((0.1, 0.5, STOP), 15), ((STOP - 0.01,) * 8, 40)])
def test_training_stops_at_the_first_check_at_the_stop(tmp_path, monkeypatch, scores, steps):
    """The check runs every 5 steps; training stops once it is >= STOP, else at the cap (not
    learned, also between BAR and STOP). Steps, learned and the validation curve are rows."""
    assert BAR < STOP - 0.01
    seen = iter(scores)
    monkeypatch.setattr(train_mod, "lowest_exact_match", lambda *a: next(seen))
    got = model_rows(bar_cfg(tmp_path, "bar"))
    curve = {f"valid@{5 * (i + 1)}": v for i, v in enumerate(scores)}
    assert got == {"steps": steps, "learned": float(scores[-1] >= STOP), **curve}


def test_checking_the_bar_does_not_change_the_training(tmp_path, monkeypatch):
    """A bar never reached: the model trains the cap and equals the one trained without checks,
    row for row, also for randomized positions (which draw at evaluation)."""
    kw = dict(encodings=["randomized:rope", "alibi"])
    never = {"copy": {"check_every": 5, "stop": 2.0}}
    checked = bar_cfg(tmp_path, "checked", overrides=never, **kw)
    plain = bar_cfg(tmp_path, "plain", overrides={"copy": {"check_every": 0}}, **kw)
    drop = lambda rows: [r for r in rows if not r[2].startswith(MODEL_METRICS)]  # noqa: E731
    a, b = run_rows(checked), run_rows(plain)
    assert drop(a) == drop(b) and len(drop(a)) == 2 * 6 * 2
    assert sum(r[2].startswith("valid@") for r in a) == 2 * 8


def test_a_resumed_training_keeps_its_validation_curve(tmp_path, monkeypatch):
    """Killed mid-training (a checkpoint every step), the rerun resumes with the checks made."""
    ref = model_rows(bar_cfg(tmp_path, "ref"))
    cfg = bar_cfg(tmp_path, "killed")

    class Killed(Exception):
        pass

    real = train_mod.fit

    def dying(*args, on_step=None, **kw):
        def step(i, loss):
            if i == 23:
                raise Killed

        return real(*args, on_step=step, **kw)

    monkeypatch.setattr(train_mod, "fit", dying)
    with pytest.raises(RuntimeError, match="failed"), Store(cfg.db) as store:
        run(cfg, {"copy": build_task("copy")}, store)  # the group fails: recorded, not written
    assert glob.glob(os.path.join(cfg.out, "models", "*.train.ckpt"))
    monkeypatch.setattr(train_mod, "fit", real)
    assert model_rows(cfg) == ref


def test_validation_is_held_out_at_sizes_up_to_L():
    task, tc = build_task("reverse"), task_config(ArenaConfig(), "reverse")
    valid = validation(task, tc)
    want = [(tc.valid, 2 * n) for n in range(1, tc.train_len + 1)]
    assert [b.inputs.shape for b in valid] == want
    again = validation(task, tc)
    assert all(torch.equal(a.inputs, b.inputs) for a, b in zip(valid, again, strict=True))
    ev = eval_batch(task, tc, tc.train_len)  # the evaluation's instances at L are others
    assert not torch.equal(valid[-1].inputs, ev.inputs[: tc.valid])


@pytest.mark.parametrize("L", [5])
def test_the_default_recipe_learns_at_another_length(tmp_path, L):
    """The default recipe (model, lr, bar, cap) at a training length other than the default's:
    NoPE and ALiBi learn reverse to the bar in distribution (a small-scale check of issue 29)."""
    cfg = ArenaConfig(tasks=["reverse"], encodings=["nope", "alibi"], seeds=1, train_len=L,
                      eval_lens=[L], db=str(tmp_path / "a.sqlite"), out=str(tmp_path / "o"),
                      workers=2)  # fmt: skip
    with Store(cfg.db) as store:
        run(cfg, {"reverse": build_task("reverse")}, store)
    with sqlite3.connect(cfg.db) as conn:
        got = dict(((e, m), v) for e, m, v in conn.execute(
            "SELECT encoding, metric, value FROM results WHERE metric IN "
            "('learned', 'steps', 'accuracy')"))  # fmt: skip
    for enc in ("nope", "alibi"):
        assert got[enc, "learned"] == 1.0, got
        assert got[enc, "steps"] < TASK_DEFAULTS["reverse"]["steps"], got
        # the stop's margin over the bar holds on the evaluation's own instances
        assert got[enc, "accuracy"] >= BAR, got


@pytest.mark.parametrize("steps, decay, span", [(15000, 0, 15000), (15000, 5000, 5000),
                                                (3000, 5000, 3000), (40, 0, 40)])  # fmt: skip
def test_the_lr_decays_over_the_recipe_then_stays_at_its_floor(steps, decay, span):
    """Warmup, cosine to 0.1 lr over `decay` steps (0, the default: over the cap; never past
    a lower cap), 0.1 lr after."""
    tc = task_config(ArenaConfig(steps=steps, overrides={"copy": {"decay": decay}}), "copy")
    assert (tc.decay or tc.steps) == span and tc.check_every
    lr = [train_mod.lr_at(s, span, tc.lr) for s in range(steps)]
    assert max(lr) == pytest.approx(tc.lr) and lr.index(max(lr)) < span // 2
    assert all(a >= b for a, b in zip(lr[span // 2 : span], lr[span // 2 + 1 : span]))
    assert lr[span - 1] == pytest.approx(0.1 * tc.lr, rel=0.05)  # the cosine's last step
    after = [train_mod.lr_at(s, span, tc.lr) for s in range(span, span + 100)]
    assert all(v == pytest.approx(0.1 * tc.lr) for v in after)


def test_fixed_steps_is_the_recipe_before_the_bar():
    """--fixed-steps: no bar, the cosine over all the steps, and the cell's hash of that recipe
    (the committed claims run was recorded so: its copy cells keep their hashes)."""
    from posenc.arena.cells import make_cells
    from posenc.arena.cli import config_from_args, parser

    args = parser().parse_args(["--tasks", "copy", "--fixed-steps", "--steps", "5000"])
    tc = task_config(config_from_args(args), "copy")
    assert tc.check_every == 0 and tc.decay == 0 and tc.steps == 5000 and tc.mix == 0.5
    (cell,) = make_cells([tc], {"copy": build_task("copy")})[:1]
    assert "bar" not in cell.train_cfg and "mix" not in cell.train_cfg
    with sqlite3.connect(REPO / "docs/arena/claims/arena.sqlite") as conn:
        query = "SELECT config_hash FROM results WHERE task = 'copy' AND encoding = 'index'"
        recorded = {h for (h,) in conn.execute(query)}
    tc = task_config(config_from_args(parser().parse_args(
        ["--tasks", "copy", "--fixed-steps", "--steps", "5000", "--seeds", "1",
         "--encodings", "index"])), "copy")  # fmt: skip
    (cell,) = make_cells([tc], {"copy": build_task("copy")})
    assert recorded == {cell.hash}
