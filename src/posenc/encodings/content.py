"""The content family: attention that depends on the tokens' content, not on positions alone
(fox, cable and path through bias(), dape through transform_logits(), stickbreaking through
normalize()). Positions only order the tokens and decide the causal mask.
"""

from __future__ import annotations

import inspect

import torch
import torch.nn.functional as F
from torch import nn

from posenc.base import PositionalEncoding, model_kwargs
from posenc.checks import check_bool, check_float, check_int, lookup
from posenc.encodings import bias as bias_family
from posenc.encodings.relative import qk_rows, relative_positions, resolve_dims
from posenc.functional.content import (
    dape_logits,
    forget_bias,
    path_scores,
    short_conv,
    stick_breaking,
)


class KeyBias(PositionalEncoding):
    """A causal bias that reads the keys (and queries) each head already has (FoX, CABLE,
    PaTH, distance_basis): max_len, heads (required) and head_dim. FoX, CABLE and PaTH
    accumulate within a run of increasing positions only (packed documents)."""

    family = "content"
    provides = frozenset({"bias"})
    trainable = True
    bidirectional = False  # accumulated from the key up to the query: causal only

    def __init__(self, name: str, dim, heads, head_dim, max_len) -> None:
        super().__init__(max_len)
        _, self.heads, self.head_dim = resolve_dims(name, dim, heads, head_dim, need_heads=True)

    def extra_repr(self) -> str:
        return f"heads={self.heads}, head_dim={self.head_dim}"


class FoX(KeyBias):
    """Forgetting Transformer (Lin et al. 2025): a forget gate f_l = sigmoid(w_h . k_l + b_h) per
    key and head, and bias(i, j) = sum of log f_l over the keys l = j+1 .. i: a learned ALiBi
    whose slope each token sets. The gate reads the key each head already has (cached keys
    give cached gates; the paper's Linear on x, of weight w_h W_k, gives the same numbers).
    `gate_bias` initializes b (x-transformers' 5.0).
    """

    paper = "Lin et al. 2025"
    summary = "forget gates from each key: a learned, content-dependent ALiBi (FoX)"

    def __init__(self, *, dim=None, heads=None, head_dim=None, max_len=None, gate_bias=5.0):
        super().__init__("fox", dim, heads, head_dim, max_len)
        check_float("gate_bias", gate_bias)
        bound = self.head_dim**-0.5  # nn.Linear(Dh, 1)'s init, per head
        weight = torch.empty(self.heads, self.head_dim).uniform_(-bound, bound)  # [H, Dh]
        self.gate_weight = nn.Parameter(weight)
        self.gate_bias = nn.Parameter(torch.full((self.heads,), float(gate_bias)))

    def log_gates(self, k: torch.Tensor) -> torch.Tensor:
        """k [B, H, Tk, Dh] -> log f [B, H, Tk] float32."""
        logit = torch.einsum("bhtd,hd->bht", k.float(), self.gate_weight.float())
        return F.logsigmoid(logit + self.gate_bias.float()[:, None])

    def bias(self, q, k, q_pos, k_pos):
        qp, kp = qk_rows(self, q, k, q_pos, k_pos)
        return forget_bias(self.log_gates(k), qp, kp).to(q.dtype)


class CABLE(KeyBias):
    """Context-aware biases for length extrapolation (Veisi et al. 2025): a penalty
    p_hl = softplus(w_h . k_hl + c_h) per token l and head h, and bias_h(i, j) =
    -(p_h,j+1 + ... + p_h,i): ALiBi whose slope each token sets. The penalty reads the key each
    head already has (the reference's Linear on x, of weight w_h W_k,h, gives the same
    numbers). Init as the reference: w ~ normal(0, 0.02), c = 0.
    """

    paper = "Veisi et al. 2025 (arXiv 2503.08067)"
    summary = "learned per-token, per-head penalties summed between key and query (CABLE)"

    def __init__(self, *, dim=None, heads=None, head_dim=None, max_len=None):
        super().__init__("cable", dim, heads, head_dim, max_len)
        self.penalty_weight = nn.Parameter(torch.randn(self.heads, self.head_dim) * 0.02)
        self.penalty_bias = nn.Parameter(torch.zeros(self.heads))  # [H]

    def penalties(self, k: torch.Tensor) -> torch.Tensor:
        """k [B, H, Tk, Dh] -> the penalties p [B, H, Tk] float32 (>= 0)."""
        logit = torch.einsum("bhtd,hd->bht", k.float(), self.penalty_weight.float())
        return F.softplus(logit + self.penalty_bias.float()[:, None])

    def bias(self, q, k, q_pos, k_pos):
        qp, kp = qk_rows(self, q, k, q_pos, k_pos)
        return forget_bias(-self.penalties(k), qp, kp).to(q.dtype)


