"""The seeds' claims (posenc.explain.claims): the inventory, each seed's verdicts, and that every
verdict is computed from the quoted data, not written down."""

from __future__ import annotations

import ast
import inspect

import pytest
import torch
from support.flips import assert_each_rule_flips
from support.readme import REPO, generated_block

from posenc import verdict as V
from posenc.explain import claims as C
from posenc.explain.claims import seed000, seed001, seed002, seed003, seed004, trained
from posenc.explain.claims.base import SEEDS_DIR, line_of
from posenc.explain.claims.tools import sinusoid


@pytest.fixture(scope="module")
def claim_list():
    return C.check_all(dim=32, max_pos=64)


@pytest.fixture(scope="module")
def all_claims(claim_list):
    return {c.id: c for c in claim_list}


# ------------------------------------------------------------------------------ inventory


def test_every_claim_is_checked_with_a_seed_and_a_verdict(all_claims):
    assert len(all_claims) >= 20
    for c in all_claims.values():
        assert c.seed.endswith(".txt") and c.quote and c.result
        assert c.verdict in (C.HOLDS, C.FAILS, C.CAVEAT, C.UNMEASURED)
    # without --arena only the claims that need trained models are not measured
    unmeasured = {c.id for c in all_claims.values() if c.verdict == C.UNMEASURED}
    assert unmeasured == {check(32, 64).id for check in C.ARENA_CHECKS}


def test_inventory_ids_seeds_quotes_claims(claim_list):
    ids = [c.id for c in claim_list]
    assert len(ids) == len(set(ids)) == len(C.CHECKS)
    names = [check.__name__ for check in C.CHECKS]
    assert len(names) == len(set(names))
    for module, c in zip([m for m in C.SEEDS for _ in m.CHECKS], claim_list):
        # each seed module checks its own seed's claims (trained: seeds 000 to 003)
        assert c.seed == getattr(module, "SEED", c.seed)
        assert c.id.startswith(f"claim-{c.seed[:3]}-")
        assert c.quote and c.claim and c.method and c.result and c.about
        assert c.verdict in C.VERDICTS and not c.paper


def test_quotes_are_the_seeds_own_words(claim_list):
    """The seed texts ship with posenc (package data): every quote is checked, and its line."""
    assert sorted(p.name for p in SEEDS_DIR.glob("*.txt")) == sorted({c.seed for c in claim_list})
    for c in claim_list:
        text = (SEEDS_DIR / c.seed).read_text(encoding="utf-8")
        assert c.quote in text, c.id
        assert c.quote in text.splitlines()[c.line - 1] or c.line == line_of(c.seed, c.quote), c.id
        assert c.line >= 1


def test_every_check_is_declared_data():
    """Each check is a finding declared on posenc.verdict: the inventory item it settles gives
    the quote and the wording (written once), the check only measures (returns Measured)."""
    from posenc.explain.claims import inventory

    items = {it.id: it for it in inventory.ALL}
    for check in C.CHECKS:
        f = check.finding
        assert isinstance(f, V.Finding) and V.MEASUREMENTS[f.measure] is check.measure
        item = next(it for it in items.values() if it.quote == f.source.quote)
        assert item.claim == f.claim and item.check == f.id, f.id
        tree = ast.parse(inspect.getsource(check.measure))
        calls = {getattr(n.func, "id", None) for n in ast.walk(tree) if isinstance(n, ast.Call)}
        assert "Claim" not in calls, f.id


def test_a_check_that_raises_is_an_error_not_a_verdict(monkeypatch, capsys):
    """An exception inside a check stays an error: its message in the table, and `posenc
    explain --claims` exits 1."""
    from posenc.cli import main as cli_main

    def broken(dim, n):
        raise AttributeError("'Tensor' object has no attribute 'arrange'")

    name = seed000.claim_000_unique.finding.measure
    monkeypatch.setitem(V.MEASUREMENTS, name, broken)
    got = {c.id: c for c in C.check_all(dim=32, max_pos=64)}["claim-000-unique"]
    assert got.verdict == C.ERROR and "AttributeError" in got.error and "arrange" in got.result
    assert cli_main(["explain", "--claims", "--dim", "32", "--max-pos", "64"]) == 1
    out, err = capsys.readouterr()
    assert "| error | AttributeError: 'Tensor' object has no attribute 'arrange' |" in out
    assert "claim-000-unique" in err and "1 check(s) raised" in err


def test_every_verdict_is_computed_from_its_numbers(claim_list):
    """Every measured claim: its verdict is decide(rules, otherwise, measured), it states the
    rule, and each rule flipped across its threshold gives its verdict on one side only."""
    measured = [c for c in claim_list if c.verdict != C.UNMEASURED]
    assert len(measured) >= 19
    for c in measured:
        assert c.rules and c.rule.endswith(f"else {c.otherwise}"), c.id
        assert_each_rule_flips(c)


