"""Seed 001 (a generated overview): a positional-encoding layer in every block; added noise."""

from __future__ import annotations

import math

import torch

from posenc import analysis
from posenc.base import PositionalEncoding
from posenc.explain.claims.base import CAVEAT, FAILS, HOLDS, Measured, Rule, seed_claim
from posenc.explain.claims.tools import dot_residual, sinusoid
from posenc.model import TransformerLM

SEED = "001_bcee35876cb4abfa.txt"


def encoding_calls(dim: int, depth: int) -> int:
    """How often the encoding's embed() runs in one forward of a `depth`-block TransformerLM."""
    torch.manual_seed(0)
    model = TransformerLM(vocab_size=16, dim=dim, depth=depth, heads=4, encoding="sinusoidal")
    calls = []
    for enc in [m for m in model.modules() if isinstance(m, PositionalEncoding)]:

        def counting(x, positions, _original=enc.embed):
            calls.append(1)
            return _original(x, positions)

        enc.embed = counting
    with torch.no_grad():
        model(torch.zeros(1, 8, dtype=torch.long))
    return len(calls)


@seed_claim(
    "inv-001-04",
    id="claim-001-every-block",
    about=("sinusoidal", "learned"),
    rules=(
        Rule("encodings per forward / blocks", "<", 1, FAILS),
        Rule("encodings per forward / blocks", ">", 1, FAILS),
    ),
    otherwise=HOLDS,
)
def claim_001_every_block(dim: int, n: int, *, depth: int = 3) -> Measured:
    calls = encoding_calls(dim, depth)
    return Measured(
        method="count how often the encoding is applied in one forward pass of a multi-block model",
        result=f"in posenc.TransformerLM with {depth} blocks the encoding's embed() runs "
        f"{calls} time(s) per forward",
        measured={"encodings per forward / blocks": calls / depth},
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
    otherwise=HOLDS,
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


@seed_claim(
    "inv-001-05",
    id="claim-001-layernorm",
    about=("sinusoidal", "learned"),
    rules=(
        Rule("LayerNorms per block", ">", 1, FAILS),
        Rule("LayerNorms per block", "<", 1, FAILS),
    ),
    otherwise=HOLDS,
)
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


CHECKS = [claim_001_every_block, claim_001_noise, claim_001_sqrt_dk, claim_001_layernorm]