class PaTH(KeyBias):
    """PaTH attention ("Position Encoding via Accumulating Householder Transformations"): per
    token t and head a transform H_t = I - beta_t w_t w_t^T (|w_t| = 1, beta_t in (0, 2)), and
    the logit (q_i^T H_i ... H_{j+1} k_j + G_i - G_j) * softmax_scale, G FoX's cumulative log
    forget gates (`forget_gate=True`), as flash-linear-attention's path_attn; bias() is that
    logit less q.k * softmax_scale. As FoX, w_t and beta_t read the key each head already has:
    w_t = normalize(SiLU(causal depthwise conv of `conv_size` taps over W_w k_t)) (0: no conv,
    no SiLU), beta_t = 2 sigmoid(u . k_t + b).
    """

    paper = "Yang et al. 2025, arXiv 2505.16381"
    summary = "accumulated data-dependent Householder transforms between key and query (PaTH)"

    def __init__(
        self,
        *,
        dim=None,
        heads=None,
        head_dim=None,
        max_len=None,
        conv_size=3,
        forget_gate=False,
        gate_bias=5.0,
    ):
        super().__init__("path", dim, heads, head_dim, max_len)
        self.conv_size = check_int("conv_size", conv_size, low=0)
        self.forget_gate = check_bool("forget_gate", forget_gate)
        check_float("gate_bias", gate_bias)
        H, Dh = self.heads, self.head_dim
        bound = Dh**-0.5  # nn.Linear(Dh, .)'s init, per head
        self.w_weight = nn.Parameter(torch.empty(H, Dh, Dh).uniform_(-bound, bound))  # [H, Dh, Dh]
        self.beta_weight = nn.Parameter(torch.empty(H, Dh).uniform_(-bound, bound))  # [H, Dh]
        self.beta_bias = nn.Parameter(torch.zeros(H))  # beta = 1 at u . k = 0
        if self.conv_size:  # nn.Conv1d's init (fan_in = conv_size), FLA's conv_bias=False
            c = self.conv_size**-0.5
            self.conv_weight = nn.Parameter(torch.empty(H, Dh, self.conv_size).uniform_(-c, c))
        if self.forget_gate:
            self.gate_weight = nn.Parameter(torch.empty(H, Dh).uniform_(-bound, bound))
            self.gate_bias = nn.Parameter(torch.full((H,), float(gate_bias)))

    def reflections(self, k: torch.Tensor, k_pos: torch.Tensor):
        """k [B, H, Tk, Dh], k_pos [b, Tk] -> w [B, H, Tk, Dh], beta [B, H, Tk], float32."""
        k = k.float()
        u = torch.einsum("bhtd,hed->bhte", k, self.w_weight.float())
        if self.conv_size:
            u = short_conv(u, self.conv_weight.float(), k_pos)
        w = F.normalize(u, dim=-1, eps=1e-6)
        logit = torch.einsum("bhtd,hd->bht", k, self.beta_weight.float())
        return w, 2 * torch.sigmoid(logit + self.beta_bias.float()[:, None])

    log_gates = FoX.log_gates  # k [B, H, Tk, Dh] -> log f [B, H, Tk] float32, FoX's gates

    def bias(self, q, k, q_pos, k_pos):
        qp, kp = qk_rows(self, q, k, q_pos, k_pos)
        w, beta = self.reflections(k, kp)
        scores = path_scores(q, k, w, beta, qp, kp)  # [B, H, Tq, Tk]
        out = scores - torch.einsum("bhqd,bhkd->bhqk", q.float(), k.float())
        if self.forget_gate:
            out = out + forget_bias(self.log_gates(k), qp, kp)
        return (out * self.softmax_scale(self.head_dim)).to(q.dtype)

    def extra_repr(self) -> str:
        return (f"heads={self.heads}, head_dim={self.head_dim}, conv_size={self.conv_size}, "
                f"forget_gate={self.forget_gate}")  # fmt: skip


