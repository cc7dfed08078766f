"""Bias encodings: a score added to the attention logits that depends on positions only.

    alibi     ALiBi      fixed linear distance penalty per head           (here)
    t5        T5Bias     learned scalar per (bucket, head)                (here)
    kerple    KERPLE     learned log / power distance kernel              (bias_learned)
    fire      FIRE       learned MLP of a normalized log distance         (bias_learned)
    sandwich  Sandwich   parameter-free sinusoidal inner product          (here)

Each is a PositionBias (posenc.encodings.bias_base): one elementwise function of query
positions, key positions and head index, which bias() and score_mod() both evaluate, so the
two give the same numbers by construction.

Causal forms define values for keys after the query too (j > i); each class says which. The
causal mask removes them in a decoder.
"""

from __future__ import annotations

import torch
from torch import nn

from posenc.base import PositionalEncoding
from posenc.checks import check_bool, check_max_len, limit_and_hint, position_at
from posenc.encodings.bias_base import DistanceBias, PositionBias, difference  # noqa: F401
from posenc.encodings.bias_learned import FIRE, KERPLE
from posenc.functional import alibi_slopes, check_t5_buckets, sandwich_curve, t5_bucket


class ALiBi(DistanceBias):
    """Attention with Linear Biases: bias = -m_h * (i - j), slopes m_h as in BLOOM.

    Causal form (default): -m_h * (i - j) for every pair, so keys after the query (j > i) get
    +m_h * (j - i), the linear continuation. That equals BLOOM's m_h * j up to a per-query
    constant, so softmax matches BLOOM even without a mask; in a decoder the mask removes them.
    `bidirectional=True`: the symmetric -m_h * |i - j| (for encoders).
    """

    paper = "Press et al. 2022"
    summary = "linear distance penalty per head, fixed geometric slopes (BLOOM, MPT)"

    def __init__(
        self,
        *,
        heads=None,
        max_len=None,
        bidirectional=False,
    ):
        super().__init__(heads)
        self.max_len = check_max_len(max_len)  # the hard limit
        self.bidirectional = check_bool("bidirectional", bidirectional)
        self.reset_buffers()

    def reset_buffers(self) -> None:
        self.set_buffer("slopes", alibi_slopes(self.heads))  # [H]

    def _value(self, qp, kp, h, params):
        rel = difference(qp, kp)
        if self.bidirectional:
            rel = rel.abs()
        return 0.0 - self.slopes[h] * rel  # 0.0 - x: +0.0 on the diagonal, not -0.0

    def extra_repr(self) -> str:
        return f"heads={self.heads}, bidirectional={self.bidirectional}"


