"""The seeds' claims, each checked by a computation here (never by a hard-coded verdict).

The seeds are the five Chinese tutorials posenc grew from (`shared/seeds/`). Each claim below
renders the seed's words briefly in English, names the seed file, measures, and gives a verdict:
"holds", "does not hold", "holds with a caveat", or "not measured here". Numbers the seeds
print (tables, code) are quoted as data; the verdicts come from comparing them with posenc.
"""

from __future__ import annotations

import math
import sqlite3
import statistics
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn

import posenc
from posenc import analysis
from posenc import functional as PF

S000 = "000_e2b8049db0aa593d.txt"
S001 = "001_bcee35876cb4abfa.txt"
S002 = "002_194117be01fb43d6.txt"
S003 = "003_4f20139358f45fd7.txt"
S004 = "004_04aee0f491a3b5de.txt"

HOLDS, FAILS, CAVEAT, UNMEASURED = (
    "holds",
    "does not hold",
    "holds with a caveat",
    "not measured here",
)


@dataclass
class Table:
    header: list[str]
    rows: list[list[str]]
    caption: str = ""


@dataclass
class Claim:
    id: str  # html anchor, e.g. "claim-003-worked-example"
    seed: str  # seed file name
    quote: str  # the seed's words, briefly, in English
    about: tuple[str, ...]  # encodings the claim concerns (their pages show it)
    measurement: str  # what was computed
    result: str  # the numbers
    verdict: str  # HOLDS / FAILS / CAVEAT / UNMEASURED
    note: str = ""
    tables: list[Table] = field(default_factory=list)
    code: str = ""


def f4(x: float) -> str:
    return f"{x:.4f}"


def sinusoid(positions: torch.Tensor, dim: int) -> torch.Tensor:
    """posenc's sinusoidal table, float64 [T, dim]."""
    return PF.sinusoidal_table(positions.double(), dim).double()


# ---------------------------------------------------------------------------------- seed 000


SEED000_CODE = """\
class PositionalEncoding(nn.Module):

    def __init__(self, d_model, max_len=5000):
        super(PositionalEncoding, self).__init__()
        pe = torch.zeros(max_len, d_model)
        position = torch.arange(0, max_len, dtype=torch.float).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        pe = pe.unsqueeze(0).transpose(0, 1)
        #pe.requires_grad = False
        self.register_buffer('pe', pe)

    def forward(self, x):
        return x + self.pe[:x.size(0), :]
"""


def run_seed(code: str, **names) -> dict:
    """Execute a seed's snippet (quoted above, fixed text) in a fresh namespace."""
    ns = {"torch": torch, "nn": nn, "math": math, **names}
    exec(compile(code, "<seed>", "exec"), ns)  # noqa: S102 - the seeds' own quoted code
    return ns


def claim_000_unique(dim: int, n: int) -> Claim:
    far = 4096
    m = analysis.uniqueness(sinusoid(torch.arange(far), dim))
    return Claim(
        "claim-000-unique",
        S000,
        "The encoding should give every position a unique code.",
        ("sinusoidal",),
        f"smallest L2 distance between the d = {dim} sinusoidal vectors of any two positions "
        f"0..{far - 1}",
        m.detail,
        HOLDS if m.good else FAILS,
    )


def claim_000_consistent(dim: int, n: int) -> Claim:
    pe = sinusoid(torch.arange(n), dim)
    r_dot = analysis.shift_residual((pe @ pe.T)[None])
    r_dist = analysis.shift_residual(torch.cdist(pe, pe)[None])
    ok = max(r_dot, r_dist) < analysis.SHIFT_TOL
    return Claim(
        "claim-000-consistent",
        S000,
        "The gap between two words should mean the same whatever the sentence (and position).",
        ("sinusoidal",),
        f"spread over t of <p_t, p_(t+k)> and of |p_t - p_(t+k)| for each k, positions "
        f"0..{n - 1}, relative to the largest value",
        f"dot product: {r_dot:.2e}; distance: {r_dist:.2e} (float64 table)",
        HOLDS if ok else FAILS,
        "Both depend on k alone. Attention, though, sees them through W_q and W_k: see seed "
        "004's claim on the dot product.",
    )


def claim_000_any_length(dim: int, n: int) -> Claim:
    t = torch.arange(10**6, 10**6 + 64)
    pe32 = PF.sinusoidal_table(t, dim).double()  # what float32 angles give
    pe64 = sinusoid(t, dim)
    err = float((pe32 - pe64).abs().max())
    near = sinusoid(torch.arange(4096), dim)
    gap = float(torch.cdist(pe64, near).min())
    finite = bool(torch.isfinite(pe32).all())
    return Claim(
        "claim-000-any-length",
        S000,
        "It extends to sentences of any length.",
        ("sinusoidal",),
        "evaluate positions 10^6..10^6+63; distance to the vectors of 0..4095; float32 "
        "table against float64",
        f"finite: {finite}; nearest in-range vector at distance {gap:.3f}; float32 angles "
        f"differ from float64 by up to {err:.2e} at t ~ 10^6",
        CAVEAT if finite else FAILS,
        "The formula is defined at any t and the far vectors are new. But float32 angles lose "
        "precision at large t (compute them in float64 there), and being defined is not the "
        "same as a model generalizing to longer inputs: see seed 002's extrapolation claim.",
    )


