"""The one set of validators: wrong types raise TypeError, wrong values ValueError, each naming
the parameter and what is allowed. Plus the positions helpers every family shares.
"""

from __future__ import annotations

import difflib
import functools
import math

import torch


def check_int(name: str, value, *, low: int | None = None, even: bool = False) -> int:
    """value as an int >= `low` (and even if `even`); bool is not an int here."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    if even and (value % 2 or (low is not None and value < low)):
        raise ValueError(f"{name} must be an even int >= {low}, got {value}")
    if low is not None and value < low:
        raise ValueError(f"{name} must be >= {low}, got {value}")
    return value


def check_float(name: str, value, *, gt: float | None = None, ge: float | None = None) -> float:
    """value as a finite float with value > gt / >= ge; bool is not a number here."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{name} must be a number, got {type(value).__name__} {value!r}")
    value = float(value)
    bad = not math.isfinite(value) or (gt is not None and not value > gt)
    if bad or (ge is not None and not value >= ge):
        bound = f" > {gt}" if gt is not None else f" >= {ge}" if ge is not None else ""
        raise ValueError(f"{name} must be a finite number{bound}, got {value!r}")
    return value


def check_bool(name: str, value) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be a bool, got {type(value).__name__} {value!r}")
    return value


def check_choice(name: str, value, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(choices)}; got {value!r}")
    return value


def check_tensor(name: str, value) -> torch.Tensor:
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
    return value


def closest_names(name: str, choices, n: int = 3) -> list[str]:
    """The closest names to `name` among `choices` (for "did you mean" errors)."""
    return difflib.get_close_matches(name, list(choices), n=n, cutoff=0.4)


def lookup(kind: str, name: str, table: dict):
    """table[name] of a registry of `kind` (lowercase, '-' read as '_'); else ValueError with the
    closest names."""
    if not isinstance(name, str):
        raise TypeError(f"{kind} name must be a str, got {type(name).__name__}")
    key = name.strip().lower().replace("-", "_")
    if key in table:
        return table[key]
    close = closest_names(key, table)
    hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    known = ", ".join(sorted(table))
    raise ValueError(f"unknown {kind} {name!r}{hint} Known {kind}s: {known}")


def check_max_len(max_len) -> int | None:
    """max_len (the hard limit on positions) as an int >= 1; None: no limit."""
    return None if max_len is None else check_int("max_len", max_len, low=1)


# --------------------------------------------------------------------------- positions


def outside_graph(fn):
    """Decorator: under torch.compile, fn runs as torch.compiler.disable(fn) (a graph break),
    made only once compiling: `import posenc` does not import torch._dynamo."""

    disabled = []  # torch.compiler.disable(fn), made at the first compiled call

    @functools.wraps(fn)
    def run(*args, **kwargs):
        if torch.compiler.is_compiling():
            if not disabled:
                disabled.append(torch.compiler.disable(fn))
            return disabled[0](*args, **kwargs)
        return fn(*args, **kwargs)

    return run


@outside_graph  # one host sync; under torch.compile a graph break, the same errors
def _check_position_values(
    positions: torch.Tensor, name: str, integer: bool, max_len, signed: bool = False
) -> None:
    if positions.is_floating_point() and not torch.isfinite(positions).all():
        raise ValueError(f"{name} must be finite, got NaN or infinite values")
    if positions.is_floating_point() and integer and not torch.equal(positions, positions.round()):
        raise ValueError(
            f"{name} must be integers for this encoding (a table or buckets index them); "
            "got non-integer float values"
        )
    out = positions < 0 if not signed else torch.zeros_like(positions, dtype=torch.bool)
    if max_len is not None:
        out = out | (positions >= max_len)
    if not out.any():  # one host sync for the whole check; the values only for the message
        return
    low = positions.min().item()
    if low < 0 and not signed:
        raise ValueError(f"{name} must be >= 0, got a minimum of {low}")
    check_reach(name, positions.max().item(), max_len)


def check_reach(name: str, top, max_len: int | None) -> None:
    """ValueError naming max_len where the largest position `top` is past it."""
    if max_len is not None and top >= max_len:
        raise ValueError(f"{name} go up to {top}, past this encoding's max_len={max_len}: "
                         f"allowed positions are 0..{max_len - 1}")  # fmt: skip


def check_positions(
    positions: torch.Tensor,
    *,
    name: str = "positions",
    integer: bool = False,
    max_len: int | None = None,
    position_dims: int = 1,
    signed: bool = False,
) -> torch.Tensor:
    """The one normalization point of positions: integers of any dtype as int64 (uint8 i - j
    would wrap), floats unchanged. TypeError for a non-tensor; ValueError for NaN / inf, < 0
    (unless `signed`: rope_nd's pixel grid), non-integers where `integer`, >= max_len, or a
    trailing axis not position_dims long. Meta tensors: shape only."""
    check_tensor(name, positions)
    if position_dims > 1 and (positions.dim() == 0 or positions.shape[-1] != position_dims):
        raise ValueError(
            f"{name} must have a trailing axis of size {position_dims} "
            f"(one component per axis), got shape {tuple(positions.shape)}"
        )
    if positions.dtype == torch.bool or positions.is_complex():
        raise TypeError(f"{name} must be an integer or float tensor, got {positions.dtype}")
    if not positions.is_floating_point() and positions.dtype != torch.long:
        positions = positions.long()  # before the checks too: int8 >= 128 would wrap
    if positions.numel() and not positions.is_meta:
        _check_position_values(positions, name, integer, max_len, signed)
    return positions


