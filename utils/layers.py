"""The Transformer encoder: feed-forward block, encoder layer (post-LN and pre-LN) and a tiny token classifier.

The layer and the classifier return attention maps as :class:`~utils.attention.MultiHeadAttention` does:
``need_weights=True`` asks for them, and the result is always a pair ``(output, weights or None)``.

Shape letters: N batch, L sequence length, S source length (= L here), E model dimension (``d_model``),
H heads, C classes. All tensors are batch-first; masks follow the package convention (bool ``True`` = may
attend, float added to the scores, broadcastable to ``(N, H, L, S)``).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from utils._checks import check_positive_int, check_probability, check_sequence, check_tensor, fmt_shape
from utils.attention import MultiHeadAttention
from utils.positional import PositionalEncoding

__all__ = ["FeedForward", "TransformerEncoderLayer", "TinyEncoderClassifier"]

_ACTIVATIONS = {"relu": F.relu, "gelu": F.gelu}


class FeedForward(nn.Module):
    """The position-wise feed-forward block: ``linear2(dropout(activation(linear1(x))))``.

    Args:
        d_model: the model dimension E.
        dim_feedforward: the hidden width.
        dropout: dropout after the activation. Default: ``0.0``.
        activation: ``"relu"`` or ``"gelu"``. Default: ``"relu"``.

    >>> ff = FeedForward(8, 32, activation="gelu")
    >>> ff(torch.randn(2, 5, 8)).shape
    torch.Size([2, 5, 8])
    """

    def __init__(self, d_model: int, dim_feedforward: int, *, dropout: float = 0.0, activation: str = "relu") -> None:
        super().__init__()
        self.d_model = check_positive_int("d_model", d_model)
        check_positive_int("dim_feedforward", dim_feedforward)
        if activation not in _ACTIVATIONS:
            raise ValueError(f"activation: expected one of {sorted(_ACTIVATIONS)}, got {activation!r}")
        self.activation_name = activation
        self.activation = _ACTIVATIONS[activation]
        self.linear1 = nn.Linear(d_model, dim_feedforward)
        self.dropout = nn.Dropout(check_probability("dropout", dropout))
        self.linear2 = nn.Linear(dim_feedforward, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Apply the block to every position independently.

        Args:
            x: ``(N, L, E)``.

        Returns:
            ``(N, L, E)``.

        Shape:
            N batch, L sequence length, E ``d_model``; the hidden width is ``dim_feedforward``.
        """
        check_sequence("x", x, self.d_model)
        hidden = self.dropout(self.activation(self.linear1(x)))  # (N, L, dim_feedforward)
        return self.linear2(hidden)  # (N, L, E)


