"""`posenc bench`: speed and memory of posenc side by side with the libraries people use.

    posenc bench [--device cpu|cuda] [--quick] [--smoke] [--json FILE] [--threads N]
                 [--sections copy,rope,table,precision,bias,train,hf,syncs] [--bias-T 1024,4096]
                 [--bias-encodings alibi,t5]

Runs the sections in this order in one process (the bias section's paths in subprocesses),
then judges the targets and prints the report. `--worker SPEC` (internal) runs one bias path.
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from posenc.bench.attention import bench_bias, bias_case_worker
from posenc.bench.common import Sizes, sizes_for
from posenc.bench.hf import bench_hf
from posenc.bench.precision import bench_precision
from posenc.bench.report import Report, machine_info, print_report, write_json
from posenc.bench.rope import bench_copy, bench_rope
from posenc.bench.sinusoidal import bench_table
from posenc.bench.syncs import bench_syncs
from posenc.bench.targets import check_targets
from posenc.bench.train import bench_train
from posenc.checks import check_choice, check_int
from posenc.cliargs import OneLineParser, check_out_file

SECTIONS = ("copy", "rope", "table", "precision", "bias", "train", "hf", "syncs")


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"--bias-T: give comma-separated integers, got {text.strip()!r}") from None


def parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="posenc bench", description=__doc__.split("\n")[0])
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    p.add_argument("--quick", action="store_true", help="fewer repeats and lengths (< 2 min)")
    p.add_argument("--smoke", action="store_true", help="tiny sizes: checks that it runs")
    p.add_argument("--json", metavar="FILE", help="also write every number to FILE")
    p.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
    p.add_argument(
        "--sections",
        default=",".join(SECTIONS),
        help=f"comma-separated subset of {','.join(SECTIONS)}",
    )
    p.add_argument(
        "--bias-T", help="bias section lengths, e.g. 1024,4096 (default 1024,4096,16384)"
    )
    p.add_argument("--bias-encodings", help="bias section encodings (default: all five)")
    p.add_argument("--worker", help=argparse.SUPPRESS)  # internal: one bias path per process
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.worker:
        print(json.dumps(bias_case_worker(json.loads(args.worker))))
        return 0
    if args.threads < 1:
        raise ValueError(f"--threads must be >= 1, got {args.threads}")
    sections = [x.strip() for x in args.sections.split(",") if x.strip()]
    if not sections:
        raise ValueError(f"--sections: give at least one of {', '.join(SECTIONS)}")
    bad = [x for x in sections if x not in SECTIONS]
    if bad:
        raise ValueError(f"--sections: unknown {bad}; allowed: {', '.join(SECTIONS)}")
    if args.json:  # before measuring, not after
        check_out_file(args.json, "--json")
    if args.device == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda: no CUDA device here; allowed: cpu")
    torch.set_num_threads(args.threads)
    s, device = sizes_for(args), args.device
    if args.bias_T:
        s.bias_T = tuple(check_int("--bias-T", _int(t), low=1) for t in args.bias_T.split(","))
    if args.bias_encodings:
        names = [x.strip() for x in args.bias_encodings.split(",") if x.strip()]
        allowed = Sizes.bias_encodings
        s.bias_encodings = tuple(check_choice("--bias-encodings", x, allowed) for x in names)
    rep = Report(machine=machine_info(args.threads, device), args=vars(args))
    t0 = time.time()
    copy_ms = bench_copy(rep, s, device) if "copy" in sections or "rope" in sections else None
    rope = bench_rope(rep, s, device, copy_ms) if "rope" in sections else None
    if "table" in sections:
        bench_table(rep, s, device)
    precision = bench_precision(rep, s, device) if "precision" in sections else None
    bias = bench_bias(rep, s, device, args.threads) if "bias" in sections else None
    train = bench_train(rep, s, device) if "train" in sections else None
    hf = bench_hf(rep, s, device) if "hf" in sections else None
    if "syncs" in sections:
        bench_syncs(rep)
    check_targets(rep, s, copy_ms, rope, precision, bias, train, args.quick, hf)
    load = rep.machine["load_avg"]
    rep.notes.append(f"wall time {time.time() - t0:.0f} s; load average at start {load}")
    print_report(rep)
    if args.json:
        write_json(rep, args.json)
    return 0
