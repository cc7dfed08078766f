"""Arena rows grouped for reading: per (task, L, metric, encoding, eval length), the value of
every seed, their median and spread. Used by the findings and the report."""

from __future__ import annotations

import statistics
from collections import defaultdict

from posenc.arena.config import (
    ALGORITHMIC_ENCODINGS,
    BACKBONES,
    LM_ENCODINGS,
    PASSKEY_ENCODINGS,
    backbone_of,
)


class Results:
    """Rows grouped: (task, train_len, metric, encoding, eval_len) -> per-seed values."""

    def __init__(self, rows: list[dict]):
        self.rows = rows
        self.values: dict[tuple, list[float]] = defaultdict(list)
        self.by_seed: dict[tuple, dict[int, float]] = defaultdict(dict)
        self.na: dict[tuple, str] = {}
        for r in rows:
            key = (r["task"], r["train_len"], r["metric"], r["encoding"], r["eval_len"])
            if r["status"] == "ok" and r["value"] is not None:
                self.values[key].append(r["value"])
                self.by_seed[key][r["seed"]] = r["value"]
            else:
                self.na[key] = r["reason"] or "not applicable"
        self.groups = sorted({(r["task"], r["train_len"]) for r in rows})

    def encodings(self, task: str, L: int) -> list[str]:
        return sorted({r["encoding"] for r in self._group(task, L)}, key=_enc_order)

    def _group(self, task: str, L: int) -> list[dict]:
        return [r for r in self.rows if (r["task"], r["train_len"]) == (task, L)]

    def eval_lens(self, task: str, L: int) -> list[int]:
        return sorted({r["eval_len"] for r in self._group(task, L)})

    def metrics(self, task: str, L: int) -> list[str]:
        return sorted({r["metric"] for r in self._group(task, L)}, key=_metric_order)

    def per_seed(self, task, L, metric, enc, E) -> dict[int, float]:
        """seed -> value of one measurement."""
        return self.by_seed.get((task, L, metric, enc, E), {})

    def stat(self, task, L, metric, enc, E) -> tuple[float, float, float, int] | None:
        """(median, min, max, seeds) or None where nothing was measured."""
        v = self.values.get((task, L, metric, enc, E))
        if not v:
            return None
        return statistics.median(v), min(v), max(v), len(v)

    def med(self, task, L, metric, enc, E) -> float | None:
        s = self.stat(task, L, metric, enc, E)
        return None if s is None else s[0]

    def is_na(self, task, L, metric, enc, E) -> bool:
        key = (task, L, metric, enc, E)
        return key in self.na and not self.values.get(key)


ORDER = tuple(dict.fromkeys(LM_ENCODINGS + ALGORITHMIC_ENCODINGS + PASSKEY_ENCODINGS))


def _enc_order(name: str):
    """posenc's labels first, then each other backbone's, each in ORDER."""
    backbone, label = backbone_of(name)
    return (BACKBONES.index(backbone), ORDER.index(label) if label in ORDER else 99, label)


def _metric_order(m: str):
    if m.startswith("loss@"):
        return (2, int(m[5:].split("-")[0]))
    return ({"ppl": 0, "accuracy": 0, "loss": 1, "token_accuracy": 1}.get(m, 3), 0)


def main_metric(task: str) -> str:
    return "ppl" if task == "lm" else "accuracy"  # the tasks': exact match


def fmt(s, metric: str) -> str:
    if s is None:
        return "–"
    med, lo, hi, n = s
    f = (lambda v: f"{v:.3f}") if metric.endswith("accuracy") or "loss" in metric else _fmt_ppl
    return f(med) if n == 1 or lo == hi else f"{f(med)} [{f(lo)}–{f(hi)}]"


def _fmt_ppl(v: float) -> str:
    return f"{v:.3g}" if v >= 1000 else f"{v:.2f}"
