"""Hugging Face interop: from_config, to_rope_parameters, to_config (posenc.hf.config) and
patch, PosencRotaryEmbedding (posenc.hf.patch; `pip install posenc[hf]`). Not imported by
posenc; the names load on first use (PEP 562), so `posenc golden --help` imports no torch.
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
