"""Every encoding, one module per family, and the registry: one plain dict, name -> class.

absolute: sinusoidal, scaled_sinusoidal, learned, onehot, index, phase, 2-D/3-D, nope,
learned_window. rotary: rope (+ scalings), xpos, rope_2d; mrope, videorope, hope, vrope
(rotary_mrope); rope_nd (rotary_axial), pope (rotary_polar), fope (rotary_fourier), liere,
comrope (rotary_lie), rope_heads, rope_pp (rotary_heads). bias: alibi, t5, kerple, fire,
sandwich, dynamic_bias. relative: shaw, transformer_xl, deberta, cope. content: fox, dape,
stickbreaking, cable, path, distance_basis (bias_dynamic). grape: grape_m, grape_a.
wrappers: randomized (wraps any of the above).
"""

from __future__ import annotations

import inspect

from posenc.base import MODEL_KWARGS, PositionalEncoding, model_kwargs, one_directional, takes
from posenc.checks import lookup
from posenc.encodings import (
    absolute,
    bias,
    bias_dynamic,
    content,
    grape,
    relative,
    rotary,
    rotary_axial,
    rotary_fourier,
    rotary_heads,
    rotary_lie,
    rotary_mrope,
    rotary_polar,
    wrappers,
)

# The registry: every position scheme, then the wrappers (randomized wraps any scheme).
ENCODINGS: dict[str, type[PositionalEncoding]] = {
    **absolute.ENCODINGS,
    **rotary.ENCODINGS,
    **rotary_mrope.ENCODINGS,
    **rotary_axial.ENCODINGS,
    **rotary_polar.ENCODINGS,
    **rotary_fourier.ENCODINGS,
    **rotary_lie.ENCODINGS,
    **rotary_heads.ENCODINGS,
    **bias.ENCODINGS,
    **bias_dynamic.ENCODINGS,
    **relative.ENCODINGS,
    **content.ENCODINGS,
    **grape.ENCODINGS,
}
wrappers.WRAPPABLE.update(ENCODINGS)
ENCODINGS.update(wrappers.ENCODINGS)


def resolve(name: str) -> type[PositionalEncoding]:
    """The encoding class registered under `name`; ValueError with the closest names if none."""
    return lookup("encoding", name, ENCODINGS)


def build_for(name: str, *, causal: bool, **kwargs) -> PositionalEncoding:
    """build() for a decoder (causal) or an encoder: an encoder gets the bidirectional form
    where the encoding has one (ALiBi, T5), and a ValueError where it has none (xPos, CoPE)."""
    if not causal:
        inner = kwargs.get("encoding") if resolve(name) is wrappers.Randomized else None
        if isinstance(inner, str):  # the wrapped encoding gets its encoder form
            if "bidirectional" in inspect.signature(resolve(inner)).parameters:
                kwargs["encoding_kwargs"] = {"bidirectional": True,
                                             **(kwargs.get("encoding_kwargs") or {})}  # fmt: skip
        elif "bidirectional" in inspect.signature(resolve(name)).parameters:
            kwargs.setdefault("bidirectional", True)
    enc = build(name, **kwargs)
    if not causal and not enc.bidirectional:
        raise ValueError(one_directional(enc))
    return enc


def build(name: str, **kwargs) -> PositionalEncoding:
    """Build an encoding by registry name. The standard keywords (base.MODEL_KWARGS: dim,
    heads, kv_heads, head_dim, max_len, train_len) reach only the encodings whose constructor
    takes them and are dropped for the others, so a model's shape can be passed to any; any
    other keyword the encoding does not take is a TypeError naming it."""
    cls = resolve(name)
    names = takes(cls)
    unknown = [k for k in kwargs if names is not None and k not in names and k not in MODEL_KWARGS]
    if unknown:
        options = [n for n in inspect.signature(cls).parameters if n not in MODEL_KWARGS]
        raise TypeError(
            f"{name} takes no keyword {', '.join(map(repr, unknown))}; its options: "
            f"{', '.join(options) or 'none'} (and the standard keywords it uses: "
            f"{', '.join(n for n in MODEL_KWARGS if n in names) or 'none'})"
        )
    return cls(**model_kwargs(cls, kwargs))
