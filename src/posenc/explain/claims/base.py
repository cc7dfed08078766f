"""The claim type shared by `posenc explain` (the seeds' claims) and the arena report (published
findings): a claim, what was measured, and a verdict computed from the numbers."""

from __future__ import annotations

from dataclasses import dataclass, field

HOLDS, FAILS, CAVEAT, UNMEASURED = (
    "holds",
    "does not hold",
    "holds with a caveat",
    "not measured here",
)
VERDICTS = (HOLDS, FAILS, CAVEAT, UNMEASURED)  # a seed claim's; the arena has its own words


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
    verdict: str  # HOLDS / FAILS / CAVEAT / UNMEASURED; the arena's "reproduced", ...
    seed: str = ""  # seed file name (shared/seeds/)
    quote: str = ""  # the seed's own words, original language, short: enough to find them
    paper: str = ""  # the citation and its numbers, for a published finding
    about: tuple[str, ...] = ()  # encodings the claim concerns (their pages show it)
    method: str = ""  # what was computed
    note: str = ""
    tables: list[Table] = field(default_factory=list)
    code: str = ""  # the seed's code, quoted
