"""posenc: positional encodings for Transformers, behind one interface."""

from __future__ import annotations

from posenc.attention import attention
from posenc.base import HOOKS, PositionalEncoding
from posenc.checks import check_positions, closest_names
from posenc.encodings import ENCODINGS, build, resolve
from posenc.model import TransformerLM

__version__ = "0.1.0"

__all__ = [
    "ENCODINGS",
    "HOOKS",
    "PositionalEncoding",
    "TransformerLM",
    "attention",
    "build",
    "check_positions",
    "closest_names",
    "resolve",
]
