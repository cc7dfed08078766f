"""The one interface every positional encoding implements, and the one shape legend.

Shape legend (every docstring of posenc):
    B    batch size
    T    sequence length; Tq queries, Tk keys (Tq <= Tk decoding with a cache)
    D    model width
    H    query heads; Hkv key/value heads (H % Hkv == 0, GQA)
    Dh   head dim; R rotary dim (R <= Dh, even)
    P    position components: 1 sequences (the axis is dropped), 2 images (row, col),
         3 video (time, row, col)
Positions are explicit tensors [T] (shared by the batch) or [B, T] (left padding, packing,
decoding offsets), with a trailing [..., P] axis in 2-D / 3-D; default arange(T) (queries
decoding: the last Tq of arange(Tk)).

Each encoding DECLARES its CAPABILITIES in `provides`, a frozenset on its class (an instance
may narrow it: Shaw without value tables; a wrapper copies its inner's). Each is one hook,
identity / None here; the contract test checks a class overrides exactly those it declares.
Attention, the model, wrappers, arena and explain read the declaration (has_bias,
score_hooks, content_dependent derive from it), never which methods a class overrides:
    embed             embed(x, positions): absolute, added to / concatenated with x [B, T, D]
    embed_dim         embed_dim(dim): embed() widens x (concatenation)
    token_scale       token_scale(dim): factor on the token embeddings (sqrt(D), Vaswani)
    rotate            rotate(q, k, q_pos, k_pos): rotates (or scales) q and k; their last dim
                      may change alike (PoPE's polar form: 2 Dh), v keeps Dh
    angles            angles(positions): [T, R/2] float64 rotation angles
    bias              bias(q, k, q_pos, k_pos): [B or 1, H, Tq, Tk] added to q.k * scale
    score_mod         score_mod(q_pos, k_pos): bias() as a FlexAttention score_mod
    distance          distance_bias(distances, q_pos): bias() of q_pos - k_pos alone, [H, N]
    values            values(probs, q_pos, k_pos): extra attention output (Shaw)
    softmax_scale     softmax_scale(head_dim): the factor on q.k, other than 1/sqrt(Dh)
    sample_positions  sample_positions(positions): training-time positions (randomized)
    transform_logits  transform_logits(logits, q, k, q_pos, k_pos): content, post-processes
                      the logits [B, H, Tq, Tk] (DAPE)
    normalize         normalize(logits, allowed, q_pos, k_pos): content, weights in place of
                      the softmax (stick-breaking)
HOOKS names the methods, so a wrapper (`randomized`) forwards every one by iterating it.

Inside attention, per block of queries: rotate -> q.k * softmax_scale + bias ->
transform_logits -> mask -> softmax or normalize -> @ v -> + values. Every hook is a function
of (query i, key j) pairs that sees all of a query's keys, so a block of queries (`chunked`)
and a KV-cache step give the full forward's numbers.

SCORE_HOOKS need the [B, H, Tq, Tk] logits in hand: eager / chunked run them, the fused backends
refuse them (posenc.attention lists what each backend honours). The `content` family's
attention depends on the tokens (FoX, DAPE, stick-breaking): positions order them, and decide
the causal mask.

Standard keywords (CONTRIBUTING.md's table): a constructor takes, keyword-only, those it uses
and no others; posenc.build() passes each only those its signature takes (model_kwargs).
    dim, heads, head_dim   D, H, Dh;  kv_heads  Hkv, for an encoding that uses it
    max_len                a HARD limit: positions >= max_len raise a ValueError
                           (check_positions, the one place); None = none
    train_len              the training length, a hint (a learned table's size without
                           max_len, T5's max_distance, FIRE's L)
"""

from __future__ import annotations

import contextlib
import inspect
import threading

import torch
from torch import nn

from posenc.checks import check_max_len, check_positions

FAMILIES = ("absolute", "rotary", "bias", "relative", "content", "none")
# capability -> the hook method that implements it (the module docstring says what each is).
CAPABILITIES: dict[str, str] = {
    "embed": "embed",
    "embed_dim": "embed_dim",
    "token_scale": "token_scale",
    "rotate": "rotate",
    "bias": "bias",
    "score_mod": "score_mod",
    "distance": "distance_bias",
    "values": "values",
    "softmax_scale": "softmax_scale",
    "sample_positions": "sample_positions",
    "angles": "angles",
    "transform_logits": "transform_logits",
    "normalize": "normalize",
}
HOOKS = tuple(CAPABILITIES.values())
# Capabilities that need the [B, H, Tq, Tk] logits or attention weights in hand: eager / chunked.
SCORE_HOOKS = ("values", "transform_logits", "normalize")
# Facts an instance reports (class attributes, or set per instance by a wrapper).
FACTS = (
    "family", "position_dims", "integer_positions", "trainable", "cache_exact", "bidirectional",
    "max_len", "per_document",
)  # fmt: skip
# The model's shape and lengths, which build() passes to the constructors that take them
# (takes(), model_kwargs()).
MODEL_KWARGS = ("dim", "heads", "kv_heads", "head_dim", "max_len", "train_len")