def claim_000_wavelengths(dim: int, n: int) -> Claim:
    rows = []
    worst = 0.0
    for d in (4, 16, dim, 512):
        wl = analysis.wavelengths(analysis.pair_angles(sinusoid(torch.arange(64), d)))
        lo, hi = float(wl.min()) / (2 * math.pi), float(wl.max()) / (2 * math.pi)
        worst = max(worst, abs(hi - 10000) / 10000)
        rows.append([str(d), f"2π × {lo:.3f}", f"2π × {hi:,.1f}", f"{hi / 10000:.3f}"])
    return Claim(
        "claim-000-wavelengths",
        S000,
        "The wavelengths grow from 2π to 10000·2π (ω_k = 1/10000^(2k/d)).",
        ("sinusoidal", "rope"),
        "wavelength 2π/ω of each sin/cos pair, fitted from the table's angles",
        f"shortest 2π exactly; longest short of 10000·2π by up to {100 * worst:.0f}% (table below)",
        CAVEAT if worst > 0.01 else HOLDS,
        "The last pair is i = d/2 - 1, so the longest wavelength is 2π·10000^((d-2)/d), which "
        "reaches 10000·2π only as d grows. With the seed's own ω_k = 1/10000^(2k/d) and "
        "k = 1..d/2 the range would instead start at 2π·10000^(2/d): the paper counts from 0.",
        [Table(["d", "shortest", "longest", "longest / (10000·2π)"], rows)],
    )


def claim_000_code(dim: int, n: int) -> Claim:
    ns = run_seed(SEED000_CODE)
    module = ns["PositionalEncoding"](dim, max_len=n)
    seed_pe = module.pe[:, 0, :].double()  # its buffer is [max_len, 1, d_model]
    diff = float((seed_pe - sinusoid(torch.arange(n), dim)).abs().max())
    return Claim(
        "claim-000-code",
        S000,
        "This PyTorch class implements the encoding.",
        ("sinusoidal",),
        f"run the seed's class (d_model = {dim}, max_len = {n}); compare its table with "
        "posenc.functional.sinusoidal_table",
        f"max |difference| = {diff:.2e}",
        CAVEAT if diff < 1e-5 else FAILS,
        "Same numbers. Its forward slices pe[:x.size(0)], so it expects x as [T, B, D] "
        "(sequence first), the layout of PyTorch's old nn.Transformer; a batch-first x [B, T, D] "
        "gets the encoding of positions 0..B-1 instead.",
        code=SEED000_CODE,
    )


# ---------------------------------------------------------------------------------- seed 001


def claim_001_every_block(dim: int, n: int) -> Claim:
    where = (
        "Vaswani et al. 2017 §3.5: positional encodings are added to the input embeddings "
        "at the bottoms of the encoder and decoder stacks (once); each block is attention + "
        "feed-forward."
    )
    model_cls = getattr(posenc, "TransformerLM", None)
    if model_cls is None:
        result = "posenc.TransformerLM is not available here, so no count"
    else:
        torch.manual_seed(0)
        depth = 3
        model = model_cls(vocab_size=16, dim=dim, depth=depth, heads=4, encoding="sinusoidal")
        encs = [m for m in model.modules() if isinstance(m, posenc.PositionalEncoding)]
        calls = []
        for enc in encs:
            original = enc.embed

            def counting(x, positions, _original=original):
                calls.append(1)
                return _original(x, positions)

            enc.embed = counting
        with torch.no_grad():
            model(torch.zeros(1, 8, dtype=torch.long))
        result = (
            f"in posenc.TransformerLM with {depth} blocks the encoding's embed() runs "
            f"{len(calls)} time(s) per forward"
        )
    return Claim(
        "claim-001-every-block",
        S001,
        "Each Transformer block has two sub-modules: multi-head attention and a positional "
        "encoding layer.",
        ("sinusoidal", "learned"),
        "count how often the encoding is applied in one forward pass of a multi-block model",
        result,
        FAILS,
        where,
    )


def claim_001_noise(dim: int, n: int) -> Claim:
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
    shift = analysis.shift_residual((x @ x.T)[None])
    worst = min(acc.values())
    accs = ", ".join(f"{100 * a:.1f}% at d = {d}" for d, a in acc.items())
    return Claim(
        "claim-001-noise",
        S001,
        "Uniform noise ε ~ U[-1/2, 1/2] can be added to the encoding: PE(pos, i) = pos_ij + ε_ij.",
        ("sinusoidal",),
        f"decode each noisy position back by its nearest clean vector (positions 0..{n - 1}, "
        f"{trials} draws; 100% without noise); shift residual of <p_t, p_s> with the noise",
        f"accuracy {accs}; the noise vector is ~{math.sqrt(dim / 12):.2f} long against "
        f"{gap:.3f} between the closest two positions (d = {dim}); shift residual "
        f"{shift:.2f} instead of ~1e-15",
        CAVEAT if worst >= 0.9 else FAILS,
        "One can add it, but it is not in Vaswani et al. (they apply dropout to the sum of "
        "embeddings and encodings, §5.4). Noise of this size is larger than the gap between "
        "neighbouring positions: how many positions survive depends on d (numbers above), and "
        "the clean dot-product structure (depends on t - s only) is lost while it is on. "
        "posenc's sinusoidal has it as an option (noise=1.0, training only, off by default).",
    )


