"""posenc.stretch.report: the recommendation rule and the findings, decided from the numbers."""

import json
import math

import pytest

from posenc.stretch import report
from posenc.verdict import NOT_MEASURED, NOT_REPRODUCED, REPRODUCED

C = 100  # the context of the synthetic model


def rows(ppl: dict, retrieval: dict | None = None) -> list[dict]:
    """Store rows from {(label, length): perplexity} and {(label, length): exact match}."""
    cfg = json.dumps({"protocol": "stretch-1"})
    base = dict(seed=0, train_len=C, status="ok", config=cfg)
    out = [dict(base, task="ppl/doc", encoding=f"m:{lb}", eval_len=n, metric="loss",
                value=math.log(p)) for (lb, n), p in ppl.items()]  # fmt: skip
    for (lb, n), v in (retrieval or {}).items():
        out += [dict(base, task="passkey", encoding=f"m:{lb}", eval_len=n, metric=m, value=v)
                for m in ("exact", "exact@0.5")]  # fmt: skip
    return out


def grid(ppl, retrieval=None):
    (g,) = report.grids(rows(ppl, retrieval))
    return g


BASE = {("none", 50): 12.0, ("none", 100): 10.0, ("none", 200): 40.0}


def test_the_eligible_scaling_that_works_is_recommended():
    g = grid(BASE | {("yarn(factor=2)", 50): 12.1, ("yarn(factor=2)", 100): 10.1,
                     ("yarn(factor=2)", 200): 10.5,
                     ("linear(factor=2)", 50): 14.0, ("linear(factor=2)", 100): 12.0,
                     ("linear(factor=2)", 200): 9.0})  # fmt: skip
    ((n, rec, why),) = report.recommend(g, tolerance=0.05)
    assert (n, rec) == (200, "yarn(factor=2)")  # linear is better at 200, but costs +20% at 50
    assert "10.50" in why and "+1.0%" in why
    ((_, rec, _),) = report.recommend(g, tolerance=0.25)  # a looser tolerance admits linear
    assert rec == "linear(factor=2)"


def test_none_works_zero_shot_when_nothing_holds_the_perplexity():
    g = grid(BASE | {("yarn(factor=2)", 50): 12.1, ("yarn(factor=2)", 100): 10.1,
                     ("yarn(factor=2)", 200): 11.5})  # fmt: skip
    assert report.recommend(g, 0.05)[0][1] == "none works zero-shot here"


def test_retrieval_decides_between_scalings_that_work():
    ppl = BASE | {(lb, n): v for lb in ("a", "b") for n, v in ((50, 12), (100, 10), (200, 10.2))}
    ret = {("none", 100): 1.0, ("a", 200): 0.5, ("b", 200): 1.0, ("none", 200): 0.0}
    assert report.recommend(grid(ppl, ret), 0.05)[0][1] == "b"
    ret[("b", 200)] = 0.4  # below half the unscaled model's rate within the context
    assert report.recommend(grid(ppl, ret), 0.05)[0][1] == "a"


def test_a_scaling_that_loses_retrieval_within_the_context_is_not_eligible():
    ppl = BASE | {(lb, n): v for lb in ("a", "b") for n, v in ((50, 12), (100, 10), (200, 10.2))}
    ret = {("none", 50): 1.0, ("a", 50): 1.0, ("b", 50): 0.5, ("a", 200): 0.5, ("b", 200): 1.0}
    ((_, rec, _),) = report.recommend(grid(ppl, ret), 0.05)
    assert rec == "a"  # b retrieves more at 200 but loses half of it at 50
    ret[("b", 50)] = 0.96  # a drop within the tolerance
    ((_, rec, why),) = report.recommend(grid(ppl, ret), 0.05)
    assert rec == "b" and "retrieval lost at <= 100: 0.04" in why
    assert report.retrieval_loss(grid(ppl, ret), "none") == 0.0
    ret[("b", 50)] = 1.0  # no loss: nothing to say
    ((_, rec, why),) = report.recommend(grid(ppl, ret), 0.05)
    assert rec == "b" and "retrieval lost" not in why


def verdict(g, cid):
    return next(f for f in report.findings(g) if f.id == cid)


@pytest.mark.parametrize("far, verdict_", [(40.0, REPRODUCED), (11.0, NOT_REPRODUCED)])
def test_direct_extrapolation_flips_at_its_threshold(far, verdict_):
    g = grid(BASE | {("none", 200): far})
    f = verdict(g, "stretch-direct-extrapolation")
    assert f.verdict == verdict_ and f.measured["ppl_ratio"] == pytest.approx(far / 10)


@pytest.mark.parametrize("short, verdict_", [(10.6, REPRODUCED),
                                             (10.4, NOT_REPRODUCED)])  # fmt: skip
def test_pi_cost_flips_at_five_percent(short, verdict_):
    g = grid(BASE | {("linear(factor=2)", 50): 12.0, ("linear(factor=2)", 100): short})
    assert verdict(g, "stretch-pi-short-cost").verdict == verdict_


def test_ntk_and_dynamic_yarn_findings_read_their_scalings():
    lines = {(lb, n): v for lb in ("ntk(factor=2)", "dynamic", "dynamic_yarn")
             for n, v in ((50, 12.0), (100, 10.0), (200, 10.5))}  # fmt: skip
    g = grid(BASE | lines)
    assert verdict(g, "stretch-ntk-zero-shot").verdict == REPRODUCED
    assert verdict(g, "stretch-dynamic-yarn").verdict == REPRODUCED
    g = grid(BASE | lines | {("dynamic_yarn", 200): 30.0, ("ntk(factor=2)", 50): 13.0})
    assert verdict(g, "stretch-ntk-zero-shot").verdict == NOT_REPRODUCED
    assert verdict(g, "stretch-dynamic-yarn").verdict == NOT_REPRODUCED


def test_findings_say_not_measured_without_their_scalings_or_lengths():
    g = grid({("none", 50): 12.0, ("none", 100): 10.0})
    assert {f.verdict for f in report.findings(g)} == {NOT_MEASURED}


def test_report_files_and_json(tmp_path):
    rs = rows(BASE | {("yarn(factor=2)", 200): 10.5}, {("none", 100): 1.0, ("none", 200): 0.0})
    index = report.write_report(rs, str(tmp_path))
    assert "Published findings" in (tmp_path / "results.md").read_text()
    assert index.endswith("index.html") and (tmp_path / "m_ppl.png").exists()
    assert (tmp_path / "m_passkey.png").exists()
    js = report.json_rows(rs)
    assert {r["scaling"] for r in js} == {"none", "yarn(factor=2)"}


def test_the_readme_tables_are_the_recorded_run():
    """docs/stretch/findings.md's tables are report.readme_tables of docs/stretch/stretch.sqlite."""
    from support.readme import REPO, generated_block

    from posenc.arena.store import Store

    with Store(str(REPO / "docs/stretch/stretch.sqlite"), create=False) as store:
        want = report.readme_tables(store.all_rows())
    assert generated_block("stretch") == want


def test_a_tie_in_perplexity_goes_to_the_smaller_short_context_cost():
    ppl = BASE | {("longrope(factor=2)", 50): 12.3, ("longrope(factor=2)", 100): 10.1,
                  ("longrope(factor=2)", 200): 9.001, ("dynamic_yarn", 50): 12.0,
                  ("dynamic_yarn", 100): 10.0, ("dynamic_yarn", 200): 9.004}  # fmt: skip
    assert report.recommend(grid(ppl), 0.05)[0][1] == "dynamic_yarn"
