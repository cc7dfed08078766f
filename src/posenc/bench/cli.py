"""`posenc bench`: speed and memory of posenc side by side with the libraries people use.

    posenc bench [--device cpu|cuda] [--quick] [--smoke] [--json FILE] [--threads N]
                 [--sections copy,rope,table,precision,bias,train,hf] [--bias-T 1024,4096]
                 [--bias-encodings alibi,t5] [--bias-paths none]

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
from posenc.bench.targets import check_targets
from posenc.bench.train import bench_train
from posenc.cliargs import OneLineParser, checked, integer, integers, names, out_file

SECTIONS = ("copy", "rope", "table", "precision", "bias", "train", "hf")


def _spec(text: str) -> dict:
    spec = json.loads(text)
    if not isinstance(spec, dict):
        raise ValueError(f"must be a JSON object, got {text!r}")
    return spec


def parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="posenc bench", description=__doc__.split("\n")[0])
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    p.add_argument("--quick", action="store_true", help="fewer repeats and lengths (< 2 min)")
    p.add_argument("--smoke", action="store_true", help="tiny sizes: checks that it runs")
    p.add_argument("--json", metavar="FILE", type=out_file, help="also write every number to FILE")
    p.add_argument("--threads", type=integer(1), default=2, help="torch threads (default 2)")
    p.add_argument(
        "--sections",
        type=names(SECTIONS),
        default=",".join(SECTIONS),
        help=f"comma-separated subset of {','.join(SECTIONS)}",
    )
    p.add_argument("--bias-T", type=integers(1),
                   help="bias section lengths, e.g. 1024,4096 (default 512,2048,8192)")  # fmt: skip
    p.add_argument("--bias-encodings", type=names(Sizes.bias_encodings),
                   help="bias section cases (default: all; fire_past too)")  # fmt: skip
    p.add_argument("--bias-paths", type=names((*Sizes.bias_paths, "none")),
                   help="bias paths beside posenc and the limit (default: "
                   "before,flex,materialized; 'none': posenc and the limit only)")  # fmt: skip
    p.add_argument("--worker", type=checked(_spec, ("{", "[]"), "a JSON object"),
                   help=argparse.SUPPRESS)  # internal: one bias path per process  # fmt: skip
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.worker:
        print(json.dumps(bias_case_worker(json.loads(args.worker))))
        return 0
    sections = args.sections  # each flag checked as it was parsed (posenc.cliargs)
    if args.device == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda: no CUDA device here; allowed: cpu")
    torch.set_num_threads(args.threads)
    s, device = sizes_for(args), args.device
    if args.bias_T:
        s.bias_T = tuple(args.bias_T)
    if args.bias_encodings:
        s.bias_encodings = tuple(args.bias_encodings)
    if args.bias_paths:
        s.bias_paths = tuple(x for x in args.bias_paths if x != "none")
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
    check_targets(rep, s, copy_ms, rope, precision, bias, train, args.quick, hf)
    load = rep.machine["load_avg"]
    rep.notes.append(f"wall time {time.time() - t0:.0f} s; load average at start {load}")
    print_report(rep)
    if args.json:
        write_json(rep, args.json)
    return 0