# ---------------------------------------------------------------------------------- seed 002

SEED002_TABLE = [  # pos, dim 0 (sin), dim 1 (cos), dim 2 (sin), dim 3 (cos), as printed
    [0, 0.0000, 1.0000, 0.0000, 1.0000],
    [1, 0.8415, 0.5403, 0.0100, 1.0000],
    [2, 0.9093, -0.4161, 0.0200, 1.0000],
]


def claim_002_table(dim: int, n: int) -> Claim:
    seed = torch.tensor([r[1:] for r in SEED002_TABLE], dtype=torch.float64)
    ours = sinusoid(torch.arange(3), 4)
    diff = (seed - ours).abs()
    worst = float(diff.max())
    rows = []
    for p in range(3):
        rows.append([str(p)] + [f"{f4(seed[p, c])} / {f4(ours[p, c])}" for c in range(4)])
    i, j = divmod(int(diff.argmax()), 4)
    return Claim(
        "claim-002-table",
        S002,
        "Worked example, d = 4, positions 0, 1, 2 (values approximate).",
        ("sinusoidal",),
        "posenc.functional.sinusoidal_table(positions 0..2, d = 4), rounded to 4 places",
        f"max |seed - computed| = {worst:.1e} (largest at position {i}, dim {j})",
        HOLDS if worst <= 5e-4 else FAILS,
        "Correct to the 4th decimal, which the seed itself calls approximate: cos(0.02) = "
        f"{f4(ours[2, 3])} is printed as 1.0000.",
        [
            Table(
                ["pos", "dim 0 (sin)", "dim 1 (cos)", "dim 2 (sin)", "dim 3 (cos)"],
                rows,
                "seed's value / computed value",
            )
        ],
    )


def claim_002_order(dim: int, n: int) -> Claim:
    if not hasattr(posenc, "attention") or "nope" not in posenc.ENCODINGS:
        return Claim(
            "claim-002-order",
            S002,
            ORDER_QUOTE,
            ("nope",),
            "permutation test",
            "posenc.attention or nope is not available",
            UNMEASURED,
        )
    bi = analysis.permutation_change("nope", dim=dim, heads=4, causal=False)
    causal = analysis.permutation_change("nope", dim=dim, heads=4, causal=True)
    sin = analysis.permutation_change("sinusoidal", dim=dim, heads=4, causal=False)
    holds = bi < 1e-5
    return Claim(
        "claim-002-order",
        S002,
        ORDER_QUOTE,
        ("nope", "sinusoidal"),
        "shuffle the tokens into one attention layer (fixed random weights, T = 16); "
        "|y(shuffled x) - shuffled y(x)| / |y(x)|",
        f"no encoding, no mask: {bi:.1e}; no encoding, causal mask: {causal:.3f}; "
        f"sinusoidal, no mask: {sin:.3f}",
        CAVEAT if holds and causal > 1e-3 else (HOLDS if holds else FAILS),
        "Without positions and without a mask the outputs are only shuffled along with the "
        "inputs (order is invisible). A causal mask alone already breaks that symmetry, so "
        "decoder-only models without an encoding (NoPE) can still learn order (Haviv et al. "
        "2022).",
    )


ORDER_QUOTE = (
    "Without positional encoding attention cannot perceive order: shuffle the words and the "
    "weighted sums stay the same."
)


def claim_002_frequency_order(dim: int, n: int) -> Claim:
    wl = analysis.wavelengths(analysis.pair_angles(sinusoid(torch.arange(64), dim)))
    omega = 2 * math.pi / wl
    falling = bool((torch.diff(omega) < 0).all())
    return Claim(
        "claim-002-frequency-order",
        S002,
        "Frequency rises with the dimension: low dims encode position with low frequencies, "
        "high dims with high ones; in the heatmap the left dims change slowly.",
        ("sinusoidal",),
        f"angular speed ω_i (radians per position) of each pair, d = {dim}",
        f"ω_0 = {float(omega[0]):.3g} (dims 0, 1) ... ω_{len(omega) - 1} = "
        f"{float(omega[-1]):.2g} (dims {dim - 2}, {dim - 1}); falls monotonically: {falling}",
        FAILS if falling else HOLDS,
        "It is the other way round: dims 0, 1 turn fastest (wavelength 2π) and the last "
        "pair slowest, as seed 004's clock has it (see the waveform and wavelength figures).",
    )


