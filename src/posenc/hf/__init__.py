"""Hugging Face interop (optional: `pip install posenc[hf]` for patch; the rest needs nothing).

    from_config(config, layer_type=None, *, layer=None)   the encoding a transformers config
                                                          (or config.json dict) describes
    to_rope_parameters(encoding)                          its transformers v5 rope_parameters
    to_config(encoding)                                   rope_parameters + recorded extra keys
    patch(model, encoding=None, *, scaling=None)          a loaded causal LM takes its
                                                          positions from posenc, in place

posenc/__init__ does not import this package; import it as `posenc.hf`.
"""

from posenc.hf.config import from_config, to_config, to_rope_parameters
from posenc.hf.patch import PosencRotaryEmbedding, patch

__all__ = ["PosencRotaryEmbedding", "from_config", "patch", "to_config",
           "to_rope_parameters"]  # fmt: skip
