"""tiled_attention equals F.scaled_dot_product_attention (outputs and gradients), and its forward memory
is O(L), measured in a fresh process."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

from utils.at_scale import naive_bytes
from utils.attention import causal_mask, padding_mask
from utils.benchmark.memory import measure_memory_subprocess
from utils.tiled_attention import online_softmax, online_softmax_update, tiled_attention

TOL = {torch.float32: dict(atol=2e-5, rtol=1e-4), torch.bfloat16: dict(atol=2e-2, rtol=2e-2)}


def _qkv(N, H, L, S, D, dtype, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return [torch.randn(N, H, n, D, generator=gen).to(dtype) for n in (L, S, S)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("block_size", [1, 7, 16, 64])  # 16 divides L=48; 7 does not; 64 > L
@pytest.mark.parametrize("kind", ["none", "causal", "padding", "causal+padding", "float"])
def test_matches_sdpa_outputs_and_gradients(dtype, block_size, kind):
    N, H, L, S, D = 2, 3, 48, 48 if "causal" in kind else 37, 16
    q, k, v = _qkv(N, H, L, S, D, dtype)
    mask = None
    if "padding" in kind:
        mask = padding_mask(torch.tensor([S, S // 3]), S)  # (N, 1, 1, S)
    if kind == "float":
        mask = torch.randn(L, S, generator=torch.Generator().manual_seed(1)).to(dtype)  # (L, S), added
    is_causal = "causal" in kind
    torch_mask = mask
    if is_causal and mask is not None:  # torch refuses attn_mask with is_causal: combine by hand
        torch_mask, is_causal_torch = mask & causal_mask(L, S), False
    else:
        is_causal_torch = is_causal
    q1, k1, v1 = (t.clone().requires_grad_(True) for t in (q, k, v))
    q2, k2, v2 = (t.clone().requires_grad_(True) for t in (q, k, v))
    ours = tiled_attention(q1, k1, v1, mask, block_size=block_size, is_causal=is_causal)
    theirs = F.scaled_dot_product_attention(q2, k2, v2, attn_mask=torch_mask, is_causal=is_causal_torch)
    assert ours.shape == theirs.shape and ours.dtype == dtype
    assert_close(ours, theirs, **TOL[dtype])
    grad = torch.randn(theirs.shape, generator=torch.Generator().manual_seed(2)).to(dtype)
    ours.backward(grad)
    theirs.backward(grad)
    tol = TOL[dtype] if dtype == torch.float32 else dict(atol=6e-2, rtol=6e-2)
    for a, b in ((q1, q2), (k1, k2), (v1, v2)):
        assert_close(a.grad, b.grad, **tol)


@pytest.mark.parametrize("backward", ["autograd", "recompute"])
@pytest.mark.parametrize("leaf", ["query", "key", "value"])
def test_one_input_requiring_grad_gets_sdpa_gradient(backward, leaf):
    """Only one of Q, K, V requires grad: autograd must still keep every block of weights it needs (the
    forward reuses one score buffer only when nothing is recorded), with several blocks to overwrite it."""
    q, k, v = _qkv(1, 2, 40, 30, 8, torch.float32)
    inputs = {"query": q, "key": k, "value": v}
    inputs[leaf] = inputs[leaf].clone().requires_grad_(True)
    grad_out = torch.randn(1, 2, 40, 8, generator=torch.Generator().manual_seed(3))
    (ours,) = torch.autograd.grad(tiled_attention(*inputs.values(), block_size=7, backward=backward),
                                  inputs[leaf], grad_out)
    (theirs,) = torch.autograd.grad(F.scaled_dot_product_attention(*inputs.values()), inputs[leaf], grad_out)
    assert_close(ours, theirs, **TOL[torch.float32])


def test_no_batch_dims_cross_attention_and_scale():
    q, k, v = torch.randn(5, 8), torch.randn(11, 8), torch.randn(11, 3)  # (L, D), (S, D), (S, Dv)
    assert_close(tiled_attention(q, k, v, block_size=4, scale=0.3),
                 F.scaled_dot_product_attention(q, k, v, scale=0.3), atol=1e-5, rtol=1e-4)


def test_fully_masked_rows_are_zero_not_nan():
    q, k, v = _qkv(2, 1, 6, 6, 4, torch.float32)
    mask = padding_mask(torch.tensor([6, 0]), 6)  # the second sequence has no key at all
    out = tiled_attention(q, k, v, mask, block_size=4)
    assert torch.isfinite(out).all() and out[1].abs().max() == 0
    assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask))


def test_causal_with_more_keys_than_queries():
    q, k, v = _qkv(1, 2, 5, 9, 4, torch.float32)
    assert_close(tiled_attention(q, k, v, block_size=2, is_causal=True),
                 F.scaled_dot_product_attention(q, k, v, is_causal=True), atol=1e-5, rtol=1e-4)


def test_bad_inputs_raise_clear_errors():
    q = torch.randn(2, 4, 8)
    with pytest.raises(ValueError, match="block_size"):
        tiled_attention(q, q, q, block_size=0)
    with pytest.raises(ValueError, match="mask"):
        tiled_attention(q, q, q, torch.ones(3, 3, dtype=torch.bool))


@pytest.mark.parametrize("block_size", [1, 3, 10])
def test_online_softmax_matches_softmax(block_size):
    x = torch.randn(4, 10, generator=torch.Generator().manual_seed(0)) * 5
    assert_close(online_softmax(x, block_size), torch.softmax(x, dim=-1))


def test_online_softmax_update_handles_minus_inf_and_big_values():
    m, s = torch.tensor([float("-inf")]), torch.tensor([0.0])
    m, s = online_softmax_update(m, s, torch.tensor([[float("-inf"), float("-inf")]]))  # fully masked so far
    assert torch.isfinite(s).all() and s.item() == 0
    m, s = online_softmax_update(m, s, torch.tensor([[1000.0, 999.0]]))  # exp(1000) would overflow
    assert_close(s, torch.tensor([1 + torch.exp(torch.tensor(-1.0)).item()]))
    assert m.item() == 1000.0


def test_forward_memory_is_linear_in_a_fresh_process():
    """At L=4096, H=8: the naive (L, L) scores alone are 512 MiB; tiled stays far below."""
    row = measure_memory_subprocess("tiled", 4096, heads=8, head_dim=64, block_size=256, threads=1)
    assert row["peak_mib"] < naive_bytes(4096, 8) / 2 / 2**20 / 8  # < 64 MiB, an eighth of one (L, L) matrix