def claim_002_transformer_xl(dim: int, n: int) -> Claim:
    L = 32
    torch.manual_seed(0)
    seed = run_seed(SEED002_TXL)["TransformerXLRelativePositionBias"](L, dim)
    with torch.no_grad():
        b = seed(L, L)[None].double()  # [1, L, L]
    seed_r = analysis.shift_residual(b)
    d = float((b[0, 1:, 1:] - b[0, :-1, :-1]).abs().max())
    if "transformer_xl" in posenc.ENCODINGS:
        torch.manual_seed(0)
        enc = posenc.build("transformer_xl", dim=dim, heads=1, head_dim=dim, max_len=L)
        pos = torch.arange(L)
        ours = analysis.shift_residual(analysis.scores(enc, pos, pos, dim=dim, heads=1))
        ours_text = f"posenc's transformer_xl (fixed q, k at every position): {ours:.1e}"
    else:
        ours_text = "posenc's transformer_xl is not available here"
    return Claim(
        "claim-002-transformer-xl",
        S002,
        "Transformer-XL (relative position bias): code whose bias is "
        "position_bias[:q_len, :k_len] of a learned [max_len, max_len] table.",
        ("transformer_xl",),
        "shift residual of bias(i, j): largest spread over i of bias(i, i - k), relative; "
        "and |bias(i+1, j+1) - bias(i, j)|",
        f"seed's code: residual {seed_r:.2f}, bias(i+1, j+1) differs from bias(i, j) by up "
        f"to {d:.2f}; {ours_text}",
        FAILS if seed_r > analysis.SHIFT_TOL else HOLDS,
        "The seed's table is indexed by absolute (i, j): an absolute bias, not a relative "
        "one. Transformer-XL scores (q_i + u)·k_j + (q_i + v)·W_r R_(i-j) with a sinusoidal "
        "R of the distance i - j and rel_shift (Dai et al. 2019), so shifting both positions "
        "changes nothing.",
        code=SEED002_TXL,
    )


SEED002_TXL = """\
class TransformerXLRelativePositionBias(nn.Module):
    def __init__(self, max_len, d_model):
        super(TransformerXLRelativePositionBias, self).__init__()
        self.position_bias = nn.Parameter(torch.randn(max_len, max_len))
        self.d_model = d_model

    def forward(self, q_len, k_len):
        bias = self.position_bias[:q_len, :k_len]
        return bias
"""

SEED002_T5 = """\
class T5RelativePositionBias(nn.Module):
    def __init__(self, max_len, num_heads):
        super(T5RelativePositionBias, self).__init__()
        self.relative_position_bias = nn.Embedding(2 * max_len - 1, num_heads)
        self.max_len = max_len

    def forward(self, q_len, k_len):
        positions = torch.arange(q_len).unsqueeze(1) - torch.arange(k_len).unsqueeze(0)
        positions = positions + (self.max_len - 1)
        bias = self.relative_position_bias(positions)
        return bias
"""

SEED002_DEBERTA = """\
class DeBERTaRelativePositionBias(nn.Module):
    def __init__(self, max_len, d_model):
        super(DeBERTaRelativePositionBias, self).__init__()
        self.relative_position_embedding = nn.Embedding(2 * max_len - 1, d_model)
        self.max_len = max_len

    def forward(self, q_len, k_len):
        positions = torch.arange(q_len).unsqueeze(1) - torch.arange(k_len).unsqueeze(0)
        positions = positions + (self.max_len - 1)
        bias = self.relative_position_embedding(positions)
        return bias
"""


def _seed_error(fn) -> str:
    try:
        fn()
    except Exception as err:  # noqa: BLE001 - reporting what the seed's code does
        return analysis.describe_error(err).splitlines()[0]
    return "no error"


