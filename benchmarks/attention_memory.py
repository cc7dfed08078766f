"""Peak memory of causal t5 / alibi attention with the chunked backend at long T.

    python benchmarks/attention_memory.py            # T=16384, H=8, Dh=64, B=1
    python benchmarks/attention_memory.py --T 4096   # quicker

A materialized float32 bias [B, H, T, T] alone needs B·H·T²·4 bytes (8.6 GB at T = 16384,
H = 8); the chunked backend builds it per query block. Each encoding runs in a fresh
subprocess and reports two measurements of the attention call:
    tensors   the peak of live tensor bytes allocated by torch ops during the call (a
              TorchDispatchMode that follows every storage until it is freed)
    rss       the process's peak resident memory during the call (VmHWM, reset just before)
              minus its resident memory just before the call; it also counts freed blocks
              that glibc malloc keeps for reuse (MALLOC_MMAP_THRESHOLD_=1000000 removes most)
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
import weakref

import torch
from torch.utils._python_dispatch import TorchDispatchMode

import posenc
from posenc.bench import proc_status_kb, reset_peak_rss


class LiveTensorBytes(TorchDispatchMode):
    """Tracks the bytes of storages created by ops while active, and their peak."""

    def __init__(self):
        super().__init__()
        self.refs: dict[int, int] = {}  # storage data_ptr -> live tensors that use it
        self.live = self.peak = 0

    def _release(self, key: int, nbytes: int) -> None:
        self.refs[key] -= 1
        if self.refs[key] == 0:
            del self.refs[key]
            self.live -= nbytes

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if not isinstance(t, torch.Tensor) or t.device.type != "cpu":
                continue
            storage = t.untyped_storage()
            key, nbytes = storage.data_ptr(), storage.nbytes()
            if key not in self.refs:
                self.refs[key] = 0
                self.live += nbytes
                self.peak = max(self.peak, self.live)
            self.refs[key] += 1
            weakref.finalize(t, self._release, key, nbytes)
        return out


def measure(name: str, T: int, H: int, Dh: int, block_size: int) -> dict:
    """One causal attention call with the chunked backend; peak memory in bytes."""
    torch.manual_seed(0)
    enc = posenc.build(name, heads=H, head_dim=Dh, dim=H * Dh)
    q, k, v = torch.randn(3, 1, H, T, Dh).unbind(0)
    with torch.no_grad():  # warm up (lazy init, thread pools) on a short sequence
        posenc.attention(q[:, :, :256], k[:, :, :256], v[:, :, :256], enc, backend="chunked")
        before = proc_status_kb("VmRSS") * 1024
        reset = reset_peak_rss()
        start = time.perf_counter()
        with LiveTensorBytes() as tracker:
            out = posenc.attention(q, k, v, enc, backend="chunked", block_size=block_size)
        seconds = time.perf_counter() - start
    if reset:
        peak_rss = proc_status_kb("VmHWM") * 1024
    else:  # the process's lifetime peak: an upper bound
        peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
    assert out.shape == (1, H, T, Dh) and torch.isfinite(out).all()
    return {"tensors": tracker.peak, "rss": max(peak_rss - before, 0), "seconds": seconds}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--T", type=int, default=16384)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--head-dim", type=int, default=64)
    parser.add_argument("--block-size", type=int, help="query block (default: attention's auto)")
    parser.add_argument("--encodings", default="t5,alibi")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # run one encoding, print JSON
    args = parser.parse_args(argv)
    T, H, Dh, bs = args.T, args.heads, args.head_dim, args.block_size
    if args.one:
        print(json.dumps(measure(args.one, T, H, Dh, bs)))
        return 0

    dense = H * T * T * 4  # a float32 bias [1, H, T, T]
    gb = 1e9
    block = bs or "auto"
    print(f"causal attention, chunked backend: B=1, H={H}, T={T}, Dh={Dh}, block_size={block}")
    print(f"a materialized float32 bias [1, {H}, {T}, {T}] needs {dense / gb:.2f} GB\n")
    print(f"{'encoding':<10} {'tensors GB':>10} {'rss GB':>8} {'seconds':>8}  bias / peak")
    for name in args.encodings.split(","):
        cmd = [sys.executable, __file__, "--one", name, "--T", str(T), "--heads", str(H)]
        cmd += ["--head-dim", str(Dh)] + (["--block-size", str(bs)] if bs else [])
        result = subprocess.run(cmd, capture_output=True, text=True, check=True)
        r = json.loads(result.stdout.strip().splitlines()[-1])
        peak = max(r["tensors"], r["rss"])
        print(
            f"{name:<10} {r['tensors'] / gb:>10.3f} {r['rss'] / gb:>8.3f} {r['seconds']:>8.1f}"
            f"  {dense / peak:>6.1f}x less"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
