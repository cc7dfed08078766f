"""Score-biased attention on a GPU (issue 41): posenc's bias paths beside attention without one.

    PYTHONPATH=src python benchmarks/gpu_bias.py --out DIR [--budget 240] [--dtypes bf16]
                                                 [--T 2048,8192,32768,512,16384] [--dry-run]

For every score encoding (alibi, kerple, sandwich, t5, fire below its threshold, fire past it:
train_len = T / 4), causal, B=1, H=8, Dh=64, forward and forward+backward, the median time of

    flex      FlexAttention compiled with the encoding's score_mod and a causal block mask
              (posenc's `flex` backend: the bias computed inside the kernel)
    sdpa_bias posenc.attention(backend="sdpa"): the [1, H, T, T] bias materialized, then SDPA
    limit     F.scaled_dot_product_attention(is_causal=True), no bias (torch picks the kernel)
    flash     the same, SDPBackend.FLASH_ATTENTION only; flash_attn_func too where the
              flash-attn package is installed

side by side in one process, with each path's ratio to `limit` at the same T and dtype.
Results go to DIR/gpu_bias.jsonl as they are measured (a rerun skips what is there) and
DIR/gpu_bias.md / .json at the end (--budget 0: only that). Bounded: forward first, T in
--T's order, and no case starts after --budget seconds (FlexAttention compiles once per
encoding, shape and mode: that is most of the time); a case whose estimated memory exceeds
60% of the free GPU memory is skipped and says so; an out-of-memory error is recorded, not
raised. Without CUDA it writes one line and
exits 2; --dry-run checks the wiring on CPU at tiny sizes (FlexAttention not compiled).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

import posenc

CASES = {  # bench case -> (encoding, T // train_len)
    "alibi": ("alibi", 1),
    "kerple": ("kerple", 1),
    "sandwich": ("sandwich", 1),
    "t5": ("t5", 1),
    "fire": ("fire", 1),  # every query below FIRE's threshold L = T
    "fire_past": ("fire", 4),  # L = T / 4: 3/4 of the queries normalize by their own position
}
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
H, DH = 8, 64


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True, help="folder for gpu_bias.{jsonl,md,json}")
    p.add_argument("--budget", type=float, default=240.0, help="seconds (default 240)")
    p.add_argument("--dtypes", default="bf16", help="comma-separated of bf16, fp16, fp32")
    p.add_argument("--T", default="2048,8192,32768,512,16384", help="lengths, in the order run")
    # --budget 0: measure nothing, write the table of what DIR/gpu_bias.jsonl holds
    p.add_argument("--cases", default=",".join(CASES), help="comma-separated of " + ",".join(CASES))
    p.add_argument("--modes", default="fwd,fwd+bwd")
    p.add_argument("--dry-run", action="store_true", help="CPU, tiny sizes: checks the wiring")
    args = p.parse_args(argv)
    try:
        args.T = [int(t) for t in args.T.split(",")]
    except ValueError:
        p.error(f"--T: comma-separated integers, got {args.T!r}")
    for name, allowed in (("dtypes", DTYPES), ("cases", CASES), ("modes", ("fwd", "fwd+bwd"))):
        vals = [x for x in getattr(args, name).split(",") if x]
        bad = [x for x in vals if x not in allowed]
        if bad or not vals:
            p.error(f"--{name}: {bad or 'none given'}; allowed: {', '.join(allowed)}")
        setattr(args, name, vals)
    return args


def device_info(device: str) -> dict:
    info = dict(torch=torch.__version__, device=device)
    if device == "cuda":
        props = torch.cuda.get_device_properties(0)
        info.update(name=props.name, memory_gb=round(props.total_memory / 2**30, 1),
                    cuda=torch.version.cuda)  # fmt: skip
    return info


def sync(device):
    if device == "cuda":
        torch.cuda.synchronize()


def timed(fn, device, min_time=0.3, max_reps=50) -> float:
    """Median ms of fn() after a warm-up call (compiles there), repeated for ~min_time s."""
    fn()
    sync(device)
    t0 = time.perf_counter()
    fn()
    sync(device)
    once = time.perf_counter() - t0
    reps = int(max(3, min(max_reps, min_time / max(once, 1e-6))))
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        sync(device)
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def flex_call(enc, T, device, compiled: bool):
    """FlexAttention with enc.score_mod and a causal block mask: (q, k, v) -> out."""
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    pos = torch.arange(T, device=device)
    score_mod = enc.score_mod(pos, pos)
    block_mask = create_block_mask(lambda b, h, q, k: k <= q, None, None, T, T, device=device)
    if compiled:  # one compile per encoding, shape and mode: more than dynamo's default limit
        for knob in ("cache_size_limit", "recompile_limit"):
            if hasattr(torch._dynamo.config, knob):
                setattr(torch._dynamo.config, knob, 1024)
    fn = torch.compile(flex_attention, dynamic=False) if compiled else flex_attention
    scale = enc.softmax_scale(DH)
    return lambda q, k, v: fn(q, k, v, score_mod=score_mod, block_mask=block_mask, scale=scale)


def path_fn(path, enc, T, device, dry):
    if path == "limit":
        return lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True)
    if path == "flash":
        from torch.nn.attention import SDPBackend, sdpa_kernel

        def flash(q, k, v):
            with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                return F.scaled_dot_product_attention(q, k, v, is_causal=True)

        return flash
    if path == "flash_attn":
        from flash_attn import flash_attn_func  # [B, T, H, Dh]

        return lambda q, k, v: flash_attn_func(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), causal=True
        ).transpose(1, 2)
    if path == "sdpa_bias":
        return lambda q, k, v: posenc.attention(q, k, v, enc, causal=True, backend="sdpa")
    return flex_call(enc, T, device, compiled=not dry)


def memory_need(path, T, dtype) -> int:
    """Bytes a call may hold beyond q, k, v (an estimate; the bias paths: float32 temporaries
    of bias() and the [1, H, T, T] bias and mask)."""
    if path == "sdpa_bias":
        return H * T * T * (3 * 4 + 2 * dtype.itemsize) + T * T
    return 16 * H * T * DH * 4


def run_case(key, path, case, T, dtype, mode, device, dry) -> dict:
    torch.manual_seed(0)
    enc = None  # case "-": the paths without a bias
    if case in CASES:
        name, per = CASES[case]
        enc = posenc.build(name, dim=H * DH, heads=H, head_dim=DH, train_len=max(1, T // per))
        enc = enc.to(device)
    q, k, v = (torch.randn(1, H, T, DH, device=device, dtype=dtype) for _ in range(3))
    fn = path_fn(path, enc, T, device, dry)
    if mode == "fwd":

        def call():
            with torch.no_grad():
                fn(q, k, v)
    else:
        grad = torch.randn_like(q)

        def call():
            leaves = [t.detach().requires_grad_() for t in (q, k, v)]
            fn(*leaves).backward(grad)

    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    ms = timed(call, device, min_time=0.05 if dry else 0.3)
    row = dict(key=key, case=case, path=path, T=T, dtype=str(dtype).split(".")[-1], mode=mode,
               ms=ms, wall_s=round(time.perf_counter() - t0, 2))  # fmt: skip
    if device == "cuda":
        row["peak_gb"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
    return row


def table(rows: list[dict], info: dict, notes: list[str]) -> str:
    """Markdown: one line per (case, dtype, mode, T), each path's ms and ratio to `limit`."""
    paths = ["flex", "sdpa_bias", "limit", "flash", "flash_attn"]
    present = [p for p in paths if any(r["path"] == p and "ms" in r for r in rows)]
    lines = [
        f"# Score-biased attention on {info.get('name', info['device'])}",
        "",
        f"torch {info['torch']}" + (f", CUDA {info['cuda']}" if "cuda" in info else "")
        + f"; causal, B=1, H={H}, Dh={DH}; median ms (ratio to `limit`, SDPA without a bias)",
        "",
        "| case | dtype | mode | T | " + " | ".join(present) + " |",
        "|" + "---|" * (4 + len(present)),
    ]  # fmt: skip
    by = {}
    for r in rows:
        by.setdefault((r["case"], r["dtype"], r["mode"], r["T"]), {})[r["path"]] = r
    for (case, dtype, mode, T), got in sorted(by.items(), key=lambda kv: kv[0]):
        if case == "-":
            continue
        lim = by.get(("-", dtype, mode, T), {}).get("limit", {}).get("ms")
        cells = []
        for p in present:
            r = got.get(p) or by.get(("-", dtype, mode, T), {}).get(p)
            if r is None:
                cells.append("")
            elif "ms" not in r:
                cells.append(r.get("skipped", "?"))
            else:
                cells.append(f"{r['ms']:.3f}" + (f" ({r['ms'] / lim:.2f}x)" if lim else ""))
        lines.append(f"| {case} | {dtype} | {mode} | {T} | " + " | ".join(cells) + " |")
    lines += ["", *[f"- {n}" for n in notes]]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    args = parse(argv)
    out = Path(args.out)
    device = "cuda" if torch.cuda.is_available() and not args.dry_run else "cpu"
    if device == "cpu" and not args.dry_run and args.budget > 0:
        print("gpu_bias: no CUDA device here; nothing measured (--dry-run checks it on CPU)")
        return 2
    if args.dry_run:
        args.T, args.dtypes = [t for t in args.T if t <= 128] or [64], ["fp32"]
    out.mkdir(parents=True, exist_ok=True)
    log = out / "gpu_bias.jsonl"
    done = {}
    if log.exists():  # resume: what an earlier run measured stays
        for line in log.read_text().splitlines():
            r = json.loads(line)
            done[r["key"]] = r
    info, notes, start = device_info(device), [], time.perf_counter()
    saved = out / "device.json"  # the device of the run that measured (--budget 0 reads it)
    if device == "cuda" or args.dry_run:
        saved.write_text(json.dumps(info))
    elif saved.exists():
        info = json.loads(saved.read_text())
    shared = ["limit", "flash"]
    try:
        import flash_attn  # noqa: F401

        shared.append("flash_attn")
    except ImportError:
        notes.append("flash-attn not installed: flash_attn_func not measured")
    if device == "cpu":
        shared = ["limit"]
    plan = []  # forward first, then --T's order: what the budget cuts comes last
    for mode in args.modes:
        for T in args.T:
            for dt in args.dtypes:
                plan += [("-", p, T, dt, mode) for p in shared]
                plan += [(c, p, T, dt, mode) for c in args.cases for p in ("flex", "sdpa_bias")]
    slow = {}  # (case, path, dtype, mode) that ran out of memory or time -> why: no longer T
    for case, path, T, dt, mode in plan:
        key = f"{case}|{path}|{T}|{dt}|{mode}"
        if key in done:
            continue
        dtype = DTYPES[dt]
        row = dict(key=key, case=case, path=path, T=T, dtype=str(dtype).split(".")[-1], mode=mode)
        if time.perf_counter() - start > args.budget:
            notes.append(f"budget of {args.budget:.0f} s spent: later cases not started")
            break
        if (case, path, dt, mode) in slow:
            row["skipped"] = f"skipped (at a shorter T: {slow[(case, path, dt, mode)]})"
        elif device == "cuda":
            free = torch.cuda.mem_get_info()[0]
            if memory_need(path, T, dtype) > 0.6 * free:
                row["skipped"] = f"skipped: needs ~{memory_need(path, T, dtype) / 2**30:.0f} GB"
        if "skipped" not in row:
            try:
                row = run_case(key, path, case, T, dtype, mode, device, args.dry_run)
            except torch.cuda.OutOfMemoryError:
                row["skipped"] = "out of memory"
                slow[(case, path, dt, mode)] = "out of memory"
            except Exception as err:  # noqa: BLE001  a path that cannot run: say so, go on
                row["skipped"] = f"failed: {type(err).__name__}"
                notes.append(f"{key}: {type(err).__name__}: {str(err).splitlines()[0][:200]}")
                slow[(case, path, dt, mode)] = f"failed: {type(err).__name__}"
            if device == "cuda":
                torch.cuda.empty_cache()
            if row.get("wall_s", 0) > args.budget / 8:  # one case took an eighth of the budget
                slow[(case, path, dt, mode)] = f"took {row['wall_s']:.0f} s, over 1/8 of the budget"
        done[key] = row
        with log.open("a") as f:
            f.write(json.dumps(row) + "\n")
        shown = f"{row['ms']:.3f} ms" if "ms" in row else row["skipped"]
        print(f"{key}: {shown}", flush=True)
    notes.append(f"wall time {time.perf_counter() - start:.0f} s (budget {args.budget:.0f} s)")
    rows = list(done.values())
    (out / "gpu_bias.json").write_text(json.dumps(dict(device=info, rows=rows), indent=1))
    (out / "gpu_bias.md").write_text(table(rows, info, notes))
    print(f"wrote {out / 'gpu_bias.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
