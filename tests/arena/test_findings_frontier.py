"""The DroPE and RNoPE-SWA findings (posenc.arena.findings_frontier) from synthetic rows: each
verdict computed from the numbers against the plain rope cell, on passkey and lm."""

from __future__ import annotations

from support.flips import assert_each_rule_flips

from posenc.arena.findings_frontier import drope, rnope_swa
from posenc.arena.results import Results

META = dict(config_hash="h", config="{}", posenc_version="0", torch_version="t", wall_time=1.0)


def rows(task, metric, values, L=8):
    """values: encoding -> [value at L, 2L, 4L, 8L], three seeds (+0, +0.01, +0.02)."""
    return [dict(task=task, encoding=enc, seed=s, train_len=L, eval_len=E, metric=metric,
                 value=v + 0.01 * s, status="ok", reason=None, **META)
            for enc, vals in values.items() for s in range(3)
            for E, v in zip((L, 2 * L, 4 * L, 8 * L), vals)]  # fmt: skip


PASSKEY = {
    "rope": [0.97, 0.0, 0.0, 0.0], "nope": [0.97, 0.9, 0.3, 0.0],
    "rope+drope": [0.97, 0.8, 0.4, 0.1], "rnope-swa": [0.97, 0.97, 0.9, 0.8],
}  # fmt: skip


def passkey(**changes):
    return Results(rows("passkey", "accuracy", dict(PASSKEY, **changes)))


def test_reproduced_when_it_beats_rope_past_L_and_keeps_L():
    for finding in (drope, rnope_swa):
        got = finding(passkey())
        assert got.verdict == "reproduced", got.result
    got = drope(passkey())
    assert "rope+drope 0.98 [0.97–0.99] → 0.44 [0.43–0.45]" in got.result  # mean over 2L..8L
    assert "beats rope past L, kept at L" in got.result


def test_not_reproduced_when_L_is_lost_or_nothing_is_gained():
    lost = drope(passkey(**{"rope+drope": [0.5, 0.8, 0.4, 0.1]}))
    assert lost.verdict == "not reproduced" and "not kept at L" in lost.result
    flat = rnope_swa(passkey(**{"rnope-swa": [0.97, 0.0, 0.0, 0.0]}))
    assert flat.verdict == "not reproduced" and "not past L" in flat.result


def test_inconclusive_when_rope_does_not_learn_and_unmeasured_without_rows():
    got = drope(passkey(rope=[0.5, 0.0, 0.0, 0.0]))
    assert got.verdict == "inconclusive" and "rope below 0.95" in got.result
    assert drope(Results([])).verdict == "not measured"
    no_hybrid = Results(rows("passkey", "accuracy", {"rope": PASSKEY["rope"]}))
    assert rnope_swa(no_hybrid).verdict == "not measured"


def test_lm_by_perplexity():
    ppl = {"rope": [10, 14, 30, 60], "rope+drope": [10.3, 11, 12, 14],
           "rnope-swa": [11, 11, 11, 11]}  # fmt: skip
    res = Results(rows("lm", "ppl", ppl))
    assert drope(res).verdict == "reproduced"  # 10.3 within x1.05 of 10, lower past L
    assert rnope_swa(res).verdict == "not reproduced"  # 11 is more than x1.05 of 10 at L
    both = Results(rows("lm", "ppl", ppl) + rows("passkey", "accuracy", PASSKEY))
    got = drope(both)
    assert got.verdict == "reproduced" and "passkey (L=8" in got.result and "lm (L=8" in got.result


def test_each_rule_flips():
    """Both findings, measured on passkey and lm: each rule flipped across its threshold."""
    ppl = {"rope": [10, 14, 30, 60], "rope+drope": [10.3, 11, 12, 14],
           "rnope-swa": [11, 11, 11, 11]}  # fmt: skip
    both = Results(rows("lm", "ppl", ppl) + rows("passkey", "accuracy", PASSKEY))
    for finding in (drope, rnope_swa):
        got = finding(both)
        assert got.paper and got.rule
        assert_each_rule_flips(got)
