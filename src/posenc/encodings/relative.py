"""Relative encodings whose bias depends on positions AND content (q / k): shaw,
transformer_xl, deberta, cope; and the helpers the q / k-dependent encodings share (keyword
resolution, q / k checks, position rows and differences).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from posenc.base import PositionalEncoding
from posenc.checks import check_int
from posenc.functional import deberta_bucket, rel_shift, relative_sinusoid
from posenc.functional.content import run_ends


def resolve_dims(
    name: str, dim, heads, head_dim, need_heads: bool
) -> tuple[int | None, int | None, int]:
    """Resolve (D, H, Dh) from the standard keywords; ValueError naming what is missing."""
    for key, val in (("dim", dim), ("heads", heads), ("head_dim", head_dim)):
        if val is not None:
            check_int(f"{name}: {key}", val, low=1)
    if head_dim is None:
        if dim is None or heads is None:
            raise ValueError(
                f"{name} needs head_dim, or dim and heads (head_dim = dim // heads); "
                f"got dim={dim}, heads={heads}, head_dim=None"
            )
        if dim % heads:
            raise ValueError(f"{name}: dim={dim} is not divisible by heads={heads}; pass head_dim")
        head_dim = dim // heads
    if need_heads and heads is None:
        raise ValueError(f"{name} needs heads (the number of query heads H), got heads=None")
    if dim is None and heads is not None:
        dim = heads * head_dim
    return dim, heads, head_dim


def check_qk(enc, q: torch.Tensor, k: torch.Tensor) -> None:
    name = type(enc).__name__
    if q.dim() != 4 or k.dim() != 4:
        raise ValueError(
            f"{name}: q and k must be [B, H, T, Dh], got {tuple(q.shape)} and {tuple(k.shape)}"
        )
    if q.shape[-1] != enc.head_dim:
        raise ValueError(
            f"{name} was built for head_dim={enc.head_dim}, but q has last dim {q.shape[-1]}"
        )
    if getattr(enc, "heads", None) is not None and q.shape[1] != enc.heads:
        raise ValueError(f"{name} was built for heads={enc.heads}, but q has {q.shape[1]} heads")
    if k.shape[:2] != q.shape[:2] or k.shape[-1] != q.shape[-1]:
        raise ValueError(
            f"{name}: k must be [B, H, Tk, Dh] matching q {tuple(q.shape)} (kv heads repeated), "
            f"got {tuple(k.shape)}"
        )


def rows(enc, pos: torch.Tensor, name: str, t: int, batch: int, integer=False) -> torch.Tensor:
    """Validated positions [t] or [B, t] (enc.check_positions: its max_len) -> [B or 1, t]."""
    pos = enc.check_positions(pos, name=name, integer=integer)
    bad_batch = pos.dim() == 2 and pos.shape[0] not in (1, batch)
    if pos.dim() not in (1, 2) or pos.shape[-1] != t or bad_batch:
        raise ValueError(f"{name} must be [{t}] or [B, {t}] with B in (1, {batch}), got "
                         f"{tuple(pos.shape)}")  # fmt: skip
    return pos if pos.dim() == 2 else pos[None]


def qk_rows(enc, q, k, q_pos, k_pos, integer=False) -> tuple[torch.Tensor, torch.Tensor]:
    """check_qk, then q_pos, k_pos as rows [B or 1, Tq], [B or 1, Tk] on q's device."""
    check_qk(enc, q, k)
    qp = rows(enc, q_pos, "q_pos", q.shape[2], q.shape[0], integer)
    return qp.to(q.device), rows(enc, k_pos, "k_pos", k.shape[2], k.shape[0], integer).to(q.device)


def relative_positions(enc, q_pos, k_pos, tq: int, tk: int, batch: int, integer: bool):
    """Validated positions (rows) -> q_pos - k_pos as [B or 1, 1, Tq, Tk]."""
    qp = rows(enc, q_pos, "q_pos", tq, batch, integer)
    kp = rows(enc, k_pos, "k_pos", tk, batch, integer)
    if integer:
        qp, kp = qp.long(), kp.long()
    return (qp[:, :, None] - kp[:, None, :]).unsqueeze(1)


