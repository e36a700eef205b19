"""utils.positional: the sinusoidal formula, the batch axis is never indexed, and RoPE's relative property."""

from __future__ import annotations

import math

import pytest
import torch
from torch.testing import assert_close

from utils.positional import (
    LearnedPositionalEncoding,
    PositionalEncoding,
    apply_rotary,
    rotary_angles,
    sinusoidal_encoding,
)


@pytest.mark.parametrize("length,d_model", [(7, 8), (5, 7), (3, 1), (50, 33)])
@pytest.mark.parametrize("base", [10000.0, 100.0])
def test_sinusoidal_formula_including_odd_d_model(length, d_model, base):
    expected = torch.empty(length, d_model, dtype=torch.float64)
    for p in range(length):
        for j in range(d_model):
            angle = p / base ** (2 * (j // 2) / d_model)
            expected[p, j] = math.sin(angle) if j % 2 == 0 else math.cos(angle)
    pe = sinusoidal_encoding(length, d_model, base=base, dtype=torch.float64)
    assert pe.shape == (length, d_model)
    assert_close(pe, expected)
    if d_model % 2:  # the last column is a sine
        assert_close(pe[:, -1], expected[:, -1])


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64], ids=str)
def test_sinusoidal_dtype(dtype):
    assert sinusoidal_encoding(4, 6, dtype=dtype).dtype == dtype


@pytest.mark.parametrize("N,L", [(3, 5), (5, 3), (4, 4), (1, 6)])
def test_positional_encoding_indexes_positions_not_batch(N, L):
    # `pe[:x.size(0)]` on a batch-first tensor would add the same vector at every position of sample n
    # (or fail, or when N == L add row n of the table to sample n): every sample must get the same table.
    E = 8
    module = PositionalEncoding(E, max_len=16)
    x = torch.randn(N, L, E)
    added = module(x) - x  # (N, L, E)
    table = sinusoidal_encoding(L, E)
    for n in range(N):
        assert_close(added[n], table)
    assert not torch.allclose(added[:, 0], added[:, -1])


def test_positional_encoding_longer_than_max_len_is_extended():
    module = PositionalEncoding(6, max_len=4)
    x = torch.zeros(2, 9, 6)
    assert_close(module(x)[0], sinusoidal_encoding(9, 6))
    assert module.pe.shape == (4, 6)  # computed for the call, not kept


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64], ids=str)
def test_positional_encoding_keeps_dtype(dtype):
    module = PositionalEncoding(8)  # float32 buffer
    x = torch.randn(2, 3, 8).to(dtype)
    assert module(x).dtype == dtype
    assert "pe" not in module.state_dict()


def test_positional_encoding_dropout_only_in_training():
    module = PositionalEncoding(8, dropout=0.5)
    x = torch.ones(2, 3, 8)
    assert torch.equal(module.eval()(x), module(x))
    assert (module.train()(x) == 0).any()


def test_learned_positional_encoding():
    module = LearnedPositionalEncoding(max_len=5, d_model=4)
    x = torch.zeros(3, 5, 4)
    out = module(x)
    assert out.shape == (3, 5, 4)
    assert torch.equal(out[0], out[2]) and torch.equal(out[0], module.weight.detach())
    out.sum().backward()
    assert module.weight.grad is not None
    with pytest.raises(ValueError, match=r"L = 6 exceeds max_len = 5.*\(3, 6, 4\)"):
        module(torch.zeros(3, 6, 4))


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("D", [2, 8, 16])
def test_rotary_scores_depend_only_on_offset(seed, D):
    g = torch.Generator().manual_seed(seed)
    q, k = torch.randn(D, generator=g, dtype=torch.float64), torch.randn(D, generator=g, dtype=torch.float64)

    def score(m: int, n: int) -> torch.Tensor:
        q_m = apply_rotary(q[None], torch.tensor([m], dtype=torch.float64))[0]
        k_n = apply_rotary(k[None], torch.tensor([n], dtype=torch.float64))[0]
        return q_m @ k_n

    for m, n in [(3, 1), (10, 2), (0, 5)]:
        for shift in [1, 7, 100]:
            assert_close(score(m, n), score(m + shift, n + shift))
    assert not torch.allclose(score(3, 1), score(3, 2))


def test_rotary_default_positions_norm_and_identity_at_zero():
    x = torch.randn(2, 3, 5, 8, dtype=torch.float64)
    out = apply_rotary(x)
    assert_close(out, apply_rotary(x, torch.arange(5)))
    assert_close(out.norm(dim=-1), x.norm(dim=-1))
    assert_close(out[..., 0, :], x[..., 0, :])  # position 0 is not rotated
    assert rotary_angles(torch.arange(5), 8).shape == (5, 4)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32], ids=str)
def test_rotary_keeps_dtype(dtype):
    x = torch.randn(2, 4, 6).to(dtype)
    assert apply_rotary(x).dtype == dtype
    assert_close(apply_rotary(x).float(), apply_rotary(x.float()), atol=3e-2, rtol=3e-2)


def test_rotary_rejects_odd_dim():
    with pytest.raises(ValueError, match=r"even.*\(2, 3, 5\)"):
        apply_rotary(torch.randn(2, 3, 5))
