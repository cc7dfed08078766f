"""Section `syncs`: host syncs (reads of a tensor's value into Python) per posenc.attention call,
rope and alibi, default and given positions, backends auto and eager; position checks counted
apart. Issue 39 took them from 4-6 per call to at most one.
"""

from __future__ import annotations

import contextlib
import itertools
from unittest import mock

import torch

from posenc import checks
from posenc.attention import attention
from posenc.bench.report import Report, Row
from posenc.encodings import build

READS = ("__bool__", "item", "tolist", "__int__", "__float__", "__index__")
BACKENDS = ("auto", "eager")
# (owner, attribute) -> what a call counts as: a read of a value into Python, a position check
COUNTED = {(torch.Tensor, name): "syncs" for name in READS}
COUNTED.update({(torch, "equal"): "syncs", (checks, "_check_position_values"): "checks"})


@contextlib.contextmanager
def counting():
    """{"syncs": n, "checks": n}, counted while inside."""
    n = {"syncs": 0, "checks": 0}

    def counted(fn, key):
        def run(*args, **kwargs):
            n[key] += 1
            return fn(*args, **kwargs)

        return run

    with contextlib.ExitStack() as stack:
        for (owner, name), key in COUNTED.items():
            stack.enter_context(mock.patch.object(owner, name, counted(getattr(owner, name), key)))
        yield n


def syncs_per_call(name: str, given: bool, backend: str, T: int = 64) -> dict:
    """{"syncs", "checks"} of one attention() call with encoding `name` (max_len 2T)."""
    torch.manual_seed(0)
    enc = build(name, dim=64, heads=4, head_dim=16, max_len=2 * T)
    q, k, v = (torch.randn(1, 4, T, 16) for _ in range(3))
    pos = {"q_pos": torch.arange(T), "k_pos": torch.arange(T)} if given else {}
    attention(q, k, v, enc, backend=backend, **pos)  # warm-up: lazy imports, caches
    with counting() as n:
        attention(q, k, v, enc, backend=backend, **pos)
    return n


def bench_syncs(rep: Report) -> dict:
    """Rows of the section; {(name, positions, backend): {"syncs", "checks"}}."""
    out = {}
    for name, given, backend in itertools.product(("rope", "alibi"), (False, True), BACKENDS):
        n = syncs_per_call(name, given, backend)
        where = "given" if given else "default"
        out[name, where, backend] = n
        note = f"{n['syncs']} host syncs per call, {n['checks']} of them position checks"
        case = f"{name} T=64 {where} positions"
        rep.rows.append(Row("syncs", case, f"posenc.attention ({backend})", note=note))
    return out