class T5Bias(DistanceBias):
    """T5's relative attention bias: a learned scalar per (bucket, head), buckets of key - query.

    `bidirectional=False` (default, decoders) gives keys after the query bucket 0, as T5's
    decoder does; encoders want `bidirectional=True`. Not scaled by 1/sqrt(Dh).

    num_buckets, max_distance: 32 and 128 by default (T5). When `train_len` is given, those not
    given scale with it: num_buckets = train_len (even, 4..32) and max_distance = max(train_len,
    start of the log buckets + 1): the log buckets then span exactly the distances seen in
    training, and longer distances share the bucket of the farthest trained ones, instead of
    landing in buckets training never reached (with T5's 128 and a training length of, say,
    20, buckets for 20..127 stay at their init).

    Init: normal(0, dim**-0.5) as transformers' T5 when `dim` is given, else normal(0, 0.02).
    """

    paper = "Raffel et al. 2020"
    summary = "learned scalar bias per head over log-spaced relative-distance buckets"
    integer_positions = True
    trainable = True

    def __init__(
        self,
        *,
        dim=None,
        heads=None,
        max_len=None,
        train_len=None,
        bidirectional=False,
        num_buckets=None,
        max_distance=None,
    ):
        super().__init__(heads)
        if num_buckets is None:  # scaled with train_len (not with the deprecated max_len hint)
            num_buckets = 32 if train_len is None else max(4, min(32, train_len // 2 * 2))
        self.max_len, train_len = limit_and_hint(max_len, train_len)  # hard limit, hint
        check_t5_buckets(bidirectional, num_buckets, 1 << 62)  # types and num_buckets first
        if max_distance is None:
            if train_len is None:
                max_distance = 128
            else:
                per_direction = num_buckets // 2 if bidirectional else num_buckets
                max_distance = max(train_len, per_direction // 2 + 1)
        check_t5_buckets(bidirectional, num_buckets, max_distance)
        self.bidirectional = bidirectional
        self.num_buckets = num_buckets
        self.max_distance = max_distance
        self.train_len = train_len
        self.relative_attention_bias = nn.Embedding(num_buckets, self.heads)  # [buckets, H]
        std = dim**-0.5 if dim else 0.02
        nn.init.normal_(self.relative_attention_bias.weight, std=std)

    def _value(self, qp, kp, h, params):
        bucket = t5_bucket(kp - qp, self.bidirectional, self.num_buckets, self.max_distance)
        return self.relative_attention_bias.weight[bucket, h]

    def extra_repr(self) -> str:
        return (
            f"heads={self.heads}, bidirectional={self.bidirectional}, "
            f"num_buckets={self.num_buckets}, max_distance={self.max_distance}"
        )


class Sandwich(DistanceBias):
    """Sandwich: the inner product of sinusoidal embeddings as a parameter-free bias.

    bias_h(i, j) = (sum_{k=1..d'/2} cos((i - j) / 10000^(2k/d')) - d'/2) / (8h/H), h = 1..H:
    p_i . p_j of two sinusoidal embeddings of width d' (`sandwich_dim`, 128 as in the paper),
    shifted to 0 at i = j (softmax ignores the constant) and compressed per head by ALiBi-like
    ratios 8h/H, as in NeMo and attention-gym. Symmetric in i - j. Computed
    in float64: integer positions read a table over |i - j| = 0..max distance, float positions
    sum the cosines directly; the numbers are the same either way.
    """

    paper = "Chi et al. 2023"
    summary = "parameter-free sinusoidal inner product p_i.p_j, per-head compression 8h/H"
    _max_table = 1 << 20  # longest |i - j| table; farther apart positions sum the cosines

    def __init__(self, *, heads=None, max_len=None, sandwich_dim=128):
        super().__init__(heads)
        self.max_len = check_max_len(max_len)  # the hard limit
        sandwich_curve(torch.zeros(1), sandwich_dim)  # validates sandwich_dim
        self.sandwich_dim = sandwich_dim
        self.reset_buffers()

    def reset_buffers(self) -> None:
        ratio = 8.0 * torch.arange(1, self.heads + 1, dtype=torch.float64) / self.heads
        self.set_buffer("inv_ratio", (1.0 / ratio).float())  # [H]

    def _table(self, span: int, device) -> torch.Tensor | None:
        """The curve at |i - j| = 0..span, float32 [span + 1]; None where that table is too long."""
        if span > self._max_table:
            return None
        return sandwich_curve(torch.arange(span + 1, device=device), self.sandwich_dim).float()

    def _value(self, qp, kp, h, params):
        (table,) = params
        if table is None:  # float positions, or integers too far apart for a table
            curve = sandwich_curve(qp.double() - kp.double(), self.sandwich_dim).float()
        else:
            curve = table[(qp - kp).abs()]
        return curve * self.inv_ratio[h]

    def bias(self, q, k, q_pos, k_pos) -> torch.Tensor:
        qp, kp, h = self._grids(q, k, q_pos, k_pos)
        table = None
        if not (qp.is_floating_point() or kp.is_floating_point() or qp.is_meta):
            table = self._table((qp - kp).abs().max().item(), q.device)
        return self._value(qp, kp, h, (table,)).to(q.dtype)

    def distance_bias(self, distances, q_pos):
        table = self._table(distances.abs().max().item(), distances.device)
        if table is None:
            return None
        d = distances.view(1, -1)  # [1, N]
        h = torch.arange(self.heads, device=d.device).view(-1, 1)  # [H, 1]
        return self._value(d, torch.zeros_like(d), h, (table,))

    def score_mod(self, q_pos: torch.Tensor, k_pos: torch.Tensor):
        q_pos, k_pos = self._score_mod_positions(q_pos, k_pos)
        table = None
        if not (q_pos.is_floating_point() or k_pos.is_floating_point()):
            lo = min(q_pos.min().item(), k_pos.min().item())
            hi = max(q_pos.max().item(), k_pos.max().item())
            table = self._table(hi - lo, q_pos.device)
        q_at, k_at = position_at(q_pos), position_at(k_pos)

        def score_mod(score, b, h, q_idx, kv_idx):
            value = self._value(q_at(b, q_idx), k_at(b, kv_idx), h, (table,))
            return score + value.to(score.dtype)

        return score_mod

    def extra_repr(self) -> str:
        return f"heads={self.heads}, sandwich_dim={self.sandwich_dim}"


ENCODINGS: dict[str, type[PositionalEncoding]] = {
    "alibi": ALiBi,
    "t5": T5Bias,
    "kerple": KERPLE,
    "fire": FIRE,
    "sandwich": Sandwich,
}
