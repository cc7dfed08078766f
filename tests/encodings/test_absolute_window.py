"""learned_window: seed 001's PE_t = psi(t) + sum_{j<J} beta_j f(t - j) w_j, with psi = f = one
learned table; golden values written out by hand from the formula."""

from __future__ import annotations

import pytest
import torch

from posenc import build


def test_golden_values_from_the_formula():
    enc = build("learned_window", dim=2, max_len=4, window=3)
    with torch.no_grad():
        enc.weight.copy_(torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0]]))
        enc.beta.copy_(torch.tensor([0.5, -1.0]))  # beta_1, beta_2
        enc.w.copy_(torch.tensor([[1.0, 10.0], [2.0, 0.0]]))  # w_1, w_2
    # t = 1: W1 + 0.5 W0*w1; t = 2: W2 + 0.5 W1*w1 - W0*w2; t = 3: W3 + 0.5 W2*w1 - W1*w2
    want = torch.tensor([[1.0, 2.0], [3.5, 14.0], [4.5, 26.0], [3.5, 38.0]])
    torch.testing.assert_close(enc.table(torch.arange(4)), want)
    # [B, T] positions (packed: restarting at 0) read the same rows
    pos = torch.tensor([[0, 1, 0, 3]])
    torch.testing.assert_close(enc.table(pos)[0], want[[0, 1, 0, 3]])


@pytest.mark.parametrize("window", [1, 5])
def test_starts_as_the_plain_learned_table(window):
    torch.manual_seed(0)
    enc = build("learned_window", dim=8, max_len=16, window=window)
    x, pos = torch.randn(2, 10, 8), torch.arange(10)
    want = x + enc.weight[:10]
    torch.testing.assert_close(enc.embed(x, pos), want)  # beta = 0 (and w = 1) at init


def test_the_window_trains_and_limits_hold():
    torch.manual_seed(0)
    enc = build("learned_window", dim=4, max_len=8, window=5)
    enc.embed(torch.randn(1, 8, 4), torch.arange(8)).square().sum().backward()
    assert enc.beta.grad.abs().min() > 0 and enc.weight.grad.abs().sum() > 0
    with pytest.raises(ValueError, match="max_len"):
        enc.embed(torch.randn(1, 9, 4), torch.arange(9))
    with pytest.raises(ValueError, match="window"):
        build("learned_window", dim=4, max_len=8, window=0)
