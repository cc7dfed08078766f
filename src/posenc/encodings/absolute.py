"""Absolute encodings: one vector per position, added to (or concatenated with) the embeddings.

Tables are computed in float32 (float64 for float64 x or positions) and cast to x's dtype at
the end. Built without `dim`, a formula-based encoding takes D from x; `table(positions, dim)`
is the positional part alone (what embed adds or concatenates).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from posenc import functional as PF
from posenc.base import PositionalEncoding
from posenc.checks import check_choice, check_float, check_int


def check_size(name: str, value, *, required: str | None = None) -> int | None:
    """None (allowed unless `required` says why it is needed) or a positive int."""
    if value is None:
        if required:
            raise ValueError(f"{name} is required: {required}; got None")
        return None
    return check_int(name, value, low=1)


class AbsoluteEncoding(PositionalEncoding):
    """Shared validation for the absolute family; subclasses define table()."""

    family = "absolute"

    def __init__(self, *, dim: int | None = None, max_len=None):
        super().__init__(max_len)
        self.dim = check_size("dim", dim)

    def table(self, positions: torch.Tensor, dim: int | None = None) -> torch.Tensor:
        """positions [T] / [B, T] (+[P]) -> [T, W] / [B, T, W], the positional features."""
        raise NotImplementedError

    def _width(self, dim: int | None) -> int:
        dim = dim if dim is not None else self.dim
        if dim is None:
            raise ValueError("dim (the model width D) is needed: pass dim=, or call embed(x, ...)")
        return dim

    def _check(self, x: torch.Tensor, positions: torch.Tensor) -> int:
        """Validate x [B, T, D] and positions; return D."""
        if not isinstance(x, torch.Tensor) or x.dim() != 3:
            shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
            raise ValueError(f"x must be [B, T, D], got {shape}")
        P = self.position_dims
        positions = self.check_positions(positions, integer=self.integer_positions, position_dims=P)
        lead = positions.shape[:-1] if P > 1 else positions.shape  # [T] or [B, T]
        B, T, D = x.shape
        if len(lead) not in (1, 2) or lead[-1] != T or (len(lead) == 2 and lead[0] not in (1, B)):
            want = "[T] or [B, T]" + (f" + [{P}]" if P > 1 else "")
            raise ValueError(
                f"positions must be {want} with T={T}, B={B} (as x), got {tuple(positions.shape)}"
            )
        if self.dim is not None and self.dim != D:
            raise ValueError(f"x has width {D}, but this encoding was built with dim={self.dim}")
        return D

    @staticmethod
    def _positions_for(x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        return positions.double() if x.dtype == torch.float64 else positions  # a float64 table


class AddedEncoding(AbsoluteEncoding):
    """x + table(positions): the output width is D."""

    provides = frozenset({"embed"})

    def embed(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        D = self._check(x, positions)
        return x + self.table(self._positions_for(x, positions), D).to(x.dtype)


class ConcatEncoding(AbsoluteEncoding):
    """[x, table(positions)]: the output width is D + width (the model projects back to D)."""

    provides = frozenset({"embed", "embed_dim"})
    width: int = 1

    def embed_dim(self, dim: int) -> int:
        return dim + self.width

    def embed(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        D = self._check(x, positions)
        feats = self.table(self._positions_for(x, positions), D).to(x.dtype)  # [T, W] / [B, T, W]
        return torch.cat([x, feats.expand(x.shape[0], x.shape[1], -1)], dim=-1)


class Sinusoidal(AddedEncoding):
    """x + s * PE(t) (+ noise in training). PE: even columns sin, odd columns cos.

    fusion: "add" (x + PE, width D) or "concat" ([x, PE], width 2D; the model projects back).
    learned_scale: s is a learned scalar (init 1); else s = 1.
    noise: amplitude a of seed 001's training-time noise U[-a/2, a/2] per element (0: off).
    """

    provides = AddedEncoding.provides | {"embed_dim", "token_scale"}  # embed_dim: fusion="concat"
    paper = "Vaswani et al. 2017"
    summary = "fixed sin/cos table added to the embeddings; optional learned scale and noise"

    def __init__(
        self,
        *,
        dim: int | None = None,
        max_len=None,
        base: float = 10000.0,
        fusion: str = "add",
        learned_scale: bool = False,
        noise: float = 0.0,
    ):
        super().__init__(dim=dim, max_len=max_len)
        self.fusion = check_choice("fusion", fusion, ("add", "concat"))
        self.base = check_float("base", base, gt=0)
        self.noise = check_float("noise", noise, ge=0)  # an amplitude; 0 = off
        self.scale = nn.Parameter(torch.ones(())) if learned_scale else None
        self.trainable = bool(learned_scale)

    def token_scale(self, dim: int) -> float:  # Vaswani et al. 3.4: embeddings to unit size
        return dim**0.5 if self.fusion == "add" else 1.0

    def embed_dim(self, dim: int) -> int:
        return dim if self.fusion == "add" else 2 * dim

    def table(self, positions: torch.Tensor, dim: int | None = None) -> torch.Tensor:
        pe = PF.sinusoidal_table(positions, self._width(dim), self.base)
        return pe if self.scale is None else pe * self.scale

    def embed(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        D = self._check(x, positions)
        pe = self.table(self._positions_for(x, positions), D)
        if self.training and self.noise > 0:
            pe = pe + self.noise * (torch.rand(x.shape, device=x.device, dtype=pe.dtype) - 0.5)
        if self.fusion == "concat":
            return torch.cat([x, pe.to(x.dtype).expand_as(x)], dim=-1)
        return x + pe.to(x.dtype)


class ScaledSinusoidal(AddedEncoding):
    """x + s * [sin(t w_0..w_{D/2-1}), cos(t w_0..w_{D/2-1})], s learned, init D^-0.5; as
    x-transformers' ScaledSinusoidalEmbedding. Built without `dim`, s starts at 1 and the
    output is scaled by D^-0.5 too."""

    paper = "Hua et al. 2022 (FLASH); x-transformers"
    summary = "sin/cos table [sin..., cos...] times a learned scalar initialised to D^-0.5"
    trainable = True

    def __init__(self, *, dim: int | None = None, max_len=None, base=10000.0):
        super().__init__(dim=dim, max_len=max_len)
        if dim is not None and dim % 2:
            raise ValueError(f"dim must be even for scaled_sinusoidal (sin/cos halves), got {dim}")
        self.base = check_float("base", base, gt=0)
        self.scale = nn.Parameter(torch.tensor(dim**-0.5 if dim else 1.0))

    def table(self, positions: torch.Tensor, dim: int | None = None) -> torch.Tensor:
        D = self._width(dim)
        if D % 2:
            raise ValueError(f"dim must be even for scaled_sinusoidal (sin/cos halves), got {D}")
        pe = PF.sinusoidal_table(positions, D, self.base)
        pe = torch.cat([pe[..., 0::2], pe[..., 1::2]], dim=-1)  # [sin..., cos...]
        return pe * (self.scale if self.dim else self.scale * D**-0.5)


class Sinusoidal2D(AddedEncoding):
    """Images: x + PE(row, col); values of positional-encodings' PositionalEncoding2D."""

    provides = AddedEncoding.provides | {"token_scale"}
    paper = "Vaswani et al. 2017; 2-D layout of the positional-encodings package"
    summary = "2-D sinusoids for images: first channels encode the row, the next the column"
    position_dims = 2

    def __init__(self, *, dim: int | None = None, max_len=None, base=10000.0):
        super().__init__(dim=dim, max_len=max_len)
        self.base = check_float("base", base, gt=0)

    fusion = "add"
    token_scale = Sinusoidal.token_scale

    def table(self, positions: torch.Tensor, dim: int | None = None) -> torch.Tensor:
        return PF.sinusoidal_table_2d(positions, self._width(dim), self.base)


