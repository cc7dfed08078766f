"""Hybrid per-layer schedules (TransformerLM's per-layer `encoding` and `window`): rnope-swa is
RoPE with a sliding window in three layers of four, NoPE with global attention in the fourth and
the last (Yang et al. 2025; Command A's 3:1). The window is shorter than training sequences, so
the global NoPE layer learns the long-range retrieval already in training.
"""

from __future__ import annotations

HYBRIDS = ("rnope-swa",)
GLOBAL_EVERY = 4  # one global NoPE layer per four (3:1, Command A / Llama 4)
WINDOW_FRACTION = 0.5  # the local layers' window: half the training length in tokens


def hybrid_kwargs(name: str, depth: int, train_tokens: int) -> dict:
    """TransformerLM's `encoding` schedule and per-layer `window` for a hybrid label."""
    if name not in HYBRIDS:
        raise ValueError(f"unknown hybrid {name!r}; known: {', '.join(HYBRIDS)}")
    window = max(1, int(WINDOW_FRACTION * train_tokens))
    is_global = [(i + 1) % GLOBAL_EVERY == 0 or i == depth - 1 for i in range(depth)]
    return {
        "encoding": ["nope" if g else "rope" for g in is_global],
        "window": [None if g else window for g in is_global],
    }