class TransformerEncoderLayer(nn.Module):
    r"""One encoder layer: self-attention then feed-forward, each with a residual connection and LayerNorm.

    Post-LN (``norm_first=False``, the original paper): ``x = norm1(x + attn(x)); x = norm2(x + ff(x))``.
    Pre-LN (``norm_first=True``): ``x = x + attn(norm1(x)); x = x + ff(norm2(x))``.

    ``forward`` returns ``(out, weights)``, like :class:`~utils.attention.MultiHeadAttention`. **Attention maps
    for plotting**: pass ``need_weights=True`` to get ``weights`` ``(N, H, L, S)`` from the explicit path. With
    the default ``need_weights=False`` the fast attention path runs and ``weights`` is ``None`` (the default
    differs from ``MultiHeadAttention``'s, as in torch, where the layer calls attention without weights).

    Args:
        d_model: the model dimension E.
        num_heads: the number of heads H.
        dim_feedforward: the feed-forward width. Default: ``2048``.
        dropout: dropout on attention weights, after the activation and on both residual branches. Default: ``0.1``.
        activation: ``"relu"`` or ``"gelu"``. Default: ``"relu"``.
        norm_first: pre-LN instead of post-LN. Default: ``False``.
        layer_norm_eps: LayerNorm epsilon. Default: ``1e-5``.

    >>> layer = TransformerEncoderLayer(16, 4, 32, dropout=0.0)
    >>> out, weights = layer(torch.randn(2, 5, 16), need_weights=True)
    >>> out.shape, weights.shape
    (torch.Size([2, 5, 16]), torch.Size([2, 4, 5, 5]))
    >>> layer(torch.randn(2, 5, 16))[1] is None
    True
    """

    def __init__(self, d_model: int, num_heads: int, dim_feedforward: int = 2048, dropout: float = 0.1, *,
                 activation: str = "relu", norm_first: bool = False, layer_norm_eps: float = 1e-5) -> None:
        super().__init__()
        # sublayers
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout=dropout)
        self.feed_forward = FeedForward(d_model, dim_feedforward, dropout=dropout, activation=activation)
        # residual branches
        self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.d_model, self.norm_first = d_model, norm_first

    def forward(self, x: torch.Tensor, *, mask: torch.Tensor | None = None, is_causal: bool = False,
                need_weights: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Self-attention then feed-forward, each around a residual connection (post-LN or pre-LN).

        Args:
            x: ``(N, L, E)``.
            mask: bool (``True`` = may attend) or float (added), broadcastable to ``(N, H, L, L)``, e.g.
                :func:`~utils.attention.padding_mask` ``(N, 1, 1, L)``. Default: ``None``.
            is_causal: also apply :func:`~utils.attention.causal_mask` ``(L, L)``. Default: ``False``.
            need_weights: also return the attention weights (explicit path); ``False`` takes the fast
                path. Default: ``False``.

        Returns:
            ``(out, weights)``: ``out`` ``(N, L, E)``, and ``weights`` ``(N, H, L, L)`` (before dropout, rows
            summing to 1 over the keys) when ``need_weights=True``, else ``None``.

        Shape:
            N batch, L sequence length, E ``d_model``, H ``num_heads``.
        """
        N, L, E = check_sequence("x", x, self.d_model)
        if self.norm_first:
            attended, weights = self._attention(self.norm1(x), mask, is_causal, need_weights)
            x = x + attended  # (N, L, E)
            x = x + self.dropout2(self.feed_forward(self.norm2(x)))  # (N, L, E)
        else:
            attended, weights = self._attention(x, mask, is_causal, need_weights)
            x = self.norm1(x + attended)  # (N, L, E)
            x = self.norm2(x + self.dropout2(self.feed_forward(x)))  # (N, L, E)
        return x, weights

    def _attention(self, x: torch.Tensor, mask: torch.Tensor | None, is_causal: bool,
                   need_weights: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
        out, weights = self.self_attn(x, mask=mask, is_causal=is_causal, need_weights=need_weights)
        return self.dropout1(out), weights

    @classmethod
    def from_torch(cls, layer: nn.TransformerEncoderLayer) -> TransformerEncoderLayer:
        """Copy a ``batch_first=True`` ``nn.TransformerEncoderLayer`` (post-LN or pre-LN, relu or gelu).

        Masks keep their conventions: torch's ``src_mask`` / ``src_key_padding_mask`` booleans mean ``True`` =
        blocked; convert with ``utils.attention.from_torch_mask`` or ``to_torch_mask``.

        >>> torch_layer = nn.TransformerEncoderLayer(8, 2, 16, batch_first=True, norm_first=True).eval()
        >>> layer = TransformerEncoderLayer.from_torch(torch_layer).eval()
        >>> x = torch.randn(2, 3, 8)
        >>> torch.allclose(layer(x)[0], torch_layer(x), atol=1e-5)
        True
        """
        if not isinstance(layer, nn.TransformerEncoderLayer):
            raise TypeError(f"layer: expected nn.TransformerEncoderLayer, got {type(layer).__name__}")
        if not layer.self_attn.batch_first:
            raise ValueError("layer: only batch_first=True layers are supported (this package is batch-first)")
        if layer.linear1.bias is None or layer.norm1.bias is None:
            raise ValueError("layer: layers built with bias=False are not supported")
        kind = getattr(layer, "activation_relu_or_gelu", 0)
        if kind == 0:
            kind = 1 if layer.activation is F.relu else 2 if layer.activation is F.gelu else 0
        if kind == 0:
            raise ValueError(f"layer: only relu and gelu activations are supported, got {layer.activation!r}")
        weight = layer.linear1.weight
        new = cls(layer.self_attn.embed_dim, layer.self_attn.num_heads, layer.linear1.out_features,
                  layer.dropout.p, activation="relu" if kind == 1 else "gelu", norm_first=layer.norm_first,
                  layer_norm_eps=layer.norm1.eps)
        new.self_attn = MultiHeadAttention.from_torch(layer.self_attn)
        new = new.to(weight.device, weight.dtype)
        pairs = [(new.feed_forward.linear1, layer.linear1), (new.feed_forward.linear2, layer.linear2),
                 (new.norm1, layer.norm1), (new.norm2, layer.norm2)]
        with torch.no_grad():
            for ours, theirs in pairs:
                ours.weight.copy_(theirs.weight)
                ours.bias.copy_(theirs.bias)
        return new.train(layer.training)


class TinyEncoderClassifier(nn.Module):
    r"""A small encoder that labels every token: embedding, positions, ``num_layers`` layers, linear head.

    Not torch's ``nn.TransformerEncoder`` (a stack of layers only): this is a whole token classifier.

    ``logits = head(norm(layers(pos(embedding(tokens) * sqrt(d_model)))))``; the final LayerNorm is there only
    when ``norm_first`` (pre-LN layers leave their output un-normalised).

    Args:
        vocab_size: the number of token ids.
        d_model: the model dimension E.
        num_heads: the number of heads H.
        num_layers: the number of encoder layers.
        dim_feedforward: the feed-forward width.
        num_classes: the number of output classes C per token.
        max_len: positions precomputed for the sinusoidal encoding. Default: ``512``.
        dropout: dropout in the layers and after the positional encoding. Default: ``0.0``.
        norm_first: pre-LN layers and a final LayerNorm. Default: ``False``.

    >>> model = TinyEncoderClassifier(vocab_size=10, d_model=16, num_heads=2, num_layers=2, dim_feedforward=32,
    ...                               num_classes=3)
    >>> logits, maps = model(torch.randint(0, 10, (4, 7)), need_weights=True)
    >>> logits.shape, len(maps), maps[0].shape
    (torch.Size([4, 7, 3]), 2, torch.Size([4, 2, 7, 7]))
    """

    def __init__(self, vocab_size: int, d_model: int, num_heads: int, num_layers: int, dim_feedforward: int,
                 num_classes: int, *, max_len: int = 512, dropout: float = 0.0, norm_first: bool = False) -> None:
        super().__init__()
        self.vocab_size = check_positive_int("vocab_size", vocab_size)
        self.d_model = check_positive_int("d_model", d_model)
        check_positive_int("num_layers", num_layers)
        check_positive_int("num_classes", num_classes)
        # input: token embedding and sinusoidal positions
        self.embedding = nn.Embedding(vocab_size, d_model)
        nn.init.normal_(self.embedding.weight, std=d_model ** -0.5)  # x sqrt(E) below: std 1 per feature
        self.positional = PositionalEncoding(d_model, dropout=dropout, max_len=max_len)
        # body
        self.layers = nn.ModuleList(
            TransformerEncoderLayer(d_model, num_heads, dim_feedforward, dropout, norm_first=norm_first)
            for _ in range(num_layers))
        self.norm = nn.LayerNorm(d_model) if norm_first else nn.Identity()
        # per-token classifier
        self.head = nn.Linear(d_model, num_classes)

    def forward(self, tokens: torch.Tensor, *, mask: torch.Tensor | None = None, is_causal: bool = False,
                need_weights: bool = False) -> tuple[torch.Tensor, list[torch.Tensor] | None]:
        """Label every token.

        Args:
            tokens: ``(N, L)`` integer token ids in ``[0, vocab_size)``.
            mask: bool (``True`` = may attend) or float (added), broadcastable to ``(N, H, L, L)``, e.g.
                :func:`~utils.attention.padding_mask` ``(N, 1, 1, L)``. Default: ``None``.
            is_causal: also apply :func:`~utils.attention.causal_mask` in every layer. Default: ``False``.
            need_weights: also return every layer's attention weights. Default: ``False``.

        Returns:
            ``(logits, maps)``: ``logits`` ``(N, L, C)``, and ``maps`` a list of ``num_layers`` weights
            ``(N, H, L, L)`` when ``need_weights=True``, else ``None``.

        Shape:
            N batch, L sequence length, H ``num_heads``, C ``num_classes``.
        """
        check_tensor("tokens", tokens, ndim=2, expected="(N, L)")
        if tokens.is_floating_point() or tokens.dtype == torch.bool:
            raise TypeError(f"tokens: expected integer token ids (torch.long), got dtype {tokens.dtype}")
        if tokens.numel() and (tokens.min() < 0 or tokens.max() >= self.vocab_size):
            raise ValueError(f"tokens: ids must lie in [0, vocab_size={self.vocab_size}), got min "
                             f"{int(tokens.min())} and max {int(tokens.max())} in shape {fmt_shape(tokens.shape)}")
        N, L = tokens.shape
        x = self.positional(self.embedding(tokens) * math.sqrt(self.d_model))  # (N, L, E)
        maps = []
        for layer in self.layers:
            x, weights = layer(x, mask=mask, is_causal=is_causal, need_weights=need_weights)  # (N, L, E)
            maps.append(weights)  # (N, H, L, L), or None
        logits = self.head(self.norm(x))  # (N, L, C)
        return logits, (maps if need_weights else None)
