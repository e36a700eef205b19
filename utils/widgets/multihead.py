"""Explorer and quiz for chapter 3, "Multi-head attention".

:func:`head_explorer` wires the pure state function :func:`utils.explorers.multihead.head_explorer_state`
and the figure :func:`utils.plotting.multihead.head_explorer_figure` to ipywidgets; :func:`ch3_quiz` returns
the chapter's quiz.
"""

from __future__ import annotations

from utils.explorers.multihead import HeadExplorerState, head_count_options, head_explorer_state
from utils.i18n.messages import tr
from utils.plotting.multihead import head_explorer_figure
from utils.widgets.common import Explorer, wire_explorer
from utils.widgets.quiz import Choice, Quiz

__all__ = ["head_explorer", "ch3_quiz"]


def head_explorer(num_heads: int = 3, head: int = 0, token: int = 5) -> Explorer:
    """An explorer over the apple sentence: choose H (divisors of 12), a head and a query token.

    The left panel is the chosen head's attention map; the right one the chosen token's weights as bars.
    Returns an :class:`~utils.widgets.common.Explorer` (see :func:`~utils.widgets.common.wire_explorer`);
    its ``output`` holds the figure. ``controls`` names them ``heads``, ``head`` and ``query``; ``state``
    is the :class:`~utils.explorers.multihead.HeadExplorerState` drawn last.
    """
    import ipywidgets as w

    tokens = list(head_explorer_state(num_heads).tokens)
    heads = w.Dropdown(options=head_count_options(12), value=num_heads, description=tr("heads H"))
    which = w.IntSlider(value=head + 1, min=1, max=num_heads, description=tr("head"))
    query = w.Dropdown(options=[(t, i) for i, t in enumerate(tokens)], value=token, description=tr("query token"))
    info = w.HTML()

    def compute() -> HeadExplorerState:
        which.max = heads.value
        state = head_explorer_state(heads.value, which.value - 1, query.value)
        info.value = tr("E = 12, H = {H}, D = {D}: '{token}' in head {head}: {preference}", H=heads.value,
                        D=state.head_dim, token=state.tokens[state.token], head=state.head + 1,
                        preference=state.preference)
        return state

    return wire_explorer([w.HBox([heads, which, query]), info], {"heads": heads, "head": which, "query": query},
                         compute, head_explorer_figure,  # the static edition's states: every head of H = 6
                         grid={"head": (1, 2, 3, 4, 5, 6, 12), "query": (2, 4, 5)},  # (the Try it), 3 query tokens
                         pure_draw=True)


def ch3_quiz() -> Quiz:
    """The chapter 3 quiz: heads and cost, the `.contiguous()` myth, torch's averaged weights, the silent
    split bug and the per-head scale."""
    return Quiz(
        [
            Choice(
                tr("With d_model = 512 and D = d_model / H, you go from H = 8 heads to H = 16. "
                   "What happens to the number of parameters of the attention layer?"),
                [tr("It doubles"), tr("It halves"), tr("It stays the same"), tr("It grows by sqrt(2)")],
                answer=2,
                feedback=[
                    tr("No: each head gets half as many dimensions (D = 32 instead of 64), so the total is unchanged."),
                    tr("No: the projections are still (E, E) matrices; only how their columns are grouped changes."),
                    tr("Yes: W_Q, W_K, W_V and W_O are (E, E) whatever H is; H only decides how the E columns "
                       "are cut."),
                    tr("No: nothing in the layer's size depends on sqrt(H)."),
                ],
                explanation=tr("Heads are a way of slicing the same (E, E) projections, not extra parameters."),
            ),
            Choice(
                tr("After `out.transpose(1, 2)` you call `.view(N, L, E)` without `.contiguous()`. What happens?"),
                [
                    tr("Training runs but the loss becomes NaN"),
                    tr("PyTorch raises a RuntimeError about size and stride"),
                    tr("The values are silently scrambled"),
                    tr("It works, only a little slower"),
                ],
                answer=1,
                feedback=[
                    tr("That is a popular story, but we ran it: `.view` refuses to run at all, so no loss is "
                       "computed."),
                    tr("Yes: `.view` cannot describe the transposed memory layout with one set of strides, so it "
                       "raises and suggests `.reshape`."),
                    tr("The silent bug is a different one: reshaping (N, H, L, D) to (N, L, E) *without* the "
                       "transpose."),
                    tr("It does not run: `.view` never copies, so it raises when strides do not fit."),
                ],
                explanation=tr("Use `.reshape` (copies only when needed) or `.contiguous().view`."),
            ),
            Choice(
                tr("`nn.MultiheadAttention(512, 8, batch_first=True)(x, x, x)` with x of shape (N, L, 512) "
                   "returns weights of which shape by default?"),
                ["(N, 8, L, L)", "(N, L, L)", "(8, L, L)", "(N, L, 512)"],
                answer=1,
                feedback=[
                    tr("That is what you get with `average_attn_weights=False` (and what our module returns)."),
                    tr("Yes: by default torch averages the weights over the heads, which hides what each head does."),
                    tr("No: the batch axis is kept; it is the heads axis that is averaged away."),
                    tr("That is the shape of the output, not of the weights."),
                ],
                explanation=tr("Pass `average_attn_weights=False` to see each head."),
            ),
            Choice(
                tr("You split the projected (N, L, E) tensor with `x.view(N, H, L, D)` directly, without the "
                   "`view(N, L, H, D).transpose(1, 2)` route. What happens?"),
                [
                    tr("PyTorch raises, because the strides do not fit"),
                    tr("It runs, and each head gets the right features of each token"),
                    tr("It runs, and each head's rows mix features of different tokens"),
                    tr("It runs, but only when N = 1"),
                ],
                answer=2,
                feedback=[
                    tr("No: x is contiguous and the sizes multiply out, so `.view` is happy; that is what makes "
                       "this bug silent."),
                    tr("No: memory holds token 0's E features, then token 1's; cutting that into (H, L, D) gives "
                       "head 0 the first L*D numbers, which belong to several tokens."),
                    tr("Yes: the shape is right and nothing raises, but a head's row holds D numbers that may "
                       "come from another token. The check names this mistake."),
                    tr("No: N is not the problem; it scrambles tokens and heads inside every sample."),
                ],
                explanation=tr("Cut the last axis first, view(N, L, H, D), then move the heads axis with "
                               "transpose(1, 2)."),
            ),
            Choice(
                tr("A layer with E = 512 and H = 8 heads. By what do you divide each head's scores q @ k^T?"),
                ["sqrt(512)", "sqrt(64)", "sqrt(8)", "64"],
                answer=1,
                feedback=[
                    tr("No: that is the model dimension. Each head's dot product sums only its D = 64 products."),
                    tr("Yes: a head's dot product is a sum of D = E / H = 64 products, so its variance grows "
                       "with D, and 1/sqrt(D) brings it back to about 1 (chapter 2)."),
                    tr("No: the number of heads plays no part in one head's dot product."),
                    tr("No: dividing by D shrinks the scores too much; the standard deviation grows like sqrt(D)."),
                ],
                explanation=tr("The scale follows the head dimension D = E // H, not E and not H."),
            ),
        ],
        title=tr("Chapter 3 quiz: multi-head attention"),
    )
