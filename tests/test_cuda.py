"""CUDA checks: the fast path (FlashAttention / memory-efficient kernels) equals the explicit path, and
device and dtype are kept. Skipped, with the reason shown by ``-ra``, on machines without a GPU."""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

from utils.attention import MultiHeadAttention, causal_mask, padding_mask, scaled_dot_product_attention
from utils.layers import TinyEncoderClassifier, TransformerEncoderLayer
from utils.positional import PositionalEncoding, apply_rotary

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device; none is available here"),
]

DTYPES = [torch.float16, torch.bfloat16, torch.float32]
TOL = {torch.float16: 5e-3, torch.bfloat16: 3e-2, torch.float32: 1e-4}


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("kind", ["none", "causal", "padding", "fully_masked"])
def test_fast_path_equals_explicit_path_on_cuda(dtype, kind):
    torch.manual_seed(0)
    N, L, E = 4, 64, 128
    mha = MultiHeadAttention(E, 4).to("cuda", dtype).eval()
    x = torch.randn(N, L, E, device="cuda", dtype=dtype)
    lengths = torch.tensor([64, 10, 1, 0 if kind == "fully_masked" else 33], device="cuda")
    mask = padding_mask(lengths, L) if kind in ("padding", "fully_masked") else None
    is_causal = kind == "causal"
    with torch.no_grad():
        fast, _ = mha(x, mask=mask, is_causal=is_causal, need_weights=False)
        slow, weights = mha(x, mask=mask, is_causal=is_causal, need_weights=True)
    assert fast.device.type == "cuda" and fast.dtype == dtype and weights.dtype == dtype
    assert torch.isfinite(fast).all() and torch.isfinite(slow).all()
    assert_close(fast, slow, atol=TOL[dtype], rtol=TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_sdpa_matches_torch_on_cuda_and_keeps_device(dtype):
    q, k, v = (torch.randn(2, 4, 32, 64, device="cuda", dtype=dtype) for _ in range(3))
    mask = causal_mask(32, device="cuda")
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert out.device == q.device and out.dtype == dtype and weights.device == q.device
    assert_close(out, ref, atol=TOL[dtype], rtol=TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_modules_keep_device_and_dtype_on_cuda(dtype):
    x = torch.randn(2, 16, 32, device="cuda", dtype=dtype)
    assert PositionalEncoding(32).cuda()(x).dtype == dtype
    assert apply_rotary(x).dtype == dtype and apply_rotary(x).is_cuda
    layer = TransformerEncoderLayer(32, 4, 64).to("cuda", dtype).eval()
    out, weights = layer(x, mask=padding_mask(torch.tensor([16, 0], device="cuda"), 16), need_weights=True)
    assert out.is_cuda and out.dtype == dtype and torch.isfinite(out).all()
    model = TinyEncoderClassifier(10, 32, 4, 2, 64, 3).to("cuda", dtype).eval()
    logits, _ = model(torch.randint(0, 10, (2, 16), device="cuda"))
    assert logits.is_cuda and logits.dtype == dtype
