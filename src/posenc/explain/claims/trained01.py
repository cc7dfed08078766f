"""Seeds 000 and 001, the claims that need trained models (posenc.explain.claims.trained)."""

from __future__ import annotations

from posenc.explain.claims.base import CAVEAT, FAILS, HOLDS, Measured, Rule, seed_claim
from posenc.explain.claims.trained import (
    LEARNED_COPY,
    LEARNED_PASSKEY,
    SCALED,
    WINDOW,
    Evidence,
    from_arena,
)

COPY_IN = range(1, 9)  # copy's sizes up to L = 8
PASSKEY_LENS = (32, 64, 128, 256)


@seed_claim("inv-000-06", id="claim-000-index-generalizes", about=("index", "sinusoidal"),
            rules=(Rule("sinusoidal - index, exact match at L", ">", 0.1, HOLDS),
                   Rule("sinusoidal - index, exact match at L", ">", 0.02, CAVEAT)),
            otherwise=FAILS)  # fmt: skip
def claim_000_index_generalizes(dim: int, n: int, arena=None) -> Measured:
    def measure(ev: Evidence):
        idx, sin = (ev.at_l(e, "copy") for e in ("index", "sinusoidal"))
        near = ev.get("index", "copy", "accuracy", 9), ev.get("sinusoidal", "copy", "accuracy", 9)
        gap = sin - idx
        return {"sinusoidal - index, exact match at L": gap}, (
            f"copy, exact match at L = 8 (held-out instances): index {idx:.3f}, sinusoidal "
            f"{sin:.3f}; one symbol past L: index {near[0]:.3f}, sinusoidal {near[1]:.3f}"
        )

    return from_arena(
        arena,
        measure,
        method="arena, copy trained at L = 8: the raw index (concatenated, projected) against "
        "the sinusoid, exact match on held-out instances at L and at L + 1",
    )  # fmt: skip


@seed_claim("inv-001-02", id="claim-001-rnn", about=("sinusoidal", "nope"),
            rules=(Rule("gain in token accuracy", ">=", 0.02, HOLDS),),
            otherwise=FAILS)  # fmt: skip
def claim_001_rnn(dim: int, n: int, arena=None) -> Measured:
    def measure(ev: Evidence):
        with_pe = ev.mean("lstm:sinusoidal", "copy", "token_accuracy", COPY_IN)
        without = ev.mean("lstm:nope", "copy", "token_accuracy", COPY_IN)
        return {"gain in token accuracy": with_pe - without}, (
            f"LSTM on copy, token accuracy over sizes 1..8: with the sinusoid {with_pe:.3f}, "
            f"without {without:.3f}"
        )

    return from_arena(
        arena,
        measure,
        method="arena, an LSTM language model (lstm backbone, the Transformer's width and depth) "
        "with the sinusoid added to its inputs and without, copy at L = 8; helps if the token "
        "accuracy gains 0.02 or more",
    )  # fmt: skip


@seed_claim("inv-001-07", id="claim-001-long-range", about=("sinusoidal", "learned"),
            rules=(Rule("sinusoidal - learned, passkey accuracy", ">", 0.02, HOLDS),
                   Rule("sinusoidal - learned, passkey accuracy", "<", -0.02, FAILS)),
            otherwise=CAVEAT)  # fmt: skip
def claim_001_long_range(dim: int, n: int, arena=None) -> Measured:
    def measure(ev: Evidence):
        sin = ev.mean("sinusoidal", "passkey", "accuracy", PASSKEY_LENS)
        learned = ev.mean(LEARNED_PASSKEY, "passkey", "accuracy", PASSKEY_LENS)
        return {"sinusoidal - learned, passkey accuracy": sin - learned}, (
            f"passkey trained at L = 32, accuracy averaged over 32..256 tokens: sinusoidal "
            f"{sin:.3f}, learned (256-row table, 256 x D parameters) {learned:.3f}; the "
            "sinusoid has no parameters"
        )

    return from_arena(
        arena,
        measure,
        method="arena, passkey (the key at any distance up to the length) trained at 32, "
        "evaluated at 32..256: the sinusoid against a learned table large enough for every "
        "length",
    )  # fmt: skip


@seed_claim("inv-001-13", id="claim-001-trainable-scale", about=("sinusoidal",),
            rules=(Rule("|s - 1|", "<", 0.05, FAILS),
                   Rule("accuracy lost against s = 1", ">", 0.05, CAVEAT)),
            otherwise=HOLDS)  # fmt: skip
def claim_001_trainable_scale(dim: int, n: int, arena=None) -> Measured:
    def measure(ev: Evidence):
        s = ev.at_l(SCALED, "copy", "encoding_scale")
        acc, fixed = ev.at_l(SCALED, "copy"), ev.at_l("sinusoidal", "copy")
        return {"|s - 1|": abs(s - 1), "accuracy lost against s = 1": fixed - acc}, (
            f"copy at L = 8: the learned scale ends at s = {s:.3f} (init 1); exact match "
            f"{acc:.3f} with it, {fixed:.3f} without"
        )

    return from_arena(
        arena,
        measure,
        method="arena, copy at L = 8: sinusoidal(learned_scale=true) (PE times a learned "
        "scalar s, init 1) against the fixed sinusoid; training adjusts it if s moves 5% or "
        "more",
    )  # fmt: skip


@seed_claim("inv-001-17", id="claim-001-window", about=("learned_window", "learned"),
            rules=(Rule("window - plain table, exact match at L", "<", -0.05, FAILS),),
            otherwise=HOLDS)  # fmt: skip
def claim_001_window(dim: int, n: int, arena=None) -> Measured:
    def measure(ev: Evidence):
        win, plain = ev.at_l(WINDOW, "copy"), ev.at_l(LEARNED_COPY, "copy")
        return {"window - plain table, exact match at L": win - plain}, (
            f"copy at L = 8, exact match: windowed (J = 5) {win:.3f}, plain learned table "
            f"{plain:.3f}"
        )

    return from_arena(
        arena,
        measure,
        method="arena, copy at L = 8: the seed's formula implemented (learned_window: psi = f = "
        "one table, beta_j scalars, w_j vectors, J = 5) against the plain table of the same "
        "size; the formula works as an encoding if it trains within 0.05 of the table",
        note="The seed leaves psi, pos', f, beta and w undefined; no published encoding of this "
        "form is named. The window sum depends on t alone, so it is itself one learned table "
        "(claim-001-window-reason).",
    )  # fmt: skip


CHECKS = [
    claim_000_index_generalizes,
    claim_001_rnn,
    claim_001_long_range,
    claim_001_trainable_scale,
    claim_001_window,
]
