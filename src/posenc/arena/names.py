"""The arena's names, torch-free: what `posenc arena --help` lists (the modules that use them
import them from here)."""

TASK_NAMES = ("copy", "reverse", "sort", "addition", "passkey", "lm")  # posenc.arena.tasks
DEFAULT_TASKS = ("copy", "reverse", "sort", "addition", "lm")
# zero-shot rope scalings: labels "rope+ntk", ... (posenc.arena.cells.rope_scaling)
VARIANTS = ("linear", "ntk", "dynamic", "yarn", "llama3", "longrope", "proportional")
BACKBONES = ("posenc", "hf-llama", "lstm")  # posenc.arena.backbones