def grid_positions(positions: torch.Tensor, position_dims: int) -> torch.Tensor:
    """[T] or [B, T] integer positions -> [..., P] with the same index on every axis."""
    if position_dims == 1:
        return positions
    return positions[..., None].expand(*positions.shape, position_dims)


def position_at(pos: torch.Tensor):
    """(b, idx) -> position of pos [T] / [B, T] ([1, T] broadcasts), for flex's mods."""
    if pos.dim() == 1:
        return lambda b, idx: pos[idx]
    if pos.shape[0] == 1:
        return lambda b, idx: pos[0, idx]
    return lambda b, idx: pos[b, idx]


def restart_positions(doc_ids: torch.Tensor) -> torch.Tensor:
    """doc_ids [..., T] (contiguous documents) -> positions restarting at 0 in each document."""
    idx = torch.arange(doc_ids.shape[-1], device=doc_ids.device).expand_as(doc_ids)
    starts = torch.ones_like(doc_ids, dtype=torch.bool)
    starts[..., 1:] = doc_ids[..., 1:] != doc_ids[..., :-1]
    first = torch.where(starts, idx, 0).cummax(dim=-1).values  # index where each doc starts
    return idx - first


def check_doc_ids(doc_ids, B: int, T: int) -> None:
    """doc_ids: [T] or [B, T] integers, each document one run ([0, 0, 1], not [0, 1, 0])."""
    if not isinstance(doc_ids, torch.Tensor):
        raise TypeError(f"doc_ids must be a torch.Tensor, got {type(doc_ids).__name__}")
    if doc_ids.shape not in ((T,), (B, T), (1, T)):
        raise ValueError(f"doc_ids must be [T] or [B, T] = [{B}, {T}], got {tuple(doc_ids.shape)}")
    if doc_ids.is_floating_point() or doc_ids.is_complex():
        raise TypeError(f"doc_ids must be an integer tensor of document ids, got {doc_ids.dtype}")
    ids = doc_ids.reshape(-1, T)
    runs = (ids[:, 1:] != ids[:, :-1]).sum(-1) + 1  # [b] runs of equal ids
    srt = ids.sort(dim=-1).values
    distinct = (srt[:, 1:] != srt[:, :-1]).sum(-1) + 1  # [b] distinct ids
    bad = (runs != distinct).nonzero()
    if T and bad.numel():
        row = int(bad[0, 0])
        raise ValueError(
            f"doc_ids must be contiguous runs (each document's tokens side by side), got "
            f"{ids[row].tolist()[:32]} in row {row}: give every document its own id"
        )


def check_model_positions(positions: torch.Tensor, B: int, T: int, P: int) -> torch.Tensor:
    """positions [T] or [B, T] (+ [..., P]), as check_positions returns them."""
    want = (T,) if P == 1 else (T, P)
    if tuple(check_tensor("positions", positions).shape) not in (want, (B, *want), (1, *want)):
        raise ValueError(
            f"positions must have shape {list(want)} or {[B, *want]}, got {tuple(positions.shape)}"
        )
    return check_positions(positions, name="positions", position_dims=P)


def check_tokens(tokens, vocab_size: int) -> None:
    """tokens: [B, T] integer ids in 0..vocab_size-1 (checked on CPU; a GPU would assert)."""
    if not isinstance(tokens, torch.Tensor) or tokens.dim() != 2:
        raise ValueError(f"tokens must be a [B, T] tensor, got {getattr(tokens, 'shape', tokens)}")
    if tokens.is_floating_point() or tokens.is_complex() or tokens.dtype == torch.bool:
        raise TypeError(f"tokens must be an integer tensor of token ids, got {tokens.dtype}")
    if tokens.numel() and tokens.device.type == "cpu" and not torch.compiler.is_compiling():
        lo, hi = tokens.min().item(), tokens.max().item()
        if lo < 0 or hi >= vocab_size:
            raise ValueError(f"tokens must be ids in 0..{vocab_size - 1} "
                             f"(vocab_size={vocab_size}), got values {lo}..{hi}")  # fmt: skip


def load_checkpoint(path, keys: tuple[str, ...], map_location="cpu", weights_only=True) -> dict:
    """torch.load(path), a dict holding `keys`; ValueError naming the file if unreadable or a
    key is missing (a missing file stays an OSError)."""
    try:
        ckpt = torch.load(path, map_location=map_location, weights_only=weights_only)
    except OSError:
        raise
    except Exception as err:  # noqa: BLE001 - any unreadable content
        raise ValueError(f"{path} is not a readable checkpoint ({type(err).__name__})") from None
    if not isinstance(ckpt, dict) or any(k not in ckpt for k in keys):
        need = f"a dict with {', '.join(map(repr, keys))}" if keys else "a dict"
        raise ValueError(f"{path} is not a posenc checkpoint (needs {need})")
    return ckpt
