"""RoPE scaling variants (context extension), one plain dict: rope_type -> function.

`fn(dim, base, params, seq_len) -> (inv_freq [dim // 2] float32, attention_factor)`, params a
Hugging Face `rope_scaling` / `rope_parameters` dict (config.max_position_embeddings is its key
`max_position_embeddings`). The numbers match transformers' rope init functions (v5), defaults
and quirks included; `ntk` is not in transformers. `dim` is the rotary dim R, the head dim for
`proportional`.
"""

from __future__ import annotations

import difflib
import math
import warnings
from collections.abc import Callable

import torch

from posenc.checks import check_float
from posenc.functional.absolute import sinusoidal_inv_freq


def default(dim: int, base: float, params: dict, seq_len: int | None = None):
    """Su et al.: inv_freq_i = 1 / base^(2i / dim)."""
    return sinusoidal_inv_freq(dim, base), 1.0


def linear(dim: int, base: float, params: dict, seq_len: int | None = None):
    """Position interpolation (Chen et al. 2023): positions / factor, i.e. inv_freq / factor."""
    return sinusoidal_inv_freq(dim, base) / _need(params, "factor", "linear"), 1.0


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
# every key a scaling dict may have: the numeric ones (BOUNDS) and these
KNOWN_KEYS = {*BOUNDS, "rope_type", "type", "truncate", "short_factor", "long_factor"}


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


def _need(params: dict, key: str, rope_type: str):
    """params[key], or a ValueError naming the key and the rope_type."""
    value = params.get(key)
    if value is None:
        raise ValueError(
            f"rope scaling rope_type={rope_type!r} needs the key {key!r} "
            f"(got keys: {', '.join(sorted(params)) or 'none'})"
        )
    return value


def _original_len(params: dict, rope_type: str) -> int:
    """original_max_position_embeddings, falling back to max_position_embeddings."""
    for key in ("original_max_position_embeddings", "max_position_embeddings"):
        if params.get(key) is not None:
            return params[key]
    raise ValueError(
        f"rope scaling rope_type={rope_type!r} needs the key 'original_max_position_embeddings' "
        f"(or 'max_position_embeddings'), the pre-training context length; the rope encoding "
        f"takes it as train_len= (got keys: {', '.join(sorted(params)) or 'none'})"
    )


def _exponents(dim: int) -> torch.Tensor:
    """2i / dim for i < dim / 2, float32 [dim // 2]."""
    return torch.arange(0, dim, 2, dtype=torch.int64).float() / dim


def _yarn_mscale(scale: float, mscale: float = 1.0) -> float:
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0


