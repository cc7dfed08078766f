"""Pure tensor math of positional encodings, one module per family: no state, no modules.

Every function computes in float32 (float64 for float64 inputs) and casts to the caller's
dtype at the end; angles go through absolute.position_angles, accurate at any position.
Shapes follow the legend in posenc.base.

    absolute      sinusoidal_table (+ 2-D / 3-D), sinusoidal_inv_freq, position_angles
    rotary        rope_inv_freq, rope_cos_sin, apply_rope (the one RoPE function: positions or
                  cos/sin, in place or out=, both layouts, partial rotary, engines)
    mrope         mrope_axes, mrope_angles (multimodal RoPE), mrope_positions (Qwen2-VL ... GLM-4V),
                  omni_positions (Qwen2.5-Omni, Qwen3-Omni)
    rope_scaling  ROPE_SCALING: rope_type -> fn(dim, base, params, seq_len) -> (inv_freq, factor)
    rotary_learned  axial frequencies (rope_nd), PoPE, FoPE, LieRE (import the module)
    bias          alibi_slopes, t5_bucket, sandwich_curve, relu_mlp_pieces (FIRE's MLP)
    relative      deberta_bucket, rel_shift, relative_sinusoid
    content       forget_bias (FoX), stick_breaking, dape_logits, run_ends (packed documents)
    path          path_scores, householder, short_conv (PaTH; import the module)
"""

from posenc.functional.absolute import (
    document_last,
    position_angles,
    sinusoidal_inv_freq,
    sinusoidal_table,
    sinusoidal_table_2d,
    sinusoidal_table_3d,
)
from posenc.functional.bias import (
    alibi_slopes,
    check_t5_buckets,
    relu_mlp_pieces,
    sandwich_curve,
    t5_bucket,
)
from posenc.functional.content import dape_logits, forget_bias, run_ends, stick_breaking
from posenc.functional.mrope import mrope_angles, mrope_axes, mrope_positions, omni_positions
from posenc.functional.relative import deberta_bucket, rel_shift, relative_sinusoid
from posenc.functional.rope_scaling import ROPE_SCALING
from posenc.functional.rotary import (
    ROPE_LAYOUTS,
    apply_rope,
    rope_align,
    rope_cos_sin,
    rope_inv_freq,
)

__all__ = ["ROPE_LAYOUTS", "ROPE_SCALING", "alibi_slopes", "apply_rope", "check_t5_buckets",
           "dape_logits", "deberta_bucket", "document_last", "forget_bias", "mrope_angles",
           "mrope_axes", "mrope_positions", "omni_positions", "position_angles", "rel_shift",
           "relu_mlp_pieces", "relative_sinusoid", "rope_align", "rope_cos_sin", "rope_inv_freq",
           "run_ends", "sandwich_curve", "stick_breaking", "sinusoidal_inv_freq",
           "sinusoidal_table", "sinusoidal_table_2d", "sinusoidal_table_3d",
           "t5_bucket"]  # fmt: skip
