"""posenc arena: train small Transformers per encoding, measure length generalization, report.

tasks.py        the tasks: sample(rng, sizes) -> Batch, sizes in the task's unit
corpus.py       byte-level corpora (default: the running Python's standard library)
names.py        the task, variant and backbone names (torch-free: `posenc arena --help`)
config.py       the default grid and the training recipe per task, encoding labels
cells.py        cells (task, label, seed) and the models they train
train.py        training one model, checkpointed so a kill loses nothing
evaluate.py     exact match / token accuracy per size, loss per position band
workers.py      running groups of cells in N single-thread processes
cluster.py      running them as Ray tasks on a cluster (--ray; Ray imported only there)
runner.py       what is left, leases, writing rows as they come (the only writer)
store.py        SQLite results (and leases), one row per measurement
results.py      rows grouped per seed: median and spread
findings*.py    the published findings, each a Claim computed from the rows
report.py       index.html, PNG plots, results.md
cli.py          `posenc arena ...`
"""

from posenc.lazy import lazy_exports

# PEP 562: `posenc arena --help` imports no torch
__all__ = lazy_exports(__name__, dict.fromkeys(["TASK_NAMES", "Batch", "build_task"],
                                               "posenc.arena.tasks"))  # fmt: skip
