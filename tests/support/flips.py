"""Each rule of a checked claim flipped across its threshold (the engine's flip test, shared by
the seeds' claims and the arena's findings)."""

from __future__ import annotations

from posenc.verdict import Claim, decide


def sides(rule) -> tuple[float, float]:
    """(a value where the rule applies, one where it does not)."""
    step = max(abs(rule.threshold), 1.0) * 1e-3
    below, above = rule.threshold - step, rule.threshold + step
    applies = below if rule.op in ("<", "<=") else above
    return applies, above if applies == below else below


def assert_each_rule_flips(c: Claim) -> None:
    """The verdict is decide(rules, otherwise, measured), every rule reads a measured number,
    and each rule, from its place in the order, gives its verdict on one side of its threshold
    and not on the other; the claim's rules give at least two verdicts (on either side of a
    threshold, or at it: a pair of rules < t and > t holds only at t)."""
    assert c.rules, f"{c.id}: no rules"
    assert c.verdict == decide(c.rules, c.otherwise, c.measured), c.id
    outcomes = set()
    for i, rule in enumerate(c.rules):
        assert rule.quantity in c.measured, f"{c.id}: {rule.quantity} not measured"
        yes, no = sides(rule)
        rest = c.rules[i:]
        assert decide(rest, c.otherwise, {**c.measured, rule.quantity: yes}) == rule.verdict, c.id
        assert not rule.applies({rule.quantity: no}), f"{c.id}: {rule} applies on both sides"
        outcomes |= {decide(c.rules, c.otherwise, {**c.measured, rule.quantity: v})
                     for v in (yes, no, rule.threshold)}  # fmt: skip
    assert len(outcomes) >= 2, f"{c.id}: the same verdict whatever the numbers"
