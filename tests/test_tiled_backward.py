"""tiled_attention's recomputing backward (FlashAttention-2, utils/tiled_backward.py) gives SDPA's gradients,
passes gradcheck, keeps fully masked rows at zero, and saves O(L) tensors where autograd through the loop
saves O(L * S)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

from utils.at_scale import naive_bytes
from utils.attention import causal_mask, padding_mask
from utils.benchmark.memory import measure_memory_subprocess
from utils.tiled_attention import BACKWARDS, TiledAttentionFunction, tiled_attention
from utils.tiled_backward import tiled_attention_backward

TOL = {torch.float32: dict(atol=2e-5, rtol=1e-4), torch.bfloat16: dict(atol=6e-2, rtol=6e-2)}


def _gen(seed):
    return torch.Generator().manual_seed(seed)


def _inputs(N, H, L, S, D, dtype, seed=0, Dv=None):
    gen = _gen(seed)
    q, k = (torch.randn(N, H, n, D, generator=gen).to(dtype) for n in (L, S))
    v = torch.randn(N, H, S, Dv or D, generator=gen).to(dtype)
    return q, k, v


def _mask(kind, N, L, S, dtype):
    """(tiled mask, is_causal, SDPA mask, SDPA is_causal): torch refuses attn_mask with is_causal."""
    mask = None
    if "padding" in kind:
        mask = padding_mask(torch.tensor([S, S // 3])[:N], S)  # (N, 1, 1, S)
    if "float" in kind:
        mask = torch.randn(L, S, generator=_gen(1)).to(dtype)  # (L, S), added to the scores
    causal = "causal" in kind
    if causal and mask is not None:
        allowed = causal_mask(L, S)  # (L, S), True = may attend
        both = mask & allowed if mask.dtype == torch.bool else mask.masked_fill(~allowed, -torch.inf)
        return mask, True, both, False
    return mask, causal, mask, causal


def _grads(fn, tensors, grad_out):
    leaves = [t.detach().clone().requires_grad_(True) for t in tensors]
    out = fn(*leaves)
    return (out, *torch.autograd.grad(out, leaves, grad_out))


@pytest.mark.parametrize("backward", BACKWARDS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("block_size", [5, 16, 64])  # 16 divides L=48 (and S=48); 5 divides neither; 64 > both
@pytest.mark.parametrize("kind", ["none", "causal", "padding", "causal+padding", "float", "causal+float"])
def test_gradients_match_sdpa(backward, dtype, block_size, kind):
    N, H, L, D = 2, 3, 48, 16
    S = 48 if "causal" in kind else 37  # L != S where the causal diagonal does not need L == S
    q, k, v = _inputs(N, H, L, S, D, dtype)
    mask, is_causal, torch_mask, torch_causal = _mask(kind, N, L, S, dtype)
    grad_out = torch.randn(N, H, L, D, generator=_gen(2)).to(dtype)
    ours = _grads(lambda q, k, v: tiled_attention(q, k, v, mask, block_size=block_size, is_causal=is_causal,
                                                  backward=backward), (q, k, v), grad_out)
    theirs = _grads(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=torch_mask,
                                                                   is_causal=torch_causal), (q, k, v), grad_out)
    assert ours[0].dtype == dtype and all(g.dtype == dtype for g in ours[1:])
    for name, a, b in zip(("out", "query", "key", "value"), ours, theirs):
        assert_close(a, b, **TOL[dtype], msg=lambda m, name=name: f"{name}: {m}")


@pytest.mark.parametrize(("L", "S"), [(5, 9), (9, 5), (13, 13)])
@pytest.mark.parametrize("block_size", [2, 4, 32])
def test_causal_gradients_when_lengths_differ(L, S, block_size):
    q, k, v = _inputs(1, 2, L, S, 4, torch.float32, Dv=3)
    grad_out = torch.randn(1, 2, L, 3, generator=_gen(3))
    ours = _grads(lambda q, k, v: tiled_attention(q, k, v, block_size=block_size, is_causal=True), (q, k, v), grad_out)
    theirs = _grads(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), (q, k, v), grad_out)
    for a, b in zip(ours, theirs):
        assert_close(a, b, **TOL[torch.float32])


def test_broadcast_batch_dims_sum_their_gradients():
    gen = _gen(4)
    q = torch.randn(2, 3, 5, 4, generator=gen)  # (N, H, L, D)
    k, v = torch.randn(1, 1, 7, 4, generator=gen), torch.randn(1, 1, 7, 6, generator=gen)  # shared by every (N, H)
    grad_out = torch.randn(2, 3, 5, 6, generator=gen)
    ours = _grads(lambda q, k, v: tiled_attention(q, k, v, block_size=3), (q, k, v), grad_out)
    theirs = _grads(F.scaled_dot_product_attention, (q, k, v), grad_out)
    assert [g.shape for g in ours[1:]] == [q.shape, k.shape, v.shape]
    for a, b in zip(ours, theirs):
        assert_close(a, b, **TOL[torch.float32])
    # called directly (not through autograd, which would sum for it), the backward sums over batch dims itself
    lse = (q @ k.transpose(-2, -1) * 0.5).logsumexp(-1, keepdim=True)  # (N, H, L, 1), scale 1/sqrt(4)
    direct = tiled_attention_backward(grad_out, q, k, v, ours[0], lse, block_size=3)
    for a, b in zip(direct[:3], theirs[1:]):
        assert_close(a, b, **TOL[torch.float32])


@pytest.mark.parametrize("mask_shape", [(6, 9), (2, 1, 1, 9), (2, 3, 6, 9)])
def test_float_mask_gets_sdpa_gradient(mask_shape):
    q, k, v = _inputs(2, 3, 6, 9, 4, torch.float32)
    mask = torch.randn(mask_shape, generator=_gen(5))
    grad_out = torch.randn(2, 3, 6, 4, generator=_gen(6))
    ours = _grads(lambda q, k, v, m: tiled_attention(q, k, v, m, block_size=4), (q, k, v, mask), grad_out)
    theirs = _grads(lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m), (q, k, v, mask), grad_out)
    assert ours[-1].shape == mask.shape
    for a, b in zip(ours, theirs):
        assert_close(a, b, **TOL[torch.float32])


@pytest.mark.parametrize("how", ["padding", "float -inf", "causal + float -inf"])
def test_fully_masked_rows_have_zero_gradients_not_nan(how):
    q, k, v = _inputs(2, 1, 6, 6, 4, torch.float32)
    if how == "padding":
        mask, is_causal = padding_mask(torch.tensor([6, 0]), 6), False  # the second sequence sees no key
        rows = (1, slice(None), slice(None))
    else:
        mask, is_causal = torch.zeros(6, 6), how.startswith("causal")
        mask[2] = -torch.inf  # query 2 sees no key
        rows = (slice(None), slice(None), 2)
    if is_causal:
        torch_mask = mask.masked_fill(~causal_mask(6, 6), -torch.inf)
    else:
        torch_mask = mask
    grad_out = torch.randn(2, 1, 6, 4, generator=_gen(7))
    out, dq, dk, dv = _grads(lambda q, k, v: tiled_attention(q, k, v, mask, block_size=4, is_causal=is_causal),
                             (q, k, v), grad_out)
    assert all(torch.isfinite(t).all() for t in (out, dq, dk, dv))
    assert out[rows].abs().max() == 0 and dq[rows].abs().max() == 0
    theirs = _grads(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=torch_mask),
                    (q, k, v), grad_out)
    for a, b in zip((out, dq, dk, dv), theirs):
        assert_close(a, b, **TOL[torch.float32])


@pytest.mark.parametrize(("kind", "block_size"), [("none", 2), ("causal", 3), ("padding", 4), ("float", 3),
                                                  ("causal+float", 2)])
def test_gradcheck_float64(kind, block_size):
    N, L, S = 2, 5, 5 if "causal" in kind else 7
    q, k, v = (t.requires_grad_(True) for t in _inputs(N, 2, L, S, 3, torch.float64))
    mask, is_causal, _, _ = _mask(kind, N, L, S, torch.float64)
    inputs = (q, k, v)
    if mask is not None and mask.is_floating_point():  # a float mask is differentiated too
        inputs = (q, k, v, mask.requires_grad_(True))

    def fn(q, k, v, m=mask):
        return tiled_attention(q, k, v, m, block_size=block_size, is_causal=is_causal)

    assert torch.autograd.gradcheck(fn, inputs)


def test_double_backward_refuses_instead_of_being_silently_wrong():
    q, k, v = (t.requires_grad_(True) for t in _inputs(1, 1, 4, 4, 2, torch.float64))
    with pytest.raises(RuntimeError, match=r"cannot be differentiated twice.*backward='autograd'"):
        torch.autograd.grad(tiled_attention(q, k, v, block_size=2).sum(), q, create_graph=True)
    (grad_q,) = torch.autograd.grad(tiled_attention(q, k, v, block_size=2, backward="autograd").sum(), q,
                                    create_graph=True)
    assert grad_q.requires_grad


def _saved_bytes(fn) -> int:
    """Bytes of the tensors autograd saves for the backward while ``fn`` runs."""
    total = 0

    def pack(tensor):
        nonlocal total
        total += tensor.numel() * tensor.element_size()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        fn()
    return total


def test_recompute_saves_only_inputs_output_and_logsumexp():
    N, H, L, S, D = 1, 2, 512, 384, 16
    q, k, v = (t.requires_grad_(True) for t in _inputs(N, H, L, S, D, torch.float32))
    scores_bytes = N * H * L * S * 4  # one (N, H, L, S) float32 matrix
    recompute = _saved_bytes(lambda: tiled_attention(q, k, v, block_size=64))
    autograd = _saved_bytes(lambda: tiled_attention(q, k, v, block_size=64, backward="autograd"))
    # q, k, v, the output and one logsumexp per query row, nothing else
    assert recompute == (L * D + 2 * S * D + L * D + L) * N * H * 4
    assert recompute < scores_bytes / 4
    assert autograd > scores_bytes  # every block of weights (and more) is kept


def test_backward_function_directly_and_through_apply():
    q, k, v = _inputs(1, 2, 10, 12, 4, torch.float32)
    grad_out = torch.randn(1, 2, 10, 4, generator=_gen(8))
    lse = (q @ k.transpose(-2, -1) * 0.5).logsumexp(-1, keepdim=True)  # scale 1/sqrt(4)
    out = F.scaled_dot_product_attention(q, k, v)
    grads = tiled_attention_backward(grad_out, q, k, v, out, lse, block_size=5)
    theirs = _grads(F.scaled_dot_product_attention, (q, k, v), grad_out)
    assert grads[3] is None
    for a, b in zip(grads[:3], theirs[1:]):
        assert_close(a, b, **TOL[torch.float32])
    leaves = [t.clone().requires_grad_(True) for t in (q, k, v)]
    through = TiledAttentionFunction.apply(*leaves, None, 5, False, 0.5)
    assert_close(through, out, **TOL[torch.float32])


def test_no_graph_when_nothing_requires_grad():
    q, k, v = _inputs(1, 1, 8, 8, 4, torch.float32)
    assert tiled_attention(q, k, v, block_size=4).grad_fn is None
    q.requires_grad_(True)
    with torch.no_grad():
        assert tiled_attention(q, k, v, block_size=4).grad_fn is None
    assert type(tiled_attention(q, k, v, block_size=4).grad_fn).__name__ == "TiledAttentionFunctionBackward"


def test_bad_backward_and_inputs_raise_clear_errors():
    q = torch.randn(2, 4, 8, requires_grad=True)
    with pytest.raises(ValueError, match=r"backward: expected one of \('recompute', 'autograd'\), got 'flash'"):
        tiled_attention(q, q, q, backward="flash")
    with pytest.raises(TypeError, match="block_size"):
        tiled_attention(q, q, q, block_size=2.0)
    with pytest.raises(ValueError, match=r"mask.*\(3, 3\).*\(2, 4, 4\)"):
        tiled_attention(q, q, q, torch.ones(3, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match="float mask must have the scores' dtype"):
        tiled_attention(q, q, q, torch.zeros(4, 4, dtype=torch.float64))


def test_backward_memory_in_a_fresh_process_is_linear_not_quadratic():
    """At L=1024, H=8, D=64: one pair of (L, L) float32 matrices is 64 MiB. The recomputing backward stays
    far below it, above the inputs and their gradients; autograd through the loop keeps more than that."""
    pair = naive_bytes(1024, 8) / 2**20  # 64 MiB
    kwargs = dict(heads=8, head_dim=64, block_size=128, threads=1, mode="backward")
    recompute = measure_memory_subprocess("tiled", 1024, **kwargs)
    autograd = measure_memory_subprocess("tiled_autograd", 1024, **kwargs)
    assert recompute["gradients_mib"] == 3 * 2 and recompute["peak_mib"] < pair / 4
    assert autograd["peak_mib"] > pair
