"""What every section shares: the sizes of a run, the timer, optional libraries."""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

import torch

GB = 1e9


@dataclass
class Sizes:
    B: int = 4  # RoPE: q and k are [B, H, T, Dh] float32 (the targets' shape)
    H: int = 16
    T: int = 2048
    Dh: int = 128
    repeats: int = 7
    warmup: int = 2
    table_T: int = 8192  # sinusoidal table [table_T, table_dim]
    table_dim: int = 512
    precision_T: tuple = (1024, 8192)  # precision section: table [T, table_dim], q, k [1, H, T, Dh]
    bias_T: tuple = (1024, 2048, 4096, 8192, 16384, 32768)  # q, k, v [1, bias_H, T, bias_Dh]
    bias_H: int = 8
    bias_Dh: int = 64
    bias_encodings: tuple = ("alibi", "t5", "fire")
    train_steps: int = 20
    train_encodings: tuple = ("rope", "alibi")


def sizes_for(args) -> Sizes:
    if args.smoke:  # tiny: for the test suite, checks the wiring, measures nothing useful
        return Sizes(
            B=1, H=2, T=64, Dh=32, repeats=2, warmup=1, table_T=64, table_dim=16, precision_T=(64,),
            bias_T=(128,), bias_H=2, bias_Dh=16, bias_encodings=("alibi",), train_steps=2,
            train_encodings=("rope",),
        )  # fmt: skip
    if args.quick:  # the target RoPE shape, fewer repeats, short bias sweep
        return Sizes(
            repeats=3, warmup=1, bias_T=(1024, 2048), bias_encodings=("alibi", "t5"), train_steps=6,
            train_encodings=("rope",),
        )  # fmt: skip
    return Sizes()


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def timeit(fn, device: str, repeats: int, warmup: int = 2) -> float:
    """Median wall time of fn() in ms, after `warmup` calls."""
    for _ in range(warmup):
        fn()
    sync(device)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        sync(device)
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


def optional(module: str):
    """Import a benchmarked library, or None (the caller adds a 'not installed' note)."""
    try:
        return __import__(module, fromlist=["_"])
    except Exception:  # noqa: BLE001 - missing or broken: skipped either way
        return None
