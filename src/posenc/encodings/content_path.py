"""PaTH attention (Yang et al. 2025): a data-dependent position encoding of the content family."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from posenc.base import PositionalEncoding
from posenc.checks import check_bool, check_float, check_int
from posenc.encodings.content import FoX, KeyBias
from posenc.encodings.relative import qk_rows
from posenc.functional.content import forget_bias, path_scores, short_conv


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


ENCODINGS: dict[str, type[PositionalEncoding]] = {"path": PaTH}