def takes(cls) -> frozenset[str] | None:
    """The keyword names cls's constructor takes (its signature, read once); None where it
    takes **kwargs (then it takes any)."""
    if "_takes" not in cls.__dict__:
        params = inspect.signature(cls).parameters.values()
        var = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params)
        cls._takes = None if var else frozenset(p.name for p in params)
    return cls._takes


def model_kwargs(cls, kwargs: dict) -> dict:
    """kwargs less the MODEL_KWARGS (the model's shape and lengths) cls's constructor does not
    take: callers pass a model's shape generically, each encoding gets what it uses."""
    names = takes(cls)
    if names is None:
        return dict(kwargs)
    return {k: v for k, v in kwargs.items() if k in names or k not in MODEL_KWARGS}


# > 0 while posenc.attention runs (per thread): the hooks' check_positions take them as given
_GIVEN = threading.local()


@contextlib.contextmanager
def positions_given():
    """Within: PositionalEncoding.check_positions takes positions as given."""
    _GIVEN.depth = getattr(_GIVEN, "depth", 0) + 1
    try:
        yield
    finally:
        _GIVEN.depth -= 1


class PositionalEncoding(nn.Module):
    """Base class: subclasses set the class attributes below, declare `provides` and override
    exactly the hooks they declare."""

    provides: frozenset[str] = frozenset()  # CAPABILITIES' names: the hooks it overrides
    family: str = "none"  # one of FAMILIES: descriptive (listing, captions), never dispatched on
    paper: str = ""  # short citation, e.g. "Vaswani et al. 2017"
    summary: str = ""  # one line for `posenc list`
    position_dims: int = 1  # P
    integer_positions: bool = False  # positions must be integers (tables, buckets)
    trainable: bool = False  # has parameters that training changes
    # False where a token's encoding depends on the whole sequence (`phase`): a KV cache
    # cannot reproduce the full forward
    cache_exact: bool = True
    # False for a one-directional form, right only under a causal mask (ALiBi's and T5's
    # decoder forms, xPos, CoPE): attention(causal=False) refuses it
    bidirectional: bool = True
    # False where it depends on the longest sequence of the batch (RoPE's dynamic / longrope,
    # as transformers'): packed documents (doc_ids) are refused
    per_document: bool = True
    max_len: int | None = None  # the hard limit: positions >= max_len raise; None: unbounded
    sample_at_eval: bool = False  # the model calls sample_positions in eval too (randomized)

    def __init__(self, max_len: int | None = None) -> None:
        super().__init__()
        self.max_len = check_max_len(max_len)

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        if not isinstance(cls.provides, frozenset) or not cls.provides <= CAPABILITIES.keys():
            raise TypeError(
                f"{cls.__name__}.provides must be a frozenset of {', '.join(CAPABILITIES)}; "
                f"got {cls.provides!r}"
            )

    def token_scale(self, dim: int) -> float:
        """Factor on token embeddings before embed() (sqrt(D): Vaswani et al. 3.4)."""
        return 1.0

    def embed(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """x [B, T, D], positions [T] or [B, T] -> [B, T, embed_dim(D)]."""
        return x

    def embed_dim(self, dim: int) -> int:
        """Width of embed()'s output for input width `dim` (concatenating encodings grow it)."""
        return dim

    def rotate(
        self, q: torch.Tensor, k: torch.Tensor, q_pos: torch.Tensor, k_pos: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """q [B, H, Tq, Dh], k [B, Hkv, Tk, Dh], q_pos [Tq] or [B, Tq] -> rotated (q, k), of
        one last dim (PoPE: 2 Dh; softmax_scale still takes the input Dh)."""
        return q, k

    def bias(
        self, q: torch.Tensor, k: torch.Tensor, q_pos: torch.Tensor, k_pos: torch.Tensor
    ) -> torch.Tensor | None:
        """q [B, H, Tq, Dh], k [B, H, Tk, Dh] (kv heads repeated) -> [B or 1, H, Tq, Tk] added
        to q.k * softmax_scale(Dh); None: no bias."""
        return None

    def score_mod(self, q_pos: torch.Tensor, k_pos: torch.Tensor):
        """FlexAttention score_mod(score, b, h, q_idx, kv_idx) adding bias()'s values (a bias of
        positions alone; q_idx / kv_idx index q_pos [Tq] / k_pos [Tk]), or None."""
        return None

    def distance_bias(self, distances: torch.Tensor, q_pos: torch.Tensor) -> torch.Tensor | None:
        """distances [N] int64 -> [H, N]: bias() at every (i, j) with q_pos[i] - k_pos[j] =
        distance (differentiable); None where the bias is not one of the distance alone here."""
        return None

    def values(
        self, probs: torch.Tensor, q_pos: torch.Tensor, k_pos: torch.Tensor
    ) -> torch.Tensor | None:
        """probs [B, H, Tq, Tk] -> extra output [B, H, Tq, Dh] added to probs @ v, or None."""
        return None

    def softmax_scale(self, head_dim: int) -> float:
        """The factor on q.k before softmax."""
        return head_dim**-0.5

    def sample_positions(self, positions: torch.Tensor) -> torch.Tensor:
        """positions [T] or [B, T] -> a training forward's (the model calls it once per forward)."""
        return positions

    def angles(self, positions: torch.Tensor) -> torch.Tensor | None:
        """positions [T] -> [T, R/2] float64 rotation angles, or None."""
        return None

    def transform_logits(
        self, logits: torch.Tensor, q: torch.Tensor, k: torch.Tensor, q_pos, k_pos
    ) -> torch.Tensor:
        """logits [B, H, Tq, Tk] float32 (scaled q.k + bias, unmasked) -> the same shape; entry
        (i, j) may read query i, key j, their positions and every head's (i, j), no other pair."""
        return logits

    def normalize(
        self, logits: torch.Tensor, allowed: torch.Tensor | None, q_pos, k_pos
    ) -> torch.Tensor | None:
        """logits [B, H, Tq, Tk] float32 (unmasked), allowed (bool, True = may attend) or None ->
        weights [B, H, Tq, Tk] in place of the softmax, 0 where not allowed; None: softmax."""
        return None

    def check_positions(self, positions: torch.Tensor, name: str = "positions", **kwargs):
        """posenc.checks.check_positions with this encoding's max_len, for every hook that takes
        positions; as given inside posenc.attention (which validated them once)."""
        if getattr(_GIVEN, "depth", 0):
            return positions
        return check_positions(positions, name=name, max_len=self.max_len, **kwargs)

    def each(self, fn, q, k, q_pos, k_pos, **check) -> tuple:
        """(fn(q, q_pos, "q_pos"), fn(k, k_pos, "k_pos")), each position checked first."""
        return tuple(
            fn(x, self.check_positions(pos, name=name, **check), name)
            for x, pos, name in ((q, q_pos, "q_pos"), (k, k_pos, "k_pos"))
        )

    def reset_buffers(self) -> None:
        """Recompute the non-persistent buffers from the settings (as reset_parameters does);
        called after load_state_dict, so a meta-built, to_empty()'d, loaded model is whole."""

    def set_buffer(self, name: str, value: torch.Tensor | None) -> None:
        """Register the non-persistent buffer `name`, on the device and float dtype of the one it
        replaces (model.to() / half() are kept)."""
        old = getattr(self, name, None)
        if isinstance(old, torch.Tensor) and value is not None:
            dtype = old.dtype if old.is_floating_point() and value.is_floating_point() else None
            value = value.to(device=old.device, dtype=dtype)
        self.register_buffer(name, value, persistent=False)

    def _load_from_state_dict(self, *args, **kwargs) -> None:
        super()._load_from_state_dict(*args, **kwargs)
        self.reset_buffers()  # non-persistent buffers are not in the state dict: rebuild them

    @property
    def has_bias(self) -> bool:
        return "bias" in self.provides

    @property
    def has_values(self) -> bool:
        return "values" in self.provides

    @property
    def score_hooks(self) -> tuple[str, ...]:
        """The capabilities of SCORE_HOOKS it declares (sdpa, flex and distance run none)."""
        return tuple(h for h in SCORE_HOOKS if h in self.provides)

    @property
    def content_dependent(self) -> bool:
        """Attention depends on q / k beyond q.k: a score hook, or a bias without score_mod."""
        return bool(self.score_hooks) or self.has_bias and "score_mod" not in self.provides


def one_directional(encoding: PositionalEncoding) -> str:
    """Why a one-directional encoding cannot run with causal=False, and what to build."""
    cls = type(getattr(encoding, "inner", encoding))  # a wrapper: the wrapped encoding
    if "bidirectional" in inspect.signature(cls).parameters and hasattr(encoding, "inner"):
        fix = (
            f"build the wrapped {cls.__name__} with bidirectional=True, or give the wrapper "
            "its name (TransformerLM(causal=False) then builds the encoder form)"
        )
    elif "bidirectional" in inspect.signature(cls).parameters:
        fix = "build it with bidirectional=True for an encoder (TransformerLM(causal=False) does)"
    else:
        fix = "it has no bidirectional form; use causal=True or another encoding"
    return (f"causal=False: {cls.__name__} is one-directional (keys after the query would get "
            f"its decoder form); {fix}")  # fmt: skip
