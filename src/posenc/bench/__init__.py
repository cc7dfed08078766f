"""`posenc bench`: speed and memory of posenc side by side with the libraries people use.

    posenc bench [--device cpu|cuda] [--quick] [--smoke] [--json FILE] [--threads N]

Sections, in run order (a library that is not installed is skipped with a note):
    cli         startup.py     start-up time of the CLI commands
    copy, rope  rope.py        copy bandwidth (RoPE's limit); RoPE against other libraries
    table       sinusoidal.py  sinusoidal table generation against positional-encodings
    precision   precision.py   what accurate angles cost against float32 products
    bias        attention.py   score-bias attention: time and peak memory against the limit
    train       train.py       TransformerLM training tokens/s against x-transformers
    hf          hf.py          a transformers model patched by posenc against unpatched
    syncs       syncs.py       host syncs per posenc.attention call
and common.py (Sizes, the timer), workers.py (subprocess workers, peak memory), targets.py
(the acceptance targets, decided by the verdict engine), report.py, cli.py.

Times are medians of repeats after warm-up. "ratio" = that row's time / posenc's time (> 1:
posenc is faster). "of limit" = copy time / the row's time (1.0 = at the copy bandwidth).
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
