"""What every section shares: the sizes of a run, the timer, optional libraries."""

from __future__ import annotations

import random
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
    bias_T: tuple = (512, 2048, 8192)  # q, k, v [1, bias_H, T, bias_Dh]
    bias_H: int = 8
    bias_Dh: int = 64
    bias_encodings: tuple = ("alibi", "kerple", "sandwich", "t5", "fire", "fire_past")
    bias_paths: tuple = ("before", "flex", "materialized")  # beside posenc and the limit
    bias_flex: bool = True  # FlexAttention rows (compiled per shape: ~1 min each on 2 cores)
    train_steps: int = 20
    train_encodings: tuple = ("rope", "alibi")
    # score encodings timed against posenc before issue 15 (POSENC_DISTANCE_BIAS=0)
    train_score_encodings: tuple = ("alibi", "kerple", "sandwich", "t5", "fire")
    hf_T: int = 1024  # section hf: a forward at hf_T tokens, a decode of hf_new after it
    hf_new: int = 32
    hf_repeats: int = 5
    hf_real: bool = True  # the embedded SmolLM2-135M (False: a tiny random Llama)
    cli_repeats: int = 5  # fresh interpreters per command timed by section cli (after a warm one)


def sizes_for(args) -> Sizes:
    if args.smoke:  # tiny: for the test suite, checks the wiring, measures nothing useful
        return Sizes(
            B=1, H=2, T=64, Dh=32, repeats=2, warmup=1, table_T=64, table_dim=16, precision_T=(64,),
            bias_T=(128,), bias_H=2, bias_Dh=16, bias_encodings=("alibi",), bias_flex=False,
            train_steps=2, train_encodings=("rope",), train_score_encodings=("alibi",),
            cli_repeats=1,
        )  # fmt: skip
    if args.quick:  # the target RoPE shape, fewer repeats, short bias sweep
        return Sizes(
            repeats=3, warmup=1, bias_T=(1024,), bias_encodings=("alibi", "t5"), bias_flex=False,
            train_steps=6, train_encodings=("rope",), train_score_encodings=("alibi",),
            hf_real=False, cli_repeats=2,
        )  # fmt: skip
    return Sizes()


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def timeit(fn, device: str, repeats: int, warmup: int = 2) -> float:
    """Median wall time of fn() in ms, after `warmup` calls."""
    return timeit_many({0: fn}, device, repeats, warmup)[0]


def timeit_many(fns: dict, device: str, repeats: int, warmup: int = 1) -> dict:
    """{name: median ms} of each fn(), run in turn (a busy machine slows them alike) in a seeded
    shuffled order (none always pays for the memory or cache another freed or evicted)."""
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    times: dict = {name: [] for name in fns}
    order, rng = list(fns), random.Random(0)
    for _ in range(repeats):
        rng.shuffle(order)
        for name in order:
            fn = fns[name]
            sync(device)
            t0 = time.perf_counter()
            fn()
            sync(device)
            times[name].append(time.perf_counter() - t0)
    return {name: 1e3 * statistics.median(t) for name, t in times.items()}


def optional(module: str, notes: list | None = None, name: str = "", what: str = ""):
    """Import a benchmarked library, or None, noting "<name> not installed: <what> skipped"."""
    try:
        return __import__(module, fromlist=["_"])
    except Exception:  # noqa: BLE001 - missing or broken: skipped either way
        if notes is not None:
            notes.append(f"{name} not installed: {what + ' ' if what else ''}skipped")
        return None