def expand_heads(idx: torch.Tensor, b: int, h: int) -> torch.Tensor:
    """[B or 1, 1, X, Y] index -> [B, H, X, Y] (a view)."""
    return idx.expand(b, h, idx.shape[-2], idx.shape[-1])


class Shaw(PositionalEncoding):
    """Shaw et al. 2018: e_ij = q_i.(k_j + a^K[clip(j - i, -k, k)]) / sqrt(Dh), k = max_distance.

    The tables a^K (and a^V with `values=True`) are [2k + 1, Dh], shared by the heads as in the
    paper. bias() returns q_i.a^K * softmax_scale(Dh), so adding it to q.k * softmax_scale(Dh)
    gives e_ij; values() returns sum_j p_ij a^V[clip(j - i)], added to probs @ v.
    """

    family = "relative"
    provides = frozenset({"bias", "values"})  # values: only with values=True (__init__)
    paper = "Shaw et al. 2018"
    summary = "learned relative key (and value) embeddings, clipped at distance k"
    integer_positions = True
    trainable = True

    def __init__(
        self,
        *,
        dim: int | None = None,
        heads: int | None = None,
        head_dim: int | None = None,
        max_len: int | None = None,
        max_distance: int = 16,
        values: bool = False,
    ):
        super().__init__(max_len)
        _, self.heads, self.head_dim = resolve_dims("shaw", dim, heads, head_dim, need_heads=False)
        self.max_distance = check_int("max_distance", max_distance, low=1)
        n = 2 * max_distance + 1
        self.rel_keys = nn.Parameter(torch.randn(n, self.head_dim) * 0.02)  # a^K [2k+1, Dh]
        self.rel_values = nn.Parameter(torch.randn(n, self.head_dim) * 0.02) if values else None
        if not values:  # the declaration, per instance: no value table, no values hook
            self.provides = Shaw.provides - {"values"}

    def _index(self, rel: torch.Tensor) -> torch.Tensor:
        """rel = i - j -> table row clip(j - i, -k, k) + k."""
        k = self.max_distance
        return (-rel).clamp(-k, k) + k

    def bias(self, q, k, q_pos, k_pos):
        check_qk(self, q, k)
        b, h, tq, dh = q.shape
        idx = self._index(relative_positions(self, q_pos, k_pos, tq, k.shape[2], b, True))
        qa = q @ self.rel_keys.to(q.dtype).T  # [B, H, Tq, 2k+1]
        return qa.gather(-1, expand_heads(idx, b, h)) * self.softmax_scale(dh)

    def values(self, probs, q_pos, k_pos):
        if self.rel_values is None:
            return None
        b, h, tq, tk = probs.shape
        idx = expand_heads(
            self._index(relative_positions(self, q_pos, k_pos, tq, tk, b, True)), b, h
        )
        bins = probs.new_zeros(b, h, tq, 2 * self.max_distance + 1).scatter_add(-1, idx, probs)
        return bins @ self.rel_values.to(probs.dtype)  # [B, H, Tq, Dh]


def _contiguous_start(pos: torch.Tensor) -> int | None:
    """pos[0] if pos ([T] or [1, T]) is pos[0] + arange(T), else None."""
    if pos.dim() == 2:
        if pos.shape[0] != 1:
            return None
        pos = pos[0]
    if pos.is_meta:  # no values: the general path
        return None
    start = int(pos[0].item()) if pos.numel() else 0
    ref = torch.arange(start, start + pos.numel(), device=pos.device)
    return start if torch.equal(pos.long(), ref) else None


