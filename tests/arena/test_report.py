"""The arena's findings and report from synthetic rows: every verdict computed from the numbers
(median over seeds, spread shown), encodings below the in-distribution bar left out and shown."""

from __future__ import annotations

import statistics

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.flips import assert_each_rule_flips

from posenc.arena.config import ALGORITHMIC_ENCODINGS, LM_ENCODINGS
from posenc.arena.findings import BAR, addition, kazemnejad, past_L, ruoss, to_the_bar
from posenc.arena.report import findings, readme_tables, style, tables, write_report
from posenc.arena.results import Results
from posenc.verdict import Claim

META = dict(config_hash="h", config="{}", posenc_version="0", torch_version="t", wall_time=1.0)


def row(task, enc, seed, L, E, metric, value):
    status = "n/a" if value is None else "ok"
    return dict(task=task, encoding=enc, seed=seed, train_len=L, eval_len=E, metric=metric,
                value=value, status=status, reason="past its table" if value is None else None,
                **META)  # fmt: skip


def lm_rows(ppl):
    """ppl: encoding -> [ppl at L, 2L, 4L, 8L], L = 8, three seeds (+0, +0.02, +0.04)."""
    return [row("lm", enc, seed, 8, E, "ppl", None if v is None else v + 0.02 * seed)
            for enc, vals in ppl.items() for seed in range(3)
            for E, v in zip((8, 16, 32, 64), vals)]  # fmt: skip


GOOD = {
    "sinusoidal": [10, 30, 80, 200], "learned": [10, None, None, None],
    "alibi": [10, 9.9, 9.8, 9.8], "kerple": [10, 10, 10.1, 10.1], "t5": [10, 10.2, 11, 12],
    "rope": [10, 12, 20, 40], "rope+ntk": [10.5, 11, 13, 18], "rope+yarn": [10.4, 11, 14, 19],
    "rope+dynamic": [10, 11, 14, 20],
}  # fmt: skip


def by_claim(rows) -> dict[str, Claim]:
    return {f.claim[:12]: f for f in findings(Results(rows))}


def test_lm_findings_are_computed_from_the_numbers(tmp_path):
    found = by_claim(lm_rows(GOOD))
    lm = ["Sinusoidal p", "Learned abso", "ALiBi (and K", "T5 bias hold", "Zero-shot NT"]
    assert [found[k].verdict for k in lm] == ["reproduced"] * 5
    assert found["Copy/reverse"].verdict == "not measured"  # no tasks in these rows
    bad = dict(GOOD, sinusoidal=[10, 10.5, 11, 12], alibi=[10, 12, 15, 30],
               **{"rope+ntk": [10, 12, 25, 50]})  # fmt: skip
    found = by_claim(lm_rows(bad))
    assert found["Sinusoidal p"].verdict == "not reproduced"
    assert "10.02 [10.00–10.04] at L=8 → 10.52 [10.50–10.54] at 16" in found["Sinusoidal p"].result
    assert found["ALiBi (and K"].verdict == "not reproduced"
    assert found["Zero-shot NT"].verdict == "not reproduced"
    assert "only some beat raw RoPE" in found["Zero-shot NT"].result
    index = write_report(lm_rows(GOOD), str(tmp_path / "out"))
    md = (tmp_path / "out" / "results.md").read_text()
    assert index.endswith("index.html") and "| learned | 10.02 [10.00–10.04] | n/a |" in md
    assert (tmp_path / "out" / "lm_L8_ppl.png").stat().st_size > 1000


ENCS = ("nope", "t5", "alibi", "rope", "sinusoidal")


def task_rows(exact: dict, tok: dict, at_L: dict | None = None, tasks=("copy", "reverse", "sort"),
              L=4, seeds=3) -> list[dict]:  # fmt: skip
    """Exact match / token accuracy: at_L[enc] at sizes <= L, exact[enc] / tok[enc] beyond."""
    out = []
    for task in tasks:
        for enc in exact:
            for seed in range(seeds):
                for E in range(1, 2 * L + 1):
                    ind = E <= L
                    acc = (at_L or {}).get(enc, 1.0) if ind else exact[enc] + 0.01 * seed
                    ta = 1.0 if ind else tok[enc]
                    out += [row(task, enc, seed, L, E, "accuracy", acc),
                            row(task, enc, seed, L, E, "token_accuracy", ta)]  # fmt: skip
    return out


RANKED = dict(nope=0.8, t5=0.8, alibi=0.5, rope=0.2, sinusoidal=0.2)
UNRANKED = dict(nope=0.2, t5=0.2, alibi=0.5, rope=0.8, sinusoidal=0.8)
ZERO = dict.fromkeys(ENCS, 0.0)


