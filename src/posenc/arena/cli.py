"""`posenc arena`: train small models per encoding, measure length generalization, report;
`posenc arena report` redraws the report. Bad input prints one line and returns 2, before
anything is written.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from typing import TYPE_CHECKING

from posenc.arena.names import BACKBONES, DEFAULT_TASKS, TASK_NAMES, VARIANTS
from posenc.cliargs import (
    OneLineParser,
    check_device,
    check_writable,
    db_file,
    device,
    dispatch,
    in_file,
    in_path,
    integer,
    integers,
    names,
    number,
    out_dir,
    ray_address,
)

if TYPE_CHECKING:
    from posenc.arena.config import ArenaConfig

# ArenaConfig's defaults that --help shows (torch-free; tests/test_cli.py checks them)
DEFAULTS = dict(seeds=3, db="arena.sqlite", out="arena_out", device="cpu")


def _config():
    """posenc.arena.config (torch): imported only once a flag it checks is given."""
    from posenc.arena import config

    return config


# --quick (the README's command, <= 5 min on 2 cores): one seed of copy for Kazemnejad et al.'s
# ranking, capped at 3000 steps, and of lm as in the full run (the same cells, the same numbers)
QUICK_LM = ("learned", "sinusoidal", "rope", "alibi", "rope+ntk", "rope+yarn", "rope+dynamic")
QUICK = dict(
    tasks=["copy", "lm"],
    seeds=1,
    overrides={
        "copy": dict(encodings=("nope", "t5", "alibi", "rope", "sinusoidal"), steps=3000),
        "lm": dict(encodings=QUICK_LM),
    },
)


def parser() -> argparse.ArgumentParser:
    d = argparse.Namespace(**DEFAULTS)
    p = OneLineParser(
        prog="posenc arena",
        description="Train small Transformers per encoding at length L, evaluate at L..8L, "
        "store every number in SQLite and write a report. `posenc arena report` redraws it.",
    )
    p.add_argument("--quick", action="store_true", help="copy + lm subset, 1 seed (<= 5 min)")
    p.add_argument(
        "--tasks", type=names(check=lambda items: _config().validate_tasks(items)),
        help=f"comma-separated, from {','.join(TASK_NAMES)} "
        f"(default {','.join(DEFAULT_TASKS)})",
    )  # fmt: skip
    p.add_argument(
        "--encodings",
        type=names(check=lambda items: _config().validate_encodings(items)),
        help="comma-separated (default per task: see docs/arena); any registered encoding, "
        "randomized:NAME (Ruoss et al.'s randomized positions over NAME), "
        f"rope+{{{','.join(VARIANTS)}}} (zero-shot scaling of the rope model), NAME+drope "
        "(DroPE: NAME's model, encoding dropped, recalibrated) and rnope-swa (RoPE sliding-"
        "window layers, one global NoPE layer in four)",
    )
    p.add_argument(
        "--backbone",
        type=names(BACKBONES),
        help="comma-separated, from posenc,hf-llama (default posenc): hf-llama trains "
        "transformers' LlamaForCausalLM with posenc's positions (rope and nope labels; "
        "pip install 'posenc[hf]')",
    )
    p.add_argument("--seeds", type=integer(1), help=f"seeds per cell (default {d.seeds})")
    p.add_argument(
        "--steps",
        type=integer(1),
        help="training steps (default per task); on copy, reverse, sort and addition the "
        "cap: a model trains until it reaches the stop (0.97 exact match on held-out data at "
        "every size <= L), else it is reported at the cap",
    )
    p.add_argument(
        "--fixed-steps",
        action="store_true",
        help="train every model exactly --steps (no bar; the lr's cosine over all of them: "
        "the recipe before issue 29)",
    )
    p.add_argument(
        "--train-len", type=integer(1),
        help="training length L in the task's unit: symbols, digits, tokens (default per task)",
    )  # fmt: skip
    p.add_argument(
        "--eval-lens",
        type=integers(1),
        help="comma-separated eval lengths (default 1..2L; lm L..8L)",
    )
    p.add_argument(
        "--workers", type=integer(1),
        help="cells run in N processes of one thread each (default: the number of cores); "
        "with --ray, the cells in flight on the cluster (default: as many as fit)",
    )  # fmt: skip
    ray_flags(p, "cells")
    p.add_argument(
        "--corpus", type=in_path, help="text file or directory for lm (default: Python's stdlib)"
    )
    p.add_argument("--db", default=d.db, type=db_file, help=f"SQLite results (default {d.db})")
    p.add_argument("--out", default=d.out, type=out_dir, help=f"report, checkpoints ({d.out})")
    p.add_argument(
        "--device", default=d.device, type=device, help="cpu (default), cuda, cuda:1, ..."
    )
    return p


def report_parser() -> argparse.ArgumentParser:
    d = argparse.Namespace(**DEFAULTS)
    p = OneLineParser(prog="posenc arena report", description="redraw the report")
    p.add_argument("--db", default=d.db, type=in_file, help=f"SQLite results (default {d.db})")
    p.add_argument("--out", default=d.out, type=out_dir, help=f"output folder (default {d.out})")
    return p


def config_from_args(args) -> ArenaConfig:
    """Validate every flag (ValueError, one line) and build the run's config."""
    from posenc.arena.cells import check_builds
    from posenc.arena.config import ArenaConfig, task_config
    from posenc.arena.store import check_db
    from posenc.arena.tasks import build_task

    cfg = ArenaConfig(**QUICK) if args.quick else ArenaConfig()
    given = ("tasks", "encodings", "seeds", "steps", "train_len", "eval_lens", "workers")
    given += ("cpus_per_cell", "gpus_per_cell")  # with --ray only (check_ray)
    # each flag's type, range and names: checked as it was parsed (cliargs)
    kw = {key: getattr(args, key) for key in given if getattr(args, key)}
    if args.backbone:
        kw["backbones"] = tuple(args.backbone)
    ray = check_ray(args)
    if ray is None:  # --workers: processes here (default: the cores), else groups in flight
        kw.setdefault("workers", os.cpu_count() or 1)
    else:
        kw.update(ray=ray, ray_slots=kw.pop("workers", None))
    kw.update(corpus=args.corpus, db=args.db, out=args.out, device=args.device)
    cfg = dataclasses.replace(cfg, **kw, fixed_steps=args.fixed_steps)
    for name in cfg.tasks:
        task = build_task(name, corpus=True)  # lengths only; the corpus comes below
        tc = task_config(cfg, name)
        if min(tc.train_len, *tc.eval_lens) < task.min_size:
            raise ValueError(
                f"--train-len / --eval-lens: task {name} needs lengths >= {task.min_size} "
                f"({task.unit})"
            )
        check_builds(task, tc)  # each label as the worker builds it: a bad one fails now
    check_device(cfg.device, local=cfg.ray is None)  # a cluster's nodes may have the GPUs
    check_writable(cfg.out)  # before any training, not after; nothing is created yet
    check_db(cfg.db)  # another application's database: refused now, and left untouched
    check_writable(os.path.dirname(os.path.abspath(cfg.db)), "--db")
    return cfg


