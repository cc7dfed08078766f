"""The scalings' names, torch-free: what `posenc stretch --help` lists (posenc.stretch.scalings
and the modules that use them import them from here)."""

SCALINGS = ("none", "linear", "ntk", "dynamic", "yarn", "dynamic_yarn", "llama3", "longrope",
            "proportional")  # fmt: skip
QUICK = ("none", "yarn", "dynamic")
FACTOR = ("linear", "ntk", "yarn", "llama3", "longrope")  # static: factor = longest / context
