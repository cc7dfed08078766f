"""Section `bias`: causal attention with a score bias, q, k, v [1, H, T, Dh] float32, forward
("fwd", under no_grad) and forward+backward ("fwd+bwd", a fixed random output gradient): time
and peak extra memory of each path (docs/bench/README.md, Method): posenc (backend auto), limit
(SDPA without a bias), before (backend chunked), flex (FlexAttention, forward only),
materialized (the [1, H, T, T] bias the way transformers' T5 and BLOOM build it; posenc's
bias() for the others). posenc and the limit share one worker process, so the load moves them
alike; the others run in one each.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from posenc import build
from posenc.attention import attention
from posenc.bench.common import GB, Sizes, optional, timeit_many
from posenc.bench.report import Report, Row
from posenc.bench.workers import available_memory, peak_extra_bytes, run_worker

MODES = ("fwd", "fwd+bwd")
SECTION = {"fwd": "bias attn", "fwd+bwd": "bias fwd+bwd"}
BEFORE_MAX_T = 4096  # the chunked path's fwd+bwd recomputes every block: minutes at 16k
BEFORE_FWD_MAX_T = {"fire": 4096}  # chunked FIRE runs its MLP per (i, j): minutes at 16k
MATERIALIZED_MAX_T = {"fire": 4096}  # posenc's bias() evaluates FIRE's MLP per (i, j)
# bench case -> (encoding, T // train_len): FIRE's second regime, queries past its threshold L
REGIMES = {"fire_past": ("fire", 4)}


def encoding_of(case: str) -> str:
    """The encoding a bench case builds ("fire_past" -> "fire")."""
    return REGIMES.get(case, (case, 1))[0]


def case_label(case: str) -> str:
    return "fire past L=T/4" if case == "fire_past" else case


FWD_ONLY = {"flex", "materialized"}
MATERIALIZED_LABEL = {  # how transformers materializes each bias; others: posenc's bias()
    "t5": "materialized (T5 compute_bias)",
    "alibi": "materialized (BLOOM build_alibi_tensor)",
}
LABEL = {
    "posenc": "posenc.attention",
    "limit": "SDPA without bias (limit)",
    "before": "posenc before (backend=chunked)",
    "flex": "FlexAttention compiled (score_mod)",
}


def label(path: str, name: str) -> str:
    if path == "materialized":
        return MATERIALIZED_LABEL.get(name, "materialized (posenc bias())")
    return LABEL[path]


def materialized_attention(name: str, q, k, v, enc):
    """Causal attention with the full [1, H, T, T] bias built the way transformers does."""
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


def forward_fn(path: str, name: str, enc):
    """(q, k, v) -> out for one path."""
    if path == "limit":
        return lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True)
    if path == "materialized":
        return lambda q, k, v: materialized_attention(name, q, k, v, enc)
    backend = {"posenc": "auto", "before": "chunked", "flex": "flex"}[path]
    return lambda q, k, v: attention(q, k, v, enc, causal=True, backend=backend)


def make_call(path: str, name: str, enc, q, k, v, mode: str):
    """A zero-argument call running `path` once in `mode`."""
    fn = forward_fn(path, name, enc)
    if mode == "fwd":

        def run():
            with torch.no_grad():
                return fn(q, k, v)

        return run
    grad = torch.randn(q.shape, generator=torch.Generator().manual_seed(1)).to(q)

    def run_bwd():
        leaves = [t.detach().requires_grad_() for t in (q, k, v)]
        fn(*leaves).backward(grad)

    return run_bwd


def bias_case_worker(spec: dict) -> list[dict]:
    """[{T, mode, path, ms, peak_mb}] of the spec's paths timed in turn in this worker process
    (repeats x 8192 // T below T = 8192, or `turns` at every T)."""
    torch.set_num_threads(spec["threads"])
    device, case = spec["device"], spec["encoding"]
    name, per = REGIMES.get(case, (case, 1))
    results = []
    H, Dh = spec["H"], spec["Dh"]
    for T in spec["T"]:
        torch.manual_seed(0)
        enc = build(name, dim=H * Dh, heads=H, head_dim=Dh, train_len=max(1, T // per)).to(device)
        q, k, v = (torch.randn(1, H, T, Dh, device=device) for _ in range(3))  # [1, H, T, Dh]
        for mode in spec["modes"]:
            paths = [p for p in spec["paths"] if mode == "fwd" or p not in FWD_ONLY]
            before_max = BEFORE_MAX_T if mode != "fwd" else BEFORE_FWD_MAX_T.get(name, T)
            if before_max < T:
                paths = [p for p in paths if p != "before"]
            calls = {p: make_call(p, name, enc, q, k, v, mode) for p in paths}
            reps = spec.get("turns") or spec["repeats"] * max(1, 8192 // T)  # short: more
            times = timeit_many(calls, device, reps, warmup=max(1, reps // 2))
            for p, run in calls.items():
                peak = max(peak_extra_bytes(run, device), 0) / 1e6
                results.append(dict(T=T, mode=mode, path=p, ms=times[p], peak_mb=peak))
        del q, k, v, enc
    return results


def worker_specs(rep: Report, s: Sizes, name: str, device: str, threads: int) -> list[dict]:
    """The worker specs of one encoding: posenc with the limit, before, flex, materialized."""
    base = dict(
        device=device, encoding=name, H=s.bias_H, Dh=s.bias_Dh, threads=threads,
        repeats=max(1, min(s.repeats, 3)),
    )  # fmt: skip
    # posenc and the limit side by side in one process; before (chunked) in its own: timed in
    # turn with it, posenc's next call paid for its freed buffers (docs/bench/README.md)
    specs = [dict(base, paths=["posenc", "limit"], T=list(s.bias_T), modes=MODES)]
    if "before" in s.bias_paths:
        specs.append(dict(base, paths=["before"], T=list(s.bias_T), modes=MODES))
    if s.bias_flex and "flex" in s.bias_paths and device == "cpu":
        specs.append(dict(base, paths=["flex"], T=list(s.bias_T), modes=["fwd"]))
    Ts = [T for T in s.bias_T if MATERIALIZED_MAX_T.get(encoding_of(name), T) >= T]
    avail = available_memory()
    for T in list(Ts):  # bias + scores + probabilities, [H, T, T] float32 each
        need = 3 * s.bias_H * T * T * 4
        if need > 0.6 * avail:
            Ts.remove(T)
            rep.notes.append(
                f"{name} materialized at T={T} skipped: needs ~{need / GB:.1f} GB, "
                f"{avail / GB:.1f} GB available"
            )
    if name in ("t5", "alibi") and optional("transformers") is None:
        Ts = []
    if Ts and "materialized" in s.bias_paths:
        specs.append(dict(base, paths=["materialized"], T=Ts, modes=["fwd"]))
    return specs


def bench_bias(rep: Report, s: Sizes, device: str, threads: int) -> dict:
    """Rows "bias attn" and "bias fwd+bwd"; {encoding: {mode: {path: {T: {ms, peak_mb}}}}}."""
    optional("transformers", rep.notes, "transformers", "the materialized T5/BLOOM paths")
    if not s.bias_flex:
        rep.notes.append("FlexAttention rows skipped in this run (they compile per shape)")
    out: dict = {}
    for name in s.bias_encodings:
        res: dict = {mode: {} for mode in MODES}
        for spec in worker_specs(rep, s, name, device, threads):
            try:
                rows = run_worker(spec)
            except Exception as err:  # noqa: BLE001
                rep.notes.append(f"bias {name} {'/'.join(spec['paths'])}: failed ({err})")
                continue
            for r in rows:
                res[r["mode"]].setdefault(r["path"], {})[r["T"]] = r
        for mode in MODES:
            for T in s.bias_T:
                ours = res[mode].get("posenc", {}).get(T)
                limit = res[mode].get("limit", {}).get(T)
                for path, by_T in res[mode].items():
                    r = by_T.get(T)
                    if r is None:
                        continue
                    ratio = r["ms"] / ours["ms"] if ours else None
                    of_limit = limit["ms"] / r["ms"] if limit else None
                    case = f"{case_label(name)} T={T} H={s.bias_H} Dh={s.bias_Dh} B=1 causal"
                    impl = label(path, encoding_of(name))
                    row = Row(SECTION[mode], case, impl, r["ms"], ratio, of_limit, r["peak_mb"])
                    rep.rows.append(row)
        out[name] = res
    rep.notes.extend(limit_summary(out, s.bias_T))
    return out


def limit_summary(bias: dict, Ts) -> list[str]:
    """One line per case and mode: posenc's time / SDPA-without-bias's (one process) at every T."""
    lines = []
    for name, res in bias.items():
        for mode in MODES:
            ours, limit = res[mode].get("posenc", {}), res[mode].get("limit", {})
            cells = [
                f"T={T} {ours[T]['ms'] / limit[T]['ms']:.2f}x"
                for T in Ts if T in ours and T in limit
            ]  # fmt: skip
            if cells:
                lines.append(f"{case_label(name)} {mode} / SDPA without bias: {', '.join(cells)}")
    return lines
