"""RoPE scaling variants (context extension), one plain dict: rope_type -> function.

Each function is `fn(dim, base, params, seq_len) -> (inv_freq [dim // 2] float32, attention_factor)`
where `params` is a Hugging Face `rope_scaling` / `rope_parameters` dict (a model's config.json
ports as it is) and `attention_factor` multiplies cos and sin. The numbers match transformers'
rope init functions (`transformers.modeling_rope_utils`, v5) for the same parameters, including
their defaults and quirks; `ntk` (static NTK-aware base change) is not in transformers.
`dim` is the rotary dim R; for `proportional` it is the whole head dim (p-RoPE rotates the whole
head, its last pairs at frequency 0). yarn, llama3 and longrope live in rope_scaling_long.

Where transformers reads `config.max_position_embeddings`, these functions read the key
`max_position_embeddings` from `params`; `original_max_position_embeddings` falls back to it the
way transformers' config standardization does.
"""

from __future__ import annotations

import difflib
import math
import warnings
from collections.abc import Callable

import torch

from posenc.checks import check_float
from posenc.functional.absolute import sinusoidal_inv_freq
from posenc.functional.rope_scaling_long import (
    _exponents,
    _need,
    _original_len,
    dynamic_yarn,
    llama3,
    longrope,
    yarn,
)

KNOWN_KEYS = {
    "rope_type",
    "type",
    "rope_theta",
    "partial_rotary_factor",
    "factor",
    "original_max_position_embeddings",
    "max_position_embeddings",
    "beta_fast",
    "beta_slow",
    "mscale",
    "mscale_all_dim",
    "attention_factor",
    "truncate",
    "low_freq_factor",
    "high_freq_factor",
    "short_factor",
    "long_factor",
    "short_mscale",
    "long_mscale",
}


def default(dim: int, base: float, params: dict, seq_len: int | None = None):
    """Su et al.: inv_freq_i = 1 / base^(2i / dim)."""
    return sinusoidal_inv_freq(dim, base), 1.0


def linear(dim: int, base: float, params: dict, seq_len: int | None = None):
    """Position interpolation (Chen et al. 2023): positions / factor, i.e. inv_freq / factor."""
    factor = _need(params, "factor", "linear")
    inv_freq = sinusoidal_inv_freq(dim, base)
    return inv_freq / factor, 1.0


def ntk(dim: int, base: float, params: dict, seq_len: int | None = None):
    """Static NTK-aware scaling (bloc97): base' = base * factor^(dim / (dim - 2))."""
    factor = _need(params, "factor", "ntk")
    base = base * factor ** (dim / (dim - 2))
    return sinusoidal_inv_freq(dim, base), 1.0


def dynamic(dim: int, base: float, params: dict, seq_len: int | None = None):
    """Dynamic NTK (emozilla): the NTK base change grows with the current length.

    base' = base * (factor * L / L0 - (factor - 1))^(dim / (dim - 2)) with L = max(seq_len, L0)
    (seq_len None means L0), so up to the original length L0 nothing changes.
    """
    factor = _need(params, "factor", "dynamic")
    original = _original_len(params, "dynamic")
    seq_len = original if seq_len is None else max(seq_len, original)
    base = base * ((factor * seq_len / original) - (factor - 1)) ** (dim / (dim - 2))
    return sinusoidal_inv_freq(dim, base), 1.0


