"""Lazy exports (PEP 562): a package's public names import their submodule on first use, so
importing the package, and a command's --help, imports no torch. Stdlib only."""

from __future__ import annotations

import importlib
import sys
import types


def lazy_exports(package: str, public: dict[str, str], *, over_submodules=()) -> list[str]:
    """Make `package` import each name of `public` (name -> its module) on first use and list
    them in dir(); a name in `over_submodules` stays the function once its namesake submodule is
    imported. Returns the sorted names (its __all__)."""
    module = sys.modules[package]

    def __getattr__(name: str):
        if name not in public:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(public[name]), name)
        setattr(module, name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(module)) | set(public))

    def function(name: str) -> property:
        return property(lambda self: getattr(importlib.import_module(public[name]), name),
                        lambda self, submodule: None)  # fmt: skip

    module.__getattr__, module.__dir__ = __getattr__, __dir__
    if over_submodules:
        props = {name: function(name) for name in over_submodules}
        module.__class__ = type(f"{package}.module", (types.ModuleType,), props)
    return sorted(public)