class Sinusoidal3D(Sinusoidal2D):
    """Video: x + PE(time, row, col); values of positional-encodings' PositionalEncoding3D."""

    paper = "Vaswani et al. 2017; 3-D layout of the positional-encodings package"
    summary = "3-D sinusoids for video: channels split over time, row and column"
    position_dims = 3

    def table(self, positions: torch.Tensor, dim: int | None = None) -> torch.Tensor:
        return PF.sinusoidal_table_3d(positions, self._width(dim), self.base)


class Learned(AddedEncoding):
    """x + W[t]: a trainable table of max_len (else train_len) rows, init normal(0, 0.02)."""

    paper = "Gehring et al. 2017; Devlin et al. 2019 (BERT)"
    summary = "a trained vector per position (max_len rows); no positions past the table"
    integer_positions = True
    trainable = True

    def __init__(self, *, dim: int | None = None, max_len=None, train_len=None):
        super().__init__(dim=check_size("dim", dim, required="learned sizes its table by it"))
        rows = max_len if max_len is not None else check_size("train_len", train_len)
        self.max_len = check_size("max_len", rows, required="the number of table rows")
        self.weight = nn.Parameter(torch.empty(self.max_len, self.dim))
        nn.init.normal_(self.weight, std=0.02)

    def table(self, positions: torch.Tensor, dim: int | None = None) -> torch.Tensor:
        positions = self.check_positions(positions, integer=True)
        return F.embedding(positions.long(), self.weight)


class OneHot(ConcatEncoding):
    """[x, onehot(t)]: seed 003's one-hot position vector of length max_len, concatenated."""

    paper = "naive baseline (seed 003)"
    summary = "concatenates a one-hot vector of length max_len (embed_dim = D + max_len)"
    integer_positions = True

    def __init__(self, *, dim: int | None = None, max_len=None):
        super().__init__(dim=dim)
        self.max_len = check_size("max_len", max_len, required="the one-hot vector's length")
        self.width = self.max_len

    def table(self, positions: torch.Tensor, dim: int | None = None) -> torch.Tensor:
        positions = self.check_positions(positions, integer=True)
        return F.one_hot(positions.long(), self.max_len).float()


