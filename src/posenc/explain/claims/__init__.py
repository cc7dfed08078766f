"""The seeds' claims, each checked by a computation (never by a hard-coded verdict).

The seeds are the five Chinese tutorials posenc grew from (posenc/explain/seeds/, package
data). Each claim is data (posenc.verdict): the inventory item it settles (the seed file, a
verbatim quote and its line, the English wording), the measurement (a check function returning
named numbers) and the rules that turn the numbers into its verdict, computed by the engine and
shown beside them. Numbers and code the seeds print are quoted as data.

    base        seed_claim (declares a check), the seed texts
    seed000..4  one module per seed: its quoted text and code, a function per claim, CHECKS
    inventory   every checkable claim of the seeds, as data: the check that settles it, how it
                would be measured, or why it cannot be
    arena       the arena's results for one encoding (`--arena DB[,DB...]`)
    trained     the claims of seeds 000-003 that need trained models: Evidence from the arena's
                databases
"""

from __future__ import annotations

from pathlib import Path

from posenc import verdict
from posenc.arena.store import Store
from posenc.explain.claims import seed000, seed001, seed002, seed003, seed004, trained
from posenc.explain.claims.arena import arena_results, databases, extrapolates
from posenc.explain.claims.base import seed_sentence
from posenc.explain.i18n import numbers, tr
from posenc.verdict import (
    CAVEAT,
    ERROR,
    FAILS,
    HOLDS,
    UNMEASURED,
    VERDICTS,
    Claim,
    Rule,
    Table,
    decide,
)

SEEDS = (seed000, seed001, seed002, seed003, seed004, trained)
CHECKS = [check for seed in SEEDS for check in seed.CHECKS]  # each (dim, n) -> Claim
ARENA_CHECKS = trained.CHECKS  # these take arena= too


def check_all(*, dim: int = 64, max_pos: int = 128, arena: str | Path | None = None) -> list[Claim]:
    """Every claim, checked by the verdict engine: a check that raises gives ERROR with its
    message, evidence absent by design (no --arena) "not measured here". A database that does
    not exist or is not the arena's is refused first (FileNotFoundError / ValueError)."""
    if arena is not None:
        check_databases(arena)
    return [check(dim, max_pos, **({"arena": arena} if check in ARENA_CHECKS else {}))
            for check in CHECKS]  # fmt: skip


def check_databases(arena) -> None:
    """Every `--arena` database exists and is an arena results database."""
    if not databases(arena):
        raise ValueError("--arena: give at least one database file")
    for path in databases(arena):
        arena_results(path, "")  # opens it: FileNotFoundError / ValueError naming the path
        check_values(path)


# a row every check can read: names as text, sizes as positive integers, a number or NULL
BAD_ROW = """SELECT task, encoding, seed, train_len, eval_len, metric, value FROM results WHERE
    typeof(task) != 'text' OR typeof(encoding) != 'text' OR typeof(metric) != 'text'
    OR typeof(seed) != 'integer' OR typeof(train_len) != 'integer' OR train_len < 1
    OR typeof(eval_len) != 'integer' OR eval_len < 1
    OR typeof(value) NOT IN ('real', 'integer', 'null') LIMIT 1"""


def check_values(path) -> None:
    """ValueError naming the database and its first row a check could not read (a value
    edited by hand, another tool's rows): an input error, found before any check runs."""
    import sqlite3

    with Store(str(path), create=False) as store:
        try:
            row = store.conn.execute(BAD_ROW).fetchone()
        except sqlite3.DatabaseError as err:
            raise ValueError(f"--arena {path}: unreadable results table ({err})") from None
    if row is not None:
        names = ("task", "encoding", "seed", "train_len", "eval_len", "metric", "value")
        said = ", ".join(f"{k}={v!r}" for k, v in zip(names, row))
        raise ValueError(
            f"--arena {path}: a corrupt row ({said}): every size must be a positive integer, "
            "every value a number or NULL"
        )


ZH_CLAIM = "the tutorial’s sentence"  # the claim column, other languages: the seed's own words


def markdown_table(claims: list[Claim], lang: str = "en") -> str:
    """| seed:line | claim | verdict | measured | rows, one per claim, in check order (timings
    left out: the table regenerates to the same text). In another language the claim is the
    tutorial's own sentence and the rest comes from the same numbers through the catalog."""
    if lang == "en":
        return verdict.markdown(
            ["seed:line", "claim", "verdict", "measured"],
            [[verdict.where(c), c.claim, c.verdict, verdict.numbers(c)] for c in claims],
        )
    return verdict.markdown(
        [tr(h, lang) for h in ("seed:line", ZH_CLAIM, "verdict", "measured values")],
        [[verdict.where(c), seed_sentence(c.seed, c.quote, most=100) if c.seed else c.claim,
          tr(c.verdict, lang), numbers(c, lang)] for c in claims],
    )  # fmt: skip


__all__ = ["ARENA_CHECKS", "CAVEAT", "CHECKS", "ERROR", "FAILS", "HOLDS", "SEEDS", "UNMEASURED",
           "VERDICTS", "Claim", "Rule", "Table", "check_all", "decide", "markdown_table",
           "extrapolates"]  # fmt: skip