class TransformerXL(PositionalEncoding):
    """Dai et al. 2019: score_ij = (q_i + u).k_j + (q_i + v).W_r R[i - j], times 1/sqrt(Dh).

    R the sinusoid of i - j (relative_sinusoid, rel_dim wide), W_r a Linear rel_dim -> H * Dh,
    u, v learned [H, Dh]; bias() is the score less q.k. With `shift=True` and contiguous
    positions it uses the paper's `rel_shift`, else it gathers by each pair's distance.
    """

    family = "relative"
    provides = frozenset({"bias"})
    paper = "Dai et al. 2019"
    summary = "sinusoidal relative R with W_r, global content and position biases u, v"
    integer_positions = True
    trainable = True

    def __init__(
        self,
        *,
        dim: int | None = None,
        heads: int | None = None,
        head_dim: int | None = None,
        max_len: int | None = None,
        rel_dim: int | None = None,
        base: float = 10000.0,
        shift: bool = True,
    ):
        super().__init__(max_len)
        d, self.heads, self.head_dim = resolve_dims("transformer_xl", dim, heads, head_dim, True)
        self.rel_dim = rel_dim if rel_dim is not None else d
        if not isinstance(self.rel_dim, int) or self.rel_dim < 2 or self.rel_dim % 2:
            raise ValueError(f"rel_dim must be an even int >= 2, got {self.rel_dim!r}")
        self.base, self.shift = float(base), shift
        self.u = nn.Parameter(torch.randn(self.heads, self.head_dim) * 0.02)  # [H, Dh]
        self.v = nn.Parameter(torch.randn(self.heads, self.head_dim) * 0.02)  # [H, Dh]
        self.w_r = nn.Linear(self.rel_dim, self.heads * self.head_dim, bias=False)

    def rel_keys(self, distances: torch.Tensor) -> torch.Tensor:
        """distances [L] -> W_r R[distances] as [H, L, Dh]."""
        r = relative_sinusoid(distances, self.rel_dim, self.base).to(self.w_r.weight.dtype)
        return self.w_r(r).view(-1, self.heads, self.head_dim).transpose(0, 1)

    def bias(self, q, k, q_pos, k_pos):
        check_qk(self, q, k)
        b, h, tq, dh = q.shape
        tk = k.shape[2]
        rel = relative_positions(self, q_pos, k_pos, tq, tk, b, True)  # [B or 1, 1, Tq, Tk]
        content = (k @ self.u.to(k.dtype)[:, :, None]).transpose(-1, -2)  # u.k_j [B, H, 1, Tk]
        qv = q + self.v.to(q.dtype)[:, None, :]  # [B, H, Tq, Dh]
        q0, k0 = _contiguous_start(q_pos), _contiguous_start(k_pos)
        if self.shift and q0 is not None and k0 is not None:
            position = self.position_shift(qv, q0 - k0, tk)
        else:
            position = self.position_gather(qv, rel)
        return (content + position) * self.softmax_scale(dh)

    def position_shift(self, qv: torch.Tensor, offset: int, tk: int) -> torch.Tensor:
        """(q + v).W_r R[i - j] for q_pos = offset + k_pos[0] + arange(Tq) (rel_shift path)."""
        tq = qv.shape[2]
        dmax = offset + tq - 1  # distance of (last query, first key)
        distances = dmax - torch.arange(tq + tk - 1, device=qv.device)  # decreasing
        bd = qv @ self.rel_keys(distances).to(qv.dtype).transpose(-1, -2)  # [B, H, Tq, Tq+Tk-1]
        return rel_shift(bd)[..., :tk]

    def position_gather(self, qv: torch.Tensor, rel: torch.Tensor) -> torch.Tensor:
        """(q + v).W_r R[i - j] for any positions: score every distance in range, then gather."""
        if rel.is_meta:  # no distances to range over: shapes only
            return qv.new_empty(*qv.shape[:3], rel.shape[-1])
        lo, hi = int(rel.min().item()), int(rel.max().item())
        distances = torch.arange(lo, hi + 1, device=qv.device)
        bd = qv @ self.rel_keys(distances).to(qv.dtype).transpose(-1, -2)  # [B, H, Tq, L]
        return bd.gather(-1, expand_heads(rel - lo, qv.shape[0], qv.shape[1]))