def ray_flags(p: argparse.ArgumentParser, unit: str) -> None:
    """--ray, --cpus-per-cell and --gpus-per-cell of `posenc arena` and `posenc stretch`."""
    p.add_argument(
        "--ray", nargs="?", const="local", metavar="ADDRESS", type=ray_address,
        help=f"run the {unit} as Ray tasks: on a local Ray started for this run (no ADDRESS), "
        "the cluster started on this machine (auto), or a head node HOST:PORT "
        "(pip install 'posenc[ray]'; see docs/arena/cluster.md)",
    )  # fmt: skip
    one = unit.removesuffix("s")
    p.add_argument(
        "--cpus-per-cell", type=integer(1), help=f"with --ray: CPUs (threads) per {one} (1)"
    )
    p.add_argument("--gpus-per-cell", type=number(0), help=f"with --ray: GPUs per {one} (0)")


def check_ray(args) -> str | None:
    """--ray's address, or None; --cpus-per-cell / --gpus-per-cell need it, GPUs --device cuda
    (each value checked as it was parsed), and Ray importable (its install hint now)."""
    if args.ray is None:
        if args.cpus_per_cell is not None or args.gpus_per_cell is not None:
            raise ValueError("--cpus-per-cell / --gpus-per-cell need --ray")
        return None
    from posenc.arena.cluster import import_ray

    import_ray()
    gpus = args.gpus_per_cell
    if gpus and not args.device.startswith("cuda"):
        raise ValueError(f"--gpus-per-cell {gpus:g} needs --device cuda (got {args.device})")
    return args.ray.strip()


def load_tasks(cfg: ArenaConfig) -> dict:
    from posenc.arena.config import task_config
    from posenc.arena.corpus import load_corpus
    from posenc.arena.tasks import build_task

    corpus = None
    if "lm" in cfg.tasks:
        corpus = load_corpus(cfg.corpus)
        tc = task_config(cfg, "lm")
        need = max(tc.eval_lens) + 1
        if len(corpus.valid) < need or len(corpus.train) < tc.train_len + 1:
            raise ValueError(
                f"--corpus: {corpus.name} is too small ({len(corpus.train)} train / "
                f"{len(corpus.valid)} valid bytes; need {tc.train_len + 1} / {need})"
            )
    return {name: build_task(name, corpus=corpus) for name in cfg.tasks}


