"""One entry of the seeds' claim inventory (posenc.explain.claims.inventory): data only.

Kept apart from the package's __init__ so that the seed modules can import it without a cycle.
"""

from __future__ import annotations

from dataclasses import dataclass

KINDS = ("statement", "worked example", "formula", "code", "comparison", "reason")
CHECKED, HOW, NOT_CHECKABLE = "checked", "how", "not checkable"
STATUSES = (CHECKED, HOW, NOT_CHECKABLE)


@dataclass(frozen=True)
class Item:
    """A claim a seed makes, located by a verbatim quote, and how it is (or would be) settled.

    Exactly one of `check` (the id of the posenc Claim that settles it), `how` (one line: how it
    would be measured, "arena: ..." where it needs training) and `not_checkable` (why it cannot
    be measured: history, opinion, definition...) is set.
    """

    id: str  # "inv-<seed>-<n>", n running in text order
    quote: str  # verbatim, an exact substring of the seed file
    kind: str  # one of KINDS
    claim: str  # English paraphrase, one sentence
    check: str | None = None
    how: str = ""
    not_checkable: str = ""

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"{self.id}: kind {self.kind!r} is not one of {KINDS}")
        if sum(map(bool, (self.check, self.how, self.not_checkable))) != 1:
            raise ValueError(f"{self.id}: set exactly one of check, how, not_checkable")

    @property
    def status(self) -> str:
        """CHECKED, HOW (checkable, no check yet) or NOT_CHECKABLE."""
        return CHECKED if self.check else HOW if self.how else NOT_CHECKABLE
