"""posenc.stretch.report: intervals, ties, the findings decided from the numbers, and reports that
render whatever rows a run can write."""

import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from posenc.arena.store import require_rows
from posenc.stretch import report
from posenc.verdict import INCONCLUSIVE, NOT_MEASURED, NOT_REPRODUCED, REPRODUCED

C = 100  # the context of the synthetic model
CFG = {"python": json.dumps({"protocol": "stretch-2", "kind": "python"}),
       "prose": json.dumps({"protocol": "stretch-2", "kind": "prose"})}  # fmt: skip


def rows(ppl: dict, retrieval: dict | None = None, windows: int = 8, spread: float = 0.01,
         texts=("python",), probes: int = 100, shift: int = 0) -> list[dict]:  # fmt: skip
    """Store rows from {(label, length): perplexity} (each window's loss log(p) +- spread, and
    its blocks' +- spread again, so the intervals are narrow) and {(label, length): exact-match
    rate} over `probes` probes."""
    out = []
    for text in texts:
        base = dict(seed=0, train_len=C, status="ok", reason=None, config=CFG[text])
        for (lb, n), p in ppl.items():
            for k in range(windows):
                loss = math.log(p) + spread * ((k + shift) % 2 * 2 - 1)
                out.append(dict(base, task=f"ppl/{text}doc", encoding=f"m:{lb}", eval_len=n,
                                metric=f"loss/w{k}", value=loss))  # fmt: skip
                if n > C:
                    out.append(dict(base, task=f"ppl/{text}doc", encoding=f"m:{lb}", eval_len=n,
                                    metric=f"loss@{C}-{n}/w{k}", value=loss + 0.5))  # fmt: skip
                for a in range(0, n, C // 8):
                    out.append(
                        dict(
                            base,
                            task=f"ppl/{text}doc",
                            encoding=f"m:{lb}",
                            eval_len=n,
                            metric=f"pos@{a}-{min(a + C // 8, n)}/w{k}",
                            value=loss + spread * ((a // (C // 8)) % 2 * 2 - 1),
                        )
                    )
    base = dict(seed=0, train_len=C, status="ok", reason=None, config=CFG["python"])
    for (lb, n), v in (retrieval or {}).items():
        hits = round(v * probes)
        for i in range(probes):
            d = (i + 0.5) / probes
            out += [dict(base, task="multikey", encoding=f"m:{lb}", eval_len=n,
                         metric=f"exact@{d:g}/p{i}", value=float(i < hits)),
                    dict(base, task="multikey", encoding=f"m:{lb}", eval_len=n,
                         metric=f"logp@{d:g}/p{i}", value=-0.1 if i < hits else -5.0)]  # fmt: skip
    return out


def grid(ppl, retrieval=None, **kw):
    (g,) = report.grids(rows(ppl, retrieval, **kw))
    return g


BASE = {("none", 50): 12.0, ("none", 100): 10.0, ("none", 200): 40.0}
STRONG = {("none", 50): 1.0, ("none", 100): 1.0}  # the unscaled model does the task within C


def test_perplexity_and_rates_carry_their_intervals():
    g = grid(BASE, STRONG | {("none", 200): 0.3})
    p = g.ppl("python", "none", 100)
    assert p.value == pytest.approx(10.0) and p.lo < 10.0 < p.hi and p.n == 8
    assert g.ppl("python", "none", 200, past=True).value == pytest.approx(40 * math.exp(0.5))
    r = g.rate("multikey", "none", 200)
    assert (r.value, r.n) == (0.3, 100) and 0.2 < r.lo < 0.3 < r.hi < 0.4
    assert g.mean_logp("multikey", "none", 200).value == pytest.approx(0.3 * -0.1 + 0.7 * -5.0)
    wide = grid(BASE, windows=2, spread=0.3).ppl("python", "none", 100)
    assert wide.hi - wide.lo > p.hi - p.lo  # fewer, more spread windows: a wider interval


def test_the_separated_best_scaling_is_recommended():
    g = grid(BASE | {("yarn(factor=2)", 50): 12.1, ("yarn(factor=2)", 100): 10.1,
                     ("yarn(factor=2)", 200): 10.5,
                     ("linear(factor=2)", 50): 14.0, ("linear(factor=2)", 100): 12.0,
                     ("linear(factor=2)", 200): 9.0})  # fmt: skip
    ((n, rec, why),) = report.recommend(g, tolerance=0.05)
    assert (n, rec) == (200, "yarn(factor=2)")  # linear is better at 200, but costs +20% at 50
    assert "10.50 [" in why and "+1.0% [" in why and why.startswith("separated")
    ((_, rec, _),) = report.recommend(g, tolerance=0.25)  # a looser tolerance admits linear
    assert rec == "linear(factor=2)"


def test_scalings_inside_each_others_intervals_tie():
    ntk = {("ntk(factor=2)", 50): 12.3, ("ntk(factor=2)", 100): 10.0, ("ntk(factor=2)", 200): 10.3}
    yarn = {("yarn(factor=2)", 50): 12.0, ("yarn(factor=2)", 100): 10.0,
            ("yarn(factor=2)", 200): 10.2}  # fmt: skip

    def rec(spread):  # ntk's windows vary against yarn's: the paired ratio has that spread
        rs = rows(BASE | yarn, spread=spread) + rows(ntk, spread=spread, shift=1)
        ((_, r, why),) = report.recommend(report.grids(rs)[0], 0.05)
        return r, why

    r, why = rec(0.2)  # ntk costs +2.5% at 50: the tie names yarn first
    assert r.startswith("tie: yarn(factor=2), ntk(factor=2)") and "best:" in why
    assert rec(0.001)[0] == "yarn(factor=2)"  # the same numbers, narrow intervals: separated


def test_none_works_zero_shot_when_nothing_holds_the_perplexity():
    g = grid(BASE | {("yarn(factor=2)", 50): 12.1, ("yarn(factor=2)", 100): 10.1,
                     ("yarn(factor=2)", 200): 11.5})  # fmt: skip
    assert report.recommend(g, 0.05)[0][1] == "none works zero-shot here"


def test_retrieval_decides_between_scalings_that_work_and_weak_tasks_do_not_count():
    ppl = BASE | {(lb, n): v for lb in ("a", "b") for n, v in ((50, 12), (100, 10), (200, 10.2))}
    ret = STRONG | {("a", 200): 0.5, ("b", 200): 1.0, ("none", 200): 0.0}
    assert report.recommend(grid(ppl, ret), 0.05)[0][1] == "b"
    ret[("b", 200)] = 0.4  # below half the unscaled model's rate within the context
    assert report.recommend(grid(ppl, ret), 0.05)[0][1] == "a"
    weak = ret | {("none", 100): 0.5}  # the model cannot do the task within its context
    g = grid(ppl, weak)
    assert report.strong_tasks(g) == [] and report.retrieval_at(g, "b", 200) is None
    (title, head, body, _), *_ = report.tables(g, 0.05)
    assert "within its context" in title and body[1][-1].startswith("no: below 0.9")


def test_a_scaling_that_loses_retrieval_within_the_context_is_not_eligible():
    ppl = BASE | {(lb, n): v for lb in ("a", "b") for n, v in ((50, 12), (100, 10), (200, 10.2))}
    ret = STRONG | {("a", 50): 1.0, ("b", 50): 0.5, ("a", 200): 0.5, ("b", 200): 1.0}
    assert report.recommend(grid(ppl, ret), 0.05)[0][1] == "a"  # b loses half of it at 50
    assert report.retrieval_loss(grid(ppl, ret), "none") == 0.0


def verdict(g, cid):
    return next(f for f in report.findings(g) if f.id == cid)


@pytest.mark.parametrize(("far", "spread", "verdict_"), [
    (40.0, 0.01, REPRODUCED), (8.0, 0.01, NOT_REPRODUCED), (9.5, 0.6, INCONCLUSIVE)])  # fmt: skip
def test_direct_extrapolation_reads_its_interval(far, spread, verdict_):
    """Read past the context alone: rows() puts the loss of positions C..T at log(far) + 0.5
    (ppl x 1.65 against 10 at C: 66, 13 and 15.7 with a wide interval)."""
    inside = {k: v for k, v in BASE.items() if k[1] <= C}
    (g,) = report.grids(rows(inside, spread=0.001) + rows({("none", 200): far}, spread=spread))
    f = verdict(g, "stretch-direct-extrapolation")
    assert f.verdict == verdict_, f.result
    assert "measured at 50..200 tokens (0.5x..2x the context 100) on python text" in f.result


@pytest.mark.parametrize(("short", "spread", "verdict_"), [
    (10.6, 0.001, REPRODUCED), (10.4, 0.001, NOT_REPRODUCED),
    (10.5, 0.3, INCONCLUSIVE)])  # fmt: skip
def test_pi_cost_reads_its_interval_and_gives_the_published_size(short, spread, verdict_):
    lines = {("linear(factor=2)", 50): 12.0, ("linear(factor=2)", 100): short}
    g = report.grids(rows(BASE, spread=0.001) + rows(lines, spread=spread))[0]
    f = verdict(g, "stretch-pi-short-cost")
    assert f.verdict == verdict_ and "+12-14%" in f.result


def test_ntk_and_dynamic_yarn_findings_name_what_was_run():
    lines = {(lb, n): v for lb in ("ntk(factor=2)", "dynamic", "dynamic_yarn")
             for n, v in ((50, 12.0), (100, 10.0), (200, 10.5))}  # fmt: skip
    g = grid(BASE | lines, spread=0.001)
    assert verdict(g, "stretch-ntk-zero-shot").verdict == REPRODUCED
    dy = verdict(g, "stretch-dynamic-yarn")
    assert dy.verdict == REPRODUCED and "nothing past 2x was run" in dy.result
    g = grid(BASE | lines | {("none", 250): 50.0, ("dynamic_yarn", 250): 10.4}, spread=0.001)
    assert "past 2x" not in verdict(g, "stretch-dynamic-yarn").result  # 2.5x was run
    g = grid(BASE | lines | {("dynamic_yarn", 200): 30.0, ("ntk(factor=2)", 50): 13.0})
    assert verdict(g, "stretch-ntk-zero-shot").verdict == NOT_REPRODUCED
    assert verdict(g, "stretch-dynamic-yarn").verdict == NOT_REPRODUCED


def test_findings_say_not_measured_without_their_scalings_or_lengths():
    g = grid({("none", 50): 12.0, ("none", 100): 10.0})
    assert {f.verdict for f in report.findings(g)} == {NOT_MEASURED}


def test_texts_are_reported_apart():
    g = grid(BASE, texts=("python", "prose"))
    assert g.texts == ["python", "prose"]
    titles = [t for t, *_ in report.tables(g, 0.05)]
    assert sum(t.startswith("python text") for t in titles) == 2  # prefix and past the context
    assert sum(t.startswith("prose text") for t in titles) == 2


def test_report_files_and_json(tmp_path):
    rs = rows(BASE | {("yarn(factor=2)", 200): 10.5}, STRONG | {("none", 200): 0.0})
    index = report.write_report(rs, str(tmp_path))
    md = (tmp_path / "results.md").read_text()
    assert "Published findings" in md and "positions 100..T only" in md
    assert md.index("m_position.png") < md.index("### Published findings")  # the first figure
    assert index.endswith("index.html") and (tmp_path / "m_ppl.png").exists()
    assert (tmp_path / "m_multikey.png").exists()
    js = report.json_rows(rs)
    assert {r["scaling"] for r in js} == {"none", "yarn(factor=2)"}
    ppl = next(r for r in js if (r["scaling"], r["length"], r["metric"]) == ("none", 100, "ppl"))
    assert ppl["lo"] < ppl["value"] < ppl["hi"] and ppl["n"] == 8 and ppl["text"] == "python"
    ex = next(r for r in js if (r["scaling"], r["length"], r["metric"]) == ("none", 200, "exact"))
    assert (ex["value"], ex["n"], ex["lo"]) == (0.0, 100, 0.0) and 0 < ex["hi"] < 0.05
    assert any(r["metric"] == "ppl_past" for r in js) and any(r["metric"] == "logp" for r in js)


def test_holes_render_as_a_dash_with_their_reason(tmp_path):
    rs = rows(BASE)
    rs.append(dict(rs[0], eval_len=400, metric="loss/w0", value=None, status="n/a",
                   reason="the document holds 300 tokens"))  # fmt: skip
    (g,) = report.grids(rs)
    title, head, body, notes = report.tables(g, 0.05)[0]
    assert body[0][head.index("400")] == "–"
    assert "none at 400: the document holds 300 tokens" in notes
    assert "the document holds 300 tokens" in report.readme_tables(rs)
    report.write_report(rs, str(tmp_path))
    js = [r for r in report.json_rows(rs) if r["length"] == 400 and r["metric"] == "ppl"]
    assert js[0]["value"] is None and "300 tokens" in js[0]["reason"]


def test_a_database_of_another_tool_is_refused():
    arena = [dict(task="copy", encoding="rope", config=json.dumps({"protocol": "arena-3"}))]
    with pytest.raises(ValueError, match="--db x.sqlite: .* none from posenc stretch"):
        require_rows(arena, "stretch", "x.sqlite")
    with pytest.raises(ValueError, match="--db x.sqlite: .* none from posenc arena"):
        require_rows(rows(BASE), "arena", "x.sqlite")
    assert require_rows([], "stretch", "x.sqlite") == []  # empty: a run not started yet
    assert require_rows(rows(BASE) + arena, "stretch", "x.sqlite") == rows(BASE)
    assert require_rows(rows(BASE) + arena, "arena", "x.sqlite") == arena


VALUES = st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True, width=32),
                   st.just(0.0), st.just(1.0))  # fmt: skip
ROW = st.fixed_dictionaries({
    "task": st.sampled_from(["ppl/doc", "ppl/x", "passkey", "multikey", "vartrack", "weird"]),
    "encoding": st.sampled_from(["m:none", "m:yarn(factor=2)", "m:linear(factor=2)", "m:dynamic",
                                 "m:ntk(factor=2)", "m:dynamic_yarn", "n:none", "m:"]),
    "seed": st.integers(0, 2), "train_len": st.sampled_from([100, 100, 100, 1, None]),
    "eval_len": st.sampled_from([1, 2, 50, 100, 200, 250, None]),
    "metric": st.sampled_from(["loss/w0", "loss/w1", "loss@100-200/w0", "pos@0-12/w0", "loss",
                               "ppl", "exact", "exact@0.5/p0", "exact@0.5", "logp@0.5/p1",
                               "loss@0-100/w0", "pos@x/w0", "", "@/"]),
    "value": VALUES, "status": st.sampled_from(["ok", "ok", "n/a", "failed"]),
    "reason": st.one_of(st.none(), st.just("the document is too short")),
    "config": st.sampled_from([CFG["python"], CFG["prose"], "{}", "not json", None,
                               json.dumps({"protocol": "stretch-2", "kind": 3})]),
})  # fmt: skip


SLOW = [HealthCheck.too_slow, HealthCheck.function_scoped_fixture]


@settings(max_examples=60, deadline=None, suppress_health_check=SLOW)
@given(st.lists(ROW, max_size=40))
def test_reports_over_rows_with_holes_never_raise(tmp_path, rs):
    """Whatever rows a run can write (n/a, NULL, NaN, lengths of 1, lone scalings), every report
    renders: the terminal text, the files, the JSON, the README tables."""
    for g in report.grids(rs):
        report.terminal(g, 0.05)
        for f in report.findings(g):
            assert f.verdict != "error", f.result
    report.write_report(rs, str(tmp_path), 0.05)
    json.dumps(report.json_rows(rs))
    report.readme_tables(rs)


def test_the_readme_tables_are_the_recorded_run():
    """docs/stretch/findings.md's tables are report.readme_tables of docs/stretch/stretch.sqlite."""
    from support.readme import REPO, generated_block

    from posenc.arena.store import Store

    with Store(str(REPO / "docs/stretch/stretch.sqlite"), create=False) as store:
        want = report.readme_tables(store.all_rows())
    assert generated_block("stretch") == want


def test_two_windows_take_their_interval_from_their_blocks():
    """Two windows: the mean of their losses, with the spread of their 16 blocks (a t interval
    over two values would be x 12.7 wide); no more blocks than windows: the windows' own."""
    import numpy as np

    from posenc.verdict import stats

    blocks = dict(enumerate(np.random.default_rng(0).normal(2.1, 0.3, 16)))
    got, b = report._spread([2.0, 2.2], blocks), stats.mean(list(blocks.values()))
    assert (got.value, got.n) == (pytest.approx(2.1), 2)
    assert got.hi - got.lo == pytest.approx(b.hi - b.lo)
    assert got.hi - got.lo < stats.mean([2.0, 2.2]).hi - stats.mean([2.0, 2.2]).lo
    assert report._spread([2.0, 2.2], {0: 2.0, 1: 2.2}) == stats.mean([2.0, 2.2])


def test_a_ratio_across_lengths_reads_the_blocks_of_both():
    """ppl at 2C over ppl at C: the longer windows' blocks past C count (their spread widens
    the interval), though no block past C is paired with one at C."""
    import numpy as np

    rng = np.random.default_rng(1)
    windows = [("d", "w0"), ("d", "w1")]
    short = {(*w, a): 2.0 + rng.normal(0, 0.05) for w in windows for a in range(0, 8, 1)}
    calm = dict(short) | {(*w, a): 2.0 + rng.normal(0, 0.05) for w in windows for a in range(8, 16)}
    wild = dict(short) | {(*w, a): 2.0 + rng.normal(0, 1.0) for w in windows for a in range(8, 16)}

    def grid(blocks16):
        mean = {w: float(np.mean([v for k, v in blocks16.items() if k[:2] == w])) for w in windows}
        at8 = {w: float(np.mean([v for k, v in short.items() if k[:2] == w])) for w in windows}
        return report.Grid(
            model="m", context=8, labels=["none"], lengths=[8, 16], texts=["python"],
            loss={("python", "none", 8): at8, ("python", "none", 16): mean}, past={}, curve={},
            blocks={("python", "none", 8): short, ("python", "none", 16): blocks16}, exact={},
            logp={}, holes={}, tasks=[])  # fmt: skip

    a, b = (grid(x).ratio("python", ("none", 16), ("none", 8)) for x in (calm, wild))
    assert a.lo < a.value < a.hi and b.lo < b.value < b.hi
    assert math.log(b.hi / b.lo) > 3 * math.log(a.hi / a.lo)  # the spread past C is read
