"""`posenc bench`: speed and memory of posenc side by side with the libraries people use.

    posenc bench [--device cpu|cuda] [--quick] [--smoke] [--json FILE] [--threads N]

One process measures, in this order (each library that is not installed is skipped with a
note), one module per section:
    copy   rope.py        the machine's copy bandwidth: q and k copied once into preallocated
                          buffers (the physical limit of RoPE, which reads and writes q and k once)
    rope   rope.py        RoPE on q and k, forward and forward+backward: posenc against
                          transformers, rotary-embedding-torch, x-transformers (and on CUDA
                          Liger-Kernel and flash-attn)
    table  sinusoidal.py  sinusoidal table generation against positional-encodings
    bias   attention.py   alibi / t5 / fire causal attention, T = 1k ... 32k: time and peak extra
                          memory of posenc.attention against the bias materialized as
                          transformers' T5 and BLOOM do
    train  train.py       training tokens/s of posenc.TransformerLM against an x-transformers
                          model of the same size and encoding, at the arena's default size
    syncs  syncs.py       host syncs per posenc.attention call (rope, alibi; default and
                          given positions; backends auto and eager)

and around them:
    common.py   Sizes (--smoke / --quick / full), the timer, optional-library imports
    workers.py  subprocess workers (one bias path per process) and peak-memory measurement
    targets.py  the acceptance targets: one table, each a finding the verdict engine decides
    report.py   Row, Report, the text table and --json
    cli.py      arguments and main()

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
