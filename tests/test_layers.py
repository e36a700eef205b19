"""utils.layers against nn.TransformerEncoderLayer, attention maps, fully-masked rows, the tiny encoder."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.testing import assert_close

from utils.attention import causal_mask, padding_mask, to_torch_mask
from utils.layers import FeedForward, TinyEncoderClassifier, TransformerEncoderLayer


def torch_kwargs(kind: str, mask):
    if kind == "padding":
        return {"src_key_padding_mask": to_torch_mask(mask)[:, 0, 0, :]}
    if kind in ("causal", "bool"):
        return {"src_mask": to_torch_mask(mask)}
    return {}


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-LN", "pre-LN"])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("kind", ["none", "causal", "bool", "padding"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_layer_from_torch_matches_in_eval(norm_first, activation, kind, dtype, tol):
    torch.manual_seed(len(kind))
    N, L, E, H = 3, 5, 16, 4
    ref = nn.TransformerEncoderLayer(E, H, 32, dropout=0.1, activation=activation, batch_first=True,
                                     norm_first=norm_first, dtype=dtype).eval()
    layer = TransformerEncoderLayer.from_torch(ref).eval()
    assert layer.norm_first == norm_first and layer.feed_forward.activation_name == activation
    x = torch.randn(N, L, E, dtype=dtype)
    mask = {"none": None, "causal": causal_mask(L), "padding": padding_mask(torch.tensor([5, 2, 4]), L),
            "bool": torch.rand(L, L) > 0.3}[kind]
    if kind == "bool":
        mask[:, 0] = True
    out, weights = layer(x, mask=mask)
    assert out.dtype == dtype and weights is None
    ref_out = ref(x, **torch_kwargs(kind, mask))
    if kind == "padding":  # torch's fast path may zero the padded query rows: compare the real tokens only
        real = padding_mask(torch.tensor([5, 2, 4]), L)[:, 0, 0, :, None]  # (N, L, 1)
        out, ref_out = out * real, ref_out * real
    assert_close(out, ref_out, **tol(dtype, 10))


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-LN", "pre-LN"])
def test_layer_from_torch_gradients_match(norm_first, tol):
    ref = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True, norm_first=norm_first)
    layer = TransformerEncoderLayer.from_torch(ref)
    x = torch.randn(2, 4, 8)
    x_ours, x_ref = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
    layer(x_ours)[0].pow(2).sum().backward()
    ref(x_ref).pow(2).sum().backward()
    assert_close(x_ours.grad, x_ref.grad, **tol(torch.float32, 10))
    assert_close(layer.feed_forward.linear1.weight.grad, ref.linear1.weight.grad, **tol(torch.float32, 10))


def test_layer_from_torch_requires_batch_first():
    with pytest.raises(ValueError, match="batch_first=True"):
        TransformerEncoderLayer.from_torch(nn.TransformerEncoderLayer(8, 2, 16))


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-LN", "pre-LN"])
def test_need_weights_returns_a_pair_either_way(norm_first, tol):
    layer = TransformerEncoderLayer(8, 2, 16, dropout=0.0, norm_first=norm_first).eval()
    x = torch.randn(2, 4, 8)
    plain, no_weights = layer(x)  # fast path
    assert isinstance(plain, torch.Tensor) and no_weights is None
    assert not hasattr(layer, "last_attention")  # the maps come back through the flag only
    out, weights = layer(x, mask=causal_mask(4), need_weights=True)
    assert weights.shape == (2, 2, 4, 4)
    assert (weights[..., 0, 1:] == 0).all()
    assert_close(weights.sum(-1), torch.ones(2, 2, 4))
    assert_close(out, layer(x, is_causal=True)[0], **tol(torch.float32))  # explicit == fast path


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("norm_first", [False, True], ids=["post-LN", "pre-LN"])
@pytest.mark.parametrize("need_weights", [False, True])
def test_layer_fully_masked_rows_finite(dtype, norm_first, need_weights):
    layer = TransformerEncoderLayer(8, 2, 16, dropout=0.0, norm_first=norm_first).to(dtype).eval()
    x = torch.randn(2, 3, 8).to(dtype)
    out, weights = layer(x, mask=padding_mask(torch.tensor([3, 0]), 3), need_weights=need_weights)
    assert (weights is None) != need_weights
    assert out.dtype == dtype and torch.isfinite(out).all()


@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_feed_forward(activation):
    ff = FeedForward(8, 32, activation=activation)
    x = torch.randn(2, 3, 8)
    hidden = ff.linear1(x)
    hidden = torch.relu(hidden) if activation == "relu" else nn.functional.gelu(hidden)
    assert_close(ff(x), ff.linear2(hidden))


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-LN", "pre-LN"])
def test_tiny_encoder_classifier_shapes_and_maps(norm_first):
    model = TinyEncoderClassifier(11, 16, 2, 3, 32, 4, max_len=20, norm_first=norm_first).eval()
    assert isinstance(model.norm, nn.LayerNorm) == norm_first
    tokens = torch.randint(0, 11, (2, 6))
    logits, no_maps = model(tokens)
    assert logits.shape == (2, 6, 4) and no_maps is None
    logits2, maps = model(tokens, mask=padding_mask(torch.tensor([6, 3]), 6), need_weights=True)
    assert len(maps) == 3 and all(m.shape == (2, 2, 6, 6) for m in maps)
    assert (maps[0][1, ..., 3:] == 0).all()
    assert_close(logits2[0], logits[0], atol=1e-5, rtol=1e-4)  # sample 0 has no padding
    logits2.sum().backward()
    assert model.embedding.weight.grad is not None


def test_tiny_encoder_classifier_embedding_is_scaled():
    model = TinyEncoderClassifier(5, 16, 2, 1, 32, 3).eval()
    tokens = torch.tensor([[1, 2, 3]])
    captured = {}
    model.layers[0].register_forward_pre_hook(lambda module, args: captured.setdefault("x", args[0]))
    model(tokens)
    expected = model.embedding(tokens) * 4.0 + model.positional.pe[:3]
    assert_close(captured["x"], expected)
