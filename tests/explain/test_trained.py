"""The seeds' claims that need trained models (posenc.explain.claims.trained): read from arena
databases, verdicts computed from the numbers read."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

from posenc.arena.config import validate_encodings
from posenc.arena.store import Row, Store
from posenc.explain import claims as C
from posenc.explain.claims import trained

REPO = Path(__file__).resolve().parents[2]


def fake_value(*key) -> float:
    """A value in (0.05, 1.05) fixed by the key: every number a check reads differs."""
    return 0.05 + hashlib.sha1(repr(key).encode()).digest()[0] / 255


@pytest.fixture
def measured(monkeypatch):
    """Every trained claim, measured on made-up numbers (no database)."""

    def get(self, label, task, metric, eval_len, train_len=None):
        self.used.append([label, task, str(train_len), str(eval_len), metric, "v", "1"])
        return fake_value(label, task, metric, eval_len, train_len)

    monkeypatch.setattr(trained.Evidence, "get", get)
    return [check(64, 128, arena="made-up") for check in C.ARENA_CHECKS]


def test_without_a_database_not_measured():
    for check in C.ARENA_CHECKS:
        c = check(64, 128)
        assert c.verdict == C.UNMEASURED and trained.RUN in c.note, c.id
        assert not c.measured


def test_every_trained_claim_decides_from_what_it_read(measured):
    assert len(measured) == len(C.ARENA_CHECKS) >= 15
    for c in measured:
        assert c.verdict == C.decide(c.rules, c.otherwise, c.measured), c.id
        assert c.verdict != C.UNMEASURED and c.tables[0].rows, c.id
        assert all(r.quantity in c.measured for r in c.rules), c.id
        flips = {
            C.decide(c.rules, c.otherwise, {**c.measured, r.quantity: r.threshold + d})
            for r in c.rules
            for d in (-1e-3 * max(1, abs(r.threshold)), 1e-3 * max(1, abs(r.threshold)))
        }
        assert len(flips) >= 2, f"{c.id}: the same verdict whatever the numbers"


def test_inventory_points_at_each_trained_claim(measured):
    from posenc.explain.claims import inventory

    checked = {it.check for it in inventory.ALL}
    assert {c.id for c in measured} <= checked


def write(db: Path, label: str, rows: list[tuple]) -> Path:
    """rows: (task, train_len, eval_len, metric, value) for one label, seeds 0 and 1."""
    with Store(str(db)) as store:
        for seed in (0, 1):
            store.write_cell(
                [Row(t, label, seed, tl, el, m, v) for t, tl, el, m, v in rows],
                config={}, config_hash=f"{label}{seed}", wall_time=0.0,
                posenc_version="test", torch_version="test",
            )  # fmt: skip
    return db


@pytest.mark.parametrize("rise, verdict", [(0.5, C.HOLDS), (0.01, C.FAILS)])
def test_learned_judged_at_seed_lengths_from_two_databases(tmp_path, rise, verdict):
    """Seed 002's 512 -> 600, from the loss bands the arena writes, across two databases."""
    bands = lambda r: [("lm", 512, 600, "loss@0-512", 1.0), ("lm", 512, 600, "loss@512-600", 1 + r)]  # noqa: E731
    a = write(tmp_path / "a.sqlite", trained.LEARNED_LONG, bands(rise))
    b = write(tmp_path / "b.sqlite", "sinusoidal", bands(0.02))
    learned = trained.claim_002_learned_cannot(64, 128, arena=f"{a},{b}")
    assert learned.verdict == verdict
    assert learned.measured["loss rise past 512 (nats)"] == pytest.approx(rise)
    sin = trained.claim_002_sinusoidal_extrapolates(64, 128, arena=[a, b])
    assert sin.verdict == C.HOLDS and "+0.020" in sin.result


def test_missing_cells_and_databases(tmp_path):
    db = write(tmp_path / "a.sqlite", "sinusoidal", [("copy", 8, 8, "accuracy", 0.9)])
    c = trained.claim_003_fusion(64, 128, arena=db)
    assert c.verdict == C.UNMEASURED and trained.CONCAT in c.result
    both = f"{db},{tmp_path / 'missing.sqlite'}"
    with pytest.raises(FileNotFoundError, match="--arena"):  # refused before any check runs
        C.check_all(dim=32, max_pos=64, arena=both)
    c = trained.claim_003_fusion(64, 128, arena=both)  # called alone: an error, not a verdict
    assert c.verdict == C.ERROR and "FileNotFoundError: --arena" in c.error


def test_labels_are_runnable_and_in_the_recorded_command():
    """The labels the checks read are arena labels, and run.sh trains each of them."""
    script = (REPO / trained.RUN).read_text()
    labels = [
        v for k, v in vars(trained).items() if k.isupper() and isinstance(v, str) and "(" in v
    ]
    assert len(labels) >= 6
    validate_encodings(labels)
    for label in labels:
        assert re.search(rf"[\",]{re.escape(label)}[\",]", script), label
