"""Running groups of cells: in this process (workers=1) or in N worker processes of one thread.

A job is one group (one trained model and the cells evaluated from it). Workers compute and
return rows; only the parent writes the database, so there is one writer. A worker that dies
(killed, out of memory) breaks the pool: the parent starts a new one and resubmits the groups
that had not come back (each resumes from its training checkpoint), so nothing is lost or
written twice. Every cell runs on one thread, so its numbers do not depend on the number of
workers (a second thread buys ~4% per cell; a second process ~1.8x).
"""

from __future__ import annotations

import multiprocessing
import time
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass

import torch

from posenc.arena.cells import Cell
from posenc.arena.config import TaskConfig, split_label
from posenc.arena.evaluate import evaluate, variant_model
from posenc.arena.store import Row
from posenc.arena.train import train


@dataclass(frozen=True)
class Job:
    """One group: its cells with the sizes each still needs, and how to run them."""

    cells: tuple[tuple[Cell, tuple[int, ...]], ...]
    tc: TaskConfig
    out: str
    device: str
    checkpoint_seconds: float

    @property
    def key(self) -> tuple:
        return self.cells[0][0].group


@dataclass
class CellResult:
    cell: Cell
    rows: list[Row]
    wall: float
    train_seconds: float


_TASKS: dict = {}  # a worker's tasks (the lm corpus is sent once per worker, not per job)


def init_worker(tasks: dict) -> None:
    _TASKS.update(tasks)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True, warn_only=True)


def run_job(job: Job) -> list[CellResult]:
    """Train the group's model (or load it) and evaluate each of its cells."""
    task = _TASKS[job.tc.task]
    t0 = time.time()
    first = job.cells[0][0]
    model = train(first, task, job.tc, out=job.out, device=job.device,
                  checkpoint_seconds=job.checkpoint_seconds)  # fmt: skip
    trained = time.time() - t0
    results = []
    for cell, sizes in job.cells:
        t1 = time.time()
        m = variant_model(model, cell, job.device) if split_label(cell.label)[1] else model
        rows = [r for size in sizes for r in evaluate(m, task, cell, size, job.tc, job.device)]
        wall = time.time() - t1 + (trained if cell is first else 0.0)
        results.append(CellResult(cell, rows, wall, trained if cell is first else 0.0))
    return results


class InlineExecutor:
    """The executor interface, running each job at submit (workers=1): one thread, as a worker."""

    def __init__(self, tasks: dict):
        self.threads = torch.get_num_threads()
        init_worker(tasks)

    def submit(self, fn, job) -> Future:
        fut: Future = Future()
        try:
            fut.set_result(fn(job))
        except Exception as err:  # noqa: BLE001 - reported by the caller, like a worker's
            fut.set_exception(err)
        return fut

    def shutdown(self, cancel_futures: bool = False) -> None:
        torch.set_num_threads(self.threads)


def executor(workers: int, tasks: dict):
    if workers == 1:
        return InlineExecutor(tasks)
    ctx = multiprocessing.get_context("spawn")  # no fork of a process with OpenMP threads
    return ProcessPoolExecutor(workers, mp_context=ctx, initializer=init_worker, initargs=(tasks,))


def run_jobs(jobs, workers: int, tasks: dict, claim, on_result, max_restarts: int = 3):
    """Run jobs with `workers` in flight. claim(job) -> "take" (this run does it), "held"
    (another run holds it: retried later) or "done" (its rows are in the database: dropped);
    on_result(job, results) writes. Returns the jobs that raised, as (job, error)."""
    pending, failed, restarts = list(jobs), [], 0
    pool = executor(workers, tasks)
    in_flight: dict[Future, Job] = {}
    try:
        while pending or in_flight:
            held = []
            while pending and len(in_flight) < workers:
                job = pending.pop(0)
                verdict = claim(job)
                if verdict == "take":
                    in_flight[pool.submit(run_job, job)] = job
                elif verdict == "held":
                    held.append(job)
            pending = held + pending
            if not in_flight:
                time.sleep(2.0)  # every job left is held by another run (bounded by its lease)
                continue
            done, _ = wait(in_flight, timeout=30.0, return_when=FIRST_COMPLETED)
            broken = False
            for fut in done:
                job = in_flight.pop(fut)
                err = fut.exception()
                if isinstance(err, BrokenProcessPool):
                    broken = True
                    pending.insert(0, job)
                elif err is not None:
                    failed.append((job, err))  # one job failing does not stop the grid
                else:
                    on_result(job, fut.result())
            if broken:
                restarts += 1
                if restarts > max_restarts:
                    raise RuntimeError(f"worker processes died {restarts} times; giving up")
                pending = list(in_flight.values()) + pending
                in_flight.clear()
                pool.shutdown(cancel_futures=True)
                pool = executor(workers, tasks)
            for job in in_flight.values():
                claim(job)  # renews the lease of a job still running
    finally:
        pool.shutdown(cancel_futures=True)
    return failed
