"""utils.attention against the PyTorch built-ins: outputs, gradients, masks, fast path, fully-masked rows."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.testing import assert_close

from utils.attention import (
    MultiHeadAttention,
    causal_mask,
    combine_masks,
    from_torch_mask,
    merge_heads,
    padding_mask,
    scaled_dot_product_attention,
    split_heads,
    to_torch_mask,
)

DTYPES = [torch.float32, torch.float64, torch.bfloat16]
ALL_DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
MASK_KINDS = ["none", "bool", "float", "causal", "padding"]


def make_mask(kind: str, N: int, L: int, S: int, dtype: torch.dtype, seed: int):
    """Return ``(mask, is_causal)`` in the package convention; no row is fully masked."""
    g = torch.Generator().manual_seed(seed + 100)
    if kind == "none":
        return None, False
    if kind == "causal":
        return None, True
    if kind == "bool":
        mask = torch.rand(L, S, generator=g) > 0.4
        mask[:, 0] = True
        return mask, False
    if kind == "float":
        return torch.randn(N, 1, L, S, generator=g).to(dtype), False
    lengths = torch.randint(1, S + 1, (N,), generator=g)
    return padding_mask(lengths, S), False


def leaves(*tensors):
    return [t.detach().clone().requires_grad_(True) for t in tensors]


# --- scaled_dot_product_attention vs F.scaled_dot_product_attention -----------------------------------
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("kind", MASK_KINDS)
@pytest.mark.parametrize("L,S", [(5, 5), (3, 7)])
@pytest.mark.parametrize("seed", [0, 1])
def test_sdpa_matches_torch_outputs_and_gradients(dtype, kind, L, S, seed, tol):
    g = torch.Generator().manual_seed(seed)
    N, H, D, Dv = 2, 2, 8, 6
    q = torch.randn(N, H, L, D, generator=g).to(dtype)
    k = torch.randn(N, H, S, D, generator=g).to(dtype)
    v = torch.randn(N, H, S, Dv, generator=g).to(dtype)
    grad = torch.randn(N, H, L, Dv, generator=g).to(dtype)
    mask, is_causal = make_mask(kind, N, L, S, dtype, seed)

    ours_in, ref_in = leaves(q, k, v), leaves(q, k, v)
    out, weights = scaled_dot_product_attention(*ours_in, mask, is_causal=is_causal)
    ref = F.scaled_dot_product_attention(*ref_in, attn_mask=mask, is_causal=is_causal)
    out.backward(grad)
    ref.backward(grad)

    assert out.dtype == dtype and weights.shape == (N, H, L, S)
    assert_close(out, ref, **tol(dtype))
    for ours_t, ref_t in zip(ours_in, ref_in):
        assert_close(ours_t.grad, ref_t.grad, **tol(dtype, 2))  # a gradient adds one more reduction
    assert_close(weights.double().sum(-1), torch.ones(N, H, L, dtype=torch.float64), **tol(dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_sdpa_custom_scale_and_unbatched(dtype, tol):
    q, k, v = torch.randn(4, 8, dtype=dtype), torch.randn(6, 8, dtype=dtype), torch.randn(6, 3, dtype=dtype)
    out, weights = scaled_dot_product_attention(q, k, v, scale=0.3)
    assert_close(out, F.scaled_dot_product_attention(q, k, v, scale=0.3), **tol(dtype))
    assert weights.shape == (4, 6)


def test_sdpa_dropout_keeps_weights_and_respects_training():
    q = k = v = torch.randn(2, 5, 8)
    out_eval, w_eval = scaled_dot_product_attention(q, k, v, dropout_p=0.5, training=False)
    assert_close(out_eval, scaled_dot_product_attention(q, k, v)[0])
    out_train, w_train = scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    assert not torch.allclose(out_train, out_eval)
    assert_close(w_train, w_eval)  # weights are reported before dropout


def test_mask_combined_with_is_causal_equals_combined_mask():
    q, k, v = torch.randn(2, 4, 8), torch.randn(2, 4, 8), torch.randn(2, 4, 8)
    pad = padding_mask(torch.tensor([4, 2]), 4)[:, 0]  # (N, 1, S)
    both = scaled_dot_product_attention(q, k, v, pad, is_causal=True)
    explicit = scaled_dot_product_attention(q, k, v, combine_masks(pad, causal_mask(4)))
    assert_close(both, explicit)


# --- fully-masked rows and half precision --------------------------------------------------------------
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
@pytest.mark.parametrize("mask_dtype", ["bool", "float"])
def test_sdpa_fully_masked_rows_are_zero(dtype, mask_dtype):
    q, k, v = (torch.randn(2, 2, 3, 4).to(dtype).requires_grad_(True) for _ in range(3))
    mask = torch.ones(3, 3, dtype=torch.bool)
    mask[1] = False
    if mask_dtype == "float":
        mask = torch.zeros(3, 3, dtype=dtype).masked_fill(~mask, float("-inf"))
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    out.sum().backward()
    assert torch.isfinite(out).all() and torch.isfinite(weights).all()
    assert (out[..., 1, :] == 0).all() and (weights[..., 1, :] == 0).all()
    assert (q.grad[..., 1, :] == 0).all() and torch.isfinite(k.grad).all() and torch.isfinite(v.grad).all()
    ref = F.scaled_dot_product_attention(q.detach(), k.detach(), v.detach(), attn_mask=mask)
    assert (ref[..., 1, :] == 0).all()  # torch 2.13 agrees


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_half_precision_masking_is_safe(dtype):
    # large scores: -1e4 added in float16 would leave masked keys with visible weight; -1e9 overflows
    q = torch.full((1, 4, 8), 30.0, dtype=dtype)
    k, v = q.clone(), torch.randn(1, 4, 8).to(dtype)
    out, weights = scaled_dot_product_attention(q, k, v, causal_mask(4))
    assert torch.isfinite(out).all() and out.dtype == dtype
    assert (weights.masked_select(~causal_mask(4)) == 0).all()
    finfo_mask = torch.zeros(4, 4, dtype=dtype).masked_fill(~causal_mask(4), torch.finfo(dtype).min)
    out2, weights2 = scaled_dot_product_attention(q, k, v, finfo_mask)
    assert torch.isfinite(out2).all() and (weights2.masked_select(~causal_mask(4)) == 0).all()


# --- masks and helpers ------------------------------------------------------------------------------------
@pytest.mark.parametrize("L,S", [(4, 4), (3, 6), (6, 3)])
def test_causal_mask_is_top_left_tril(L, S):
    mask = causal_mask(L, S)
    assert mask.dtype == torch.bool and mask.shape == (L, S)
    assert torch.equal(mask, torch.ones(L, S, dtype=torch.bool).tril())


def test_padding_mask_values_and_device():
    lengths = torch.tensor([0, 2, 4])
    mask = padding_mask(lengths, 4)
    assert mask.shape == (3, 1, 1, 4) and mask.dtype == torch.bool and mask.device == lengths.device
    assert mask.sum(-1).flatten().tolist() == [0, 2, 4]
    assert mask[1, 0, 0].tolist() == [True, True, False, False]


def test_combine_masks_bool_and_float():
    bool_mask = torch.tensor([[True, False], [True, True]])
    float_mask = torch.tensor([[0.5, 0.0], [1.0, -1.0]])
    combined = combine_masks(bool_mask, float_mask)
    assert combined.dtype == torch.float32
    assert combined[0, 1] == float("-inf") and combined[1, 1] == -1.0
    assert torch.equal(combine_masks(bool_mask, causal_mask(2)), torch.tensor([[True, False], [True, True]]))


def test_torch_mask_conversions_round_trip():
    mask = causal_mask(3)
    assert torch.equal(to_torch_mask(mask), ~mask)
    assert torch.equal(from_torch_mask(attn_mask=to_torch_mask(mask)), mask)
    pad = padding_mask(torch.tensor([1, 3]), 3)
    assert torch.equal(from_torch_mask(key_padding_mask=to_torch_mask(pad)[:, 0, 0, :]), pad)


@pytest.mark.parametrize("num_heads", [1, 2, 4])
def test_split_and_merge_heads(num_heads):
    x = torch.randn(2, 5, 8)
    heads = split_heads(x, num_heads)
    assert heads.shape == (2, num_heads, 5, 8 // num_heads)
    assert torch.equal(heads[:, 0], x[..., : 8 // num_heads])
    assert torch.equal(merge_heads(heads), x)


# --- MultiHeadAttention vs nn.MultiheadAttention ----------------------------------------------------------
def torch_masks(kind: str, mask):
    if mask is None:
        return {}
    if kind == "padding":
        return {"key_padding_mask": to_torch_mask(mask)[:, 0, 0, :]}
    return {"attn_mask": to_torch_mask(mask)}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("kind", ["none", "bool", "float2d", "causal", "padding"])
@pytest.mark.parametrize("cross", [False, True])
@pytest.mark.parametrize("bias", [True, False])
def test_mha_from_torch_matches(dtype, kind, cross, bias, tol):
    torch.manual_seed(len(kind) + 10 * cross)
    N, L, S, E, H = 2, 4, 6 if cross else 4, 16, 4
    ref = nn.MultiheadAttention(E, H, bias=bias, batch_first=True, dtype=dtype).eval()
    mha = MultiHeadAttention.from_torch(ref)
    query = torch.randn(N, L, E, dtype=dtype)
    key = torch.randn(N, S, E, dtype=dtype) if cross else query
    if kind == "causal":
        mask = causal_mask(L, S)
    elif kind == "float2d":
        mask = torch.randn(L, S, dtype=dtype)
    else:
        mask, _ = make_mask(kind, N, L, S, dtype, 0)
    out, weights = mha(query, key, key, mask=mask)
    ref_out, ref_weights = ref(query, key, key, average_attn_weights=False, **torch_masks(kind, mask))
    assert_close(out, ref_out, **tol(dtype, 5))
    assert_close(weights, ref_weights, **tol(dtype, 5))
    assert out.dtype == dtype


def test_mha_from_torch_gradients_match(tol):
    ref = nn.MultiheadAttention(8, 2, batch_first=True).eval()
    mha = MultiHeadAttention.from_torch(ref)
    x = torch.randn(2, 5, 8)
    mha(x)[0].pow(2).sum().backward()
    ref(x, x, x)[0].pow(2).sum().backward()
    assert_close(mha.q_proj.weight.grad, ref.in_proj_weight.grad[:8], **tol(torch.float32, 5))
    assert_close(mha.out_proj.weight.grad, ref.out_proj.weight.grad, **tol(torch.float32, 5))


def test_mha_from_torch_requires_batch_first():
    with pytest.raises(ValueError, match="batch_first=True"):
        MultiHeadAttention.from_torch(nn.MultiheadAttention(8, 2))


# --- fast path == explicit path -----------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("kind", [*MASK_KINDS, "fully_masked", "causal+padding"])
def test_mha_fast_path_equals_explicit_path(dtype, kind, tol):
    N, L, E = 3, 5, 16
    mha = MultiHeadAttention(E, 4).to(dtype).eval()
    x = torch.randn(N, L, E, dtype=dtype)
    mask, is_causal = make_mask(kind.split("+")[-1] if kind != "fully_masked" else "none", N, L, L, dtype, 0)
    if kind == "fully_masked":
        mask = padding_mask(torch.tensor([5, 0, 2]), L)
    is_causal = is_causal or kind.startswith("causal")
    x_fast, x_slow = leaves(x, x)
    fast, none = mha(x_fast, mask=mask, is_causal=is_causal, need_weights=False)
    slow, weights = mha(x_slow, mask=mask, is_causal=is_causal, need_weights=True)
    assert none is None and weights.shape == (N, 4, L, L)
    assert_close(fast, slow, **tol(dtype, 2))
    fast.sum().backward()
    slow.sum().backward()
    assert_close(x_fast.grad, x_slow.grad, **tol(dtype, 4))


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
@pytest.mark.parametrize("need_weights", [True, False])
def test_mha_fully_masked_rows_finite_where_torch_is_nan(dtype, need_weights):
    ref = nn.MultiheadAttention(8, 2, batch_first=True).eval()
    mha = MultiHeadAttention.from_torch(ref).to(dtype)
    x = torch.randn(2, 3, 8)
    pad = padding_mask(torch.tensor([3, 0]), 3)
    ref_out = ref(x, x, x, key_padding_mask=to_torch_mask(pad)[:, 0, 0, :])[0]
    assert torch.isnan(ref_out[1]).all()  # what torch gives
    out, _ = mha(x.to(dtype), mask=pad, need_weights=need_weights)
    assert out.dtype == dtype and torch.isfinite(out).all()
    assert_close(out[1], mha.out_proj.bias.expand(3, 8))  # zero attention, then the output bias


def test_mha_dropout_only_in_training():
    mha = MultiHeadAttention(8, 2, dropout=0.5)
    x = torch.randn(2, 4, 8)
    mha.eval()
    assert torch.equal(mha(x)[0], mha(x)[0])
    mha.train()
    out, weights = mha(x)
    assert_close(weights.sum(-1), torch.ones(2, 2, 4))
    assert not torch.allclose(out, mha.eval()(x)[0])


def test_mha_key_value_defaults():
    mha = MultiHeadAttention(8, 2).eval()
    x, memory = torch.randn(2, 3, 8), torch.randn(2, 6, 8)
    assert torch.equal(mha(x)[0], mha(x, x, x)[0])
    out, weights = mha(x, memory)
    assert torch.equal(out, mha(x, memory, memory)[0]) and weights.shape == (2, 2, 3, 6)
