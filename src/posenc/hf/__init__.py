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

import importlib
import sys
import types

# public name -> the module that defines it
_PUBLIC = {
    "PosencRotaryEmbedding": "posenc.hf.patch",
    "from_config": "posenc.hf.config",
    "patch": "posenc.hf.patch",
    "to_config": "posenc.hf.config",
    "to_rope_parameters": "posenc.hf.config",
}
__all__ = sorted(_PUBLIC)


def __getattr__(name: str):
    if name not in _PUBLIC:
        raise AttributeError(f"module 'posenc.hf' has no attribute {name!r}")
    value = getattr(importlib.import_module(_PUBLIC[name]), name)
    globals()[name] = value
    return value


class _Hf(types.ModuleType):
    """`posenc.hf.patch` is the function, even once the submodule of that name is imported
    (the import system binds a submodule to its parent's attribute: ignored here)."""

    @property
    def patch(self):
        return importlib.import_module("posenc.hf.patch").patch

    @patch.setter
    def patch(self, submodule) -> None:
        pass


sys.modules[__name__].__class__ = _Hf
