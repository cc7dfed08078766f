"""Every checkable claim of the five seeds, as data (issue 14, item 1).

posenc.explain.claims checks some of the seeds' claims; this inventory lists all of them, each
with a verbatim quote that locates it in the seed, an English paraphrase, its kind, and either
the id of the posenc check that settles it, a line on how it would be measured, or why it cannot
be. Statements that are not checkable (history, attribution, opinion, definition) are listed
only where a reader might take them for a claim.

    item        Item, KINDS, STATUSES
    seed000..4  SEED (the file name in posenc/explain/seeds/) and ITEMS, in text order
"""

from __future__ import annotations

from posenc.explain.claims.inventory import seed000, seed001, seed002, seed003, seed004
from posenc.explain.claims.inventory.item import CHECKED, HOW, KINDS, NOT_CHECKABLE, STATUSES, Item

SEEDS = (seed000, seed001, seed002, seed003, seed004)
ALL: tuple[Item, ...] = tuple(item for seed in SEEDS for item in seed.ITEMS)
BY_ID = {item.id: item for item in ALL}
SEED_OF = {item.id: seed.SEED for seed in SEEDS for item in seed.ITEMS}  # item id -> file name


def by_seed() -> dict[str, tuple[Item, ...]]:
    """{seed file name: its items, in text order}, seeds in order."""
    return {seed.SEED: seed.ITEMS for seed in SEEDS}


__all__ = ["ALL", "BY_ID", "CHECKED", "HOW", "KINDS", "NOT_CHECKABLE", "SEEDS", "SEED_OF",
           "STATUSES", "Item", "by_seed"]  # fmt: skip