def main(argv: list[str] | None = None) -> int:
    return dispatch("posenc arena", "cells", main_run, main_report, argv)


def main_run(argv: list[str]) -> int:
    args = parser().parse_args(argv)  # --help and usage errors answer before torch
    from posenc.arena import runner
    from posenc.arena.store import Store

    cfg = config_from_args(args)
    print(f"arena: preparing {', '.join(cfg.tasks)} ...", file=sys.stderr, flush=True)
    tasks = load_tasks(cfg)
    os.makedirs(os.path.dirname(os.path.abspath(cfg.db)), exist_ok=True)  # input checked
    with Store(cfg.db) as store:
        print_plan(cfg, tasks, store)
        n = runner.run(cfg, tasks, store)
        rows = store.all_rows()
    print(f"arena: {n} rows written to {cfg.db}", file=sys.stderr)
    return write_report(rows, cfg.out)


def write_report(rows: list[dict], out: str) -> int:
    from posenc.arena import report

    index = report.write_report(rows, out)
    print(report.terminal_summary(rows))
    print(f"arena: full report at {index} (tables and plots: results.md beside it)")
    return 0


def step_seconds(job, task) -> float:
    """One training step of the job's model on this machine now, in one thread as a worker
    trains (the fastest of 3 after a warm-up step)."""
    import time

    import numpy as np
    import torch
    import torch.nn.functional as F

    from posenc.arena.backbones import build_model
    from posenc.arena.train import per_instance, train_batch

    threads, times = torch.get_num_threads(), []
    torch.set_num_threads(1)
    try:
        kwargs = job.cells[0][0].train_cfg["model"]
        model = build_model({**kwargs, "backbone": "posenc"} if "backbone" in kwargs else kwargs)
        opt, rng = torch.optim.AdamW(model.parameters()), np.random.default_rng(0)
        for _ in range(4):
            start = time.perf_counter()
            inputs, targets, mask = train_batch(task, job.tc, rng)[:3]
            loss = F.cross_entropy(per_instance(model, inputs, mask)[mask], targets[mask])
            opt.zero_grad()
            loss.backward()
            opt.step()
            times.append(time.perf_counter() - start)
    finally:
        torch.set_num_threads(threads)
    return min(times[1:])


def print_plan(cfg: ArenaConfig, tasks: dict, store) -> None:
    """Before the first cell: what will be trained, and at most how long (the step caps at one
    step measured now per task, over the workers)."""
    from posenc.arena import runner

    cells, jobs = runner.plan(cfg, tasks, store)
    if not jobs:
        return
    lines, per_step, work = [], {}, 0.0
    for task in cfg.tasks:
        mine = [j for j in jobs if j.tc.task == task]
        if not mine:
            continue
        labels = list(dict.fromkeys(c.label for j in mine for c, _ in j.cells))
        seeds = len({j.key[2] for j in mine})
        cap = "a cap of " if mine[0].tc.check_every else ""
        lines.append(f"  {task}: {len(labels)} encodings x {seeds} seed(s), "
                     f"{cap}{mine[0].tc.steps} steps each ({', '.join(labels)})")  # fmt: skip
        if cfg.device == "cpu" and cfg.ray is None:
            try:  # a posenc model's step (other backbones' models build lazily: not timed)
                per_step[task] = step_seconds(mine[0], tasks[task])
            except Exception as err:  # an estimate never stops the run
                print(f"arena: no estimate for {task} ({type(err).__name__})", file=sys.stderr)
                continue
            work += sum(j.tc.steps for j in mine) * per_step[task]
    todo = sum(len(j.cells) for j in jobs)
    print(f"arena: {todo} of {len(cells)} cells to run, {len(jobs)} models to train, "
          f"{cfg.workers} worker(s); results go to {cfg.db} as each cell ends",
          file=sys.stderr)  # fmt: skip
    print("\n".join(lines), file=sys.stderr)
    if per_step:
        steps = ", ".join(f"{t} {1000 * s:.0f} ms" for t, s in per_step.items())
        slots = min(cfg.workers, len(jobs))
        estimate = (
            f"arena: estimate: ~{runner.fmt_time(work / slots)} of training steps (one step "
            f"measured now: {steps}; validation and evaluation add ~10%, models that reach the "
            "stop end sooner)"
        )
        print(estimate, file=sys.stderr, flush=True)


def main_report(argv: list[str]) -> int:
    args = report_parser().parse_args(argv)
    from posenc.arena.store import Store, require_rows

    with Store(args.db, create=False) as store:
        rows = store.all_rows()
    return write_report(require_rows(rows, "arena", args.db), args.out)


__all__ = ["main"]
