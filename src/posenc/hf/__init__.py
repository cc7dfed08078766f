"""Hugging Face interop (optional: `pip install posenc[hf]` for patch; the rest needs nothing).

    from_config(config, layer_type=None, *, layer=None)   the encoding a transformers config
                                                          (or config.json dict) describes
    to_rope_parameters(encoding)                          its transformers v5 rope_parameters
    to_config(encoding)                                   rope_parameters + recorded extra keys
    patch(model, encoding=None, *, scaling=None)          a loaded causal LM takes its
                                                          positions from posenc, in place

posenc/__init__ does not import this package; import it as `posenc.hf`. The names are imported
on first use (PEP 562), so that `posenc golden --help` imports no torch.
"""

from __future__ import annotations

from posenc.lazy import lazy_exports

# public name -> the module that defines it
_PUBLIC = {
    "PosencRotaryEmbedding": "posenc.hf.patch",
    "from_config": "posenc.hf.config",
    "patch": "posenc.hf.patch",
    "to_config": "posenc.hf.config",
    "to_rope_parameters": "posenc.hf.config",
}
__all__ = lazy_exports(__name__, _PUBLIC, over_submodules=("patch",))
