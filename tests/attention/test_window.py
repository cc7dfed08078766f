"""Sliding-window attention (posenc.attention.window): the mask is exactly 0 <= q - k < window
by position values on every backend (against a mask written out entry by entry), a windowed
TransformerLM decodes with the KV cache to the full forward's logits, and a layer sees nothing
past its window."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from support.changed import assert_changed

import posenc
from posenc import TransformerLM
from posenc.attention import attention
from posenc.attention.window import layer_windows, window_mask

V = 13


def explicit(q_pos, k_pos, window, causal):
    """[B, 1, Tq, Tk] entry by entry from the definition."""
    B, Tq, Tk = q_pos.shape[0], q_pos.shape[1], k_pos.shape[1]
    out = torch.zeros(B, 1, Tq, Tk, dtype=torch.bool)
    for b in range(B):
        for i in range(Tq):
            for j in range(Tk):
                d = int(q_pos[b, i]) - int(k_pos[b, j])
                out[b, 0, i, j] = 0 <= d < window if causal else abs(d) < window
    return out


def reference(q, k, v, allowed):
    """Softmax attention with an explicit boolean mask, in float64; empty rows give zeros."""
    logits = (q.double() @ k.double().transpose(-1, -2)) * q.shape[-1] ** -0.5
    logits = logits.masked_fill(~allowed, -torch.inf)
    probs = torch.softmax(logits, -1).nan_to_num(0.0)
    return (probs @ v.double()).float()


@settings(max_examples=25, deadline=None)
@given(
    st.integers(1, 3), st.integers(1, 9), st.integers(0, 4), st.integers(1, 12), st.booleans(),
    st.sampled_from(["eager", "sdpa", "chunked"]), st.integers(0, 2**31 - 1),
)  # fmt: skip
def test_the_mask_is_exact_on_every_backend(B, Tq, extra, window, causal, backend, seed):
    g = torch.Generator().manual_seed(seed)
    Tk = Tq + extra  # decoding: the queries are the last Tq keys
    k_pos = torch.randint(0, 20, (B, Tk), generator=g).sort(-1).values  # any values, repeats too
    q_pos = k_pos[:, extra:]
    mask = window_mask(q_pos, k_pos, window, Tq, Tk, causal=causal)
    assert mask.shape == (B, 1, Tq, Tk)
    assert torch.equal(mask, explicit(q_pos, k_pos, window, causal))
    q, k, v = (torch.randn(B, 2, T, 8, generator=g) for T in (Tq, Tk, Tk))
    got = attention(q, k, v, None, q_pos, k_pos, causal=causal, backend=backend, mask=mask)
    allowed = mask if not causal else mask & (k_pos[:, None, None, :] <= q_pos[:, None, :, None])
    torch.testing.assert_close(got, reference(q, k, v, allowed), atol=1e-5, rtol=1e-5)


def test_default_positions_are_the_last_queries_of_the_keys():
    mask = window_mask(None, None, 2, 2, 5)  # queries at 3, 4
    want = torch.tensor([[0, 0, 1, 1, 0], [0, 0, 0, 1, 1]], dtype=torch.bool)
    assert torch.equal(mask[0, 0], want)


def tiny(encoding="rope", window=3, depth=2, seed=0, **kw):
    torch.manual_seed(seed)
    return TransformerLM(vocab_size=V, dim=32, depth=depth, heads=4, encoding=encoding,
                         window=window, **kw).eval()  # fmt: skip


@pytest.mark.parametrize(
    "encoding, window",
    [("rope", 3), ("alibi", 2), ("nope", 4), (["rope", "nope"], [3, None]), ("t5", [None, 2])],
)
def test_cached_decoding_equals_the_full_forward(encoding, window):
    model = tiny(encoding, window)
    prompt = torch.randint(0, V, (2, 4))
    tokens, logits = model.generate(prompt, max_new_tokens=7, return_logits=True)
    with torch.no_grad():
        for step in range(7):
            full = model(tokens[:, : 4 + step])[:, -1]
            torch.testing.assert_close(logits[:, step], full, atol=1e-5, rtol=1e-5)


def test_a_layer_sees_nothing_before_its_window():
    model = tiny("rope", 3, depth=1)
    x = torch.randint(0, V, (1, 10))
    y = x.clone()
    y[0, :4] = (y[0, :4] + 1) % V  # tokens 0..3 changed: queries 6.. do not see them
    with torch.no_grad():
        a, b = model(x), model(y)
    torch.testing.assert_close(a[0, 6:], b[0, 6:])
    assert_changed(a[0, 4:6], b[0, 4:6])  # query 4 and 5 see tokens 2, 3


def test_a_window_past_the_sequence_is_full_attention():
    x = torch.randint(0, V, (2, 9))
    with torch.no_grad():
        torch.testing.assert_close(tiny("rope", 9)(x), tiny("rope", None)(x))
        assert_changed(tiny("rope", 8)(x), tiny("rope", None)(x))


def test_packed_documents_keep_their_windows():
    model = tiny(["rope", "nope"], [2, None])
    docs = [torch.randint(0, V, (n,)) for n in (4, 6)]
    packed = torch.cat(docs)[None]
    doc_ids = torch.tensor([0] * 4 + [1] * 6)
    with torch.no_grad():
        out = model(packed, doc_ids=doc_ids)[0]
        alone = torch.cat([model(d[None])[0] for d in docs])
    torch.testing.assert_close(out, alone, atol=1e-5, rtol=1e-5)


def test_the_model_records_and_restores_its_windows(tmp_path):
    model = tiny(["rope", "nope"], [3, None])
    assert [b.attn.window for b in model.blocks] == [3, None]
    model.save(tmp_path / "m.pt")
    back = TransformerLM.from_checkpoint(tmp_path / "m.pt").eval()
    x = torch.randint(0, V, (1, 8))
    with torch.no_grad():
        torch.testing.assert_close(back(x), model(x))
    assert isinstance(back.encodings[1], posenc.resolve("nope"))


@pytest.mark.parametrize(
    "window, depth, error, match",
    [
        (0, 2, ValueError, "window must be >= 1"),
        ([3], 2, ValueError, "depth=2 entries"),
        ([3, 0], 2, ValueError, r"window\[1\] must be >= 1"),
        (2.5, 2, TypeError, "window must be None"),
        (True, 2, TypeError, "window must be None"),
        ([3, "x"], 2, TypeError, r"window\[1\] must be an int"),
    ],
)
def test_bad_windows(window, depth, error, match):
    with pytest.raises(error, match=match):
        layer_windows(window, depth)
    assert layer_windows(None, 2) == [None, None] and layer_windows(4, 2) == [4, 4]
