"""posenc arena: train small Transformers per encoding, measure length generalization, report.

tasks.py   the tasks behind one protocol, sample_batch(rng, batch_size, length) -> Batch
corpus.py  byte-level corpora (default: the running Python's standard library)
store.py   SQLite results, one row per measurement
runner.py  train / evaluate / checkpoint / resume
report.py  index.html, PNG plots, results.md and the published findings checked
cli.py     `posenc arena ...`
"""

from posenc.arena.tasks import TASK_NAMES, Batch, build_task

__all__ = ["TASK_NAMES", "Batch", "build_task"]
