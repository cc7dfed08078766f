"""Pure tensor math of positional encodings, one module per family: no state, no modules.

Every function computes in float32 (float64 for float64 inputs) and casts to the caller's
dtype at the end; angles go through absolute.position_angles, accurate at any position.
The rarer schemes' math is imported as a module: rotary_learned (rope_nd's axial frequencies,
PoPE, FoPE, LieRE, ComRoPE), grape, video.
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