def proportional(dim: int, base: float, params: dict, seq_len: int | None = None):
    """p-RoPE (Barbero et al. 2025, Gemma): frequencies 1 / base^(2i / dim) over the whole head
    dim `dim`, of which only the first int(partial_rotary_factor * dim // 2) pairs turn; the
    other pairs get frequency 0 (identity). All divided by `factor` (default 1)."""
    prf, factor = params.get("partial_rotary_factor"), params.get("factor")
    turning = int((1.0 if prf is None else prf) * dim // 2)  # transformers' rope_angles
    # pow over exactly the turning pairs: a longer tensor may round an entry differently
    inv_freq = torch.zeros(dim // 2)
    inv_freq[:turning] = 1.0 / (base ** _exponents(dim)[:turning])
    return inv_freq / (1.0 if factor is None else factor), 1.0


ROPE_SCALING: dict[str, Callable[..., tuple[torch.Tensor, float]]] = {
    "default": default,
    "linear": linear,
    "ntk": ntk,
    "dynamic": dynamic,
    "yarn": yarn,
    "dynamic_yarn": dynamic_yarn,
    "llama3": llama3,
    "longrope": longrope,
    "proportional": proportional,
}


# numeric keys: the bound each must pass (gt: >, ge: >=); None values mean absent (as in HF)
BOUNDS = {
    "rope_theta": dict(gt=1.0), "factor": dict(gt=0.0), "beta_fast": dict(gt=0.0),
    "beta_slow": dict(gt=0.0), "mscale": dict(gt=0.0), "mscale_all_dim": dict(gt=0.0),
    "short_mscale": dict(gt=0.0), "long_mscale": dict(gt=0.0),
    "attention_factor": dict(gt=0.0), "low_freq_factor": dict(gt=0.0),
    "high_freq_factor": dict(gt=0.0), "partial_rotary_factor": dict(gt=0.0),
    "original_max_position_embeddings": dict(ge=1), "max_position_embeddings": dict(ge=1),
}  # fmt: skip
NEEDS_FACTOR_AT_LEAST_1 = ("ntk", "dynamic", "yarn", "llama3", "longrope")


def check_values(params: dict, rope_type: str) -> None:
    """TypeError / ValueError naming the key, the value and the allowed range for every numeric
    key out of range, and for inconsistent pairs (beta_fast <= beta_slow, ...)."""
    where = f"rope scaling rope_type={rope_type!r}"
    for key, bound in BOUNDS.items():
        if params.get(key) is not None:
            value = check_float(f"{where}: {key}", params[key], **bound)
            if "ge" in bound and value != int(value):
                raise ValueError(f"{where}: {key} must be a whole number, got {value!r}")
    if params.get("partial_rotary_factor", 0) > 1:
        raise ValueError(f"{where}: partial_rotary_factor must be in (0, 1], "
                         f"got {params['partial_rotary_factor']!r}")  # fmt: skip
    factor = params.get("factor")
    if factor is not None and factor < 1 and rope_type in NEEDS_FACTOR_AT_LEAST_1:
        raise ValueError(f"{where}: factor must be >= 1 (it extends the context), got {factor!r}")
    fast, slow = params.get("beta_fast"), params.get("beta_slow")
    if fast is not None and slow is not None and not fast > slow:
        raise ValueError(f"{where}: beta_fast must be > beta_slow, got {fast!r} <= {slow!r}")
    low_f, high_f = params.get("low_freq_factor"), params.get("high_freq_factor")
    if low_f is not None and high_f is not None and not high_f >= low_f:
        raise ValueError(f"{where}: high_freq_factor must be >= low_freq_factor, "
                         f"got {high_f!r} < {low_f!r}")  # fmt: skip
    for key in ("short_factor", "long_factor"):
        value = params.get(key)
        if value is None:
            continue
        if not isinstance(value, list | tuple) or not all(
            isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) and x > 0
            for x in value
        ):
            raise ValueError(f"{where}: {key} must be a list of finite numbers > 0, got {value!r}")


def rope_type_of(params: dict | None) -> str:
    """The rope_type of a scaling dict (legacy key `type` accepted); ValueError if unknown."""
    if not params:
        return "default"
    if not isinstance(params, dict):
        raise TypeError(
            f"rope scaling must be a dict (HF rope_scaling), got {type(params).__name__}"
        )
    rope_type = params.get("rope_type", params.get("type", "default"))
    if rope_type not in ROPE_SCALING:
        close = difflib.get_close_matches(
            str(rope_type), list(ROPE_SCALING), n=len(ROPE_SCALING), cutoff=0
        )
        raise ValueError(
            f"unknown rope_type {rope_type!r}; known rope_types (closest first): {', '.join(close)}"
        )
    check_values(params, rope_type)
    unknown = set(params) - KNOWN_KEYS
    if unknown:
        warnings.warn(
            f"rope scaling: ignoring unrecognized keys {sorted(unknown)} "
            f"for rope_type={rope_type!r}",
            stacklevel=3,
        )
    return rope_type