def yarn(dim: int, base: float, params: dict, seq_len: int | None = None):
    """YaRN (Peng et al. 2023): NTK-by-parts frequency ramp plus an attention temperature.

    Pairs rotating more than beta_fast times over the original length keep their frequency,
    those rotating fewer than beta_slow times are interpolated by `factor`, a linear ramp in
    between (its ends floored/ceiled when `truncate`, the default). attention_factor:
    `attention_factor` if given, else mscale(factor, mscale) / mscale(factor, mscale_all_dim)
    when both are set, else 0.1 ln(factor) + 1.
    """
    original = _original_len(params, "yarn")
    factor = params.get("factor")
    if factor is None:  # DeepSeek-style configs: the ratio of the two lengths, both given
        both = ("original_max_position_embeddings", "max_position_embeddings")
        if any(params.get(key) is None for key in both):
            _need(params, "factor", "yarn")
        factor = params["max_position_embeddings"] / original
    attention_factor = params.get("attention_factor")
    mscale, mscale_all_dim = params.get("mscale"), params.get("mscale_all_dim")
    if attention_factor is None:
        if mscale and mscale_all_dim:
            attention_factor = _yarn_mscale(factor, mscale) / _yarn_mscale(factor, mscale_all_dim)
        else:
            attention_factor = _yarn_mscale(factor)
    beta_fast = params.get("beta_fast") or 32
    beta_slow = params.get("beta_slow") or 1

    def correction_dim(rotations: float) -> float:  # the dim whose pair turns `rotations` times
        return dim * math.log(original / (rotations * 2 * math.pi)) / (2 * math.log(base))

    low, high = correction_dim(beta_fast), correction_dim(beta_slow)
    if params.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001  # avoid dividing by zero
    ramp = ((torch.arange(dim // 2, dtype=torch.float32) - low) / (high - low)).clamp(0, 1)
    extrapolation = 1 - ramp  # 1: keep the original frequency, 0: interpolate
    pos_freqs = base ** _exponents(dim)
    interpolated, kept = 1.0 / (factor * pos_freqs), 1.0 / pos_freqs
    return interpolated * (1 - extrapolation) + kept * extrapolation, float(attention_factor)


def dynamic_yarn(dim: int, base: float, params: dict, seq_len: int | None = None):
    """Dynamic-YaRN (Peng et al. 2023, sec. 3.3): YaRN with factor s = max(1, L / L0) at each
    call, L = seq_len; up to the original length L0 the frequencies are the unscaled ones. Not in
    transformers; `factor` is not read (the length sets it)."""
    original = _original_len(params, "dynamic_yarn")
    scale = 1.0 if seq_len is None else max(1.0, seq_len / original)
    if scale == 1.0:
        return sinusoidal_inv_freq(dim, base), 1.0
    return yarn(dim, base, {**params, "factor": scale}, seq_len)


def llama3(dim: int, base: float, params: dict, seq_len: int | None = None):
    """Llama 3.1: wavelengths above L0/low_freq_factor are divided by `factor`, below
    L0/high_freq_factor kept, smoothly interpolated in between (no band when the two factors
    are equal, where transformers would divide 0 by 0 at the boundary)."""
    factor = _need(params, "factor", "llama3")
    low_freq_factor = _need(params, "low_freq_factor", "llama3")
    high_freq_factor = _need(params, "high_freq_factor", "llama3")
    original = _original_len(params, "llama3")
    inv_freq = sinusoidal_inv_freq(dim, base)
    low_freq_wavelen = original / low_freq_factor
    high_freq_wavelen = original / high_freq_factor
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    if high_freq_factor == low_freq_factor:  # no band to smooth over (Llama 4 Scout's 1, 1)
        return scaled, 1.0
    smooth = (original / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = (wavelen >= high_freq_wavelen) & (wavelen <= low_freq_wavelen)
    return torch.where(medium, smoothed, scaled), 1.0


def longrope(dim: int, base: float, params: dict, seq_len: int | None = None):
    """LongRoPE / Phi-3: per-pair rescale factors, `long_factor` when seq_len > L0, else
    `short_factor`. attention_factor: given, else sqrt(1 + ln(factor) / ln(L0)) (1 if factor <= 1),
    where factor defaults to max_position_embeddings / L0; Phi-3.5-MoE's `short_mscale` /
    `long_mscale`, where given, replace it (short up to L0, long past it)."""
    short_factor = _need(params, "short_factor", "longrope")
    long_factor = _need(params, "long_factor", "longrope")
    original = _original_len(params, "longrope")
    for key, value in (("short_factor", short_factor), ("long_factor", long_factor)):
        if len(value) != dim // 2:
            raise ValueError(
                f"rope scaling rope_type='longrope': {key} must have dim // 2 = {dim // 2} "
                f"entries, got {len(value)}"
            )
    factor = params.get("factor")
    if factor is None:
        if params.get("max_position_embeddings") is None:
            raise ValueError(
                "rope scaling rope_type='longrope' needs the key 'factor' "
                "(or 'max_position_embeddings', from which factor = max / original length)"
            )
        factor = params["max_position_embeddings"] / original
    attention_factor = params.get("attention_factor")
    if attention_factor is None:
        attention_factor = (
            1.0 if factor <= 1.0 else math.sqrt(1 + math.log(factor) / math.log(original))
        )
    long = bool(seq_len and seq_len > original)
    mscale = params.get("long_mscale" if long else "short_mscale")  # Phi-3.5-MoE (Phimoe)
    if mscale is not None:
        attention_factor = mscale
    ext = torch.tensor(long_factor if long else short_factor, dtype=torch.float32)
    return 1.0 / (ext * base ** _exponents(dim)), float(attention_factor)


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
