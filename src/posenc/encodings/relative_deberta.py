"""DeBERTa (He et al. 2021): disentangled content-to-position and position-to-content scores
over log-bucketed relative positions. Registered in posenc.encodings.relative."""

from __future__ import annotations

import torch
from torch import nn

from posenc.base import PositionalEncoding
from posenc.checks import check_int, check_max_len, renamed
from posenc.encodings.relative_base import check_qk, expand_heads, relative_positions, resolve_dims
from posenc.functional import deberta_bucket


class DeBERTa(PositionalEncoding):
    """He et al. 2021 (DeBERTa-v2 form): disentangled attention with relative position buckets.

    d(i, j) = clamp(deberta_bucket(i - j) + span, 0, 2 span - 1), span = num_buckets (or
    max_distance without buckets). Relative embeddings [2 span, D] (optionally
    LayerNorm-ed) go through their own projections to K_r, Q_r [H, 2 span, Dh]; bias() returns
    (q_i.K_r[d(i, j)] + k_j.Q_r[d(i, j)]) * softmax_scale(Dh), softmax_scale = 1/sqrt(3 Dh)
    (1/sqrt((1 + len(pos_att_type)) Dh)), as DebertaV2's DisentangledSelfAttention with
    share_att_key=False. (The p2c index is transformers' -r of the transposed score, which is
    again d(i, j) in query-key layout.)
    """

    family = "relative"
    provides = frozenset({"bias", "softmax_scale"})
    paper = "He et al. 2021"
    summary = "disentangled content-to-position and position-to-content scores, log buckets"
    integer_positions = True
    trainable = True

    @renamed(position_buckets="num_buckets", max_relative_positions="max_distance")
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
        super().__init__()
        self.max_len = check_max_len(max_len)  # the hard limit
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
        rel = relative_positions(
            self, q_pos, k_pos, tq, k.shape[2], b, True
        )  # i - j, [B or 1, 1, Tq, Tk]
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