def claim_002_t5_deberta(dim: int, n: int) -> Claim:
    L = 512
    ns = run_seed(SEED002_T5 + SEED002_DEBERTA)
    t5 = ns["T5RelativePositionBias"](L, 8)
    deb = ns["DeBERTaRelativePositionBias"](L, 16)
    with torch.no_grad():
        b = t5(64, 64).permute(2, 0, 1).double()  # seed returns [q, k, heads]
    t5_err = _seed_error(lambda: t5(L + 1, L + 1))
    deb_err = _seed_error(lambda: deb(L + 1, L + 1))
    rel = torch.arange(-(4 * L - 1), 4 * L)  # key - query
    t5_buckets = int(PF.t5_bucket(rel).unique().numel())
    deb_buckets = int(PF.deberta_bucket(-rel, 256, 512).clamp(-255, 255).unique().numel())
    rows = [
        ["seed's T5", f"{2 * L - 1} (one per distance)", t5_err],
        [
            "T5 (Raffel et al.), 32 buckets, max_distance 128",
            f"{t5_buckets}",
            "no error: distances past 128 share the last bucket",
        ],
        ["seed's DeBERTa", f"{2 * L - 1} rows of d_model", deb_err],
        [
            "DeBERTa-v2, position_buckets 256, max_relative_positions 512",
            f"{deb_buckets}",
            "no error: log buckets, clipped",
        ],
    ]
    return Claim(
        "claim-002-t5-deberta",
        S002,
        "T5 and DeBERTa code: an nn.Embedding(2·max_len - 1, ...) indexed by i - j + max_len - 1.",
        ("t5", "deberta"),
        f"run the seed's classes (max_len = {L}); count distinct learned entries for distances "
        f"|i - j| < {4 * L} with T5's and DeBERTa's real bucketing; call them with "
        f"q_len = k_len = {L + 1}",
        f"the seed's T5 bias is relative (shift residual {analysis.shift_residual(b):.0e}) "
        "but unbucketed; both snippets fail past max_len (table below)",
        CAVEAT,
        "Relative indexing is right, the rest is not T5's or DeBERTa's method: T5 shares "
        "log-spaced buckets (exact up to 8 per direction, then log-spaced to 128, one bucket "
        "beyond), so any length works; the seed's table has a separate parameter per distance "
        "and raises an IndexError past max_len. The seed's DeBERTa returns [q, k, d_model] "
        "embeddings, neither a bias nor DeBERTa's disentangled c2p + p2c scores with log buckets.",
        [Table(["implementation", "learned entries per head", f"q_len = {L + 1}"], rows)],
        SEED002_T5 + "\n" + SEED002_DEBERTA,
    )


def arena_results(db: str | Path, encoding: str) -> list[dict]:
    """Median over seeds of the arena's results for one encoding, one row per
    (task, train_len, eval_len, metric)."""
    path = Path(db)
    if not path.is_file():
        raise FileNotFoundError(f"--arena database not found: {db}")
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        raw = con.execute(
            "SELECT task, train_len, eval_len, metric, value, status, reason FROM results "
            "WHERE encoding = ? ORDER BY task, train_len, eval_len, metric",
            (encoding,),
        ).fetchall()
    except sqlite3.Error as err:
        raise ValueError(f"--arena {db}: not an arena results database ({err})") from None
    finally:
        con.close()
    groups: dict[tuple, list] = {}
    for task, tl, el, metric, value, status, reason in raw:
        groups.setdefault((task, int(tl), int(el), metric), []).append((value, status, reason))
    out = []
    for (task, tl, el, metric), items in groups.items():
        ok = [float(v) for v, s, _ in items if s == "ok" and v is not None]
        reasons = sorted({r for _, s, r in items if s != "ok" and r})
        out.append(
            dict(
                task=task,
                train_len=tl,
                eval_len=el,
                metric=metric,
                value=statistics.median(ok) if ok else None,
                seeds=len(ok),
                status="ok" if ok else "n/a",
                reason="; ".join(reasons),
            )
        )
    return out


HIGHER_IS_BETTER = ("accuracy", "token_accuracy")
VERDICT_WORDS = {True: "extrapolates", False: "does not", None: "not counted"}
MAIN_METRICS = ("ppl", *HIGHER_IS_BETTER)  # loss and per-position bands are left to the arena
LEARNED_AT_L = 0.5  # an accuracy below this at L means the task was not learned: not counted


def extrapolates(rows: list[dict], tol: float = 0.25) -> list[tuple[str, bool | None, str]]:
    """Per (task, train_len, metric): does the longest evaluation stay within `tol` of the
    in-distribution value (relative; accuracies must not fall, perplexities must not rise, by
    more)? -> [(label, verdict, why)]; verdict None where the task was not learned at L."""
    found = []
    keys = sorted({(r["task"], r["train_len"], r["metric"]) for r in rows})
    for task, tl, metric in keys:
        if metric not in MAIN_METRICS:
            continue
        rs = [r for r in rows if (r["task"], r["train_len"], r["metric"]) == (task, tl, metric)]
        inside = [r for r in rs if r["eval_len"] <= tl and r["status"] == "ok"]
        longer = [r for r in rs if r["eval_len"] > tl]
        if not inside or not longer:
            continue
        base = max(inside, key=lambda r: r["eval_len"])
        far = max(longer, key=lambda r: r["eval_len"])
        label = f"{task}, trained at {tl}, {metric} at {far['eval_len']}"
        if far["status"] != "ok":
            found.append((label, False, f"n/a: {far['reason'] or 'not evaluable'}"))
            continue
        a, b = base["value"], far["value"]
        why = f"{a:.4g} at {base['eval_len']} -> {b:.4g}"
        if metric in HIGHER_IS_BETTER:
            if a < LEARNED_AT_L:
                found.append((label, None, f"{why}; not learned at L, not counted"))
                continue
            change = (a - b) / a
        else:  # ppl: lower is better
            change = (b - a) / max(abs(a), 1e-12)
        found.append((label, change <= tol, why))
    return found


