"""Where the arena's training step spends its time, per encoding (torch.profiler, CPU).

    python benchmarks/train_profile.py                       # nope alibi t5 fire, 2 threads
    python benchmarks/train_profile.py --encodings kerple --steps 50

The step of posenc.bench.train (the arena's default model and batch on copy: forward,
cross-entropy, backward, AdamW). Per encoding: the step's time, and the share of its CPU time
in the matrix multiplications, in the attention kernels (torch's flash forward / backward), in
the optimizer and in everything else (elementwise ops, layer norms, the bias), then the
`--top` ops by self time. With POSENC_DISTANCE_BIAS=0 in the environment it profiles the path
that `auto` took before the distance backend.
"""

from __future__ import annotations

import argparse
import time

import torch
from torch.profiler import profile

from posenc.bench.train import arena_size, train_step

MATMUL = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm")


def shares(events) -> dict[str, float]:
    """Self CPU microseconds per group: matmul, attention kernels, optimizer, other."""
    total = sum(e.self_cpu_time_total for e in events)
    mm = sum(e.self_cpu_time_total for e in events if e.key in MATMUL)
    attn = sum(e.self_cpu_time_total for e in events if "flash_attention" in e.key)
    opt = sum(e.cpu_time_total for e in events if e.key.startswith("Optimizer.step"))
    return dict(matmul=mm, attention=attn, optimizer=opt, other=total - mm - attn - opt)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--encodings", default="nope,alibi,t5,fire")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--top", type=int, default=8)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    cfg = arena_size()
    print(f"arena default model {cfg}, {args.threads} threads, {args.steps} steps")
    for name in args.encodings.split(","):
        step = train_step(cfg, name, "cpu")
        for _ in range(5):
            step()
        t0 = time.perf_counter()
        for _ in range(args.steps):
            step()
        ms = (time.perf_counter() - t0) / args.steps * 1e3
        with profile() as prof:
            for _ in range(args.steps):
                step()
        events = prof.key_averages()
        groups = shares(events)
        total = sum(groups.values())
        parts = ", ".join(f"{k} {v / total:.0%}" for k, v in groups.items())
        print(f"\n{name}: {ms:.2f} ms per step; CPU time: {parts}")
        top = sorted(events, key=lambda e: e.self_cpu_time_total, reverse=True)[: args.top]
        for e in top:
            per_step = e.self_cpu_time_total / args.steps / 1e3
            print(f"  {e.key[:60]:<60} {per_step:6.2f} ms  x{e.count // args.steps}")


if __name__ == "__main__":
    main()
