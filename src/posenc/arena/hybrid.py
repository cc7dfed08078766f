"""Hybrid per-layer schedules in the arena: labels whose layers differ (TransformerLM's
per-layer `encoding` list and `window`).

    rnope-swa   RoPE with a sliding window in three layers of four, NoPE with full (global)
                attention in the fourth (Yang et al. 2025, "Rope to Nope and Back Again";
                Cohere's Command A: window 4096, 3:1; Llama 4's iRoPE without the window).

The last layer is always global (lm's two layers: one local, one global). The window is
shorter than the training sequences, so already in training the global NoPE layer must learn
the long-range retrieval, the division of labour the paper describes.
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
