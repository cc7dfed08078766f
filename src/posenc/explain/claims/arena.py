"""Seed claims checked against trained models: the arena's results database (`--arena DB`),
read through posenc.arena.store."""

from __future__ import annotations

import statistics
from pathlib import Path

from posenc.arena.store import Store

HIGHER_IS_BETTER = ("accuracy", "token_accuracy")
MAIN_METRICS = ("ppl", *HIGHER_IS_BETTER)  # loss and per-position bands are left to the arena
LEARNED_AT_L = 0.5  # an accuracy below this at L means the task was not learned: not counted


def databases(arena) -> list[Path]:
    """`--arena`: one path, a comma-separated list, or a list of paths."""
    items = arena.split(",") if isinstance(arena, str) else arena
    items = [items] if isinstance(items, Path) else items
    return [Path(str(a).strip()) for a in items if str(a).strip()]


def arena_results(arena, encoding: str) -> list[dict]:
    """Median over seeds of the arena's results for one encoding, one row per
    (task, train_len, eval_len, metric), read from one database or several (`databases`)."""
    raw = []
    for path in databases(arena):
        if not path.is_file():
            raise FileNotFoundError(f"--arena database not found: {path}")
        try:
            with Store(str(path), create=False) as store:
                raw += store.encoding_rows(encoding)
        except ValueError as err:
            raise ValueError(f"--arena {path}: not an arena results database ({err})") from None
    groups: dict[tuple, list] = {}
    for task, tl, el, metric, value, status, reason in raw:
        groups.setdefault((task, int(tl), int(el), metric), []).append((value, status, reason))
    out = []
    for (task, tl, el, metric), items in groups.items():
        ok = [float(v) for v, s, _ in items if s == "ok" and v is not None]
        reasons = sorted({r for _, s, r in items if s != "ok" and r})
        out.append(
            dict(
                task=task,
                train_len=tl,
                eval_len=el,
                metric=metric,
                value=statistics.median(ok) if ok else None,
                seeds=len(ok),
                status="ok" if ok else "n/a",
                reason="; ".join(reasons),
            )
        )
    return out


def extrapolates(rows: list[dict], tol: float = 0.25) -> list[tuple[str, bool | None, str]]:
    """Per (task, train_len, metric): does the longest evaluation stay within `tol` of the
    in-distribution value (relative; accuracies must not fall, perplexities must not rise, by
    more)? -> [(label, verdict, why)]; verdict None where the task was not learned at L."""
    found = []
    keys = sorted({(r["task"], r["train_len"], r["metric"]) for r in rows})
    for task, tl, metric in keys:
        if metric not in MAIN_METRICS:
            continue
        rs = [r for r in rows if (r["task"], r["train_len"], r["metric"]) == (task, tl, metric)]
        inside = [r for r in rs if r["eval_len"] <= tl and r["status"] == "ok"]
        longer = [r for r in rs if r["eval_len"] > tl]
        if not inside or not longer:
            continue
        base = max(inside, key=lambda r: r["eval_len"])
        far = max(longer, key=lambda r: r["eval_len"])
        label = f"{task}, trained at {tl}, {metric} at {far['eval_len']}"
        if far["status"] != "ok":
            found.append((label, False, f"n/a: {far['reason'] or 'not evaluable'}"))
            continue
        a, b = base["value"], far["value"]
        why = f"{a:.4g} at {base['eval_len']} -> {b:.4g}"
        if metric in HIGHER_IS_BETTER:
            if a < LEARNED_AT_L:
                found.append((label, None, f"{why}; not learned at L, not counted"))
                continue
            change = (a - b) / a
        else:  # ppl: lower is better
            change = (b - a) / max(abs(a), 1e-12)
        found.append((label, change <= tol, why))
    return found