def _arena_claim(cid, quote, encoding, want: bool, arena, about) -> Claim:
    measurement = (
        f"arena: {encoding}'s metric at the longest evaluation length vs in distribution "
        "(median over seeds; ppl for lm, accuracies for tasks learned at L (>= 0.5); within "
        "25% counts as extrapolating)"
    )
    if arena is None:
        return Claim(
            cid,
            S002,
            quote,
            about,
            measurement,
            "no arena database given (posenc explain --arena results.db)",
            UNMEASURED,
            "Run `posenc arena` and pass its database to check this against trained models.",
        )
    rows = arena_results(arena, encoding)
    checks = extrapolates(rows)
    if not checks:
        return Claim(
            cid,
            S002,
            quote,
            about,
            measurement,
            f"the database has no {encoding} results both within and past the training length",
            UNMEASURED,
        )
    agree = [ok == want for _, ok, _ in checks if ok is not None]
    if not agree:
        verdict = UNMEASURED
    else:
        verdict = HOLDS if all(agree) else FAILS if not any(agree) else CAVEAT
    table = Table(
        ["task", "train", "eval", "metric", "median", "seeds", "status"],
        [
            [
                r["task"],
                str(r["train_len"]),
                str(r["eval_len"]),
                r["metric"],
                "-" if r["value"] is None else f"{r['value']:.4g}",
                str(r["seeds"]),
                r["status"] + (f" ({r['reason']})" if r["reason"] else ""),
            ]
            for r in rows
        ],
        f"arena results for {encoding} from {Path(arena).name}",
    )
    summary = "; ".join(f"{label}: {VERDICT_WORDS[ok]} ({why})" for label, ok, why in checks)
    return Claim(cid, S002, quote, about, measurement, summary, verdict, tables=[table])


def claim_002_sinusoidal_extrapolates(dim, n, arena=None) -> Claim:
    return _arena_claim(
        "claim-002-sinusoidal-extrapolates",
        "Sinusoidal encodings let the model handle sequences longer than in training "
        "(e.g. trained at 512, run at 600), with no retraining.",
        "sinusoidal",
        True,
        arena,
        ("sinusoidal",),
    )


def claim_002_learned_cannot(dim, n, arena=None) -> Claim:
    c = _arena_claim(
        "claim-002-learned-cannot",
        "Learned encodings do not generalize to sequences longer than those seen in training.",
        "learned",
        False,
        arena,
        ("learned",),
    )
    if "learned" in posenc.ENCODINGS:
        enc = posenc.build("learned", dim=dim, max_len=n)
        err = _seed_error(lambda: enc.embed(torch.zeros(1, n + 1, dim), torch.arange(n + 1)))
        c.note = (c.note + " " if c.note else "") + (
            f"Past its table, posenc's learned encoding does not run at all: {err}"
        )
    return c


# ---------------------------------------------------------------------------------- seed 003

SEED003_EXAMPLE = [  # p_1..p_5 as printed, d = 4
    [0.8415, 0.5403, 0.9950, 0.0998],
    [0.9093, -0.4161, 0.9801, 0.1987],
    [0.1411, -0.9900, 0.9553, 0.2958],
    [-0.7568, -0.6536, 0.9209, 0.3899],
    [-0.9589, 0.2837, 0.8775, 0.4794],
]


def claim_003_worked_example(dim: int, n: int) -> Claim:
    seed = torch.tensor(SEED003_EXAMPLE, dtype=torch.float64)
    t = torch.arange(1, 6, dtype=torch.float64)
    correct = sinusoid(t, 4)  # 10000^(2/4) = 100 in the second pair
    as_written = torch.stack(  # the seed's own formula, with 10^(2/4)
        [t.sin(), t.cos(), (t / 10**0.5).sin(), (t / 10**0.5).cos()], dim=-1
    )
    guess = torch.stack([t.sin(), t.cos(), (t / 10).cos(), (t / 10).sin()], dim=-1)
    err_correct = float((seed - correct).abs().max())
    err_written = float((seed[:, 2:] - as_written[:, 2:]).abs().max())
    err_guess = float((seed - guess).abs().max())
    rows = [
        [f"p_{int(p)}"]
        + [f"{f4(seed[i, c])}" for c in (2, 3)]
        + [f"{f4(as_written[i, c])}" for c in (2, 3)]
        + [f"{f4(correct[i, c])}" for c in (2, 3)]
        for i, p in enumerate(t)
    ]
    return Claim(
        "claim-003-worked-example",
        S003,
        "Worked example, d = 4: p_t = [sin(t/1), cos(t/1), sin(t/10^(2/4)), cos(t/10^(2/4))], "
        "e.g. p_1 = [0.8415, 0.5403, 0.9950, 0.0998].",
        ("sinusoidal",),
        "recompute dims 2, 3 with the seed's own formula (10^(2/4)) and with the correct "
        "10000^(2/4) = 100 (posenc.functional.sinusoidal_table)",
        f"dims 0, 1 are right; dims 2, 3 are wrong: off by up to {err_correct:.3f} from the "
        f"correct values and by {err_written:.3f} from the seed's own formula",
        FAILS if err_correct > 5e-4 else HOLDS,
        "The formula should use 10000^(2i/d) = 100 for the second pair, not 10^(2/4); and the "
        "printed third/fourth values do not follow even 10^(2/4): they match "
        f"[cos(t/10), sin(t/10)] (to {err_guess:.0e}), cos and sin swapped with divisor 10.",
        [
            Table(
                [
                    "t",
                    "seed dim 2",
                    "seed dim 3",
                    "10^(2/4): sin",
                    "10^(2/4): cos",
                    "correct sin(t/100)",
                    "correct cos(t/100)",
                ],
                rows,
                "dims 2 and 3: the seed's values, its formula as written, and the correct ones",
            )
        ],
    )


