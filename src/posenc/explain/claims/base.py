"""`seed_claim` declares a check as a seed's claim on posenc.verdict (see
posenc.explain.claims); the seed texts its quotes are located in."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

from posenc.explain.claims import inventory
from posenc.verdict import HOLDS, Source, finding

SEEDS_DIR = Path(__file__).resolve().parents[1] / "seeds"  # package data: the five tutorials


@cache
def seed_text(seed: str) -> str:
    """The text of a seed file (posenc/explain/seeds/)."""
    return (SEEDS_DIR / seed).read_text(encoding="utf-8")


def line_of(seed: str, quote: str) -> int:
    """The 1-based line where `quote` starts in the seed (0 if it is not there)."""
    text = seed_text(seed)
    at = text.find(quote)
    return text.count("\n", 0, at) + 1 if at >= 0 else 0


def seed_sentence(seed: str, quote: str, most: int = 240) -> str:
    """The tutorial's own sentence that holds `quote` (from the seed file, cut at 。！？；or the
    line's end; markdown marks dropped); `quote` alone if it is not in the seed."""
    text = seed_text(seed)
    at = text.find(quote)
    if at < 0:
        return quote
    end_of_quote = at + len(quote)
    start = max(text.rfind(ch, 0, at) for ch in "。！？；\n") + 1
    ends = [i for i in (text.find(ch, end_of_quote) for ch in "。！？；") if i >= 0]
    line_end = text.find("\n", end_of_quote)
    end = min([*ends, line_end if line_end >= 0 else len(text) - 1]) + 1
    said = re.sub(r"^[*#>\-\s]+", "", text[start:end].replace("**", "")).strip()
    if len(said) > most:  # a long line without a stop: the quote and what is around it
        i = said.find(quote.replace("**", ""))
        lo = max(0, i - (most - len(quote)) // 2)
        said = ("…" if lo else "") + said[lo : lo + most] + ("…" if lo + most < len(said) else "")
    return said


def seed_claim(item_id: str, *, id: str, about, rules, otherwise: str = HOLDS):
    """Declare the check below as the claim of inventory item `item_id` (posenc.verdict.finding:
    quote and wording from the inventory, the verdict from `rules`, `otherwise` where none
    applies), appended to the CHECKS list of the module that declares it."""
    it, seed = inventory.BY_ID[item_id], inventory.SEED_OF[item_id]
    src = Source(seed, it.quote, line_of(seed, it.quote))
    mark = finding(id=id, claim=it.claim, source=src, about=about, rules=rules, otherwise=otherwise)

    def wrap(fn):
        check = mark(fn)
        fn.__globals__["CHECKS"].append(check)  # its module's CHECKS: page order
        return check

    return wrap
