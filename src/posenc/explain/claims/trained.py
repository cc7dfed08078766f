"""Seed claims that need trained models, read from arena results (`--arena DB[,DB...]`).

docs/arena/claims/run.sh trains the cells these read (labels below), beside the main run
(docs/arena/arena.sqlite) and the passkey run (docs/arena/passkey/arena.sqlite). Each check
states the labels, task and lengths it compares and the rule on the numbers; without a database,
or without those cells in it, the evidence is absent (posenc.verdict.Absent: "not measured
here") and the note names the command. Values are medians over the seeds a database holds.

    Evidence        the arena's numbers for (label, task, metric, length), and the rows it used
    from_arena      a check's numbers measured from Evidence (Absent without a database)
"""

from __future__ import annotations

import statistics
from collections.abc import Callable

from posenc.explain.claims.arena import arena_results
from posenc.explain.claims.base import Absent, Measured, Table

RUN = "docs/arena/claims/run.sh"
ARENA = "docs/arena/arena.sqlite,docs/arena/passkey/arena.sqlite,docs/arena/claims/arena.sqlite"
# the labels run.sh trains (the main run has nope, sinusoidal, rope, alibi, t5, learned)
LEARNED_COPY = "learned(max_len=64)"  # a table longer than copy's 2 x 2L tokens
WINDOW = "learned_window(max_len=64)"  # seed 001's windowed learned encoding
SCALED = "sinusoidal(learned_scale=true)"
CONCAT = "sinusoidal(fusion=concat)"
LEARNED_PASSKEY = "learned(max_len=256)"
LEARNED_CURVE = "learned(max_len=512)"  # lm at L = 64: learning curves
LEARNED_LONG = "learned(max_len=1024)"  # lm at L = 512, judged at 600 (seed 002's lengths)
L = {"copy": 8, "reverse": 8, "sort": 8, "passkey": 32, "lm": 32}  # the main run's lengths


class Missing(LookupError):
    """The database lacks a number a check needs."""


class Evidence:
    """Medians over seeds from the arena databases; `used` collects what a check read."""

    def __init__(self, arena):
        self.arena, self.rows, self.used = arena, {}, []

    def get(self, label: str, task: str, metric: str, eval_len: int, train_len=None) -> float:
        train_len = L[task] if train_len is None else train_len
        if label not in self.rows:
            self.rows[label] = arena_results(self.arena, label)
        for r in self.rows[label]:
            key = (r["task"], r["metric"], r["eval_len"], r["train_len"])
            if key == (task, metric, eval_len, train_len) and r["value"] is not None:
                row = [label, task, str(train_len), str(eval_len), metric, f"{r['value']:.4g}"]
                self.used.append([*row, str(r["seeds"])])
                return r["value"]
        raise Missing(f"{label} on {task} (L = {train_len}): {metric} at {eval_len}")

    def at_l(self, label: str, task: str, metric: str = "accuracy") -> float:
        """The metric at the training length L of the main run."""
        return self.get(label, task, metric, L[task])

    def mean(self, label: str, task: str, metric: str, lens, train_len=None) -> float:
        return statistics.fmean(self.get(label, task, metric, n, train_len) for n in lens)


Measure = Callable[[Evidence], tuple[dict[str, float], str]]


def from_arena(arena, measure: Measure, *, method: str, note: str = "") -> Measured:
    """measure(Evidence) -> (numbers, result text), with the table of the arena numbers read.
    No database, or a number it lacks, is evidence absent by design (posenc.verdict.Absent)."""
    if arena is None:
        raise Absent(
            "no arena database given (posenc explain --claims --arena DB[,DB...])",
            note=f"Needs trained models: `bash {RUN}`, then --arena {ARENA}.",
            method=method,
        )
    ev = Evidence(arena)
    try:
        measured, result = measure(ev)
    except Missing as gap:
        raise Absent(
            f"not in the database: {gap}", note=f"`bash {RUN}` trains the cells this reads.",
            method=method,
        ) from None  # fmt: skip
    header = ["label", "task", "train", "eval", "metric", "median", "seeds"]
    rows = list(dict.fromkeys(tuple(r) for r in ev.used))
    table = Table(header, [list(r) for r in rows], "the arena numbers this check read")
    return Measured(measured=measured, result=result, method=method, note=note, tables=[table])