def claim_003_bounded(dim: int, n: int) -> Claim:
    pe = sinusoid(torch.arange(4096), dim)
    top = float(pe.abs().max())
    return Claim(
        "claim-003-bounded",
        S003,
        "Sine and cosine lie in [-1, 1], so the encoding is bounded.",
        ("sinusoidal",),
        f"max |value| over positions 0..4095, d = {dim}",
        f"{top:.6f}",
        HOLDS if top <= 1 + 1e-12 else FAILS,
        "Unlike the 'cumulative' encoding t (posenc's index), which grows without bound.",
    )


def claim_003_near_similar(dim: int, n: int) -> Claim:
    pe = sinusoid(torch.arange(2 * n), dim)
    d = torch.stack([(pe[k:] - pe[: 2 * n - k]).norm(dim=-1).mean() for k in range(n)])
    drops = torch.nonzero(torch.diff(d) < 0).flatten()
    first = int(drops[0]) + 1 if drops.numel() else None
    return Claim(
        "claim-003-near-similar",
        S003,
        "Nearby positions get similar vectors; distant positions differ more.",
        ("sinusoidal",),
        f"|p_t - p_(t+k)| against k = 0..{n - 1} (d = {dim})",
        (
            f"grows from 0 at k = 0, but first shrinks again at k = {first}; "
            f"{drops.numel()} of {n - 1} steps go down"
            if first
            else "grows monotonically"
        ),
        CAVEAT if first else HOLDS,
        "Near positions are close, but distance is not monotonic in k: the fast pairs "
        "come round again, so some far positions are closer than nearer ones.",
    )


# ---------------------------------------------------------------------------------- seed 004

SEED004_CODE = """\
def absolute_positional_encoding(seq_len, d_model):
    pe = torch.zeros((seq_len, d_model)) # (seq_len, dmodel)
    pos = torch.arrange(0, seq_len).unsqueeze(-1) # (seq_len, 1)

    div_term = torch.exp(-1 * torch.arrange(0, seq_len, 2) * math.log(10000.0) / d_model)

    pe[:, 0::2] = math.sin(pos * div_term)
    pe[:, 1::2] = math.cos(pos * div_term)

    return pe
"""

SEED004_FIXES = [
    ("torch.arrange → torch.arange", "torch.arrange", "torch.arange"),
    ("math.sin / math.cos → torch.sin / torch.cos (they take tensors)", "math.", "torch."),
    (
        "div_term over d_model, not seq_len",
        "torch.arange(0, seq_len, 2)",
        "torch.arange(0, d_model, 2)",
    ),
]


def claim_004_code(dim: int, n: int) -> Claim:
    seq_len, d_model = 16, 8
    ref = sinusoid(torch.arange(seq_len), d_model)
    code = SEED004_CODE
    rows = []
    stages = [("as written", code)]
    for what, old, new in SEED004_FIXES:
        if old == "math.":  # keep math.log, fix the two calls on tensors
            code = code.replace("math.sin", "torch.sin").replace("math.cos", "torch.cos")
        else:
            code = code.replace(old, new)
        stages.append((f"+ {what}", code))
    final = None
    for what, src in stages:
        try:
            pe = run_seed(src)["absolute_positional_encoding"](seq_len, d_model).double()
            final = float((pe - ref).abs().max())
            outcome = f"runs; max |difference| from sinusoidal_table = {final:.1e}"
        except Exception as err:  # noqa: BLE001 - showing the seed code's failures
            outcome = analysis.describe_error(err).splitlines()[0]
            final = None
        rows.append([what, outcome])
    square = run_seed(stages[2][1])["absolute_positional_encoding"](8, 8).double()
    sq_diff = float((square - sinusoid(torch.arange(8), 8)).abs().max())
    return Claim(
        "claim-004-code",
        S004,
        "This function computes the absolute (sinusoidal) encoding.",
        ("sinusoidal",),
        f"run the seed's code as written, then with each fix (seq_len = {seq_len}, "
        f"d_model = {d_model}); compare with posenc.functional.sinusoidal_table",
        f"as written it does not run; with all three fixes it matches to {final:.0e}"
        if final is not None
        else "still fails after the fixes",
        FAILS,
        "Three bugs: torch.arrange does not exist; math.sin/math.cos take Python numbers, not "
        "tensors; div_term steps over seq_len where it must step over d_model. The last one "
        f"hides when seq_len = d_model (8 × 8 runs and matches: {sq_diff:.0e}). Its comment "
        "'1 / 10000 ** (2 * i / d) = exp(2 * i / d) * log(10000)' is wrong too: it is "
        "exp(-(2i/d) · log 10000).",
        [Table(["version", "outcome"], rows)],
        SEED004_CODE,
    )


