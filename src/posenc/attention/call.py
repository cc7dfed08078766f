"""One attention call, validated and normalized once (posenc.attention.prepare), and the base
class of every backend: `can_run(call) -> None | reason`, `picks(call)`, `run(call) -> out`."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from posenc.base import PositionalEncoding


@dataclass
class Call:
    """What every backend reads: q, k rotated (last dim Dh, or 2 Dh for PoPE), v [B, Hkv, Tk, Dh];
    positions validated, integers int64; mask 4-D bool or None; default_pos: attention's arange."""

    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    encoding: PositionalEncoding | None
    q_pos: torch.Tensor | None
    k_pos: torch.Tensor | None
    causal: bool
    mask: torch.Tensor | None
    scale: float
    default_pos: bool
    block_size: int | None = None
    memo: dict = field(default_factory=dict)  # work a backend's can_run did for its run

    @property
    def position_dims(self) -> int:
        return self.encoding.position_dims if self.encoding is not None else 1

    @property
    def provides(self) -> frozenset[str]:
        """What the encoding declares (posenc.base.CAPABILITIES); nothing without one."""
        return self.encoding.provides if self.encoding is not None else frozenset()

    @property
    def has_bias(self) -> bool:
        return "bias" in self.provides

    @property
    def score_hooks(self) -> tuple[str, ...]:
        return self.encoding.score_hooks if self.encoding is not None else ()

    @property
    def name(self) -> str:
        return type(self.encoding).__name__ if self.encoding is not None else "no encoding"


class Backend:
    """A backend of posenc.attention; `auto` runs the first of AUTO_ORDER that picks and can run.
    By default it runs every call and `auto` picks it wherever it can run."""

    def can_run(self, call: Call) -> str | None:
        """None where run(call) works, else why not (the ValueError an explicit choice gets)."""
        return None

    def picks(self, call: Call) -> bool:
        """Whether `auto` would take this backend for the call, when it can run it."""
        return True

    def run(self, call: Call) -> torch.Tensor:
        """[B, H, Tq, Dh] in q's dtype."""
        raise NotImplementedError


class BackendRefused(ValueError, NotImplementedError):
    """An explicit backend that cannot run the call (ValueError; NotImplementedError for flex)."""
