"""Helpers the seeds' checks share: posenc's sinusoidal table in float64, running quoted code."""

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
