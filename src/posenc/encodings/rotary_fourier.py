"""FoPE, Fourier position embedding (Hua et al. 2024): pair d turns by C_d(t) = sum_k a_kd
cos(w_k t) and S_d(t) = sum_k b_kd sin(w_k t) over the K RoPE frequencies with a period within
the training length (the others are zeroed), for the first M pairs; the rest get C = S = 1.
"""

from __future__ import annotations

import torch
from torch import nn

from posenc.base import PositionalEncoding
from posenc.checks import check_bool, check_float, check_int
from posenc.encodings.rotary import RotaryEncoding, set_per_head
from posenc.functional.absolute import position_angles
from posenc.functional.rotary_learned import fope_cos_sin, fope_inv_freq

DEFAULT_TRAIN_LEN = 2048  # the floor's length when train_len is not given


class FoPE(RotaryEncoding):
    """Fourier position embedding, matched to the authors' FourierEmbedding (OLMo) and vLLM.

    `train_len` (else 2048) sets the floor 2 pi / train_len below which frequencies are
    zeroed. `pairs` (M, default min(K, Dh/4)) Fourier-series pairs; `per_head` gives each head
    its own coefficients; `learnable` trains them; they start at the identity plus Xavier
    noise of gain `init_gain` (the authors' eye_xavier_norm).
    """

    paper = "Hua et al. 2024"
    summary = "FoPE: each rotary pair a learned Fourier series; sub-train-length freqs zeroed"
    trainable = True

    def __init__(
        self,
        *,
        dim: int | None = None,
        heads: int | None = None,
        head_dim: int | None = None,
        max_len: int | None = None,
        train_len: int | None = None,
        base: float = 10000.0,
        layout: str = "half",
        rotary_dim: int | None = None,
        pairs: int | None = None,
        per_head: bool = False,
        learnable: bool = True,
        init_gain: float = 0.3,
    ) -> None:
        super().__init__(dim, heads, head_dim, base, layout, rotary_dim, max_len)
        if self.head_dim is None and rotary_dim is None:
            raise ValueError("fope needs the head dim: pass head_dim= (or dim= and heads=)")
        r = self.rotary_dim()
        length = DEFAULT_TRAIN_LEN if train_len is None else train_len
        self.train_len = check_int("train_len", length, low=1)
        # a plain attribute, not a buffer: model.to(bfloat16) must not round the frequencies
        with torch.device("cpu"):  # moved to the positions' device per call (not meta)
            self.inv_freq = fope_inv_freq(r, self.base, length)
        K = self.inv_freq.numel()  # 0 where train_len is shorter than every period: no position
        M = min(K, max(1, r // 4)) if pairs is None else check_int("pairs", pairs, low=1)
        if M > K:
            raise ValueError(f"pairs must be <= K={K} (the kept frequencies), got {M}")
        set_per_head(self, "fope", per_head, heads, "coefficients")
        shape = (heads, K, M) if self.per_head else (K, M)
        self.trainable = check_bool("learnable", learnable)
        gain = check_float("init_gain", init_gain, ge=0)
        self.cos_coef = nn.Parameter(eye_plus_xavier(shape, gain), requires_grad=self.trainable)
        self.sin_coef = nn.Parameter(eye_plus_xavier(shape, gain), requires_grad=self.trainable)

    def _angles(self, positions, r, dtype):  # the K kept frequencies': angles() is [T, K]
        return position_angles(positions, self.inv_freq.to(positions.device), dtype)

    def _cos_sin(self, positions, r, dtype):
        return fope_cos_sin(positions, self.inv_freq, self.cos_coef, self.sin_coef, r // 2, dtype)

    def extra_repr(self) -> str:
        K, M = self.cos_coef.shape[-2:]
        return super().extra_repr() + f", train_len={self.train_len}, K={K}, pairs={M}"


def eye_plus_xavier(shape: tuple[int, ...], gain: float) -> torch.Tensor:
    """[(H,) K, M] Xavier-normal noise (`gain`) plus the identity, strided for M < K (column d
    reads frequency d * ceil(K / M)), as the authors' eye_xavier_norm."""
    coef = torch.zeros(shape)
    K, M = shape[-2:]
    if coef.numel() == 0:
        return coef
    if gain > 0:
        nn.init.xavier_normal_(coef, gain=gain)
    step = -(-K // M)
    d = torch.arange(min(M, -(-K // step)))  # the d with d * step < K (no mask: meta works)
    coef[..., d * step, d] += 1.0
    return coef


ENCODINGS: dict[str, type[PositionalEncoding]] = {"fope": FoPE}