class CoPE(PositionalEncoding):
    """Golovneva et al. 2024, contextual position encoding, for causal attention.

    Gates g_it = sigmoid(q_i.k_t * softmax_scale(Dh)) (as the reference, of the scaled
    logits); p_ij = sum of g_it over the keys t from j up to the query, within j's run of
    increasing positions (packed documents), clamped to max_distance - 1; bias q_i.e[p_ij],
    e [max_distance, Dh] shared by the heads, interpolated between floor and ceil. Keys after
    the query get p_ij = 0 (the reference's value for masked pairs).
    """

    family = "relative"
    provides = frozenset({"bias"})
    bidirectional = False  # positions count gates up to the query: causal attention only
    paper = "Golovneva et al. 2024"
    summary = "contextual positions from cumulative sigmoid gates, interpolated embeddings"
    trainable = True

    def __init__(
        self,
        *,
        dim: int | None = None,
        heads: int | None = None,
        head_dim: int | None = None,
        max_len: int | None = None,
        train_len: int | None = None,
        max_distance: int | None = None,
    ):
        super().__init__(max_len)
        _, self.heads, self.head_dim = resolve_dims("cope", dim, heads, head_dim, need_heads=False)
        if max_distance is None:  # scaled with train_len
            max_distance = 64 if train_len is None else check_int("train_len", train_len, low=1)
        self.max_distance = check_int("max_distance", max_distance, low=1)
        self.pos_emb = nn.Parameter(torch.randn(max_distance, self.head_dim) * 0.02)  # [npos, Dh]

    def positions(self, q, k, q_pos, k_pos) -> torch.Tensor:
        """Contextual positions p [B, H, Tq, Tk] float32, not clamped."""
        check_qk(self, q, k)
        b, h, tq, dh = q.shape
        tk = k.shape[2]
        rel = relative_positions(self, q_pos, k_pos, tq, tk, b, False)  # i - j
        logits = (q.float() @ k.float().transpose(-1, -2)) * self.softmax_scale(dh)
        gates = torch.sigmoid(logits).masked_fill(rel < 0, 0.0)  # keys after the query: closed
        suffix = F.pad(gates.flip(-1).cumsum(-1).flip(-1), (0, 1))  # sum_{t >= j}, [.., Tk+1]
        kp = k_pos if k_pos.dim() == 2 else k_pos[None]
        nxt = expand_heads(run_ends(kp)[:, None, None, :], b, h).expand(b, h, tq, tk)
        return suffix[..., :tk] - suffix.gather(-1, nxt)

    def bias(self, q, k, q_pos, k_pos):
        pos = self.positions(q, k, q_pos, k_pos).clamp(0, self.max_distance - 1)
        lo = pos.floor()
        w = (pos - lo).to(q.dtype)
        logits = q @ self.pos_emb.to(q.dtype).T  # q_i . e[n], [B, H, Tq, max_distance]
        at_lo = logits.gather(-1, lo.long())
        at_hi = logits.gather(-1, pos.ceil().long())
        return at_hi * w + at_lo * (1 - w)


