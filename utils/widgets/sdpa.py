"""Explorers and quiz for chapter 2, scaled dot-product attention and masks.

Each explorer wires a pure state function of :mod:`utils.explorers.sdpa` (tested by pytest) and a figure
of :mod:`utils.plotting.sdpa` to controls and an ``Output`` widget.

* :func:`scale_explorer`: D, the temperature and the 1/sqrt(D) scale;
* :func:`mask_polarity_explorer`: the same mask handed to ``F.scaled_dot_product_attention`` (True = may
  attend) or ``nn.MultiheadAttention`` (True = blocked);
* :func:`ch2_quiz`.
"""

from __future__ import annotations

from utils.explorers.sdpa import MASK_APIS, MASK_KINDS, MaskPolarityState, mask_polarity_state, scale_explorer_state
from utils.i18n.messages import tr
from utils.plotting.sdpa import mask_polarity_figure, scale_explorer_figure
from utils.widgets.common import powers_of_two, wire_explorer
from utils.widgets.quiz import Choice, Quiz

__all__ = ["scale_explorer", "mask_polarity_explorer", "ch2_quiz"]


def scale_explorer():
    """Sliders for D and the temperature and a scaling toggle, redrawing the score histogram and one row.

    Returns:
        An ``ipywidgets.VBox`` (see :func:`~utils.widgets.common.wire_explorer`): the controls, then an
        ``Output`` with the figure. ``controls`` names them ``dim``, ``temperature`` and ``scaled``;
        ``state`` is the :class:`~utils.explorers.sdpa.ScaleExplorerState` drawn last.
    """

    import ipywidgets as w

    dim = w.SelectionSlider(options=list(powers_of_two(4, 1024)), value=64, description="D")
    temperature = w.FloatLogSlider(value=1.0, base=10, min=-1, max=1, step=0.05, description=tr("temperature"))
    scaled = w.ToggleButton(value=True, description=tr("scale by 1/√D"), icon="check")
    return wire_explorer(
        [w.HBox([dim, temperature, scaled])], {"dim": dim, "temperature": temperature, "scaled": scaled},
        lambda: scale_explorer_state(dim.value, temperature.value, scaled.value), scale_explorer_figure,
        grid={"dim": (4, 16, 64, 256, 512, 1024), "temperature": (0.3, 1.0, 3.0)}, pure_draw=True)  # static edition


def mask_polarity_explorer():
    """One mask, two APIs: choose the mask, the API, and whether to pass it as is or inverted, and see
    the weights that API really computes (NaN written as NaN, padded and fully-masked rows marked).

    Returns:
        An ``ipywidgets.VBox`` (see :func:`~utils.widgets.common.wire_explorer`): the controls, a caption
        (the call and what it did) and an ``Output``. ``controls`` names them ``kind``, ``api``,
        ``inverted``, ``side`` and ``pad``; ``state`` is the
        :class:`~utils.explorers.sdpa.MaskPolarityState` drawn last.
    """
    import ipywidgets as w

    kind_labels = {"padding": tr("padding"), "causal": tr("causal"), "both": tr("both")}
    kind = w.ToggleButtons(options=[(kind_labels[k], k) for k in MASK_KINDS], value="both", description=tr("mask"))
    api_labels = {"sdpa": tr("our convention / F.scaled_dot_product_attention")}
    api = w.ToggleButtons(options=[(api_labels.get(key, label), key) for key, label in MASK_APIS.items()],
                          value="sdpa", description="API")
    inverted = w.ToggleButtons(options=[(tr("as is: mask"), False), (tr("inverted: ~mask"), True)], value=False,
                               description=tr("pass"))
    side = w.ToggleButtons(options=[(tr("right"), "right"), (tr("left"), "left")], value="right",
                           description=tr("padding on"))
    pad = w.IntSlider(value=2, min=0, max=3, description=tr("pad tokens"))
    caption = w.HTML()

    def compute() -> MaskPolarityState:
        state = mask_polarity_state(kind.value, api.value, inverted.value, pad=pad.value, side=side.value)
        caption.value = f"<code>{state.summary}</code>"
        return state

    return wire_explorer([kind, api, inverted, w.HBox([side, pad]), caption],
                         {"kind": kind, "api": api, "inverted": inverted, "side": side, "pad": pad},
                         compute, mask_polarity_figure, pure_draw=True)


def ch2_quiz() -> Quiz:
    """Four questions: the scale, the mask conventions, the mask value and dropout."""
    return Quiz([
        Choice(
            tr("q and k have 256 independent entries, each with mean 0 and variance 1. What is the standard "
               "deviation of q·k?"),
            ["1", "16", "256", tr("It depends on the sequence length")],
            answer=1,
            feedback=[
                tr("That is the std *after* dividing by √256 = 16."),
                tr("Yes: the variance is the sum of 256 unit variances, so std = √256 = 16."),
                tr("256 is the variance; the std is its square root."),
                tr("The dot product of one q with one k never sees the sequence length."),
            ],
            explanation=tr("Dividing by √D brings it back to 1 whatever D is."),
        ),
        Choice(
            tr("You pass the boolean causal mask from this chapter (True = may attend) unchanged as attn_mask "
               "to nn.MultiheadAttention. What happens?"),
            [tr("The same result as F.scaled_dot_product_attention"),
             tr("An error about the mask's dtype"),
             tr("It runs, but each query attends only to the future and the last row is all NaN"),
             tr("It runs and ignores the mask")],
            answer=2,
            feedback=[
                tr("No: nn.MultiheadAttention reads True as *blocked*, the opposite of SDPA."),
                tr("No error is raised: a bool mask is accepted, just read the other way round."),
                tr("Right: the mask is inverted, so query i sees only keys after i, and the last query sees "
                   "nothing at all, which the softmax turns into NaN."),
                tr("The mask is used, read as True = blocked."),
            ],
            explanation=tr("Convert at the boundary (~mask, or utils.attention.to_torch_mask)."),
        ),
        Choice(
            tr("Why does the course's reference fill the blocked scores with -inf rather than -1e9?"),
            [tr("-1e9 is slower"),
             tr("-1e9 does not fit in float16: masked_fill raises, and a float mask becomes -inf anyway"),
             tr("-inf is what makes rows sum to 1"),
             tr("There is no difference in any dtype")],
            answer=1,
            feedback=[
                tr("Speed is the same; the problem is range."),
                tr("Yes: float16 tops out at 65504. -inf fits in every dtype and gives a blocked key a weight of "
                   "exactly 0 at any score; the reference then sets a row whose keys are all blocked to zero, "
                   "where the softmax alone would give NaN."),
                tr("Rows sum to 1 with a finite fill too, as long as one key is allowed. What -inf adds is a weight "
                   "of exactly 0 whatever the scores (a finite fill such as -1e4 can leak when scores are large) "
                   "and a value every dtype can hold."),
                tr("In float16 there is: we ran it in this chapter."),
            ],
        ),
        Choice(
            tr("In model.eval(), what does dropout on the attention weights do?"),
            [tr("Nothing: the weights pass through unchanged"),
             tr("It zeroes the same fraction of weights as in training"),
             tr("It divides the weights by (1 - p)"),
             tr("It renormalises each row to sum to 1")],
            answer=0,
            feedback=[
                tr("Right: dropout is the identity in eval mode, so outputs become deterministic."),
                tr("That is training mode; eval turns it off."),
                tr("The 1/(1 - p) rescaling happens in training, to the weights it keeps."),
                tr("Dropout never renormalises rows; in training a row no longer sums to exactly 1."),
            ],
        ),
    ], title=tr("Chapter 2 quiz"))
