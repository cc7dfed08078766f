"""The seeds' claims, each checked by a computation (never by a hard-coded verdict).

The seeds are the five Chinese tutorials posenc grew from (`shared/seeds/`). Each claim names
the seed file, quotes it briefly in its own words, renders the claim in English, measures, and
gives a verdict: "holds", "does not hold", "holds with a caveat", or "not measured here".
Numbers and code the seeds print are quoted as data. Each claim carries what it measured
(`measured`) and the rules that turn those numbers into its verdict (`rules`, `otherwise`,
shown on the page): a verdict is computed, never written down.

    base        Claim (shared with the arena's published findings), Table, the verdicts
    seed000..4  one module per seed: its quoted text and code, a function per claim, CHECKS
                (seed001b, seed002b, seed002c, seed003b, seed004b: more of seeds 001 to 004,
                where one module would pass 300 lines)
    inventory   every checkable claim of the seeds, as data: the check that settles it, how it
                would be measured, or why it cannot be
    arena       the arena's results for one encoding (`--arena DB[,DB...]`)
    trained     claims that need trained models: Evidence from the arena's databases
    trained01, trained23   those claims of seeds 000-001 and 002-003
"""

from __future__ import annotations

from pathlib import Path

from posenc import analysis
from posenc.explain.claims import (
    seed000,
    seed001,
    seed001b,
    seed002,
    seed002b,
    seed002c,
    seed003,
    seed003b,
    seed004,
    seed004b,
    trained01,
    trained23,
)
from posenc.explain.claims.arena import extrapolates
from posenc.explain.claims.base import (
    CAVEAT,
    FAILS,
    HOLDS,
    UNMEASURED,
    VERDICTS,
    Claim,
    Rule,
    Table,
    decide,
)

SEEDS = (
    seed000,
    seed001,
    seed001b,
    seed002,
    seed002b,
    seed002c,
    seed003,
    seed003b,
    seed004,
    seed004b,
    trained01,
    trained23,
)
CHECKS = [check for seed in SEEDS for check in seed.CHECKS]  # each (dim, n) -> Claim
ARENA_CHECKS = trained01.CHECKS + trained23.CHECKS  # these take arena= too


def check_all(*, dim: int = 64, max_pos: int = 128, arena: str | Path | None = None) -> list[Claim]:
    """Every claim, checked. A check whose encoding is missing reports 'not measured here'."""
    out = []
    for check in CHECKS:
        kwargs = {"arena": arena} if check in ARENA_CHECKS else {}
        try:
            out.append(check(dim, max_pos, **kwargs))
        except (KeyError, ValueError, AttributeError, ImportError) as err:
            if isinstance(err, (FileNotFoundError, ValueError)) and arena and kwargs:
                raise
            out.append(
                Claim(
                    id=f"claim-{check.__name__[6:].replace('_', '-')}",
                    claim=check.__doc__ or check.__name__,
                    method="could not run",
                    result=analysis.describe_error(err),
                    verdict=UNMEASURED,
                )
            )
    return out


def markdown_table(claims: list[Claim]) -> str:
    """| seed | claim | verdict | measured | rows, one per claim, in check order."""
    lines = ["| seed | claim | verdict | measured |", "|---|---|---|---|"]
    for c in claims:
        numbers = "; ".join(f"{k} = {v:.3g}" for k, v in c.measured.items()) or c.result
        cell = lambda text: text.replace("|", "\\|").replace("\n", " ")  # noqa: E731
        lines.append(f"| {c.seed[:3]} | {cell(c.claim)} | {c.verdict} | {cell(numbers)} |")
    return "\n".join(lines)


__all__ = [
    "ARENA_CHECKS",
    "CAVEAT",
    "CHECKS",
    "FAILS",
    "HOLDS",
    "SEEDS",
    "UNMEASURED",
    "VERDICTS",
    "Claim",
    "Rule",
    "Table",
    "check_all",
    "decide",
    "markdown_table",
    "extrapolates",
]
