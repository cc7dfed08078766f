"""Seed 001 (a generated overview): a positional-encoding layer in every block; added noise."""

from __future__ import annotations

import math

import torch

from posenc import analysis
from posenc.base import PositionalEncoding
from posenc.encodings import build
from posenc.explain.claims.base import seed_claim
from posenc.explain.claims.tools import dot_residual, formula_error, sinusoid
from posenc.model import TransformerLM
from posenc.verdict import CAVEAT, FAILS, HOLDS, Measured, Rule

SEED = "001_bcee35876cb4abfa.txt"
CHECKS: list = []  # its checks in page order (seed_claim appends each)


@seed_claim("inv-001-04", id="claim-001-every-block", about=("sinusoidal", "learned"),
            rules=(Rule("encodings per forward / blocks", "<", 1, FAILS),
                   Rule("encodings per forward / blocks", ">", 1, FAILS)))  # fmt: skip
def claim_001_every_block(dim: int, n: int, *, depth: int = 3) -> Measured:
    torch.manual_seed(0)
    model = TransformerLM(vocab_size=16, dim=dim, depth=depth, heads=4, encoding="sinusoidal")
    calls = []  # one entry per embed() call
    for enc in [m for m in model.modules() if isinstance(m, PositionalEncoding)]:

        def counting(x, positions, _original=enc.embed):
            calls.append(1)
            return _original(x, positions)

        enc.embed = counting
    with torch.no_grad():
        model(torch.zeros(1, 8, dtype=torch.long))
    return Measured(
        method="count how often the encoding is applied in one forward pass of a multi-block model",
        result=f"in posenc.TransformerLM with {depth} blocks the encoding's embed() runs "
        f"{len(calls)} time(s) per forward",
        measured={"encodings per forward / blocks": len(calls) / depth},
        note="Vaswani et al. 2017 §3.5: positional encodings are added to the input embeddings "
        "at the bottoms of the encoder and decoder stacks (once); each block is attention + "
        "feed-forward.",
    )


@seed_claim(
    "inv-001-14",
    id="claim-001-noise",
    about=("sinusoidal",),
    rules=(Rule("decoding accuracy", "<", 0.9, FAILS),),
    otherwise=CAVEAT,  # it can be added; the structure it blurs is in the note
)
def claim_001_noise(dim: int, n: int) -> Measured:
    g = torch.Generator().manual_seed(0)
    trials = 10

    def noisy(pe: torch.Tensor) -> torch.Tensor:
        return pe + torch.rand(pe.shape, generator=g, dtype=torch.float64) - 0.5

    def decode_accuracy(d: int) -> float:
        pe = sinusoid(torch.arange(n), d)
        hits = [
            (torch.cdist(noisy(pe), pe).argmin(-1) == torch.arange(n)).double().mean()
            for _ in range(trials)
        ]
        return float(torch.stack(hits).mean())

    acc = {d: decode_accuracy(d) for d in sorted({16, dim})}
    pe = sinusoid(torch.arange(n), dim)
    gap, _, _ = analysis.min_pairwise_distance(pe)
    x = noisy(pe)
    shift = dot_residual(x)
    worst = min(acc.values())
    accs = ", ".join(f"{100 * a:.1f}% at d = {d}" for d, a in acc.items())
    return Measured(
        method=f"decode each noisy position back by its nearest clean vector (positions "
        f"0..{n - 1}, {trials} draws; 100% without noise); shift residual of <p_t, p_s> with "
        "the noise",
        result=f"accuracy {accs}; the noise vector is ~{math.sqrt(dim / 12):.2f} long against "
        f"{gap:.3f} between the closest two positions (d = {dim}); shift residual "
        f"{shift:.2f} instead of ~1e-15",
        measured={"decoding accuracy": worst},
        note="One can add it, but it is not in Vaswani et al. (they apply dropout to the sum of "
        "embeddings and encodings, §5.4). Noise of this size is larger than the gap between "
        "neighbouring positions: how many positions survive depends on d (numbers above), and "
        "the clean dot-product structure (depends on t - s only) is lost while it is on. "
        "posenc's sinusoidal has it as an option (noise=1.0, training only, off by default).",
    )