def test_claim_takes_keywords_only():
    with pytest.raises(TypeError):
        C.Claim("claim-x", "a claim", "a result", C.HOLDS)


# ------------------------------------------------------------------------------ verdicts


def test_seed_002_table_holds(all_claims):
    c = all_claims["claim-002-table"]
    assert c.verdict == C.HOLDS
    assert c.tables[0].rows[1][1] == "0.8415 / 0.8415"


def test_seed_003_example_is_wrong_with_correct_values(all_claims):
    c = all_claims["claim-003-worked-example"]
    assert c.verdict == C.FAILS
    p1 = c.tables[0].rows[0]  # t = 1: seed, 10^(2/4) formula, correct
    assert p1[1:3] == ["0.9950", "0.0998"]
    assert p1[3] == f"{torch.sin(torch.tensor(1 / 10**0.5)).item():.4f}"
    assert p1[5:] == ["0.0100", "1.0000"]


def test_seed_004_code_bugs_then_fixed(all_claims):
    c = all_claims["claim-004-code"]
    rows = c.tables[0].rows
    assert c.verdict == C.FAILS
    assert "AttributeError" in rows[0][1] and "arrange" in rows[0][1]
    assert rows[-1][1].startswith("runs")
    assert float(rows[-1][1].rsplit("=", 1)[1]) < 1e-5


def test_transformer_xl_code_is_absolute(all_claims):
    c = all_claims["claim-002-transformer-xl"]
    assert c.verdict == C.FAILS
    assert "posenc's transformer_xl" in c.result and "0.0e+00" in c.result


def test_seed_claims_that_hold_or_not(all_claims):
    assert all_claims["claim-000-unique"].verdict == C.HOLDS
    assert all_claims["claim-000-consistent"].verdict == C.HOLDS
    assert all_claims["claim-002-order"].verdict == C.CAVEAT  # a causal mask sees order
    assert all_claims["claim-002-frequency-order"].verdict == C.FAILS
    assert all_claims["claim-001-every-block"].verdict == C.FAILS
    assert "1 time(s)" in all_claims["claim-001-every-block"].result
    assert all_claims["claim-004-clock"].verdict == C.HOLDS
    assert "IndexError" in str(all_claims["claim-002-t5-deberta"].tables[0].rows)


# ------------------------------------------------------------------------------ corrupted quotes
# The same check on altered quoted data (a wrong number, repaired code) must change its verdict.


def test_a_wrong_number_in_seed_002s_table_fails():
    table = [row[:] for row in seed002.TABLE]
    table[1][1] = 0.8515  # sin(1) = 0.8415
    c = seed002.claim_002_table(32, 64, table=table)
    assert c.verdict == C.FAILS and "position 1, dim 0" in c.result


def test_seed_003s_example_with_right_numbers_holds():
    t = torch.arange(1, 6)
    right = [[round(float(v), 4) for v in row] for row in sinusoid(t, 4)]
    assert seed003.claim_003_worked_example(32, 64, example=right).verdict == C.HOLDS


def test_seed_000s_code_with_another_base_fails():
    code = seed000.CODE.replace("10000.0", "1000.0")
    assert seed000.claim_000_code(32, 64, code=code).verdict == C.FAILS
    assert seed000.claim_000_code(32, 64).verdict == C.CAVEAT


def test_seed_004s_code_repaired_holds():
    fixed = seed004.fixed_stages(seed004.CODE)[-1][1]
    c = seed004.claim_004_code(32, 64, code=fixed)
    assert c.verdict == C.HOLDS and c.result.startswith("as written it runs")


def test_a_relative_transformer_xl_table_holds():
    code = seed002.TXL.replace(
        "torch.randn(max_len, max_len)", "torch.randn(2 * max_len - 1)"
    ).replace(
        "self.position_bias[:q_len, :k_len]",
        "self.position_bias[torch.arange(q_len)[:, None] - torch.arange(k_len) + 31]",
    )
    assert seed002.claim_002_transformer_xl(32, 64, code=code).verdict == C.HOLDS


def test_an_absolute_t5_table_fails():
    t5 = seed002.T5.replace("unsqueeze(1) - torch.arange", "unsqueeze(1) + torch.arange")
    assert seed002.claim_002_t5_deberta(32, 64, t5=t5).verdict == C.FAILS


def test_one_block_has_one_encoding():
    c = seed001.claim_001_every_block(32, 64, depth=1)
    assert c.verdict == C.HOLDS and "1 blocks" in c.result


def test_readme_table_is_the_generated_one():
    """docs/claims.md's table is `posenc explain --claims --arena <trained.ARENA>`, to the
    character (timings are left out of the text, so it regenerates the same)."""
    table = generated_block("claims")
    dbs = [REPO / db for db in trained.ARENA.split(",")]
    generated = C.markdown_table(C.check_all(dim=64, max_pos=128, arena=dbs))
    assert table.strip() == generated.strip()
