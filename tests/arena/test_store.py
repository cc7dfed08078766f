"""The arena's SQLite store: one row per measurement, UNIQUE, all-or-nothing cells."""

from __future__ import annotations

import sqlite3

import pytest

from posenc.arena.report import Results, findings, write_report
from posenc.arena.store import Row, Store

META = dict(config={"a": 1}, config_hash="h1", wall_time=1.5, posenc_version="0", torch_version="t")


def rows(enc="alibi", seed=0, value=1.0):
    return [Row("lm", enc, seed, 8, E, m, value * E) for E in (8, 16) for m in ("loss", "ppl")]


def test_write_and_read_back(tmp_path):
    db = str(tmp_path / "a.sqlite")
    with Store(db) as s:
        s.write_cell(rows(), **META)
        s.write_cell([Row("lm", "learned", 0, 8, 16, "ppl", None, "n/a", "past table")], **META)
    with Store(db, create=False) as s:
        got = s.all_rows()
    assert len(got) == 5
    na = [r for r in got if r["status"] == "n/a"]
    assert na[0]["reason"] == "past table" and na[0]["value"] is None
    assert {r["config_hash"] for r in got} == {"h1"} and got[0]["wall_time"] == 1.5


def test_unique_and_all_or_nothing(tmp_path):
    with Store(str(tmp_path / "a.sqlite")) as s:
        s.write_cell(rows(), **META)
        mixed = rows(enc="t5") + rows()[:1]  # new rows plus one duplicate
        with pytest.raises(sqlite3.IntegrityError):
            s.write_cell(mixed, **META)
        assert s.count() == 4  # none of the t5 rows went in


def test_corrupt_or_foreign_files_are_refused(tmp_path):
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(b"this is not a database" * 100)
    with pytest.raises(ValueError, match="not a usable SQLite database"):
        Store(str(bad))
    assert bad.read_bytes() == b"this is not a database" * 100
    other = tmp_path / "other.sqlite"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE results (x INTEGER)")
    conn.commit()
    conn.close()
    with pytest.raises(ValueError, match="another shape"):
        Store(str(other))
    with pytest.raises(ValueError, match="no such database"):
        Store(str(tmp_path / "missing.sqlite"), create=False)


def fake_lm_rows(ppl):
    """ppl: encoding -> [ppl at L, 2L, 4L, 8L], L = 8, two seeds."""
    out = []
    for enc, vals in ppl.items():
        for seed in (0, 1):
            for E, v in zip((8, 16, 32, 64), vals):
                status = "n/a" if v is None else "ok"
                out.append(dict(task="lm", encoding=enc, seed=seed, train_len=8, eval_len=E,
                                metric="ppl", value=None if v is None else v + seed * 0.02,
                                status=status, reason="past its table" if v is None else None,
                                config_hash="h", config="{}", posenc_version="0",
                                torch_version="t", wall_time=1.0))  # fmt: skip
    return out


def test_findings_are_computed_from_the_numbers(tmp_path):
    good = {
        "sinusoidal": [10, 30, 80, 200], "learned": [10, None, None, None],
        "alibi": [10, 9.9, 9.8, 9.8], "kerple": [10, 10, 10.1, 10.1], "t5": [10, 10.2, 11, 12],
        "rope": [10, 12, 20, 40], "rope+ntk": [10.5, 11, 13, 18], "rope+yarn": [10.4, 11, 14, 19],
        "rope+dynamic": [10, 11, 14, 20],
    }  # fmt: skip
    verdicts = {f["claim"][:12]: f["verdict"] for f in findings(Results(fake_lm_rows(good)))}
    assert list(verdicts.values()).count("reproduced") == 5
    assert verdicts["Copy/reverse"] == "not measured"  # no tasks in these rows
    bad = dict(
        good,
        sinusoidal=[10, 10.5, 11, 12],
        alibi=[10, 12, 15, 30],
        **{"rope+ntk": [10, 12, 25, 50]},
    )
    found = {f["claim"][:12]: f for f in findings(Results(fake_lm_rows(bad)))}
    assert found["Sinusoidal p"]["verdict"] == "not reproduced"
    assert "10.01 at L=8 → 10.51 at 16" in found["Sinusoidal p"]["numbers"]  # medians
    assert found["ALiBi (and K"]["verdict"] == "partly"
    assert found["Zero-shot NT"]["verdict"] == "partly"
    index = write_report(fake_lm_rows(good), str(tmp_path / "out"))
    md = (tmp_path / "out" / "results.md").read_text()
    assert index.endswith("index.html") and "| learned | 10.01 [10.00–10.02] | n/a |" in md
    assert (tmp_path / "out" / "lm_L8_ppl.png").stat().st_size > 1000
