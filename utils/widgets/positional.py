"""Explorer and quiz of chapter 4, "Positional encoding". See utils/widgets/__init__.py.

:func:`positional_explorer` wires :func:`~utils.explorers.positional.positional_explorer_state` (pure,
tested by pytest) and :func:`~utils.plotting.positional.positional_explorer_figure` to sliders and a toggle.
"""

from __future__ import annotations

from utils.explorers.positional import ENCODING_KINDS, positional_explorer_state
from utils.i18n.messages import tr
from utils.plotting.positional import positional_explorer_figure
from utils.widgets.common import wire_explorer
from utils.widgets.quiz import Choice, Numeric, Quiz

__all__ = ["positional_explorer", "ch4_quiz"]


def positional_explorer(length: int = 48, d_model: int = 32):
    """Sliders for the position ``p`` and the dimension ``j``, a toggle between sinusoidal, learned (random
    init) and RoPE; redraws the table, the row of ``p`` and the similarity-vs-offset curve.

    Returns:
        An ``ipywidgets.VBox`` (see :func:`~utils.widgets.common.wire_explorer`): controls, then an
        ``Output``. ``controls`` names them ``kind``, ``position`` and ``dimension``; ``state`` is the
        :class:`~utils.explorers.positional.PositionalExplorerState` drawn last.
    """
    import ipywidgets as w

    kind = w.ToggleButtons(options=[(label, key) for key, label in ENCODING_KINDS.items()], value="sinusoidal",
                           description=tr("encoding"))
    position = w.IntSlider(value=length // 3, min=0, max=length - 1, description=tr("position p"),
                           continuous_update=False)
    dimension = w.IntSlider(value=0, min=0, max=d_model - 1, description=tr("dimension j"),
                            continuous_update=False)
    return wire_explorer(
        [kind, w.HBox([position, dimension])], {"kind": kind, "position": position, "dimension": dimension},
        lambda: positional_explorer_state(kind.value, position.value, dimension.value, length=length,
                                          d_model=d_model),
        positional_explorer_figure,  # the static edition's states:
        grid={"position": (0, length // 3, 2 * length // 3, length - 1), "dimension": (0, d_model // 2)},
        pure_draw=True)


def ch4_quiz() -> Quiz:
    """The chapter 4 quiz: order blindness, the shift matrix, the batch-axis bug, extrapolation, RoPE."""
    return Quiz([
        Choice(
            tr("Self-attention with no positional information reads 'dog bites man' and 'man bites dog'. "
               "How do the two sets of output vectors compare?"),
            [tr("They are completely different, because the words are in a different order."),
             tr("Every output vector is identical, whatever the token."),
             tr("They are the same vectors, in the permuted order."),
             tr("They differ only by a small numerical error.")],
            answer=2,
            feedback=[tr("Nothing in Q, K, V or the softmax looks at the order, so permuting the input can only "
                         "permute the output."),
                      tr("Each token still gets its own output (its own query); only the order is lost."),
                      tr("Right: self-attention is permutation-equivariant. 'dog' gets the same output in both "
                         "sentences, so the model cannot tell who bit whom."),
                      tr("The match is exact up to float rounding, and the reason is structural, not numerical.")],
            explanation=tr("Positions have to be injected from outside: that is this chapter."),
        ),
        Choice(
            tr("For the sinusoidal encoding, how is PE(p + k) related to PE(p)?"),
            [tr("PE(p + k) = M_k PE(p), with one matrix M_k (2 x 2 rotations) that is the same for every p."),
             "PE(p + k) = PE(p) + PE(k).",
             tr("PE(p + k) = M PE(p) with a matrix that depends on both p and k."),
             tr("There is no simple relation; the model has to memorise every pair.")],
            answer=0,
            feedback=[tr("Right: the angle-addition formulas give a block of rotations by k * w_i, "
                         "independent of p."),
                      tr("sin(a + b) is not sin a + sin b: the cell after exercise 2 prints how far PE(p) + PE(7) "
                         "is from PE(p + 7), and it is not close."),
                      tr("The whole point is that M_k does not depend on p: that is what makes an offset "
                         "learnable with one linear map."),
                      tr("You built the matrix yourself in the exercise.")],
            explanation=tr("A linear layer can in principle express 'k positions later'; whether it learns it is "
                           "another question."),
        ),
        Choice(
            tr("x is batch-first, shape (N, L, E) = (8, 8, 64), and pe is the (5000, 64) table. "
               "What does `x + pe[:x.size(0)]` do?"),
            [tr("It raises a shape error."),
             tr("It adds PE(n) to every position of sample n."),
             tr("It adds random rows of the table."),
             tr("The right thing, but only by luck: pe[:N] equals pe[:L] because N == L. With N = 1 the same line "
                "silently adds PE(0) to every token.")],
            answer=3,
            feedback=[tr("(8, 8, 64) + (8, 64) broadcasts: the (8, 64) slice lines up with the (L, E) axes. "
                         "It only raises when N is neither 1 nor L."),
                      tr("That is what the same line does with a (max_len, 1, E) table from a sequence-first recipe; "
                         "with a (max_len, E) table the slice broadcasts along N instead."),
                      tr("The rows are PE(0) .. PE(N-1), in order; nothing is random."),
                      tr("Right: x.size(0) is N. A test with N == L cannot catch this; test with N == 1 and N != L.")],
            explanation=tr("Slice by x.size(1), and test with N == 1 and N != L."),
        ),
        Choice(
            tr("A model with sinusoidal encodings is trained on sequences of length <= 128. What do the "
               "encodings guarantee at position 1000?"),
            [tr("That the model works there as well as at position 100."),
             tr("That PE(1000) exists and has the same norm and relative-offset structure, but not that the "
                "trained model handles these unseen input values well."),
             tr("Nothing: PE(1000) is undefined or NaN."),
             tr("That the model raises an error.")],
            answer=1,
            feedback=[tr("The network never saw those values in training; extrapolation is an empirical question, "
                         "and measurements (Press et al., 2022, 'Train Short, Test Long', the ALiBi paper) show it "
                         "degrades quickly."),
                      tr("Right: a defined input is not a generalising model."),
                      tr("The formula works for any p; you computed PE at positions far past the training length."),
                      tr("Only a learned table with no row for that position has to raise.")],
            explanation=tr("'Can handle longer sequences' means 'can be computed for', not 'works well on'."),
        ),
        Choice(
            tr("With RoPE, the score between a query at position m and a key at position n depends on the "
               "positions through..."),
            [tr("m and n separately."),
             tr("nothing: RoPE removes position from the scores."),
             tr("only m - n."),
             tr("only m + n.")],
            answer=2,
            feedback=[tr("That is what happens with additive encodings: (q + PE(m))·(k + PE(n)) has terms with m "
                         "and n on their own."),
                      tr("The scores do change with the offset; you saw the curve."),
                      tr("Right: rotating q by m w and k by n w leaves their dot product a function of (m - n) w "
                         "(the signed offset: (5, 2) and (2, 5) score differently)."),
                      tr("Rotations compose by adding angles, but the dot product subtracts them.")],
            explanation=tr("That is why RoPE is applied to q and k, not added to the embeddings."),
        ),
        Numeric(
            tr("With d_model = 512 and base 10000, what is the ratio of the longest wavelength to the shortest "
               "(to the nearest integer)?"),
            answer=10000 ** (510 / 512),
            tolerance=1.0,
            explanation=tr("10000^(510/512) ≈ 9647: slightly below 10000, because the last pair is i = 255."),
            hint=tr("The wavelength of pair i is 2π·10000^(2i/512), with i from 0 to 255."),
        ),
    ], title=tr("Chapter 4 quiz: positional encoding"))
