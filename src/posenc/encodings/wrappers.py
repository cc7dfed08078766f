"""Randomized positional encodings (Ruoss et al. 2023): a wrapper around any encoding.

In training a sequence gets as positions p the sample S[p], S a sorted random subset of
[0, sample_len) of size max(p) + 1 (order and packed-document restarts kept): one subset for
[T] positions, one per row, of its own size, for [B, T]. At evaluation positions pass through
unless `sample_at_eval=True` (Ruoss et al.'s protocol). TransformerLM calls sample_positions
once per forward, before any layer; a cached decode draws one subset for the finished
sequence (posenc.kv_cache.KVCache.sampled), so cache_exact holds.
"""

from __future__ import annotations

import torch

from posenc.base import FACTS, HOOKS, PositionalEncoding, model_kwargs
from posenc.checks import check_bool, check_int, check_max_len, check_positions, lookup

SAMPLE_LEN = 2048  # sample_len's default (Ruoss et al.'s L), capped at max_len

# What randomized can wrap, name -> class: every position scheme (not another wrapper). Filled
# where the registry is built, posenc.encodings.
WRAPPABLE: dict[str, type[PositionalEncoding]] = {}


class Randomized(PositionalEncoding):
    """Wraps `encoding` (a registry name built with `encoding_kwargs`, or an instance).

    An instance provides what its inner encoding (`self.inner`) provides, plus
    sample_positions: every other hook, every fact of FACTS and any other attribute are the
    inner's. The inner is built with train_len = sample_len and max_len as given (never
    enlarged); sample_len defaults to 2048, or max_len where smaller, and may not pass it.
    """

    family = "none"
    provides = frozenset({"sample_positions"})  # an instance adds its inner's (__init__)
    paper = "Ruoss et al. 2023"
    summary = "wrapper: trains on sorted random positions from [0, sample_len)"

    def __init__(
        self,
        *,
        encoding: str | PositionalEncoding = "rope",
        encoding_kwargs: dict | None = None,
        sample_len: int | None = None,
        sample_at_eval: bool = False,
        dim: int | None = None,
        heads: int | None = None,
        kv_heads: int | None = None,
        head_dim: int | None = None,
        max_len: int | None = None,
    ) -> None:
        super().__init__()
        if sample_len is not None:
            check_int("sample_len", sample_len, low=1)
        self.sample_at_eval = check_bool("sample_at_eval", sample_at_eval)
        limit = check_max_len(max_len)
        if isinstance(encoding, PositionalEncoding):
            if encoding_kwargs:
                raise TypeError("encoding_kwargs is only for an encoding given by name")
            if limit is not None and limit != encoding.max_len:
                raise ValueError(
                    f"max_len={max_len}: the wrapped instance has max_len={encoding.max_len}; "
                    "build it with the max_len you want"
                )
            inner = encoding
        elif isinstance(encoding, str):
            if encoding.strip().lower() == "randomized":
                raise ValueError("encoding must be another encoding, not 'randomized' itself")
            n = sample_len or min(SAMPLE_LEN, limit or SAMPLE_LEN)  # never past the hard limit
            # the inner's hard limit is max_len, as given: never enlarged to cover sample_len
            std = dict(dim=dim, heads=heads, kv_heads=kv_heads, head_dim=head_dim, max_len=limit,
                       train_len=n)  # fmt: skip
            cls = lookup("encoding", encoding, WRAPPABLE)
            inner = cls(**model_kwargs(cls, {**std, **(encoding_kwargs or {})}))
        else:
            raise TypeError(
                "encoding must be an encoding name or a PositionalEncoding, "
                f"got {type(encoding).__name__}"
            )
        if inner.position_dims != 1:
            raise ValueError(
                f"encoding must take 1-D positions (position_dims=1), got "
                f"{type(inner).__name__} with position_dims={inner.position_dims}"
            )
        if sample_len is None:  # never past the hard limit
            sample_len = min(SAMPLE_LEN, inner.max_len or SAMPLE_LEN)
        if inner.max_len is not None and sample_len > inner.max_len:
            raise ValueError(
                f"sample_len={sample_len} > max_len={inner.max_len}: training positions are "
                "drawn from [0, sample_len), past the hard limit max_len; give a max_len >= "
                "sample_len, or a smaller sample_len"
            )
        self.sample_len = sample_len
        self.inner = inner
        self.provides = inner.provides | Randomized.provides  # the declaration, forwarded
        for fact in FACTS:
            setattr(self, fact, getattr(inner, fact))
        self.heads = getattr(inner, "heads", heads)

    def __getattr__(self, name: str):  # the inner's settings (base, slopes, ...)
        try:
            return super().__getattr__(name)  # parameters, buffers, submodules
        except AttributeError:
            if name == "inner" or "inner" not in self.__dict__.get("_modules", {}):
                raise
            return getattr(self._modules["inner"], name)

    def extra_repr(self) -> str:
        return f"sample_len={self.sample_len}"

    def sample_positions(self, positions: torch.Tensor) -> torch.Tensor:
        """positions [T] or [B, T] -> randomized positions of the same shape."""
        if not (self.training or self.sample_at_eval):
            return positions
        if positions.is_floating_point():
            raise ValueError("positions must be integers to be randomized, got a float tensor")
        positions = check_positions(positions)  # int64: a uint8 index would read as a mask
        if positions.is_meta or not positions.numel():  # no values to sample from
            return positions
        n = int(positions.max()) + 1
        if n > self.sample_len:
            raise ValueError(
                f"positions go up to {n - 1}, past sample_len={self.sample_len}: raise sample_len"
            )
        device = positions.device
        if positions.dim() == 1:
            subset = torch.randperm(self.sample_len, device=device)[:n].sort().values
            return subset[positions]
        # one subset per row, of the row's own size max(p_row) + 1: the first n_row of a random
        # order are a uniform n_row-subset (the rest pushed past it by the sort, never indexed)
        noise = torch.rand(positions.shape[0], self.sample_len, device=device)
        order = noise.argsort(dim=-1)[:, :n]  # [B, n]
        own = torch.arange(n, device=device) <= positions.amax(dim=-1, keepdim=True)  # [B, n]
        subset = order.masked_fill(~own, self.sample_len).sort(dim=-1).values
        return subset.gather(-1, positions.long())


def _forwarder(hook: str):
    def method(self, *args, **kwargs):
        return getattr(self.inner, hook)(*args, **kwargs)

    method.__name__ = method.__qualname__ = hook
    method.__doc__ = f"The inner encoding's {hook}."
    return method


for _hook in HOOKS:
    if _hook not in Randomized.__dict__:
        setattr(Randomized, _hook, _forwarder(_hook))

ENCODINGS: dict[str, type[PositionalEncoding]] = {"randomized": Randomized}