@seed_claim(
    "inv-001-08",
    id="claim-001-sqrt-dk",
    about=("sinusoidal", "nope"),
    rules=(  # the real reason: var(q.k) = d_k, which sqrt(d_k) undoes
        Rule("var(q.k) / d_k at 256", ">", 0.8, FAILS),
    ),
)
def claim_001_sqrt_dk(dim: int, n: int) -> Measured:
    g = torch.Generator().manual_seed(0)
    var, top = {}, {}
    for dk in (16, 256):
        q, k = torch.randn(2, 4096, dk, generator=g, dtype=torch.float64)
        scores = (q * k).sum(-1)  # q.k of unit-variance vectors
        var[dk] = float(scores.var())
        row = torch.randn(64, dk, generator=g, dtype=torch.float64) @ q[0]  # one query, 64 keys
        top[dk] = float(row.softmax(-1).max())  # unscaled: saturates as d_k grows
    return Measured(
        method="variance of q.k for q, k with unit-variance entries, d_k = 16 and 256; largest "
        "softmax weight of one query over 64 keys without the scale",
        result=f"var(q.k) = {var[16]:.1f} at d_k = 16, {var[256]:.0f} at d_k = 256 (= d_k); "
        f"unscaled max weight {top[16]:.2f} -> {top[256]:.2f}",
        measured={"var(q.k) / d_k at 256": var[256] / 256},
        note="The stated reason is not the one: dot products of d_k-dimensional vectors have "
        "variance d_k, so without the scale softmax saturates on one key (Vaswani et al. §3.2.1); "
        "1/sqrt(d_k) brings the variance back to 1. The scale does not depend on the lengths or "
        "number of the inputs.",
    )


@seed_claim("inv-001-05", id="claim-001-layernorm", about=("sinusoidal", "learned"),
            rules=(Rule("LayerNorms per block", ">", 1, FAILS),
                   Rule("LayerNorms per block", "<", 1, FAILS)))  # fmt: skip
def claim_001_layernorm(dim: int, n: int) -> Measured:
    layer = torch.nn.TransformerEncoderLayer(dim, 4, batch_first=True)
    norms = sum(isinstance(m, torch.nn.LayerNorm) for m in layer.modules())
    return Measured(
        method="count the LayerNorms of one torch.nn.TransformerEncoderLayer (Vaswani et al.'s "
        "block)",
        result=f"{norms} per block: one after the attention and one after the feed-forward "
        "sub-layer",
        measured={"LayerNorms per block": norms},
        note="Vaswani et al. §3.1: LayerNorm(x + Sublayer(x)) after each of the two sub-layers; "
        "it also centres, not only scales.",
    )


@seed_claim("inv-001-09", id="claim-001-attention-formula", about=("nope",),
            rules=(Rule("max |difference|", ">", 1e-12, FAILS),))  # fmt: skip
