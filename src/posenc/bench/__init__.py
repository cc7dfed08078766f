"""`posenc bench`: speed and memory of posenc side by side with the libraries people use.

Sections, in run order: cli (startup.py), copy and rope (rope.py), table (sinusoidal.py),
precision, bias (attention.py), train, hf, syncs; common.py (Sizes, the timer),
workers.py (subprocesses, peak memory), targets.py (verdict findings), report.py, cli.py.
"ratio" = the row's time / posenc's (> 1: posenc is faster); "of limit" = the limit's / the row's.
"""

from posenc.lazy import lazy_exports

# public name -> its module, imported on first use (PEP 562): `posenc bench --help` imports
# no torch
_PUBLIC = {
    "SECTIONS": "cli", "main": "cli", "parser": "cli", "Sizes": "common", "sizes_for": "common",
    "timeit": "common", "Report": "report", "Row": "report", "print_report": "report",
    "TARGETS": "targets", "check_targets": "targets", "peak_extra_bytes": "workers",
    "proc_status_kb": "workers", "reset_peak_rss": "workers",
}  # fmt: skip
__all__ = lazy_exports(__name__, {name: f"posenc.bench.{m}" for name, m in _PUBLIC.items()})