def claim_004_relative_dot(dim: int, n: int) -> Claim:
    pe = sinusoid(torch.arange(n), dim)
    alone = analysis.shift_residual((pe @ pe.T)[None])
    g = torch.Generator().manual_seed(0)
    wq, wk = torch.randn(2, dim, dim, generator=g, dtype=torch.float64) / dim**0.5
    through = analysis.shift_residual(((pe @ wq) @ (pe @ wk).T)[None])
    return Claim(
        "claim-004-relative-dot",
        S004,
        "In Q·K^T the encodings meet as cos θ1 cos θ2 + sin θ1 sin θ2 = cos(θ1 - θ2): the dot "
        "product carries the relative distance.",
        ("sinusoidal", "rope"),
        "shift residual (spread of score(i, i - k) over i, relative) of <p_i, p_j>, and of "
        "<p_i W_q, p_j W_k> with random W_q, W_k",
        f"<p_i, p_j>: {alone:.1e}; through random W_q, W_k: {through:.2f}",
        CAVEAT if alone < analysis.SHIFT_TOL and through > analysis.SHIFT_TOL else HOLDS,
        "True for the encodings alone. Attention multiplies by W_q and W_k first, and a "
        "general W_q W_k^T mixes pairs, so the score depends on absolute positions again; "
        "RoPE rotates q and k after the projections, which makes the identity exact.",
    )


def claim_004_frequency_range(dim: int, n: int) -> Claim:
    rows = []
    lows = []
    for d in (4, 16, dim, 512):
        inv = PF.sinusoidal_inv_freq(d, dtype=torch.float64)
        lows.append(float(inv.min()))
        rows.append([str(d), f"{float(inv.max()):.3g}", f"{float(inv.min()):.3g}"])
    far = max(abs(math.log10(x / 1e-4)) for x in lows)
    return Claim(
        "claim-004-frequency-range",
        S004,
        "Divided by d, the frequencies always span [1/10000, 1], whatever d.",
        ("sinusoidal",),
        "highest and lowest ω_i = 10000^(-2i/d) for several d",
        "highest is always 1; lowest is 10000^(-(d-2)/d): table below",
        CAVEAT if far > 0.05 else HOLDS,
        "1/10000 is only approached as d grows (i stops at d/2 - 1): for d = 4 the lowest "
        "frequency is 1/100.",
        [Table(["d", "highest ω", "lowest ω"], rows)],
    )


def claim_004_clock(dim: int, n: int) -> Claim:
    wl = analysis.wavelengths(analysis.pair_angles(sinusoid(torch.arange(64), dim)))
    speed = 2 * math.pi / wl
    ok = bool((torch.diff(speed) < 0).all())
    return Claim(
        "claim-004-clock",
        S004,
        "Each pair of dims is a hand on a clock; the lower the dims, the faster the hand "
        "(seconds, minutes, hours).",
        ("sinusoidal", "rope"),
        f"angular speed of each pair, d = {dim} (see the clock figure)",
        f"pair 0: {float(speed[0]):.3g} rad/position ... pair {len(speed) - 1}: "
        f"{float(speed[-1]):.2g}; strictly decreasing: {ok}",
        HOLDS if ok else FAILS,
    )


# ---------------------------------------------------------------------------------- all

CHECKS = [
    claim_000_unique,
    claim_000_consistent,
    claim_000_any_length,
    claim_000_wavelengths,
    claim_000_code,
    claim_001_every_block,
    claim_001_noise,
    claim_002_table,
    claim_002_order,
    claim_002_frequency_order,
    claim_002_sinusoidal_extrapolates,
    claim_002_learned_cannot,
    claim_002_transformer_xl,
    claim_002_t5_deberta,
    claim_003_worked_example,
    claim_003_bounded,
    claim_003_near_similar,
    claim_004_code,
    claim_004_relative_dot,
    claim_004_frequency_range,
    claim_004_clock,
]


def check_all(*, dim: int = 64, max_pos: int = 128, arena: str | Path | None = None) -> list[Claim]:
    """Every claim, checked. A check whose encoding is missing reports 'not measured here'."""
    out = []
    for check in CHECKS:
        kwargs = {"arena": arena} if "arena" in check.__code__.co_varnames else {}
        try:
            out.append(check(dim, max_pos, **kwargs))
        except (KeyError, ValueError, AttributeError, ImportError) as err:
            if isinstance(err, (FileNotFoundError, ValueError)) and arena and kwargs:
                raise
            out.append(
                Claim(
                    f"claim-{check.__name__[6:].replace('_', '-')}",
                    "",
                    check.__doc__ or check.__name__,
                    (),
                    "could not run",
                    analysis.describe_error(err),
                    UNMEASURED,
                )
            )
    return out
