"""Running groups of cells (one trained model each): in this process, in N spawned worker
processes of one thread (a cell's numbers do not depend on the number of workers), or on Ray
(cluster.py). Workers return rows; only the parent writes. A lost worker's groups run again;
a worker ends with the run that started it (posenc.lifeline).
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import time
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass

import torch

from posenc import lifeline
from posenc.arena.cells import Cell
from posenc.arena.config import TaskConfig, split_label
from posenc.arena.drope import recalibrate
from posenc.arena.evaluate import evaluate, trained_rows, variant_model
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
    wall: float  # seconds, the training's included in the group's first cell


class StopRun(ValueError):
    """An error no job can avoid (the model does not load): the run stops at once, in one line."""


_TASKS: dict = {}  # a worker's tasks (the lm corpus is sent once per worker, not per job)


def init_worker(tasks: dict, threads: int = 1) -> None:
    """A worker's state (a worker process is tied to its run first: posenc.lifeline)."""
    _TASKS.clear()
    _TASKS.update(tasks)
    torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(True, warn_only=True)


def run_job(job: Job) -> list[CellResult]:
    """Train the group's model (or load it) and evaluate each of its cells (a zero-shot variant
    rebuilt from it, DroPE's recalibrated from it)."""
    task = _TASKS[job.tc.task]
    t0 = time.time()
    first = job.cells[0][0]
    model = train(first, task, job.tc, out=job.out, device=job.device,
                  checkpoint_seconds=job.checkpoint_seconds)  # fmt: skip
    trained = time.time() - t0
    results = []
    for cell, sizes in job.cells:
        t1 = time.time()
        variant, m = split_label(cell.label)[1], model
        if variant == "drope":
            m = recalibrate(model, cell, task, job.tc, out=job.out, device=job.device,
                            checkpoint_seconds=job.checkpoint_seconds)  # fmt: skip
        elif variant:
            m = variant_model(model, cell, job.device)
        rows = [r for size in sizes for r in evaluate(m, task, cell, size, job.tc, job.device)]
        if variant is None and cell.train_len in sizes:  # once per trained model
            rows += trained_rows(model, task, cell)
        wall = time.time() - t1 + (trained if cell is first else 0.0)
        results.append(CellResult(cell, rows, wall))
    return results


class InlineExecutor:
    """Runs each job at submit (workers=1), on `threads` threads, as a worker would."""

    slots = 1

    def __init__(self, tasks: dict, threads: int = 1):
        self.threads = torch.get_num_threads()
        init_worker(tasks, threads)

    def submit(self, fn, job) -> Future:
        fut: Future = Future()
        try:
            fut.set_result(fn(job))
        except Exception as err:  # noqa: BLE001 - reported by the caller, like a worker's
            fut.set_exception(err)
        return fut

    def lost(self, err: BaseException) -> bool:
        return False

    def shutdown(self) -> None:
        torch.set_num_threads(self.threads)


class ProcessExecutor:
    """N spawned worker processes of `threads` threads each, ending with this process; a worker
    that dies breaks the whole pool (`whole`), restarted."""

    whole = True

    def __init__(self, workers: int, tasks: dict, threads: int = 1):
        self.slots, self.tasks, self.threads = workers, tasks, threads
        self.pool = self._start()

    def _start(self) -> ProcessPoolExecutor:
        ctx = multiprocessing.get_context("spawn")  # no fork of a process with OpenMP threads
        init = pickle.dumps((init_worker, (self.tasks, self.threads)))  # unpickled once tied
        return ProcessPoolExecutor(self.slots, mp_context=ctx, initializer=lifeline.start,
                                   initargs=(os.getpid(), init))  # fmt: skip

    def submit(self, fn, job) -> Future:
        return self.pool.submit(fn, job)

    def lost(self, err: BaseException) -> bool:
        return isinstance(err, BrokenProcessPool)

    def restart(self) -> None:
        self.pool.shutdown(cancel_futures=True)
        self.pool = self._start()

    def shutdown(self) -> None:
        self.pool.shutdown(cancel_futures=True)


def local_executor(workers: int, tasks: dict, threads: int = 1):
    if workers == 1:
        return InlineExecutor(tasks, threads)
    return ProcessExecutor(workers, tasks, threads)


def run_jobs(jobs, pool, claim, on_result, on_failure=None, max_restarts: int = 3, fn=run_job):
    """Run fn(job), `pool.slots` in flight; returns [(job, error)] of those that raised.
    claim(job) -> "take", "held" (retried later) or "done"; on_result(job, results) and
    on_failure(job, error) as each ends. A lost worker's job runs again (max_restarts in all)."""
    pending, failed, restarts = list(jobs), [], 0
    in_flight: dict[Future, Job] = {}
    try:
        while pending or in_flight:
            held = []
            while pending and len(in_flight) < pool.slots:
                job = pending.pop(0)
                verdict = claim(job)
                if verdict == "take":
                    in_flight[pool.submit(fn, job)] = job
                elif verdict == "held":
                    held.append(job)
            pending = held + pending
            if not in_flight:
                time.sleep(2.0)  # every job left is held by another run (bounded by its lease)
                continue
            done, _ = wait(in_flight, timeout=30.0, return_when=FIRST_COMPLETED)
            lost = []
            for fut in done:
                job = in_flight.pop(fut)
                err = fut.exception()
                if err is not None and pool.lost(err):
                    lost.append(job)
                elif isinstance(err, StopRun):
                    raise err
                elif err is not None:
                    failed.append((job, err))  # one job failing does not stop the grid
                    if on_failure is not None:
                        on_failure(job, err)
                else:
                    on_result(job, fut.result())
            if lost:
                restarts += 1
                if restarts > max_restarts:
                    raise RuntimeError(f"workers were lost {restarts} times; giving up")
                if getattr(pool, "whole", False):
                    lost += list(in_flight.values())
                    in_flight.clear()
                    pool.restart()
                pending = lost + pending
            for job in in_flight.values():
                claim(job)  # renews the lease of a job still running
    finally:
        pool.shutdown()
    return failed
