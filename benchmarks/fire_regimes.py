"""FIRE below and past its threshold beside SDPA without a bias, side by side in one process.

    PYTHONPATH=src python benchmarks/fire_regimes.py T REPEATS MODE [THREADS]

MODE fwd or fwd+bwd; causal, B=1, H=8, Dh=64, float32. Prints the median wall and process CPU
time of each path over REPEATS turns (the three paths in turn within every turn) and its ratio
to SDPA's: `below` is train_len = T (every query below L), `past` train_len = T / 4.
"""

import sys
import time

import torch
import torch.nn.functional as F

import posenc

T, reps, mode = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
torch.set_num_threads(int(sys.argv[4]) if len(sys.argv) > 4 else 2)
H, Dh = 8, 64
q, k, v = (torch.randn(1, H, T, Dh) for _ in range(3))
grad = torch.randn(q.shape)


def call(fn):
    if mode == "fwd":
        return lambda: torch.no_grad()(fn)(q, k, v)

    def run():
        leaves = [x.detach().requires_grad_() for x in (q, k, v)]
        fn(*leaves).backward(grad)

    return run


calls = {"sdpa": call(lambda a, b, c: F.scaled_dot_product_attention(a, b, c, is_causal=True))}
for name, train_len in (("below", T), ("past", T // 4)):
    enc = posenc.build("fire", dim=H * Dh, heads=H, head_dim=Dh, train_len=train_len)
    calls[name] = call(lambda a, b, c, e=enc: posenc.attention(a, b, c, e))
for c in calls.values():
    c()  # warm-up
times = {name: [] for name in calls}
for _ in range(reps):
    for name, c in calls.items():
        t0, w0 = time.process_time(), time.perf_counter()
        c()
        times[name].append((time.process_time() - t0, time.perf_counter() - w0))


def med(xs):
    return sorted(xs)[len(xs) // 2]


base = [med([x[i] for x in times["sdpa"]]) for i in (0, 1)]
for name, ts in times.items():
    cpu, wall = med([x[0] for x in ts]), med([x[1] for x in ts])
    print(f"T={T} {mode} {name}: wall {wall * 1e3:.0f} ms ({wall / base[1]:.2f}x), "
          f"cpu {cpu * 1e3:.0f} ms ({cpu / base[0]:.2f}x)", flush=True)  # fmt: skip
