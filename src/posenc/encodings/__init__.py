"""Every encoding, one module per family, and the registry: one plain dict, name -> class.

absolute   sinusoidal, scaled_sinusoidal, learned, onehot, index, phase, 2-D/3-D, nope
           learned_window (absolute_window: seed 001's formula)
rotary     rope (+ scalings), xpos, rope_2d, mrope (rotary_mrope), rope_nd (rotary_axial),
           pope (rotary_polar), fope (rotary_fourier), liere (rotary_lie),
           comrope (rotary_commuting), rope_pp (rotary_imaginary)
bias       alibi, t5, kerple, fire, sandwich
relative   shaw, transformer_xl, deberta, cope
content    fox, dape, stickbreaking (attention that depends on content; positions only order)
wrappers   randomized (wraps any of the above)
"""

from __future__ import annotations

import inspect

from posenc.base import PositionalEncoding, one_directional
from posenc.checks import lookup
from posenc.encodings import wrappers

ENCODINGS: dict[str, type[PositionalEncoding]] = {**wrappers.WRAPPABLE, **wrappers.ENCODINGS}


def resolve(name: str) -> type[PositionalEncoding]:
    """The encoding class registered under `name`; ValueError with the closest names if none."""
    return lookup("encoding", name, ENCODINGS)


def build_for(name: str, *, causal: bool, **kwargs) -> PositionalEncoding:
    """build() for a decoder (causal) or an encoder: an encoder gets the bidirectional form
    where the encoding has one (ALiBi, T5), and a ValueError where it has none (xPos, CoPE)."""
    if not causal:
        inner = kwargs.get("encoding") if resolve(name) is wrappers.Randomized else None
        if isinstance(inner, str):  # the wrapped encoding gets its encoder form
            takes = "bidirectional" in inspect.signature(resolve(inner)).parameters
            if takes:
                kwargs["encoding_kwargs"] = {"bidirectional": True,
                                             **(kwargs.get("encoding_kwargs") or {})}  # fmt: skip
        elif "bidirectional" in inspect.signature(resolve(name)).parameters:
            kwargs.setdefault("bidirectional", True)
    enc = build(name, **kwargs)
    if not causal and not enc.bidirectional:
        raise ValueError(one_directional(enc))
    return enc


def build(name: str, **kwargs) -> PositionalEncoding:
    """Build an encoding by registry name. The standard keywords (dim, heads, head_dim,
    max_len, train_len) are accepted by every encoding and ignored where unused."""
    return resolve(name)(**kwargs)
