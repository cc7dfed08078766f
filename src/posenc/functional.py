"""Pure tensor math of positional encodings: no state, no modules.

Every function computes angles and tables in float32 (float64 where large positions need it)
and casts to the caller's dtype at the end. Shapes follow the legend in posenc.base.
"""

from __future__ import annotations

import math

import torch

# ============================================================================ absolute tables
# (sinusoidal_table and the 2-D / 3-D tables)

# ============================================================================ rotary
# (rope_inv_freq, apply_rope and their helpers; scaling variants live in posenc.rope_scaling)

# ============================================================================ biases
# (alibi_slopes, t5_bucket)

# ============================================================================ relative
# (deberta_bucket, rel_shift)
