"""Helpers the seeds' checks share: posenc's sinusoidal table in float64, the sinusoid as the
seeds write it, the shift residual of a dot product, running quoted code."""

from __future__ import annotations

import math

import torch
from torch import nn

from posenc import analysis
from posenc import functional as PF


def f4(x: float) -> str:
    return f"{x:.4f}"


def sinusoid(positions: torch.Tensor, dim: int) -> torch.Tensor:
    """posenc's sinusoidal table, float64 [T, dim]."""
    return PF.sinusoidal_table(positions.double(), dim).double()


def written_formula(positions: torch.Tensor, dim: int) -> torch.Tensor:
    """The sinusoid as the seeds write it, in float64: p(t, 2i) = sin(t / 10000^(2i/d)),
    p(t, 2i+1) = cos(t / 10000^(2i/d)), i = 0..floor(d/2) - 1: [T, 2 floor(d/2)]."""
    two_i = 2 * torch.arange(dim // 2, dtype=torch.float64)
    ang = positions.double()[:, None] / 10000.0 ** (two_i / dim)
    return torch.stack([ang.sin(), ang.cos()], -1).flatten(1)


def formula_error(positions: torch.Tensor, dim: int) -> float:
    """max |written_formula - posenc's sinusoidal table| (even dim)."""
    return float((written_formula(positions, dim) - sinusoid(positions, dim)).abs().max())


def dot_residual(pe: torch.Tensor) -> float:
    """Spread over t of <p_t, p_(t+k)> for each k (0: the dot product depends on k alone)."""
    return analysis.shift_residual((pe @ pe.T)[None])


def run_seed(code: str, **names) -> dict:
    """Execute a seed's snippet (quoted, fixed text) in a fresh namespace."""
    ns = {"torch": torch, "nn": nn, "math": math, **names}
    exec(compile(code, "<seed>", "exec"), ns)  # noqa: S102 - the seeds' own quoted code
    return ns


def seed_error(fn) -> str:
    """The first line of the error `fn()` raises, or "no error"."""
    try:
        fn()
    except Exception as err:  # noqa: BLE001 - reporting what the seed's code does
        return analysis.describe_error(err).splitlines()[0]
    return "no error"
