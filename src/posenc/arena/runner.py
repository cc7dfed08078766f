"""Running the arena: the cells not yet in the database, grouped by trained model, run by the
workers; the parent writes each cell's rows in one transaction as its group comes back, and two
runs on one database share the groups through leases.
"""

from __future__ import annotations

import os
import socket
import sys
import time
import uuid

import torch
from tqdm import tqdm

from posenc import __version__
from posenc.arena.cells import Cell, make_cells, metrics_for
from posenc.arena.cluster import RayExecutor
from posenc.arena.config import ArenaConfig, task_config
from posenc.arena.store import Store
from posenc.arena.workers import Job, local_executor, run_jobs

LEASE_SECONDS = 120.0  # a group's lease; renewed every <= 30 s while it runs


def stale(owner: str) -> bool:
    """Whether a lease's owner is a run on this machine whose process is gone (it was killed):
    its groups are taken over at once instead of after the lease expires."""
    host, _, rest = owner.partition(":")
    pid = rest.partition(":")[0]
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except OSError as err:  # PermissionError: alive, another user's
        return isinstance(err, ProcessLookupError)
    return False


def missing_sizes(store: Store, cell: Cell, sizes) -> tuple[int, ...]:
    """The evaluation sizes of a cell whose rows are not all in the database yet."""
    L = cell.train_len
    key, name = (cell.task, cell.label, cell.seed, L), f"{cell.name} train_len={L}"
    have = store.written(key, cell.hash, name)
    return tuple(e for e in sizes if not set(metrics_for(cell.task, L, e)) <= have.get(e, set()))


def plan(cfg: ArenaConfig, tasks: dict, store: Store) -> tuple[list[Cell], list[Job]]:
    """All cells of the run, and the jobs (groups) that still have work."""
    tcs = {name: task_config(cfg, name) for name in cfg.tasks}
    cells = make_cells(list(tcs.values()), tasks)
    groups: dict[tuple, list] = {}
    for cell in cells:
        todo = missing_sizes(store, cell, tcs[cell.task].eval_lens)
        if todo:
            groups.setdefault(cell.group, []).append((cell, todo))
    jobs = [
        Job(tuple(g), tcs[key[0]], cfg.out, cfg.device, cfg.checkpoint_seconds)
        for key, g in groups.items()
    ]
    return cells, jobs


class Progress:
    """A bar over `total` units (stderr, TTY only), one line per unit done with the time left,
    and any other line (a failure) printed at once above the bar."""

    def __init__(self, total: int, desc: str):
        self.total, self.done, self.start = total, 0, time.time()
        self.bar = tqdm(total=total, desc=desc, file=sys.stderr, leave=False,
                        disable=not sys.stderr.isatty(), dynamic_ncols=True)  # fmt: skip

    def step(self, text: str, wall: float) -> None:
        self.done += 1
        self.bar.update(1)
        left = fmt_time((time.time() - self.start) / self.done * (self.total - self.done))
        self.write(f"[{self.done}/{self.total}] {text} ({wall:.1f} s, ~{left} left)")

    def write(self, line: str) -> None:
        self.bar.write(line, file=sys.stderr)

    def close(self) -> None:
        self.bar.close()


def fmt_time(s: float) -> str:
    return f"{s:.0f}s" if s < 90 else f"{s / 60:.1f}m" if s < 5400 else f"{s / 3600:.1f}h"


def summarize(rows, train_len: int) -> str:
    """The main metric at L, at 2L and at the longest length (where measured)."""
    main = {r.eval_len: r for r in rows if r.metric in ("ppl", "accuracy")}
    show = sorted({e for e in (train_len, 2 * train_len, max(main, default=0)) if e in main})
    value = lambda r: "n/a" if r.value is None else f"{r.value:.3g}"  # noqa: E731
    return ", ".join(f"{main[e].metric}@{e}={value(main[e])}" for e in show)


def executor(cfg: ArenaConfig, tasks: dict):
    """Where the groups run: this machine's worker processes, or a Ray cluster (--ray)."""
    if cfg.ray is None:
        return local_executor(cfg.workers, tasks)  # one thread per cell
    return RayExecutor(cfg.ray, tasks, cpus_per_cell=cfg.cpus_per_cell,
                       gpus_per_cell=cfg.gpus_per_cell, slots=cfg.ray_slots)  # fmt: skip


def run(cfg: ArenaConfig, tasks: dict, store: Store) -> int:
    """Run every unfinished cell; returns the number of rows written."""
    cells, jobs = plan(cfg, tasks, store)
    if not jobs:
        print(f"arena: all {len(cells)} cells already in {store.path}", file=sys.stderr)
        return 0
    versions = {"posenc_version": __version__, "torch_version": torch.__version__}

    def fresh(job: Job) -> bool:
        return any(missing_sizes(store, c, sizes) for c, sizes in job.cells)

    def write(job: Job, results, progress: Progress) -> int:
        wanted, written = {c.label: sizes for c, sizes in job.cells}, 0
        for res in results:
            todo = set(missing_sizes(store, res.cell, wanted[res.cell.label]))
            rows = [r for r in res.rows if r.eval_len in todo]  # another run may have written
            if rows:
                store.write_cell(rows, config=res.cell.cfg, config_hash=res.cell.hash,
                                 wall_time=res.wall, **versions)  # fmt: skip
                written += len(rows)
            progress.step(f"{res.cell.name}: {summarize(res.rows, res.cell.train_len)}", res.wall)
        return written

    progress = Progress(sum(len(j.cells) for j in jobs), "arena cells")
    return drive(jobs, executor(cfg, tasks), store, progress, fresh=fresh, write=write,
                 name=lambda job: job.cells[0][0].name, prog="arena", unit="group(s)")  # fmt: skip


def drive(jobs, pool, store: Store, progress: Progress, *, fresh, write, name, prog: str,
          unit: str, lease: float = LEASE_SECONDS, fn=None) -> int:  # fmt: skip
    """The run loop of `posenc arena` and `posenc stretch`: each job leased in `store`, run on
    `pool`, its rows written by write(job, result, progress) -> count; a failure is printed and
    recorded at once, the others go on, and a RuntimeError at the end counts them (StopRun ends
    the run at once). fresh(job): rows left to write; name(job): how a failure names it."""
    owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
    written = 0

    def claim(job) -> str:
        if not fresh(job):
            return "done"
        if not store.claim(job.key, owner, lease, stale):
            return "held"
        if not fresh(job):  # another run wrote it between the check and the lease
            store.release(job.key, owner)
            return "done"
        return "take"

    def on_result(job, result) -> None:
        nonlocal written
        written += write(job, result, progress)
        store.release(job.key, owner)

    def on_failure(job, err: BaseException) -> None:
        store.record_failure(job.key, f"{type(err).__name__}: {err}", owner)
        store.release(job.key, owner)
        progress.write(f"{prog}: {name(job)} failed: {type(err).__name__}: {err}")

    try:
        failed = run_jobs(jobs, pool, claim, on_result, on_failure, **({"fn": fn} if fn else {}))
    finally:
        progress.close()
    if failed:
        raise RuntimeError(f"{len(failed)} {unit} failed (see above); rerun to retry them")
    return written