class Index(ConcatEncoding):
    """[x, t]: the raw position as one extra feature (unbounded, so it grows with length)."""

    paper = "naive baseline (seeds 000, 003)"
    summary = "concatenates the raw position t as one feature (embed_dim = D + 1)"

    def table(self, positions: torch.Tensor, dim: int | None = None) -> torch.Tensor:
        return positions.to(torch.promote_types(positions.dtype, torch.float32))[..., None]


class Phase(ConcatEncoding):
    """[x, t/(T-1)]: seed 000's phase in [0, 1], T the length of each token's document (its
    run of increasing positions). Not cache_exact: a phase depends on the length of the
    sequence it is seen in, the flaw seed 000 points out.
    """

    paper = "naive baseline (seed 000)"
    summary = "concatenates t/(T-1) in [0, 1]; depends on the sequence length"
    cache_exact = False

    def table(self, positions: torch.Tensor, dim: int | None = None) -> torch.Tensor:
        pos = positions.to(torch.promote_types(positions.dtype, torch.float32))
        last = PF.document_last(pos).clamp(min=1)  # T - 1 per document (1 if T == 1)
        return (pos / last)[..., None]


class NoPE(PositionalEncoding):
    """No positional information at all (causal attention alone must find the order)."""

    family = "none"
    provides = frozenset()  # nothing: every hook is the identity
    paper = "Haviv et al. 2022; Kazemnejad et al. 2023"
    summary = "no positional encoding: every hook is the identity"

    def __init__(self, *, max_len=None):
        super().__init__(max_len)


class NoPETemperature(PositionalEncoding):
    """NoPE with Llama 4's query temperature (its iRoPE NoPE layers, after Nakanishi 2025):
    the query at position p is multiplied by 1 + attn_scale * log(1 + floor((p + 1) /
    floor_scale)), exactly 1 below position floor_scale - 1; keys and values unchanged.
    """

    family = "none"  # no rotation, no bias: only the queries' scale follows their position
    provides = frozenset({"rotate"})  # rotate() scales the queries (no angles)
    paper = "Meta 2025 (Llama 4 iRoPE); Nakanishi 2025"
    summary = "NoPE with a log-length query temperature (Llama 4's NoPE layers)"

    def __init__(
        self, *, max_len=None, floor_scale: float = 8192, attn_scale: float = 0.1,
    ):  # fmt: skip
        super().__init__(max_len)
        self.floor_scale = check_float("floor_scale", floor_scale, gt=0)
        self.attn_scale = check_float("attn_scale", attn_scale, ge=0)

    def temperature(self, positions: torch.Tensor) -> torch.Tensor:
        """positions [T] or [B, T] -> the query factors, float64."""
        steps = torch.floor((positions.double() + 1.0) / self.floor_scale)
        return torch.log1p(steps) * self.attn_scale + 1.0

    def rotate(self, q, k, q_pos, k_pos):  # q scaled per query position, k unchanged
        q_pos = self.check_positions(q_pos, name="q_pos")
        t = self.temperature(q_pos)[..., None]  # [Tq, 1] or [B, Tq, 1]
        t = t.unsqueeze(1) if t.dim() == 3 else t  # [B, 1, Tq, 1]
        compute = torch.promote_types(q.dtype, torch.float32)
        return (q.to(compute) * t.to(compute)).to(q.dtype), k

    def extra_repr(self) -> str:
        return f"floor_scale={self.floor_scale:g}, attn_scale={self.attn_scale:g}"


class LearnedWindow(Learned):
    """x + W[t] + sum_{j<J} beta_j W[t - j] * w_j; max_len rows (train_len if not given)."""

    paper = "seed 001's formula (no published source)"
    summary = "a trained table plus a learned mix of the J - 1 rows before each position"

    def __init__(self, *, dim=None, max_len=None, train_len=None, window: int = 5):
        super().__init__(dim=dim, max_len=max_len, train_len=train_len)
        self.window = check_int("window", window, low=1)
        self.beta = nn.Parameter(torch.zeros(self.window - 1))  # [J - 1]
        self.w = nn.Parameter(torch.ones(self.window - 1, self.dim))  # [J - 1, D]

    def table(self, positions: torch.Tensor, dim: int | None = None) -> torch.Tensor:
        positions = self.check_positions(positions, integer=True)
        pos = positions.long()  # [T] or [B, T]
        pe = F.embedding(pos, self.weight)  # [(B,) T, D]
        for j in range(1, self.window):
            back = pos - j
            rows = F.embedding(back.clamp(min=0), self.weight) * (back >= 0).unsqueeze(-1)
            pe = pe + self.beta[j - 1] * rows * self.w[j - 1]
        return pe

    def extra_repr(self) -> str:
        return f"max_len={self.max_len}, dim={self.dim}, window={self.window}"


ENCODINGS: dict[str, type[PositionalEncoding]] = {
    "sinusoidal": Sinusoidal,
    "scaled_sinusoidal": ScaledSinusoidal,
    "learned": Learned,
    "onehot": OneHot,
    "index": Index,
    "phase": Phase,
    "sinusoidal_2d": Sinusoidal2D,
    "sinusoidal_3d": Sinusoidal3D,
    "nope": NoPE,
    "nope_temperature": NoPETemperature,
    "learned_window": LearnedWindow,
}
