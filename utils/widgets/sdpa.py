"""Explorer and quiz for chapter 2, scaled dot-product attention and masks.

The explorer is split in two: :func:`scale_explorer_state` computes what is drawn (pure, tested by
pytest), :func:`scale_explorer` wires it to sliders and an ``Output`` widget.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from utils.plotting.sdpa import scale_explorer_figure
from utils.widgets.common import powers_of_two, wire_explorer
from utils.widgets.quiz import Choice, Quiz

__all__ = ["ScaleExplorerState", "scale_explorer_state", "scale_explorer", "ch2_quiz"]


@dataclass(frozen=True)
class ScaleExplorerState:
    """What the D / temperature explorer draws for one setting."""

    scores: torch.Tensor  # (L, S), as fed to the softmax
    row: torch.Tensor  # (S,) the weights of query 0
    max_weight: float
    entropy: float  # of ``row``, in nats
    max_entropy: float  # log S: a uniform row
    score_std: float
    keys: list[str]  # S labels
    dim: int  # D
    temperature: float
    scaled: bool


def scale_explorer_state(dim: int, temperature: float = 1.0, scaled: bool = True, *, length: int = 12,
                         seed: int = 0) -> ScaleExplorerState:
    """Scores and softmax weights for random unit-variance queries and keys of size ``dim``.

    Args:
        dim: D, the size of each query and key (the paper's d_k).
        temperature: the scores are divided by it before the softmax. Default: ``1.0``.
        scaled: divide the scores by ``sqrt(dim)`` too. Default: ``True``.
        length: the number of queries L and keys S. Default: ``12``.
        seed: the same seed gives the same q and k for every setting. Default: ``0``.

    Returns:
        A :class:`ScaleExplorerState`: ``scores`` (L, S), ``row`` (S,) the weights of query 0,
        ``max_weight``, ``entropy`` (nats) of that row, ``max_entropy`` (``log S``, a uniform row),
        ``score_std``, ``keys`` (labels) and the settings.

    >>> s = scale_explorer_state(512, scaled=False)
    >>> s.max_weight > 0.9, scale_explorer_state(512).max_weight < 0.9
    (True, True)
    """
    if dim < 1 or temperature <= 0:
        raise ValueError(f"dim must be >= 1 and temperature > 0, got dim={dim}, temperature={temperature}")
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(length, 1024, generator=gen)[:, :dim]  # (L, D): the same first D coords for every D
    k = torch.randn(length, 1024, generator=gen)[:, :dim]  # (S, D)
    scores = q @ k.T  # (L, S)
    if scaled:
        scores = scores / math.sqrt(dim)
    scores = scores / temperature
    row = scores[0].softmax(-1)  # (S,)
    entropy = -(row * row.clamp_min(1e-30).log()).sum().item()
    return ScaleExplorerState(
        scores=scores, row=row, max_weight=row.max().item(), entropy=entropy, max_entropy=math.log(length),
        score_std=scores.std().item(), keys=[f"k{j}" for j in range(length)], dim=dim,
        temperature=temperature, scaled=scaled,
    )


def scale_explorer():
    """Sliders for D and the temperature and a scaling toggle, redrawing the score histogram and one row.

    Returns:
        An ``ipywidgets.VBox`` (see :func:`~utils.widgets.common.wire_explorer`): the controls, then an
        ``Output`` with the figure. ``controls`` names them ``dim``, ``temperature`` and ``scaled``;
        ``state`` is the :class:`ScaleExplorerState` drawn last.
    """

    import ipywidgets as w

    dim = w.SelectionSlider(options=list(powers_of_two(4, 1024)), value=64, description="D")
    temperature = w.FloatLogSlider(value=1.0, base=10, min=-1, max=1, step=0.05, description="temperature")
    scaled = w.ToggleButton(value=True, description="scale by 1/√D", icon="check")
    return wire_explorer(
        [w.HBox([dim, temperature, scaled])], {"dim": dim, "temperature": temperature, "scaled": scaled},
        lambda: scale_explorer_state(dim.value, temperature.value, scaled.value), scale_explorer_figure,
        grid={"dim": (4, 16, 64, 256, 512, 1024), "temperature": (0.3, 1.0, 3.0)})  # the static edition


def ch2_quiz() -> Quiz:
    """Four questions: the scale, the mask conventions, the mask value and dropout."""
    return Quiz([
        Choice(
            "q and k have 256 independent entries, each with mean 0 and variance 1. What is the standard "
            "deviation of q·k?",
            ["1", "16", "256", "It depends on the sequence length"],
            answer=1,
            feedback=[
                "That is the std *after* dividing by √256 = 16.",
                "Yes: the variance is the sum of 256 unit variances, so std = √256 = 16.",
                "256 is the variance; the std is its square root.",
                "The dot product of one q with one k never sees the sequence length.",
            ],
            explanation="Dividing by √D brings it back to 1 whatever D is.",
        ),
        Choice(
            "You pass the boolean causal mask from this chapter (True = may attend) unchanged as attn_mask "
            "to nn.MultiheadAttention. What happens?",
            ["The same result as F.scaled_dot_product_attention",
             "An error about the mask's dtype",
             "It runs, but each query attends only to the future and the last row is all NaN",
             "It runs and ignores the mask"],
            answer=2,
            feedback=[
                "No: nn.MultiheadAttention reads True as *blocked*, the opposite of SDPA.",
                "No error is raised: a bool mask is accepted, just read the other way round.",
                "Right: the mask is inverted, so query i sees only keys after i, and the last query sees "
                "nothing at all, which the softmax turns into NaN.",
                "The mask is used, read as True = blocked.",
            ],
            explanation="Convert at the boundary (~mask, or utils.attention.to_torch_mask).",
        ),
        Choice(
            "Why does the course's reference fill the blocked scores with -inf rather than -1e9?",
            ["-1e9 is slower",
             "-1e9 does not fit in float16: masked_fill raises, and a float mask becomes -inf anyway",
             "-inf is what makes rows sum to 1",
             "There is no difference in any dtype"],
            answer=1,
            feedback=[
                "Speed is the same; the problem is range.",
                "Yes: float16 tops out at 65504. -inf fits in every dtype and gives a blocked key a weight of "
                "exactly 0 at any score; the reference then sets a row whose keys are all blocked to zero, "
                "where the softmax alone would give NaN.",
                "Rows sum to 1 with a finite fill too, as long as one key is allowed. What -inf adds is a weight "
                "of exactly 0 whatever the scores (a finite fill such as -1e4 can leak when scores are large) "
                "and a value every dtype can hold.",
                "In float16 there is: we ran it in this chapter.",
            ],
        ),
        Choice(
            "In model.eval(), what does dropout on the attention weights do?",
            ["Nothing: the weights pass through unchanged",
             "It zeroes the same fraction of weights as in training",
             "It divides the weights by (1 - p)",
             "It renormalises each row to sum to 1"],
            answer=0,
            feedback=[
                "Right: dropout is the identity in eval mode, so outputs become deterministic.",
                "That is training mode; eval turns it off.",
                "The 1/(1 - p) rescaling happens in training, to the weights it keeps.",
                "Dropout never renormalises rows; in training a row no longer sums to exactly 1.",
            ],
        ),
    ], title="Chapter 2 quiz")
