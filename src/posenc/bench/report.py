"""The results of a run (rows, targets, notes) as a text table and --json; the columns'
meaning is printed under the table.
"""

from __future__ import annotations

import json
import os
import platform
import sys
from dataclasses import asdict, dataclass, field

import torch


@dataclass
class Row:
    section: str
    case: str
    impl: str
    ms: float | None = None
    ratio: float | None = None  # this row's time / posenc's time in the same case
    of_limit: float | None = None  # the limit's time / this row's time
    peak_mb: float | None = None
    note: str = ""


class LiveRows(list):
    """Report.rows: each row also printed to stderr as it is measured (the table: stdout, last)."""

    def append(self, row: Row) -> None:
        super().append(row)
        ms = "" if row.ms is None else f" {row.ms:.2f} ms"
        ratio = "" if row.ratio is None else f" (ratio {row.ratio:.2f})"
        note = f"  {row.note}" if row.note else ""
        print(f"  {row.section}: {row.case}: {row.impl}{ms}{ratio}{note}", file=sys.stderr,
              flush=True)  # fmt: skip


@dataclass
class Report:
    machine: dict
    args: dict
    rows: list[Row] = field(default_factory=LiveRows)
    targets: list[dict] = field(default_factory=list)  # {target, status (verdict), value, note}
    notes: list[str] = field(default_factory=list)


def machine_info(threads: int, device: str) -> dict:
    return dict(
        platform=platform.platform(), processor=platform.processor(), cpus=os.cpu_count(),
        threads=threads, torch=torch.__version__, python=platform.python_version(),
        device=torch.cuda.get_device_name() if device == "cuda" else "cpu",
        load_avg=os.getloadavg() if hasattr(os, "getloadavg") else None,
    )  # fmt: skip


def fmt(v, spec: str) -> str:
    return format("-", ">" + spec.split(".")[0]) if v is None else format(v, spec)


def print_report(rep: Report) -> None:
    m = rep.machine
    where = f"{m['device']} ({m['platform']})"
    print(f"posenc bench on {where}, torch {m['torch']}, {m['threads']} threads, float32\n")
    w = max([38, *(len(r.case) for r in rep.rows)])  # the case column, never cut
    head = f"{'section':<13} {'case':<{w}} {'implementation':<40} {'ms':>10} {'ratio':>7} "
    head += f"{'of limit':>8} {'peak MB':>8}  note"
    print(head)
    print("-" * len(head))
    for r in rep.rows:
        print(
            f"{r.section:<13} {r.case:<{w}} {r.impl[:40]:<40} {fmt(r.ms, '10.2f')} "
            f"{fmt(r.ratio, '7.2f')} {fmt(r.of_limit, '8.2f')} {fmt(r.peak_mb, '8.0f')}  {r.note}"
        )
    print("\nratio = time / posenc's time (> 1: posenc faster); of limit = the limit's time /")
    print("time (rope: copy; bias attn: SDPA without bias; train: no encoding)")
    print("\ntargets:")
    for t in rep.targets:
        note = f"  ({t['note']})" if t["note"] else ""
        print(f"  {t['status']:<17}  {t['target']:<62} {t['value']}{note}")
    if rep.notes:
        print("\nnotes:")
        for n in rep.notes:
            print(f"  - {n}")


def write_json(rep: Report, path: str) -> None:
    """Every number of the run (machine, arguments, rows, targets, notes) to `path`."""
    with open(path, "w") as f:
        json.dump({**asdict(rep)}, f, indent=1, default=str)
