"""Every bad call raises ValueError or TypeError naming the argument and showing the shapes got and expected."""

from __future__ import annotations

import re

import pytest
import torch

from utils.attention import (
    MultiHeadAttention,
    causal_mask,
    padding_mask,
    scaled_dot_product_attention,
    split_heads,
)
from utils.layers import FeedForward, TinyEncoderClassifier, TransformerEncoderLayer
from utils.positional import PositionalEncoding, sinusoidal_encoding

x3 = torch.randn(2, 5, 16)
q4, k4, v4 = torch.randn(2, 2, 3, 8), torch.randn(2, 2, 4, 8), torch.randn(2, 2, 4, 6)
mha = MultiHeadAttention(16, 4)
layer = TransformerEncoderLayer(16, 4, 32, dropout=0.0)

# (id, call, exception, substrings that must all appear in the message)
CASES = [
    ("sdpa rank", lambda: scaled_dot_product_attention(torch.randn(8), k4, v4),
     ValueError, ["query", "(8,)", "(..., L, D)"]),
    ("sdpa q/k last dim", lambda: scaled_dot_product_attention(q4, torch.randn(2, 2, 4, 7), v4),
     ValueError, ["query", "key", "(2, 2, 3, 8)", "(2, 2, 4, 7)"]),
    ("sdpa k/v length", lambda: scaled_dot_product_attention(q4, k4, torch.randn(2, 2, 5, 6)),
     ValueError, ["key", "value", "(2, 2, 4, 8)", "(2, 2, 5, 6)"]),
    ("sdpa mask broadcast", lambda: scaled_dot_product_attention(q4, k4, v4, torch.ones(3, 5, dtype=torch.bool)),
     ValueError, ["mask", "(3, 5)", "(2, 2, 3, 4)"]),
    ("sdpa int mask", lambda: scaled_dot_product_attention(q4, k4, v4, torch.ones(3, 4, dtype=torch.long)),
     TypeError, ["mask", "torch.int64", "(3, 4)"]),
    ("sdpa dropout 1", lambda: scaled_dot_product_attention(q4, k4, v4, dropout_p=1.0),
     ValueError, ["dropout_p", "[0, 1)", "1.0"]),
    ("sdpa dropout negative", lambda: scaled_dot_product_attention(q4, k4, v4, dropout_p=-0.1),
     ValueError, ["dropout_p", "-0.1"]),
    ("sdpa half/float", lambda: scaled_dot_product_attention(q4.half(), k4, v4),
     ValueError, ["query", "torch.float16", "torch.float32", "(2, 2, 3, 8)"]),
    ("sdpa float mask dtype", lambda: scaled_dot_product_attention(q4.half(), k4.half(), v4.half(), torch.zeros(3, 4)),
     ValueError, ["mask", "torch.float32", "torch.float16", "(3, 4)"]),
    ("sdpa not a tensor", lambda: scaled_dot_product_attention([1.0], k4, v4), TypeError, ["query", "list"]),
    ("sdpa integer query", lambda: scaled_dot_product_attention(q4.long(), k4, v4),
     TypeError, ["query", "torch.int64", "(2, 2, 3, 8)"]),
    ("mha d_model % heads", lambda: MultiHeadAttention(10, 3), ValueError, ["d_model = 10", "num_heads = 3"]),
    ("mha zero heads", lambda: MultiHeadAttention(16, 0), ValueError, ["num_heads", "0"]),
    ("mha negative d_model", lambda: MultiHeadAttention(-8, 2), ValueError, ["d_model", "-8"]),
    ("mha dropout", lambda: MultiHeadAttention(16, 4, dropout=1.5), ValueError, ["dropout", "1.5"]),
    ("mha rank", lambda: mha(torch.randn(5, 16)), ValueError, ["query", "(5, 16)", "(N, L, E)"]),
    ("mha wrong E", lambda: mha(torch.randn(2, 5, 12)), ValueError, ["query", "(2, 5, 12)", "16"]),
    ("mha k/v length", lambda: mha(x3, torch.randn(2, 6, 16), torch.randn(2, 7, 16)),
     ValueError, ["(2, 6, 16)", "(2, 7, 16)"]),
    ("mha batch", lambda: mha(x3, torch.randn(3, 6, 16)), ValueError, ["(2, 5, 16)", "(3, 6, 16)"]),
    ("mha mask broadcast", lambda: mha(x3, mask=torch.ones(4, 5, dtype=torch.bool)),
     ValueError, ["mask", "(4, 5)", "(2, 4, 5, 5)"]),
    ("mha 3-D mask", lambda: mha(x3, mask=torch.ones(2, 5, 5, dtype=torch.bool)),
     ValueError, ["mask", "(2, 5, 5)", "(N, 1, L, S)"]),
    ("mha int mask", lambda: mha(x3, mask=torch.ones(5, 5, dtype=torch.int32)),
     TypeError, ["mask", "torch.int32", "(5, 5)"]),
    ("mha half input, float module", lambda: mha(x3.half()), ValueError, ["query", "torch.float16", "torch.float32"]),
    ("mha half key", lambda: mha(x3, x3.half()), ValueError, ["key", "torch.float16", "torch.float32"]),
    ("split_heads", lambda: split_heads(torch.randn(2, 5, 10), 4),
     ValueError, ["E = 10", "num_heads = 4", "(2, 5, 10)"]),
    ("padding lengths > max_len", lambda: padding_mask(torch.tensor([3, 7]), 5),
     ValueError, ["lengths", "max_len=5", "[3, 7]", "(2,)"]),
    ("padding float lengths", lambda: padding_mask(torch.tensor([1.0, 2.0]), 5), TypeError, ["lengths", "float"]),
    ("padding rank", lambda: padding_mask(torch.tensor([[1, 2]]), 5), ValueError, ["lengths", "(1, 2)", "(N,)"]),
    ("causal zero", lambda: causal_mask(0), ValueError, ["L", "0"]),
    ("sinusoidal d_model", lambda: sinusoidal_encoding(4, 0), ValueError, ["d_model", "0"]),
    ("pe wrong E", lambda: PositionalEncoding(8)(torch.randn(2, 3, 6)), ValueError, ["x", "(2, 3, 6)", "8"]),
    ("pe rank", lambda: PositionalEncoding(8)(torch.randn(3, 8)), ValueError, ["x", "(3, 8)", "(N, L, E)"]),
    ("ff wrong E", lambda: FeedForward(8, 16)(torch.randn(2, 3, 6)), ValueError, ["x", "(2, 3, 6)", "8"]),
    ("ff activation", lambda: FeedForward(8, 16, activation="tanh"), ValueError, ["activation", "tanh"]),
    ("layer wrong E", lambda: layer(torch.randn(2, 5, 12)), ValueError, ["x", "(2, 5, 12)", "16"]),
    ("layer d_model % heads", lambda: TransformerEncoderLayer(10, 4), ValueError, ["d_model = 10", "num_heads = 4"]),
    ("layer mask", lambda: layer(x3, mask=torch.ones(3, 3, dtype=torch.bool)),
     ValueError, ["mask", "(3, 3)", "(2, 4, 5, 5)"]),
    ("encoder float tokens", lambda: TinyEncoderClassifier(5, 16, 2, 1, 32, 3)(torch.rand(2, 3)),
     TypeError, ["tokens", "torch.float32"]),
    ("encoder token range", lambda: TinyEncoderClassifier(5, 16, 2, 1, 32, 3)(torch.tensor([[1, 9]])),
     ValueError, ["tokens", "vocab_size=5", "(1, 2)"]),
    ("encoder tokens rank", lambda: TinyEncoderClassifier(5, 16, 2, 1, 32, 3)(torch.tensor([1, 2])),
     ValueError, ["tokens", "(2,)", "(N, L)"]),
]


@pytest.mark.parametrize("call,exception,substrings", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_raises_with_shapes(call, exception, substrings):
    with pytest.raises(exception) as info:
        call()
    message = str(info.value)
    for text in substrings:
        assert text in message, f"{text!r} not in {message!r}"
    assert not re.search(r"mat1 and mat2|size of tensor a", message)