def test_kazemnejad_ranks_by_exact_match_over_L_plus_1_to_2L():
    f = kazemnejad(Results(task_rows(RANKED, UNRANKED)))
    assert f.verdict == "reproduced" and "Ranked by exact match" in f.result
    assert "nope 1.00 → 0.81 [0.80–0.82] / 0.20" in f.result  # median [min–max] over seeds
    f = kazemnejad(Results(task_rows(UNRANKED, RANKED)))
    assert f.verdict == "not reproduced" and "not above" in f.result


def test_kazemnejad_falls_back_to_token_accuracy_when_no_exact_match_survives():
    f = kazemnejad(Results(task_rows(ZERO, RANKED)))
    assert f.verdict == "reproduced" and "Ranked by token accuracy" in f.result
    between = dict(RANKED, alibi=0.1)
    f = kazemnejad(Results(task_rows(ZERO, between)))
    assert f.verdict == "not reproduced" and "ALiBi not between" in f.result


def test_an_encoding_below_the_bar_is_left_out_with_its_number():
    low = {"nope": BAR - 0.1}
    f = kazemnejad(Results(task_rows(RANKED, UNRANKED, at_L=low, tasks=("copy",))))
    assert f.verdict == "inconclusive" and "(below the bar: left out)" in f.result
    rows = task_rows(RANKED, UNRANKED, at_L=low, tasks=("copy",))
    rows += task_rows(RANKED, UNRANKED, tasks=("sort",))
    f = kazemnejad(Results(rows))
    assert f.verdict == "reproduced" and "over sort:" in f.result  # copy left out


def test_ruoss_compares_randomized_with_its_base():
    encs = {"rope": 0.0, "sinusoidal": 0.0, "randomized:rope": 0.0, "randomized:sinusoidal": 0.0}
    tok = {"rope": 0.3, "sinusoidal": 0.2, "randomized:rope": 0.6, "randomized:sinusoidal": 0.5}
    f = ruoss(Results(task_rows(encs, tok)))
    assert f.verdict == "reproduced" and "randomized:rope +30.0 points" in f.result
    f = ruoss(Results(task_rows(encs, dict(tok, **{"randomized:sinusoidal": 0.1}))))
    assert f.verdict == "not reproduced"
    f = ruoss(Results(task_rows(encs, tok, at_L={"randomized:rope": 0.5})))
    assert "below the bar" in f.result


@pytest.mark.parametrize("far, verdict", [(0.1, "reproduced"), (0.9, "not reproduced")])
def test_addition_is_judged_at_1_1_1_25_1_5_times_the_digits(far, verdict):
    L = 8  # sizes 9, 10, 12
    rows = []
    for enc, at_L in (("rope", 1.0), ("nope", 0.2)):
        for seed in range(3):
            for E in range(1, 2 * L + 1):
                acc = at_L if E <= L else (0.9 if E <= 10 else far)
                rows.append(row("addition", enc, seed, L, E, "accuracy", acc))
    f = addition(Results(rows))
    assert f.verdict == verdict
    assert "at 9 (1.1×), 0.90 at 10 (1.25×)" in f.result
    assert "nope 0.20 at L (below the bar: left out)" in f.result


def test_every_default_label_gets_its_own_colour_and_line_style():
    labels = list(dict.fromkeys(LM_ENCODINGS + ALGORITHMIC_ENCODINGS))
    styles = {(style(e)["color"], style(e)["ls"], style(e)["marker"]) for e in labels}
    assert len(styles) == len(labels)


def test_per_model_metrics_get_one_training_table():
    """train_loss@f / table_* rows (one per trained model, at eval_len = L) are one table with
    the curve in step order, not per-length tables."""
    rows = [row("copy", "learned", 0, 8, E, "accuracy", 0.5) for E in (8, 16)]
    rows += [row("copy", "learned", 0, 8, 8, f"train_loss@{f:g}", 1 / f) for f in (1.0, 0.125, 0.5)]
    rows += [row("copy", "learned", 0, 8, 8, "table_jump", 1.4)]
    found = {title: (header, body) for title, header, body in tables(Results(rows))}
    assert not any("train_loss" in t or "table_jump" in t for t in found)
    header, body = found["copy, L=8: training (learning curve, learned tables), median"]
    assert header == [
        "encoding",
        "train_loss@0.125",
        "train_loss@0.5",
        "train_loss@1",
        "table_jump",
    ]
    assert body == [["learned", "8.000", "2.000", "1.000", "1.400"]]


