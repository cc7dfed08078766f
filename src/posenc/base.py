"""The one interface every positional encoding implements, and the one shape legend.

Shape legend (used in every docstring of posenc):
    B    batch size
    T    sequence length; Tq queries, Tk keys (Tq <= Tk when decoding with a cache)
    D    model width
    H    query heads; Hkv key/value heads (H % Hkv == 0, grouped-query attention)
    Dh   head dim; R rotary dim (R <= Dh, even)
    P    position components: 1 for sequences (then the last axis is dropped), 2 for images
         (row, col), 3 for video (time, row, col)

Positions are explicit tensors: `[T]` (shared by the batch) or `[B, T]` (left padding, packed
sequences, decoding offsets), with a trailing `[..., P]` axis for 2-D / 3-D encodings.
The default is `arange(T)`; for queries when decoding, the last Tq of `arange(Tk)`.

Each encoding DECLARES what it provides, in one place on its class: `provides`, a frozenset of
the names of CAPABILITIES (an instance may narrow it in __init__: Shaw without value tables;
a wrapper copies its inner's). Every capability is one hook method; the hooks an encoding does
not provide are identity / None here, and the contract test checks that a class overrides
exactly the hooks it declares. Attention, the model, the wrappers, the arena and explain read
the declaration (has_bias, score_hooks, content_dependent, ... are derived from it), never
which methods a class overrides nor its family:
    embed             embed(x, positions): absolute, added to (or concatenated with) the token
                      embeddings x [B, T, D]
    embed_dim         embed_dim(dim): embed() widens x (concatenation)
    token_scale       token_scale(dim): a factor on the token embeddings before embed()
                      (sqrt(D), Vaswani)
    rotate            rotate(q, k, q_pos, k_pos): rotary, rotates (or scales) queries and keys
                      (their last dim may change, for both alike: PoPE's polar form is 2 Dh
                      wide; v keeps Dh)
    angles            angles(positions): [T, R/2] float64 rotation angles (figures, analysis)
    bias              bias(q, k, q_pos, k_pos): [B or 1, H, Tq, Tk], added to q.k * scale
    score_mod         score_mod(q_pos, k_pos): bias() as a FlexAttention score_mod (a bias of
                      positions alone)
    distance          distance_bias(distances, q_pos): bias() as a function of the distance
                      q_pos - k_pos alone, [H, N] (the `distance` backend)
    values            values(probs, q_pos, k_pos): extra attention output (Shaw's relative
                      values)
    softmax_scale     softmax_scale(head_dim): the factor on q.k, other than 1/sqrt(Dh)
    sample_positions  sample_positions(positions): training-time positions (randomized)
    transform_logits  transform_logits(logits, q, k, q_pos, k_pos): content, post-processes
                      the logits [B, H, Tq, Tk] (DAPE's MLP)
    normalize         normalize(logits, allowed, q_pos, k_pos): content, the attention weights
                      in place of the softmax (stick-breaking)
HOOKS names the methods, so a wrapper (`randomized`) forwards every one by iterating it.

The order inside attention, for a block of queries: rotate -> logits = q.k * softmax_scale +
bias -> transform_logits -> mask -> softmax, or normalize -> @ v -> + values. Every hook is a
function of (query i, key j) pairs that sees every key of a query's row: so a block of queries
(`chunked`) and a KV-cache decode step (the last Tq queries over all cached keys) give the same
numbers as the full forward.

What each backend can honour (SCORE_HOOKS are the capabilities that need the [B, H, Tq, Tk]
logits or weights in hand; `eager` and `chunked` materialize them per block of queries, the
fused kernels never do):
    eager, chunked   every capability.
    sdpa             rotate, bias (materialized as a float mask); refuses SCORE_HOOKS.
    flex             rotate, bias through score_mod; refuses SCORE_HOOKS and a bias without
                     `score_mod` (one that depends on q / k).
    distance         a bias through distance_bias, for an encoding that provides `distance`
                     (consecutive positions, CPU, no mask); refuses any other encoding, naming
                     what it provides.
The `content` family holds the schemes whose attention depends on the tokens' content, not on
positions alone (FoX's forget gates, DAPE's MLP over the logits, stick-breaking): positions
only order the tokens and decide the causal mask.

Standard keywords: the model's shape and lengths, one vocabulary across posenc (CONTRIBUTING.md
has the table). A constructor takes (keyword-only) those its encoding uses and no others;
posenc.build() passes each encoding only those its signature takes (model_kwargs), so callers
pass a model's shape generically.
    dim, heads, head_dim   D, H, Dh of the model the encoding sits in
    kv_heads               Hkv (grouped-query attention), for an encoding that uses it
    max_len                a HARD limit: positions >= max_len raise a ValueError, for every
                           encoding (check_positions, the one place); None = none
    train_len              the training length, a hint for settings scaled to it (a learned
                           table's size when max_len is not given, T5's max_distance, FIRE's L)
"""

