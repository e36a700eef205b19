"""Explorer and quiz for chapter 6, attention at scale.

:func:`window_explorer_state` computes what the explorer draws (pure, tested by pytest);
:func:`window_explorer` wires it to sliders and an ``Output`` widget.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from utils.at_scale import global_tokens_mask, receptive_field
from utils.plotting.at_scale import window_explorer_figure
from utils.widgets.common import wire_explorer
from utils.widgets.quiz import Choice, Quiz

__all__ = ["WindowExplorerState", "window_explorer_state", "window_explorer", "ch6_quiz"]


@dataclass(frozen=True)
class WindowExplorerState:
    """What the sliding-window explorer draws for one (window, global tokens, depth)."""

    mask: torch.Tensor  # bool (L, L), True = may attend
    field: torch.Tensor  # bool (depth, L): row d, the inputs that reach ``query`` after d + 1 layers
    reach: list[int]  # the number of inputs reaching ``query`` per layer
    fraction: float  # of the (L, L) entries kept
    full_depth: int | None  # the first depth at which ``query`` sees every input, or None
    window: int
    num_global: int
    depth: int
    query: int


def window_explorer_state(window: int, num_global: int = 0, depth: int = 3, *, length: int = 32,
                          query: int | None = None) -> WindowExplorerState:
    """The sliding-window mask with global tokens and the receptive field of one query by depth.

    Args:
        window: keys at most this far away on each side are visible.
        num_global: the first ``num_global`` tokens are global. Default: ``0``.
        depth: the number of stacked layers. Default: ``3``.
        length: L. Default: ``32``.
        query: the position whose receptive field is drawn. Default: the last one.

    Returns:
        A :class:`WindowExplorerState`: ``mask`` bool (L, L), ``field`` bool (depth, L) (row d: inputs
        that reach ``query`` after d + 1 layers), ``reach`` (the number of inputs reaching it per layer),
        ``fraction`` of the (L, L) entries kept, ``full_depth`` (first depth at which it sees every
        input, or None) and the settings.

    >>> s = window_explorer_state(2, 0, 3, length=16, query=15)
    >>> s.reach, s.full_depth
    ([3, 5, 7], None)
    """
    if window < 0 or num_global < 0 or depth < 1 or length < 1:
        raise ValueError(f"need window >= 0, num_global >= 0, depth >= 1, length >= 1; got window={window}, "
                         f"num_global={num_global}, depth={depth}, length={length}")
    query = length - 1 if query is None else query
    mask = global_tokens_mask(length, window, num_global)  # (L, L)
    field = receptive_field(mask, depth)[:, query, :]  # (depth, L)
    reach = field.sum(dim=-1).tolist()
    full = next((d + 1 for d, r in enumerate(reach) if r == length), None)
    return WindowExplorerState(mask=mask, field=field, reach=reach, fraction=mask.float().mean().item(),
                               full_depth=full, window=window, num_global=num_global, depth=depth, query=query)


def window_explorer(length: int = 32):
    """Sliders for the window, the number of global tokens and the depth; redraws the mask and the field.

    Returns:
        An ``ipywidgets.VBox`` (see :func:`~utils.widgets.common.wire_explorer`): the controls, then an
        ``Output`` with the figure. ``controls`` names them ``window``, ``num_global`` and ``depth``;
        ``state`` is the :class:`WindowExplorerState` drawn last.
    """

    import ipywidgets as w

    window = w.IntSlider(value=2, min=0, max=length // 2, description="window")
    num_global = w.IntSlider(value=0, min=0, max=4, description="global tokens")
    depth = w.IntSlider(value=3, min=1, max=8, description="depth")
    return wire_explorer(
        [w.HBox([window, num_global, depth])], {"window": window, "num_global": num_global, "depth": depth},
        lambda: window_explorer_state(window.value, num_global.value, depth.value, length=length),
        window_explorer_figure,  # the static edition's states:
        grid={"window": (0, 1, 2, 4, length // 2), "num_global": (0, 1), "depth": (1, 2, 4, 8)})


def ch6_quiz() -> Quiz:
    """Five questions on memory, tiling, windows, the KV cache and the ring-buffer cache."""
    return Quiz([
        Choice(
            "Tiled (FlashAttention-style) attention computes exactly the same output as the naive version. "
            "What does it save?",
            ["Floating-point operations: it skips most of the (L, S) scores",
             "Memory: it never holds the (L, S) scores at once, only one block",
             "Nothing on CPU; it only helps on GPUs",
             "Accuracy: it is more precise than softmax"],
            answer=1,
            feedback=[
                "No: it still computes every score, once; the FLOPs are the same (FlashAttention is faster on GPU "
                "because it moves less data, not because it computes less).",
                "Right: extra memory O(L) instead of O(L·S); we measured it with peak RSS.",
                "The memory saving is the same on CPU; we measured it here on a CPU.",
                "It gives the same result up to rounding; the online softmax is a rearrangement, not an improvement.",
            ],
            explanation="Same maths, same FLOPs, different order: only one block of scores is alive at a time.",
        ),
        Choice(
            "You train with tiled_attention from this chapter (a Python loop under autograd). How much memory "
            "does the backward pass need?",
            ["O(L), like the forward",
             "O(L·S): autograd saves every block it computed for the backward",
             "None: the loop is not differentiable",
             "O(1)"],
            answer=1,
            feedback=[
                "Only the forward is O(L). Autograd keeps each block's tensors alive for the backward.",
                "Right: that is why FlashAttention writes its own backward that recomputes the blocks from the "
                "saved running max and sum.",
                "It is differentiable; the tests compare its gradients with F.scaled_dot_product_attention's.",
                "Even the output alone is O(L·Dv).",
            ],
            explanation="Memory-efficient training needs a custom backward (recomputation), not just a tiled forward.",
        ),
        Choice(
            "A model stacks 4 layers of sliding-window attention with window 2 (two keys on each side). How far "
            "back can information reach the last token?",
            ["2 positions", "4 positions", "8 positions", "Everywhere: attention is global"],
            answer=2,
            feedback=[
                "That is one layer. Each layer adds another window.",
                "That counts two layers.",
                "Right: the receptive field grows by the window per layer, 4 x 2 = 8.",
                "Not with a window mask: a token outside the band has weight zero in that layer.",
            ],
            explanation="Depth widens a local model's view linearly; global tokens shortcut it in two hops.",
        ),
        Choice(
            "Why does a KV cache give exactly the same tokens as recomputing the whole prefix at every step?",
            ["It does not: it is an approximation",
             "Because of the causal mask: earlier positions never see later ones, so their keys and values "
             "never change",
             "Because the model is in eval mode",
             "Because keys and values are the same tensor"],
            answer=1,
            feedback=[
                "It is exact; the chapter checks that both generate the same tokens.",
                "Right: with causal attention, position t's K and V depend only on tokens 0..t, so we compute "
                "them once.",
                "Eval mode switches dropout off, but the reason the cache is exact is the causal mask.",
                "They are two different projections of the same hidden states.",
            ],
            explanation="No causal mask (e.g. an encoder) means no KV cache: every position would change at each step.",
        ),
        Choice(
            "A 2-layer decoder generates with a ring-buffer cache of W slots per layer. Can the newest token still "
            "be influenced by a token more than W positions back?",
            ["No: its keys and values were overwritten, so nothing of that token is left",
             "Yes: layer 2's cached keys were computed from layer-1 states that each saw their own window, so "
             "information can arrive from up to 2(W - 1) positions back",
             "Yes: the ring buffer keeps a summary of the evicted tokens in its oldest slot",
             "Only if W is at least the length of the prompt"],
            answer=1,
            feedback=[
                "Its own keys are gone, but not everything it passed on: the cached keys of layer 2 come from "
                "layer-1 states that attended to it while it was still in the window.",
                "Right: each layer reaches one window further, as section 4's receptive fields showed. Our model "
                "still fails below one pattern's length, because it was never trained to relay a word that way.",
                "It keeps nothing but the W most recent keys and values; slots are simply overwritten.",
                "The prompt length does not matter: once more than W tokens exist, the oldest slot is overwritten.",
            ],
            explanation="A sliding window limits what one layer sees, not how far information travels through depth.",
        ),
    ], title="Chapter 6 quiz: attention at scale")
