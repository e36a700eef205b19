"""Explorers and quiz for chapter 6, attention at scale.

:func:`window_explorer` and :func:`kv_cache_explorer` wire the pure state functions of
:mod:`utils.explorers.at_scale` (tested by pytest) and the figures of :mod:`utils.plotting.at_scale` to
controls and an ``Output`` widget.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from utils.decoder import TinyDecoder, decode_trace
from utils.explorers.at_scale import kv_cache_explorer_state, window_explorer_state
from utils.i18n.messages import tr
from utils.plotting.at_scale import kv_cache_explorer_figure, window_explorer_figure
from utils.tasks import REPEAT_VOCAB
from utils.widgets.common import wire_explorer
from utils.widgets.quiz import Choice, Quiz

__all__ = ["window_explorer", "kv_cache_explorer", "ch6_quiz"]


def window_explorer(length: int = 32):
    """Sliders for the window, the number of global tokens and the depth; redraws the mask and the field.

    Returns:
        An ``ipywidgets.VBox`` (see :func:`~utils.widgets.common.wire_explorer`): the controls, then an
        ``Output`` with the figure. ``controls`` names them ``window``, ``num_global`` and ``depth``;
        ``state`` is the :class:`~utils.explorers.at_scale.WindowExplorerState` drawn last.
    """

    import ipywidgets as w

    window = w.IntSlider(value=2, min=0, max=length // 2, description=tr("window"))
    num_global = w.IntSlider(value=0, min=0, max=4, description=tr("global tokens"))
    depth = w.IntSlider(value=3, min=1, max=8, description=tr("depth"))
    return wire_explorer(
        [w.HBox([window, num_global, depth])], {"window": window, "num_global": num_global, "depth": depth},
        lambda: window_explorer_state(window.value, num_global.value, depth.value, length=length),
        window_explorer_figure,  # the static edition's states:
        grid={"window": (0, 1, 2, 4, length // 2), "num_global": (0, 1), "depth": (1, 2, 4, 8)}, pure_draw=True)


def kv_cache_explorer(model: TinyDecoder, prompt: torch.Tensor, new_tokens: int = 32,
                      windows: Sequence[int] = (4, 8, 9, 16), *, vocab: Sequence[str] = REPEAT_VOCAB):
    """Play or step through greedy decoding with a KV cache; a switch turns the cache into a ring buffer.

    Decodes ``prompt`` once with the full cache and once per window (:func:`~utils.decoder.decode_trace`),
    then redraws :func:`~utils.plotting.at_scale.kv_cache_explorer_figure` for the chosen step.

    Args:
        model: a :class:`~utils.decoder.TinyDecoder`.
        prompt: ``(1, P)`` token ids.
        new_tokens: the steps to trace. Default: ``32``.
        windows: the ring-buffer sizes offered. Default: ``(4, 8, 9, 16)``.
        vocab: the word of each token id. Default: :data:`~utils.tasks.REPEAT_VOCAB`.

    Returns:
        An ``ipywidgets.VBox`` (see :func:`~utils.widgets.common.wire_explorer`); ``controls`` names
        ``step``, ``sliding`` and ``window``; ``play`` is the ``Play`` widget that drives ``step``; ``state``
        is the :class:`~utils.explorers.at_scale.KVCacheExplorerState` drawn last.
    """
    import ipywidgets as w

    traces = {None: decode_trace(model, prompt, new_tokens)}
    traces.update({size: decode_trace(model, prompt, new_tokens, window=size) for size in windows})
    ids = prompt[0].tolist()
    play = w.Play(value=0, min=0, max=new_tokens - 1, interval=800, description=tr("play"))
    step = w.IntSlider(value=0, min=0, max=new_tokens - 1, description=tr("step"))
    w.link((play, "value"), (step, "value"))  # kernel-side, so that Play also works where tests drive it
    sliding = w.Checkbox(value=False, description=tr("sliding window (ring buffer)"))
    window = w.Dropdown(options=list(windows), value=max(windows), description=tr("W slots"))
    box = wire_explorer(
        [w.HBox([play, step]), w.HBox([sliding, window])], {"step": step, "sliding": sliding, "window": window},
        lambda: kv_cache_explorer_state(ids, traces, step.value, window.value if sliding.value else None,
                                        vocab=vocab),
        kv_cache_explorer_figure,
        grid={"step": sorted({s for s in (0, 1, 4, 8, new_tokens // 2) if s < new_tokens} | {new_tokens - 1}),
              "window": tuple(windows)}, pure_draw=True)  # the static edition: a window the full cache
    # ignores gives the same state, drawn once
    box.play = play
    return box


def ch6_quiz() -> Quiz:
    """Six questions on memory, tiling, the backward pass, windows, the KV cache and the ring-buffer cache."""
    return Quiz([
        Choice(
            tr("Tiled (FlashAttention-style) attention computes exactly the same output as the naive version. "
               "What does it save?"),
            [tr("Floating-point operations: it skips most of the (L, S) scores"),
             tr("Memory: it never holds the (L, S) scores at once, only one block"),
             tr("Nothing on CPU; it only helps on GPUs"),
             tr("Accuracy: it is more precise than softmax")],
            answer=1,
            feedback=[
                tr("No: it still computes every score, once; the FLOPs are the same (FlashAttention is faster on GPU "
                   "because it moves less data, not because it computes less)."),
                tr("Right: extra memory O(L) instead of O(L·S); we measured it with peak RSS."),
                tr("The memory saving is the same on CPU; we measured it here on a CPU."),
                tr("It gives the same result up to rounding; the online softmax is a rearrangement, not an "
                   "improvement."),
            ],
            explanation=tr("Same maths, same FLOPs, different order: only one block of scores is alive at a time."),
        ),
        Choice(
            tr("You train with tiled_attention(..., backward=\"autograd\"): the Python loop under autograd. How much "
               "memory does the backward pass need?"),
            [tr("O(L), like the forward"),
             tr("O(L·S): autograd saves every block it computed for the backward"),
             tr("None: the loop is not differentiable"),
             "O(1)"],
            answer=1,
            feedback=[
                tr("Only the forward is O(L). Autograd keeps each block's tensors alive for the backward."),
                tr("Right: that is why FlashAttention writes its own backward, which recomputes each block from the "
                   "one logsumexp per row the forward saved (section 3 does the same)."),
                tr("It is differentiable; the tests compare its gradients with F.scaled_dot_product_attention's."),
                tr("Even the output alone is O(L·Dv)."),
            ],
            explanation=tr("Memory-efficient training needs a custom backward (recomputation), not just a tiled "
                           "forward."),
        ),
        Choice(
            tr("FlashAttention's forward saves one logsumexp per query row for the backward. Why not save the weights "
               "P instead?"),
            [tr("P is an (L, S) matrix: saving it brings back the O(L·S) memory that tiling removed, while the "
                "logsumexp is L numbers from which each block of P is rebuilt as exp(S - lse)"),
             tr("The logsumexp is more accurate than P"),
             tr("P cannot be computed block by block"),
             tr("The backward does not need P at all")],
            answer=0,
            feedback=[
                tr("Right: the backward recomputes each block's scores from Q and K and gets its exact weights back "
                   "from one saved number per row, trading a second pass of FLOPs for memory."),
                tr("Both are exact up to rounding; the point is their size, not their accuracy."),
                tr("The forward computes P one block at a time; it simply never keeps it."),
                tr("It does: dV = Pᵀ dO and dS = P ⊙ (dP − Δ) both use P, rebuilt block by block."),
            ],
            explanation=tr("Recompute rather than store: L numbers instead of L × S, at the cost of redoing the "
                           "scores."),
        ),
        Choice(
            tr("A model stacks 4 layers of sliding-window attention with window 2 (two keys on each side). How far "
               "back can information reach the last token?"),
            [tr("2 positions"), tr("4 positions"), tr("8 positions"), tr("Everywhere: attention is global")],
            answer=2,
            feedback=[
                tr("That is one layer. Each layer adds another window."),
                tr("That counts two layers."),
                tr("Right: the receptive field grows by the window per layer, 4 x 2 = 8."),
                tr("Not with a window mask: a token outside the band has weight zero in that layer."),
            ],
            explanation=tr("Depth widens a local model's view linearly; global tokens shortcut it in two hops."),
        ),
        Choice(
            tr("Why does a KV cache give exactly the same tokens as recomputing the whole prefix at every step?"),
            [tr("It does not: it is an approximation"),
             tr("Because of the causal mask: earlier positions never see later ones, so their keys and values "
                "never change"),
             tr("Because the model is in eval mode"),
             tr("Because keys and values are the same tensor")],
            answer=1,
            feedback=[
                tr("It is exact; the chapter checks that both generate the same tokens."),
                tr("Right: with causal attention, position t's K and V depend only on tokens 0..t, so we compute "
                   "them once."),
                tr("Eval mode switches dropout off, but the reason the cache is exact is the causal mask."),
                tr("They are two different projections of the same hidden states."),
            ],
            explanation=tr("No causal mask (e.g. an encoder) means no KV cache: every position would change at each "
                           "step."),
        ),
        Choice(
            tr("A 2-layer decoder generates with a ring-buffer cache of W slots per layer. Can the newest token still "
               "be influenced by a token more than W positions back?"),
            [tr("No: its keys and values were overwritten, so nothing of that token is left"),
             tr("Yes: layer 2's cached keys were computed from layer-1 states that each saw their own window, so "
                "information can arrive from up to 2(W - 1) positions back"),
             tr("Yes: the ring buffer keeps a summary of the evicted tokens in its oldest slot"),
             tr("Only if W is at least the length of the prompt")],
            answer=1,
            feedback=[
                tr("Its own keys are gone, but not everything it passed on: the cached keys of layer 2 come from "
                   "layer-1 states that attended to it while it was still in the window."),
                tr("Right: each layer reaches one window further, as section 4's receptive fields showed. Our model "
                   "still fails below one pattern's length, because it was never trained to relay a word that way."),
                tr("It keeps nothing but the W most recent keys and values; slots are simply overwritten."),
                tr("The prompt length does not matter: once more than W tokens exist, the oldest slot is overwritten."),
            ],
            explanation=tr("A sliding window limits what one layer sees, not how far information travels through "
                           "depth."),
        ),
    ], title=tr("Chapter 6 quiz: attention at scale"))
