"""`posenc bench`: speed and memory of posenc side by side with the libraries people use.

Runs the sections in order in one process (the bias section's paths in subprocesses), then
decides the targets and prints the report; `--worker SPEC` (internal) runs one bias path.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from posenc.cliargs import OneLineParser, checked, integer, integers, json_file, names

SECTIONS = ("cli", "copy", "rope", "table", "precision", "bias", "train", "hf", "syncs")


# seconds per section on 2 quiet cores, for the estimate: full from the recorded runs in
# docs/bench; quick from a loaded run (2026-11-27) rescaled by its RoPE slowdown; smoke by sizes
SECONDS = {
    "smoke": dict(cli=8, copy=1, rope=2, table=1, precision=2, bias=20, train=5, hf=15, syncs=2),
    "quick": dict(
        cli=30, copy=1, rope=85, table=7, precision=12, bias=30, train=15, hf=10, syncs=2
    ),
    "full": dict(
        cli=60, copy=1, rope=60, table=5, precision=2, bias=1500, train=80, hf=94, syncs=2
    ),
}


def bias_share(s, default) -> float:
    """The share of the bias section's default time that `s` asks for: encodings, T^2, paths
    (posenc and the limit alone take ~1/9 of the three paths' time)."""
    enc = len(s.bias_encodings) / max(1, len(default.bias_encodings))
    work = sum(t * t for t in s.bias_T) / max(1, sum(t * t for t in default.bias_T))
    paths = (1 + 8 * len(s.bias_paths) / max(1, len(default.bias_paths))) / 9
    return enc * work * paths


class Progress:
    """A time estimate before the first section and, after each, how long it took and the
    time left at this run's pace (stderr; the rows themselves print as they are measured)."""

    def __init__(self, sections: list[str], mode: str, bias_share: float = 1.0):
        self.plan = {name: SECONDS[mode].get(name, 0) for name in sections}
        if "bias" in self.plan:  # a subset of its encodings, lengths or paths
            self.plan["bias"] *= bias_share
        self.start, self.done = time.time(), 0.0
        print(f"bench: {mode} run of {', '.join(sections)}: about {fmt_s(sum(self.plan.values()))}"
              " on 2 quiet cores (more under load); each row prints as it is measured",
              file=sys.stderr, flush=True)  # fmt: skip

    def section(self, name: str, fn):
        print(f"bench: {name} ...", file=sys.stderr, flush=True)
        start = time.time()
        out = fn()
        self.done += self.plan.pop(name, 0)
        took, elapsed = time.time() - start, time.time() - self.start
        pace = elapsed / self.done if self.done else 1.0
        left = f", ~{fmt_s(pace * sum(self.plan.values()))} left" if self.plan else ""
        print(f"bench: {name} took {fmt_s(took)}{left}", file=sys.stderr, flush=True)
        return out


def fmt_s(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.1f} min"


def _spec(text: str) -> dict:
    spec = json.loads(text)
    if not isinstance(spec, dict):
        raise ValueError(f"must be a JSON object, got {text!r}")
    return spec


def _sizes(field: str, extra: tuple[str, ...] = ()):
    """A check of comma-separated names against Sizes.<field> (imports torch: only when the
    flag is given, so that --help answers at once)."""

    def check(items: list[str]) -> None:
        from posenc.bench.common import Sizes

        allowed = (*getattr(Sizes, field), *extra)
        bad = [x for x in items if x not in allowed]
        if bad:
            raise ValueError(f"unknown {bad}; allowed: {', '.join(allowed)}")

    return names(check=check)


def parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="posenc bench", description=__doc__.split("\n")[0])
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    p.add_argument("--quick", action="store_true", help="fewer repeats and lengths (about 3-4 min)")
    p.add_argument("--smoke", action="store_true", help="tiny sizes: checks that it runs")
    p.add_argument("--json", metavar="FILE", type=json_file, help="also write every number to FILE")
    p.add_argument("--threads", type=integer(1), default=2, help="torch threads (default 2)")
    p.add_argument(
        "--sections",
        type=names(SECTIONS),
        default=",".join(SECTIONS),
        help=f"comma-separated subset of {','.join(SECTIONS)}",
    )
    p.add_argument("--bias-T", type=integers(1),
                   help="bias section lengths, e.g. 1024,4096 (default 512,2048,8192)")  # fmt: skip
    p.add_argument("--bias-encodings", type=_sizes("bias_encodings"),
                   help="bias section cases (default: all; fire_past too)")  # fmt: skip
    p.add_argument("--bias-paths", type=_sizes("bias_paths", ("none",)),
                   help="bias paths beside posenc and the limit (default: "
                   "before,flex,materialized; 'none': posenc and the limit only)")  # fmt: skip
    p.add_argument("--worker", type=checked(_spec, ("{", "[]"), "a JSON object"),
                   help=argparse.SUPPRESS)  # internal: one bias path per process  # fmt: skip
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)  # --help answers before torch is imported
    if args.worker:  # one bias case (bench.workers), tied to the run that started it first
        from posenc import lifeline

        spec = json.loads(args.worker)
        if "parent" in spec:
            lifeline.die_with(spec.pop("parent"))
        from posenc.bench.attention import bias_case_worker

        print(json.dumps(bias_case_worker(spec)))
        return 0
    import torch

    from posenc.bench.attention import bench_bias
    from posenc.bench.common import sizes_for
    from posenc.bench.hf import bench_hf
    from posenc.bench.precision import bench_precision
    from posenc.bench.report import Report, machine_info, print_report, write_json
    from posenc.bench.rope import bench_copy, bench_rope
    from posenc.bench.sinusoidal import bench_table
    from posenc.bench.startup import bench_cli
    from posenc.bench.syncs import bench_syncs
    from posenc.bench.targets import check_targets
    from posenc.bench.train import bench_train

    sections = args.sections  # each flag checked as it was parsed (posenc.cliargs)
    if args.device == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda: no CUDA device here; allowed: cpu")
    torch.set_num_threads(args.threads)
    s, device = sizes_for(args), args.device
    for field in ("bias_T", "bias_encodings", "bias_paths"):  # given: replaces the default
        if getattr(args, field):
            setattr(s, field, tuple(x for x in getattr(args, field) if x != "none"))
    rep = Report(machine=machine_info(args.threads, device), args=vars(args))
    mode = "smoke" if args.smoke else "quick" if args.quick else "full"
    run = Progress(sections, mode, bias_share(s, sizes_for(args)))
    calls = {  # in run order; copy runs for rope too (its limit)
        "cli": lambda: bench_cli(rep, s.cli_repeats),
        "copy": lambda: bench_copy(rep, s, device),
        "rope": lambda: bench_rope(rep, s, device, got["copy"]),
        "table": lambda: bench_table(rep, s, device),
        "precision": lambda: bench_precision(rep, s, device),
        "bias": lambda: bench_bias(rep, s, device, args.threads),
        "train": lambda: bench_train(rep, s, device),
        "hf": lambda: bench_hf(rep, s, device),
        "syncs": lambda: bench_syncs(rep),
    }
    got = dict.fromkeys(SECTIONS)
    for name, call in calls.items():
        if name in sections or (name == "copy" and "rope" in sections):
            got[name] = run.section(name, call)
    results = [got[k] for k in ("copy", "rope", "precision", "bias", "train")]
    check_targets(rep, s, *results, args.quick, got["hf"], got["cli"])
    load = rep.machine["load_avg"]
    rep.notes.append(f"wall time {time.time() - run.start:.0f} s; load average at start {load}")
    print_report(rep)
    if args.json:
        write_json(rep, args.json)
    return 0