def test_every_finding_is_declared_and_each_rule_flips():
    """The arena's findings go through posenc.verdict: each is data (paper, wording, rules)
    and, measured on these rows, each of its rules flipped across its threshold changes the
    verdict; no finding is left unmeasured by every row set."""
    encs = {"rope": 0.0, "sinusoidal": 0.0, "randomized:rope": 0.0, "randomized:sinusoidal": 0.0}
    tok = {"rope": 0.3, "sinusoidal": 0.2, "randomized:rope": 0.6, "randomized:sinusoidal": 0.5}
    adds = [row("addition", "rope", s, 8, E, "accuracy", 1.0 if E <= 8 else 0.1)
            for s in range(3) for E in range(1, 17)]  # fmt: skip
    sets = [lm_rows(GOOD), task_rows(RANKED, UNRANKED), task_rows(encs, tok), adds]
    seen = set()
    for rows in sets:
        for f in findings(Results(rows)):
            assert f.paper and f.claim and f.id.startswith("finding-")
            if f.verdict != "not measured":
                assert_each_rule_flips(f)
                seen.add(f.id)
    from posenc.arena.findings_frontier import frontier_findings

    assert len(seen) == len(findings(Results([]))) - len(frontier_findings(Results([])))


@given(st.lists(st.lists(st.floats(0, 1), min_size=4, max_size=4), min_size=1, max_size=3))
def test_past_L_is_the_median_over_seeds_of_the_mean_past_L(per_seed):
    """Past L: per seed the mean over sizes L+1..2L (sizes <= L never count), then the median
    over seeds, exact match / token accuracy."""
    rows = []
    for seed, vals in enumerate(per_seed):
        for E, v in enumerate(vals, start=1):
            rows += [row("copy", "nope", seed, 2, E, "accuracy", v),
                     row("copy", "nope", seed, 2, E, "token_accuracy", 1 - v)]  # fmt: skip
    ((_, header, body),) = past_L(Results(rows))
    em = statistics.median(statistics.mean(v[2:]) for v in per_seed)
    tok = statistics.median(statistics.mean(1 - x for x in v[2:]) for v in per_seed)
    assert header == ["encoding", "copy (L=2)"] and body == [["nope", f"{em:.2f} / {tok:.2f}"]]


def test_the_stop_has_a_table_of_steps_and_a_plot_of_its_checks(tmp_path):
    """Learned: seeds that reached the stop / seeds and steps taken (median [min–max]), one
    column per task; the validation curves are a plot, not a table column each. A seed at the
    cap (learned 0) is counted apart from the bar (its exact match at L is 0.99 here)."""
    rows = []
    for seed, (steps, learned) in enumerate([(500, 1.0), (750, 1.0), (1000, 0.0)]):
        rows += [row("copy", "nope", seed, 8, 8, "accuracy", 0.99),
                 row("copy", "nope", seed, 8, 8, "steps", steps),
                 row("copy", "nope", seed, 8, 8, "learned", learned)]  # fmt: skip
        rows += [row("copy", "nope", seed, 8, 8, f"valid@{s}", s / 1000) for s in (250, steps)]
    ((title, header, body),) = to_the_bar(Results(rows))
    assert header == ["encoding", "copy (L=8)"] and body == [["nope", "2/3: 750 [500–1000]"]]
    assert not any("valid@" in t or "steps" in h for t, h, _ in tables(Results(rows)) for h in h)
    write_report(rows, str(tmp_path))
    assert (tmp_path / "copy_L8_bar.png").exists()
    assert "Learned: seeds that reached the stop (0.97" in (tmp_path / "results.md").read_text()


@pytest.mark.parametrize(
    "block, db, verdicts",
    [
        ("arena", "docs/arena/arena.sqlite", True),
        ("schemes", "docs/arena/schemes/arena.sqlite", True),
        ("lengths", "docs/arena/lengths/arena.sqlite", False),  # two L per task: no verdicts
    ],
)
def test_the_readme_tables_are_the_recorded_runs(block, db, verdicts):
    """docs/arena/findings.md's sections are report.readme_tables of the committed databases."""
    from support.readme import REPO, generated_block

    from posenc.arena.store import Store

    with Store(str(REPO / db), create=False) as store:
        assert generated_block(block) == readme_tables(store.all_rows(), verdicts=verdicts)


def test_report_of_a_stretch_database_is_refused(tmp_path, capsys):
    """`posenc arena report` on posenc stretch's database: one line naming --db, exit 2."""
    from support.readme import REPO

    from posenc.cli import main

    db, out = REPO / "docs/stretch/stretch.sqlite", tmp_path / "o"
    assert main(["arena", "report", "--db", str(db), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "none from posenc arena" in err
    assert not out.exists()
