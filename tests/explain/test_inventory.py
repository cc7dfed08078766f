"""The inventory of the seeds' claims (posenc.explain.claims.inventory): every quote is in its seed,
in text order; ids, kinds and statuses are well formed; every check it names exists, and every
existing check is named."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from posenc.explain import claims as C
from posenc.explain.claims import inventory as I
from posenc.explain.claims.base import SEEDS_DIR  # package data: a clean clone has them


def counts() -> str:
    """Per seed: the number of items and of each status, for the assertion messages."""
    lines = []
    for seed, items in I.by_seed().items():
        status = Counter(item.status for item in items)
        lines.append(
            f"{seed}: {len(items)} items ("
            + ", ".join(f"{status[s]} {s}" for s in I.STATUSES)
            + ")"
        )
    return "\n".join(lines + [f"total: {len(I.ALL)}"])


@pytest.fixture(scope="module")
def check_ids():
    return {c.id for c in C.check_all(dim=32, max_pos=64)}


@pytest.fixture(scope="module")
def seed_texts():
    return {seed: (SEEDS_DIR / seed).read_text(encoding="utf-8") for seed in I.by_seed()}


def test_every_seed_has_items():
    per_seed = {seed: len(items) for seed, items in I.by_seed().items()}
    assert len(per_seed) == 5 and all(n > 0 for n in per_seed.values()), counts()
    assert len(I.ALL) == sum(per_seed.values()), counts()


def test_every_quote_is_in_its_seed_in_text_order(seed_texts):
    bad = []
    for seed, items in I.by_seed().items():
        text, start = seed_texts[seed], 0
        for item in items:
            at = text.find(item.quote, start)
            if at < 0:
                where = "not in the seed" if item.quote not in text else "out of text order"
                bad.append(f"{item.id}: {where}: {item.quote!r}")
            else:
                start = at
    assert not bad, "\n".join(bad) + "\n" + counts()


def test_quotes_are_short_and_unstripped():
    bad = [
        f"{item.id}: {item.quote!r}"
        for item in I.ALL
        if not 4 <= len(item.quote) <= 80 or item.quote != item.quote.strip()
    ]
    assert not bad, "\n".join(bad) + "\n" + counts()


def test_ids_are_unique_and_in_order():
    for seed, items in I.by_seed().items():
        number = re.match(r"(\d{3})_", seed).group(1)
        want = [f"inv-{number}-{n:02d}" for n in range(1, len(items) + 1)]
        assert [item.id for item in items] == want, f"{seed}\n{counts()}"
    ids = [item.id for item in I.ALL]
    assert len(ids) == len(set(ids)), counts()


def test_kind_is_valid_and_exactly_one_status_is_set():
    bad = [
        item.id
        for item in I.ALL
        if item.kind not in I.KINDS
        or sum(map(bool, (item.check, item.how, item.not_checkable))) != 1
        or not item.claim
    ]
    assert not bad, f"{bad}\n{counts()}"


def test_an_item_with_two_statuses_or_a_bad_kind_is_refused():
    with pytest.raises(ValueError, match="exactly one"):
        I.Item("inv-9", "q", "statement", "c", check="claim-000-code", how="compute")
    with pytest.raises(ValueError, match="exactly one"):
        I.Item("inv-9", "q", "statement", "c")
    with pytest.raises(ValueError, match="kind"):
        I.Item("inv-9", "q", "opinion", "c", not_checkable="opinion")


def test_every_check_named_exists(check_ids):
    unknown = [f"{item.id}: {item.check}" for item in I.ALL if item.check not in (None, *check_ids)]
    assert not unknown, "\n".join(unknown) + "\n" + counts()


def test_every_existing_check_is_named_by_an_item(check_ids):
    named = {item.check for item in I.ALL}
    missing = sorted(check_ids - named)
    assert not missing, f"checks no item names: {missing}\n{counts()}"