from __future__ import annotations

import contextlib
import inspect
import threading

import torch
from torch import nn

from posenc.checks import check_positions

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


# > 0 while posenc.attention runs (per thread): its positions are validated, the hooks' own
# check_positions take them as given (one host sync per call, not one per hook).
_GIVEN = threading.local()


@contextlib.contextmanager
def positions_given():
    """Within: PositionalEncoding.check_positions takes positions as given (posenc.attention,
    once it has validated them)."""
    _GIVEN.depth = getattr(_GIVEN, "depth", 0) + 1
    try:
        yield
    finally:
        _GIVEN.depth -= 1


class PositionalEncoding(nn.Module):
    """Base class. Subclasses set the class attributes, declare `provides` and override
    exactly the hooks they declare.

    Class attributes:
        provides:      the capabilities it declares, a frozenset of CAPABILITIES' names (the
                       module docstring): exactly the hooks the class overrides.
        family:        one of FAMILIES: descriptive (listing, grouping, captions, which
                       picture explain draws), never what attention or the model read.
        paper:         short citation, e.g. "Vaswani et al. 2017".
        summary:       one line for `posenc list`.
        position_dims: P, the number of position components (1, 2 or 3).
        integer_positions: True where positions must be integers (tables, buckets).
        trainable:     True if the encoding has parameters that training changes.
        cache_exact:   False where a token's encoding depends on the whole sequence (`phase`),
                       so cached decoding cannot reproduce a full forward.
        per_document: False where a token's encoding depends on the longest sequence of the
                       whole batch (RoPE's dynamic / longrope scaling, as transformers'), so
                       packed documents (doc_ids) cannot each get their own: refused.
        bidirectional: False where the form is one-directional and only right under a causal
                       mask (ALiBi's and T5's decoder forms, xPos, CoPE): attention(...,
                       causal=False) refuses it; ALiBi and T5 build with bidirectional=True.
    """

    provides: frozenset[str] = frozenset()
    family: str = "none"
    paper: str = ""
    summary: str = ""
    position_dims: int = 1
    integer_positions: bool = False
    trainable: bool = False
    cache_exact: bool = True
    bidirectional: bool = True
    per_document: bool = True

    # The hard limit: positions >= max_len raise (check_positions); None means unbounded.
    max_len: int | None = None
    # Whether the model calls sample_positions in eval mode too (randomized, Ruoss's protocol).
    sample_at_eval: bool = False

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        if not isinstance(cls.provides, frozenset) or not cls.provides <= CAPABILITIES.keys():
            raise TypeError(
                f"{cls.__name__}.provides must be a frozenset of {', '.join(CAPABILITIES)}; "
                f"got {cls.provides!r}"
            )

    def token_scale(self, dim: int) -> float:
        """Factor on token embeddings [B, T, D] before embed(): sqrt(D) where the encoding is
        added at unit scale to embeddings initialized N(0, D^-1/2) (Vaswani et al. 3.4)."""
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
        """q [B, H, Tq, Dh], k [B, Hkv, Tk, Dh], q_pos [Tq] or [B, Tq] -> rotated (q, k).

        The rotated q and k share a last dim, Dh unless the method widens both (PoPE: 2 Dh);
        softmax_scale(Dh) is still taken from the input head dim.
        """
        return q, k

    def bias(
        self, q: torch.Tensor, k: torch.Tensor, q_pos: torch.Tensor, k_pos: torch.Tensor
    ) -> torch.Tensor | None:
        """q [B, H, Tq, Dh], k [B, H, Tk, Dh] (kv heads already repeated) -> [B or 1, H, Tq, Tk].

        Added to the scaled logits q.k * softmax_scale(Dh). None: no bias.
        """
        return None

    def score_mod(self, q_pos: torch.Tensor, k_pos: torch.Tensor):
        """FlexAttention score_mod(score, b, h, q_idx, kv_idx) with bias()'s values, or None.

        Only for encodings whose bias depends on positions alone. q_pos [Tq], k_pos [Tk] are
        the positions that q_idx / kv_idx index into.
        """
        return None

    def distance_bias(self, distances: torch.Tensor, q_pos: torch.Tensor) -> torch.Tensor | None:
        """bias() as a function of the distance alone: distances [N] int64 -> [H, N], the value
        at every (i, j) with q_pos[i] - k_pos[j] = distance, differentiable in the parameters.
        None where it is not one for these query positions q_pos [T] / [B, T]. The `distance`
        backend reads it instead of a [B, H, Tq, Tk] bias (O(Tq + Tk) values)."""
        return None

    def values(
        self, probs: torch.Tensor, q_pos: torch.Tensor, k_pos: torch.Tensor
    ) -> torch.Tensor | None:
        """probs [B, H, Tq, Tk] -> extra output [B, H, Tq, Dh] added to probs @ v, or None.

        Only Shaw et al.'s relative value embeddings use it.
        """
        return None

    def softmax_scale(self, head_dim: int) -> float:
        """The factor on q.k before softmax; 1/sqrt(Dh) unless the method says otherwise."""
        return head_dim**-0.5

    def sample_positions(self, positions: torch.Tensor) -> torch.Tensor:
        """positions [T] or [B, T] -> the positions a training forward uses. The model calls
        it once per forward in training mode, before any layer. Identity here."""
        return positions

    def angles(self, positions: torch.Tensor) -> torch.Tensor | None:
        """positions [T] -> [T, R/2] float64 rotation angles of a rotary encoding, else None."""
        return None

    def transform_logits(
        self, logits: torch.Tensor, q: torch.Tensor, k: torch.Tensor, q_pos, k_pos
    ) -> torch.Tensor:
        """logits [B, H, Tq, Tk] float32 (q.k * softmax_scale + bias, not yet masked), q / k as
        bias() gets them -> logits of the same shape. Entry (i, j) may depend on query i, key j,
        their positions and every head's logit (i, j), not on other pairs. Identity here."""
        return logits

    def normalize(
        self, logits: torch.Tensor, allowed: torch.Tensor | None, q_pos, k_pos
    ) -> torch.Tensor | None:
        """logits [B, H, Tq, Tk] float32 (not masked), allowed bool broadcastable to it (True =
        may attend) or None -> attention weights [B, H, Tq, Tk], zero where not allowed (rows
        may sum to less than 1), replacing the softmax. None: the softmax."""
        return None

    def check_positions(self, positions: torch.Tensor, name: str = "positions", **kwargs):
        """posenc.checks.check_positions with this encoding's hard limit: positions >= max_len
        raise a ValueError naming max_len and the position. Every hook that takes positions
        calls it; inside posenc.attention, which validated the call's positions once by the
        encoding's rules (attention.inputs.prepare_positions), it takes them as given."""
        if getattr(_GIVEN, "depth", 0):
            return positions
        return check_positions(positions, name=name, max_len=self.max_len, **kwargs)

    def reset_buffers(self) -> None:
        """Recompute the derived (non-persistent) buffers from the constructor's settings, as
        torch modules' reset_parameters does for parameters. Called after load_state_dict, so a
        model built on the meta device, moved with to_empty() and loaded is whole. None here."""

    def set_buffer(self, name: str, value: torch.Tensor | None) -> None:
        """Register (or refill) the non-persistent buffer `name` with `value`, on the device
        and in the floating dtype of the buffer it replaces (model.to() / half() are kept)."""
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
        """True where the attention depends on q / k beyond q.k: a score hook, or a bias
        with no score_mod (position-only biases declare one)."""
        return bool(self.score_hooks) or (
            "bias" in self.provides and "score_mod" not in self.provides
        )


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
