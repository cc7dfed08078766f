"""The claim type shared by `posenc explain` (the seeds' claims) and the arena report (published
findings): a claim, what was measured, and a verdict computed from the numbers.

A seed's claim carries its measured numbers (`measured`) and the rules that turn them into the
verdict (`rules`, then `otherwise`): the verdict is computed, never written, and the page
states the rule beside the numbers.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field

HOLDS, FAILS, CAVEAT, UNMEASURED = (
    "holds",
    "does not hold",
    "holds with a caveat",
    "not measured here",
)
VERDICTS = (HOLDS, FAILS, CAVEAT, UNMEASURED)  # a seed claim's; the arena has its own words


OPS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}


@dataclass(frozen=True)
class Rule:
    """`verdict` when measured[quantity] <op> threshold."""

    quantity: str
    op: str
    threshold: float
    verdict: str

    def applies(self, measured: dict) -> bool:
        return OPS[self.op](measured[self.quantity], self.threshold)

    def __str__(self) -> str:
        return f"{self.verdict} if {self.quantity} {self.op} {self.threshold:g}"


def decide(rules, otherwise: str, measured: dict) -> str:
    """The verdict of the first rule that applies, else `otherwise`."""
    return next((r.verdict for r in rules if r.applies(measured)), otherwise)


@dataclass
class Table:
    header: list[str]
    rows: list[list[str]]
    caption: str = ""


@dataclass(kw_only=True)
class Claim:
    """One claim and its check. A seed's claim names the seed file and quotes it; a published
    finding (the arena's) names the paper instead."""

    id: str  # html anchor, e.g. "claim-003-worked-example"
    claim: str  # what is claimed, briefly, in English
    result: str  # the numbers
    verdict: str = ""  # HOLDS / FAILS / CAVEAT / UNMEASURED (the arena's: "reproduced", ...);
    # computed from measured by rules where they are given
    seed: str = ""  # seed file name (shared/seeds/)
    quote: str = ""  # the seed's own words, original language, short: enough to find them
    paper: str = ""  # the citation and its numbers, for a published finding
    about: tuple[str, ...] = ()  # encodings the claim concerns (their pages show it)
    method: str = ""  # what was computed
    note: str = ""
    tables: list[Table] = field(default_factory=list)
    code: str = ""  # the seed's code, quoted
    measured: dict[str, float] = field(default_factory=dict)  # the numbers the verdict reads
    rules: tuple[Rule, ...] = ()  # in order; the first that applies gives the verdict
    otherwise: str = ""  # the verdict when no rule applies

    def __post_init__(self) -> None:
        if self.rules:
            self.verdict = decide(self.rules, self.otherwise, self.measured)

    @property
    def rule(self) -> str:
        """The rules as a sentence: "does not hold if err > 0.0005; else holds"."""
        if not self.rules:
            return ""
        return "; ".join(map(str, self.rules)) + f"; else {self.otherwise}"
