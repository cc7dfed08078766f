"""Section `bias`: causal attention with a score bias (alibi, t5, fire), T = 1k ... 32k.

Time and peak extra memory of posenc.attention against the bias materialized the way
transformers does: T5 (compute_bias: buckets -> embedding, added to q·k) and BLOOM
(build_alibi_tensor + baddbmm); FIRE has no transformers model, so its materialized path is
posenc's own bias() added to the full score matrix. q, k, v [1, H, T, Dh] float32, forward.

Each (encoding, path) runs in its own subprocess (posenc.bench.workers), over increasing T.
The encodings are built from the standard keywords alone (dim, heads, head_dim, train_len=T),
so each takes its own defaults for everything else.
"""

from __future__ import annotations

import torch

from posenc import build
from posenc.attention import attention
from posenc.bench.common import GB, Sizes, optional, timeit
from posenc.bench.report import Report, Row
from posenc.bench.workers import available_memory, peak_extra_bytes, run_worker

BIAS_PATHS = ("posenc", "materialized")
# FIRE runs an MLP on every (query, key) pair: T = 8192 takes over 7 minutes per path on 2 cores
BIAS_MAX_T = {"fire": 4096}
# how transformers materializes each bias (materialized_attention); others: posenc's bias()
MATERIALIZED_LABEL = {
    "t5": "materialized (T5 compute_bias)",
    "alibi": "materialized (BLOOM build_alibi_tensor)",
}


def materialized_label(name: str) -> str:
    return MATERIALIZED_LABEL.get(name, "materialized (posenc bias())")


def materialized_attention(name: str, q, k, v, enc):
    """Causal attention with the full [1, H, T, T] bias built the way transformers does:
    T5 (compute_bias: buckets -> embedding, added to q·k), BLOOM (build_alibi_tensor +
    baddbmm), FIRE (no transformers model: posenc's own bias(), materialized)."""
    B, H, T, Dh = q.shape
    scale = enc.softmax_scale(Dh)
    if name == "t5":
        from transformers.models.t5.modeling_t5 import T5Attention

        pos = torch.arange(T, device=q.device)
        rel = pos[None, :] - pos[:, None]  # [T, T], key - query
        buckets = T5Attention._relative_position_bucket(
            rel, bidirectional=enc.bidirectional, num_buckets=enc.num_buckets,
            max_distance=enc.max_distance,
        )  # fmt: skip
        bias = enc.relative_attention_bias(buckets).permute(2, 0, 1)[None]  # [1, H, T, T]
        scores = torch.matmul(q, k.transpose(-1, -2)) * scale + bias
    elif name == "alibi":
        from transformers.models.bloom.modeling_bloom import build_alibi_tensor

        alibi = build_alibi_tensor(torch.ones(B, T, device=q.device), H, q.dtype)  # [B*H, 1, T]
        scores = torch.baddbmm(
            alibi, q.reshape(B * H, T, Dh), k.reshape(B * H, T, Dh).transpose(1, 2),
            beta=1.0, alpha=scale,
        ).view(B, H, T, T)  # fmt: skip
    else:
        pos = torch.arange(T, device=q.device)
        scores = torch.matmul(q, k.transpose(-1, -2)) * scale + enc.bias(q, k, pos, pos)
    causal = torch.ones(T, T, dtype=torch.bool, device=q.device).tril()  # [T, T]
    scores = scores.masked_fill(~causal, torch.finfo(scores.dtype).min)  # [B, H, T, T]
    return torch.matmul(scores.softmax(-1), v)


def bias_case_worker(spec: dict) -> list[dict]:
    """One path over increasing T, in this (worker) process: [{T, ms, peak_mb}].

    spec: device, encoding, path ("posenc" | "materialized"), T (list), H, Dh, repeats,
    threads."""
    torch.set_num_threads(spec["threads"])
    device, name, path = spec["device"], spec["encoding"], spec["path"]
    results = []
    for T in spec["T"]:
        torch.manual_seed(0)
        H, Dh = spec["H"], spec["Dh"]
        enc = build(name, dim=H * Dh, heads=H, head_dim=Dh, train_len=T).to(device)
        q, k, v = (torch.randn(1, H, T, Dh, device=device) for _ in range(3))  # [1, H, T, Dh]

        def run(enc=enc, q=q, k=k, v=v):
            if path == "materialized":
                return materialized_attention(name, q, k, v, enc)
            return attention(q, k, v, enc, causal=True)

        with torch.no_grad():
            ms = timeit(run, device, spec["repeats"], warmup=1)
            peak = peak_extra_bytes(run, device)
        results.append({"T": T, "ms": ms, "peak_mb": max(peak, 0) / 1e6})
        del q, k, v, enc
    return results


def bench_bias(rep: Report, s: Sizes, device: str, threads: int) -> dict:
    """Rows "bias attn"; {encoding: {path: {T: {T, ms, peak_mb}}}}."""
    if optional("transformers") is None:
        rep.notes.append("transformers not installed: the materialized T5/BLOOM paths skipped")
    for name, top in BIAS_MAX_T.items():
        if name in s.bias_encodings and max(s.bias_T) > top:
            rep.notes.append(f"{name}: measured up to T={top} only (its MLP bias is slow on CPU)")
    avail = available_memory()
    out: dict = {}
    for name in s.bias_encodings:
        results = {}
        for path in BIAS_PATHS:
            Ts = [T for T in s.bias_T if BIAS_MAX_T.get(name, T) >= T]
            if path == "materialized":
                # bias + scores + probabilities, float32, [H, T, T] each (T5 and BLOOM keep all 3)
                need = {T: 3 * s.bias_H * T * T * 4 for T in Ts}
                skip = [T for T in Ts if need[T] > 0.6 * avail]
                for T in skip:
                    rep.notes.append(
                        f"{name} materialized at T={T} skipped: needs ~{need[T] / GB:.1f} GB, "
                        f"{avail / GB:.1f} GB available"
                    )
                Ts = [T for T in Ts if T not in skip]
                if optional("transformers") is None and name in MATERIALIZED_LABEL:
                    Ts = []
            if not Ts:
                continue
            spec = dict(
                device=device, encoding=name, path=path, T=Ts, H=s.bias_H, Dh=s.bias_Dh,
                repeats=max(1, min(s.repeats, 3)), threads=threads,
            )  # fmt: skip
            try:
                results[path] = {r["T"]: r for r in run_worker(spec)}
            except Exception as err:  # noqa: BLE001
                rep.notes.append(f"bias {name} {path}: failed ({err})")
        for T in s.bias_T:
            ours = results.get("posenc", {}).get(T)
            for path in BIAS_PATHS:
                r = results.get(path, {}).get(T)
                if r is None:
                    continue
                impl = "posenc.attention" if path == "posenc" else materialized_label(name)
                ratio = r["ms"] / ours["ms"] if ours else None
                case = f"{name} T={T} H={s.bias_H} Dh={s.bias_Dh} B=1 causal"
                rep.rows.append(Row("bias attn", case, impl, r["ms"], ratio, None, r["peak_mb"]))
        out[name] = results
    return out