class DeBERTa(PositionalEncoding):
    """He et al. 2021 (DeBERTa-v2 form): disentangled attention with relative position buckets.

    d(i, j) = clamp(deberta_bucket(i - j) + span, 0, 2 span - 1), span = num_buckets (or
    max_distance without buckets). Relative embeddings [2 span, D] (optionally LayerNorm-ed)
    project to K_r, Q_r [H, 2 span, Dh]; bias = (q_i.K_r[d(i, j)] + k_j.Q_r[d(i, j)]) *
    softmax_scale, 1/sqrt((1 + len(pos_att_type)) Dh), as DebertaV2's
    DisentangledSelfAttention with share_att_key=False.
    """

    family = "relative"
    provides = frozenset({"bias", "softmax_scale"})
    paper = "He et al. 2021"
    summary = "disentangled content-to-position and position-to-content scores, log buckets"
    integer_positions = True
    trainable = True

    def __init__(
        self,
        *,
        dim: int | None = None,
        heads: int | None = None,
        head_dim: int | None = None,
        max_len: int | None = None,
        num_buckets: int = 256,
        max_distance: int = 512,
        norm_rel_ebd: str = "none",
        layer_norm_eps: float = 1e-7,
        pos_att_type: tuple[str, ...] = ("c2p", "p2c"),
    ):
        super().__init__(max_len)
        d, self.heads, self.head_dim = resolve_dims("deberta", dim, heads, head_dim, True)
        check_int("max_distance", max_distance, low=1)
        if num_buckets > 0 and max_distance - 1 <= num_buckets // 2:
            raise ValueError(
                f"max_distance must be > num_buckets // 2 + 1, got "
                f"max_distance={max_distance}, num_buckets={num_buckets}"
            )
        if norm_rel_ebd not in ("none", "layer_norm"):
            raise ValueError(f"norm_rel_ebd must be 'none' or 'layer_norm', got {norm_rel_ebd!r}")
        types = tuple(pos_att_type)
        if not types or any(t not in ("c2p", "p2c") for t in types) or len(set(types)) < len(types):
            raise ValueError(
                f"pos_att_type must be a non-empty subset of ('c2p', 'p2c'), got {pos_att_type!r}"
            )
        self.pos_att_type = types
        self.num_buckets = num_buckets
        self.max_distance = max_distance
        self.span = num_buckets if num_buckets > 0 else max_distance
        self.rel_embeddings = nn.Parameter(torch.randn(2 * self.span, d) * 0.02)  # [2 span, D]
        norm = norm_rel_ebd == "layer_norm"
        self.rel_norm = nn.LayerNorm(d, eps=layer_norm_eps) if norm else None
        hd = self.heads * self.head_dim
        self.pos_key_proj = nn.Linear(d, hd) if "c2p" in types else None
        self.pos_query_proj = nn.Linear(d, hd) if "p2c" in types else None

    def softmax_scale(self, head_dim: int) -> float:
        return (head_dim * (1 + len(self.pos_att_type))) ** -0.5

    def _project(self, proj: nn.Linear, emb: torch.Tensor) -> torch.Tensor:
        """[2 span, D] -> [H, 2 span, Dh]."""
        return proj(emb).view(-1, self.heads, self.head_dim).transpose(0, 1)

    def bias(self, q, k, q_pos, k_pos):
        check_qk(self, q, k)
        b, h, tq, dh = q.shape
        rel = relative_positions(self, q_pos, k_pos, tq, k.shape[2], b, True)  # i - j
        if self.num_buckets > 0:
            rel = deberta_bucket(rel, self.num_buckets, self.max_distance)
        idx = (rel + self.span).clamp(0, 2 * self.span - 1)
        emb = self.rel_embeddings if self.rel_norm is None else self.rel_norm(self.rel_embeddings)
        score = 0
        if self.pos_key_proj is not None:  # content -> position: q_i . K_r[d(i, j)]
            kr = self._project(self.pos_key_proj, emb).to(q.dtype)
            score = score + (q @ kr.transpose(-1, -2)).gather(-1, expand_heads(idx, b, h))
        if self.pos_query_proj is not None:  # position -> content: k_j . Q_r[d(i, j)]
            qr = self._project(self.pos_query_proj, emb).to(k.dtype)
            p2c = (k @ qr.transpose(-1, -2)).gather(-1, expand_heads(idx.transpose(-1, -2), b, h))
            score = score + p2c.transpose(-1, -2)
        return score * self.softmax_scale(dh)


ENCODINGS: dict[str, type[PositionalEncoding]] = {
    "shaw": Shaw,
    "transformer_xl": TransformerXL,
    "deberta": DeBERTa,
    "cope": CoPE,
}