def claim_001_attention_formula(dim: int, n: int) -> Measured:
    g = torch.Generator().manual_seed(0)
    q, k, v = torch.randn(3, 2, 4, 16, dim // 4, generator=g, dtype=torch.float64)
    written = torch.softmax(q @ k.transpose(-1, -2) / (dim // 4) ** 0.5, -1) @ v
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v)
    err = float((written - ref).abs().max())
    return Measured(
        method="the formula as written against torch's scaled_dot_product_attention, random "
        f"Q, K, V [2, 4, 16, {dim // 4}], float64",
        result=f"max |difference| = {err:.1e}",
        measured={"max |difference|": err},
    )


@seed_claim("inv-001-10", id="claim-001-source-target", about=("nope",),
            rules=(Rule("query rows - target length", "<", 0, HOLDS),
                   Rule("query rows - target length", ">", 0, HOLDS)), otherwise=FAILS)  # fmt: skip
def claim_001_source_target(dim: int, n: int) -> Measured:
    attn = torch.nn.MultiheadAttention(dim, 4, batch_first=True)
    target, source = torch.randn(1, 3, dim), torch.randn(1, 5, dim)  # decoder queries, encoder
    _, weights = attn(target, source, source)  # Q from the target, K and V from the source
    rows, cols = weights.shape[-2:]
    return Measured(
        method="cross-attention as in a decoder (torch.nn.MultiheadAttention): queries from a "
        "3-token target, keys and values from a 5-token source",
        result=f"attention weights [{rows}, {cols}]: Q has the target's {rows} rows, K the "
        f"source's {cols}",
        measured={"query rows - target length": rows - 3},
        note="Swapped: n (Q's rows) is the target length and m (K's rows) the source length in "
        "encoder-decoder attention; in self-attention both are the sequence length.",
    )


@seed_claim("inv-001-15", id="claim-001-matrix-as-written", about=("sinusoidal",),
            rules=(Rule("max |difference|", ">", 1e-6, FAILS),))  # fmt: skip
def claim_001_matrix_as_written(dim: int, n: int) -> Measured:
    d, L = 8, 6
    p = torch.arange(L, dtype=torch.float64)[:, None]  # row r holds position r
    r = torch.arange(1, L + 1, dtype=torch.float64)[:, None]  # its exponents grow with the row
    ang = torch.cat([p / 10000 ** (2 * j * r / d) for j in (1, 2)], -1)  # as written: 2r/d, 4r/d
    written = torch.stack([ang.sin(), ang.cos()], -1).flatten(1)  # [L, 4]
    err = float((written - sinusoid(torch.arange(L), d)[:, :4]).abs().max())
    return Measured(
        method=f"evaluate the matrix as written (d_model = {d}, L = {L}: the exponent of row t "
        "is 2t/d, 4t/d, ...) against the first four columns of sinusoidal_table",
        result=f"max |difference| = {err:.3f}",
        measured={"max |difference|": err},
        note="The exponent must follow the column pair i (2i/d, starting at 0), not the row; as "
        "written it starts at 2/d and passes 1 for late rows.",
    )


@seed_claim("inv-001-16", id="claim-001-learned-init", about=("learned",),
            rules=(Rule("std of the initial table", ">", 0.0, FAILS),))  # fmt: skip
def claim_001_learned_init(dim: int, n: int) -> Measured:
    tables = []
    for seed in (0, 1):
        torch.manual_seed(seed)
        enc = build("learned", dim=dim, max_len=n)
        tables.append(torch.cat([p.detach().flatten() for p in enc.parameters()]))
    spread = float(tables[0].std())
    return Measured(
        method=f"build posenc's learned table (max_len = {n}, d = {dim}) under two seeds",
        result=f"the tables differ (max |difference| "
        f"{float((tables[0] - tables[1]).abs().max()):.3f}); std of the initial values "
        f"{spread:.3f}",
        measured={"std of the initial table": spread},
        note="A false choice: learned parameters start random (here N(0, 0.02)) and training "
        "moves them; 'learned' and 'randomly initialised' go together.",
    )


@seed_claim("inv-001-12", id="claim-001-formula", about=("sinusoidal",),
            rules=(Rule("max |difference|", ">", 1e-9, FAILS),))  # fmt: skip
def claim_001_formula(dim: int, n: int) -> Measured:
    err = formula_error(torch.arange(n), dim)
    return Measured(
        method=f"the formula in float64 against sinusoidal_table, positions 0..{n - 1}, d = {dim}",
        result=f"max |difference| = {err:.1e}",
        measured={"max |difference|": err},
    )


@seed_claim("inv-001-19", id="claim-001-window-reason", about=("learned_window", "learned"),
            rules=(Rule("influence of the tokens", "<", 1e-6, FAILS),))  # fmt: skip
def claim_001_window_reason(dim: int, n: int) -> Measured:
    torch.manual_seed(0)
    enc = build("learned_window", dim=dim, max_len=n, window=5)
    with torch.no_grad():
        enc.beta.normal_()  # a window term that is far from zero
        pos = torch.arange(n)
        x_a, x_b = torch.randn(2, 1, n, dim)  # two different token sequences
        pe_a, pe_b = enc.embed(x_a, pos) - x_a, enc.embed(x_b, pos) - x_b
        table = enc.table(pos)  # [n, D]: one plain learned table with these rows
        plain = build("learned", dim=dim, max_len=n)
        plain.weight.copy_(table)
        same = float((plain.table(pos) - pe_a[0]).abs().max())
    tokens = float((pe_a - pe_b).abs().max())
    return Measured(
        method=f"seed 001's windowed encoding (learned_window, J = 5, beta ~ N(0, 1), d = {dim}, "
        f"{n} positions) added to two different random token sequences; then a plain learned "
        "table set to its rows",
        result=f"what it adds differs between the two sequences by {tokens:.1e} (max); a plain "
        f"table reproduces it to {same:.1e}",
        measured={"influence of the tokens": tokens},
        note="The window mixes the encodings of earlier positions, not earlier tokens: PE_t is "
        "a function of t alone, so no information about earlier inputs enters, and the whole "
        "sum is one learned table.",
    )
