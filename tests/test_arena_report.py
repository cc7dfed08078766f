"""The Kazemnejad verdict from synthetic rows (exact match, token accuracy); task overrides."""

from posenc.arena.report import Results, findings
from posenc.explain.claims import Claim

ENCS = ("nope", "t5", "alibi", "rope", "sinusoidal")


def rows(exact: dict, tok: dict, ind_exact: float = 1.0, ind_tok: float = 1.0) -> list[dict]:
    out = []
    for task in ("copy", "reverse", "sort"):
        for enc in ENCS:
            for E, acc, ta in ((8, ind_exact, ind_tok), (16, exact[enc], tok[enc])):
                for metric, v in (("accuracy", acc), ("token_accuracy", ta)):
                    out.append(dict(task=task, encoding=enc, seed=0, train_len=8, eval_len=E,
                                    metric=metric, value=v, status="ok", reason=None))  # fmt: skip
    return out


def verdict(*a, **k) -> Claim:
    (f,) = [f for f in findings(Results(rows(*a, **k))) if f.claim.startswith("Copy")]
    return f


RANKED = dict(nope=0.8, t5=0.8, alibi=0.5, rope=0.2, sinusoidal=0.2)
UNRANKED = dict(nope=0.2, t5=0.2, alibi=0.5, rope=0.8, sinusoidal=0.8)
ZERO = dict.fromkeys(ENCS, 0.0)


def test_exact_match_ranks_when_nonzero():
    f = verdict(RANKED, UNRANKED)
    assert f.verdict == "reproduced (by exact match)"
    assert "nope 1.00 (1.00) → 0.80 (0.20)" in f.result


def test_token_accuracy_ranks_when_exact_match_is_zero_out_of_distribution():
    assert verdict(ZERO, RANKED).verdict == "reproduced (by token accuracy)"
    f = verdict(ZERO, UNRANKED)
    assert f.verdict == "not reproduced (by token accuracy)"
    assert "ranked by OOD token accuracy over copy, reverse, sort" in f.result


def test_token_accuracy_ranks_when_exact_match_is_low_in_distribution():
    f = verdict(RANKED, RANKED, ind_exact=0.3, ind_tok=0.95)
    assert f.verdict == "reproduced (by token accuracy)"


def test_inconclusive_when_not_learned_in_distribution():
    assert verdict(RANKED, RANKED, ind_exact=0.3, ind_tok=0.6).verdict.startswith("inconclusive")


def test_task_overrides_scale_eval_lengths_and_cli_lengths_apply_to_all():
    from posenc.arena.cli import config_from_args, parser
    from posenc.arena.runner import ArenaConfig, task_config

    cfg = ArenaConfig()
    lm, copy = task_config(cfg, "lm"), task_config(cfg, "copy")
    assert (lm.train_len, lm.eval_lens) == (cfg.train_len, cfg.eval_lens)
    L = cfg.task_overrides["copy"]["train_len"]
    assert copy.train_len == L and copy.eval_lens == [L, 2 * L, 4 * L, 8 * L]
    args = parser().parse_args(["--train-len", "24", "--tasks", "copy,lm"])
    cfg = config_from_args(args)
    for t in ("copy", "lm"):
        assert task_config(cfg, t).train_len == 24
        assert task_config(cfg, t).eval_lens == [24, 48, 96, 192]
