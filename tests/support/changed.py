"""assert_changed: a perturbation moved an output by far more than rounding."""

import torch


def assert_changed(a: torch.Tensor, b: torch.Tensor, by: float = 1e-5) -> None:
    """a and b differ somewhere by more than `by`: 100× float32 rounding of numbers near 1
    (~1e-7), so a change the math makes invariant (a shift under softmax, a scale under a norm)
    cannot pass by rounding noise, as `not torch.allclose` lets it."""
    diff = (a - b).abs().max().item()
    assert diff > by, f"changed by {diff:.3g} only (<= {by:g}): rounding, or an invariance"