class DAPE(PositionalEncoding):
    """Data-adaptive positional encoding (Zheng et al. 2024): logits x + b + MLP([x; b]) with b
    a positional bias (`encoding` of the bias family, KERPLE by default as the paper's main
    model) and the MLP Linear(2H, mlp_width) - LeakyReLU - Linear(mlp_width, H) over the heads
    of each (i, j) pair, on the scaled logits before the mask (the authors' code).
    """

    family = "content"
    paper = "Zheng et al. 2024"
    provides = frozenset({"transform_logits"})
    summary = "MLP over each pair's logits and positional bias (KERPLE) across heads (DAPE)"
    trainable = True

    def __init__(
        self,
        *,
        heads=None,
        max_len=None,
        train_len=None,
        encoding="kerple",
        encoding_kwargs=None,
        mlp_width=32,
        bidirectional=False,
    ):
        super().__init__()
        if heads is None:
            raise ValueError("DAPE needs heads= (the number of attention heads, >= 1)")
        self.heads = check_int("heads", heads, low=1)
        check_int("mlp_width", mlp_width, low=1)
        check_bool("bidirectional", bidirectional)
        cls = lookup("encoding", encoding, bias_family.ENCODINGS)
        std = dict(heads=heads, max_len=max_len, train_len=train_len)
        if "bidirectional" in inspect.signature(cls).parameters:
            std["bidirectional"] = bidirectional
        self.positional = cls(**model_kwargs(cls, {**std, **(encoding_kwargs or {})}))
        for fact in ("bidirectional", "integer_positions", "max_len"):
            setattr(self, fact, getattr(self.positional, fact))
        self.mlp = nn.Sequential(
            nn.Linear(2 * heads, mlp_width), nn.LeakyReLU(), nn.Linear(mlp_width, heads)
        )

    def transform_logits(self, logits, q, k, q_pos, k_pos):
        b = self.positional.bias(q, k, q_pos, k_pos)  # [B or 1, H, Tq, Tk]
        first, last = self.mlp[0], self.mlp[2]
        slope = self.mlp[1].negative_slope
        return dape_logits(logits, b, first.weight, first.bias, last.weight, last.bias, slope)

    def extra_repr(self) -> str:
        return f"heads={self.heads}"


class StickBreaking(PositionalEncoding):
    """Stick-breaking attention (Tan et al. 2024): no positional encoding and no softmax. Key
    j's weight is beta_ij = sigmoid(q_i . k_j * softmax_scale) times the stick the keys nearer
    the query left, prod over l in (j, i) of (1 - beta_il). As the paper, the query does not
    attend to its own key unless `attend_current=True`.
    """

    family = "content"
    paper = "Tan et al. 2024"
    provides = frozenset({"normalize"})
    summary = "stick-breaking weights over preceding tokens in place of the softmax, no positions"
    bidirectional = False  # the stick is broken from the query backwards: causal only

    def __init__(self, *, max_len=None, attend_current=False):
        super().__init__(max_len)
        self.attend_current = check_bool("attend_current", attend_current)

    def normalize(self, logits, allowed, q_pos, k_pos):
        if not self.attend_current:  # the query's own key (the same position) takes no share
            b, _, tq, tk = logits.shape
            rel = relative_positions(self, q_pos, k_pos, tq, tk, b, False)  # [b, 1, Tq, Tk]
            other = rel.to(logits.device) != 0
            allowed = other if allowed is None else allowed & other
        return stick_breaking(logits, allowed)

    def extra_repr(self) -> str:
        return f"attend_current={self.attend_current}"


ENCODINGS: dict[str, type[PositionalEncoding]] = {
    "fox": FoX,
    "dape": DAPE,
    "stickbreaking": StickBreaking,
    "cable": CABLE,
    "path": PaTH,
}
