"""Chapter 2's mask polarity explorer: every weight it shows is what torch itself computes."""

import dataclasses
import math

import matplotlib.pyplot as plt
import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.testing import assert_close
from widget_support import png

from utils.attention import causal_mask, scaled_dot_product_attention
from utils.explorers.sdpa import MASK_KINDS, mask_polarity_state
from utils.plotting.sdpa import mask_polarity_figure
from utils.widgets.sdpa import mask_polarity_explorer


def _torch_mha_weights(x, **masks):
    """A one-head nn.MultiheadAttention with identity projections, called directly (not via the explorer)."""
    E = x.shape[-1]
    mha = nn.MultiheadAttention(E, 1, bias=False, batch_first=True).eval()
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.eye(E).repeat(3, 1))
        mha.out_proj.weight.copy_(torch.eye(E))
        return mha(x, x, x, need_weights=True, **masks)[1][0]


def _x(seed=0, length=6, d_model=4):
    return torch.randn(1, length, d_model, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("kind", MASK_KINDS)
@pytest.mark.parametrize("pad", [0, 1, 3])
@pytest.mark.parametrize("seed", [0, 3])
def test_inverted_mask_to_mha_gives_our_conventions_weights(kind, pad, seed):
    ours = mask_polarity_state(kind, "sdpa", False, pad=pad, seed=seed)
    mha = mask_polarity_state(kind, "mha", True, pad=pad, seed=seed)
    assert ours.matches_intent and mha.matches_intent
    assert_close(mha.weights, ours.weights)
    # and both against the reference and F.scaled_dot_product_attention, called here
    x = _x(seed)[0]
    real = torch.arange(6) < 6 - pad  # right padding
    mask = {"padding": real.expand(6, 6), "causal": causal_mask(6), "both": real & causal_mask(6)}[kind]
    assert_close(ours.weights, scaled_dot_product_attention(x, x, torch.eye(6), mask)[1])
    q = x[None, None]  # (N, H, L, E)
    assert_close(ours.weights, F.scaled_dot_product_attention(q, q, torch.eye(6)[None, None], attn_mask=mask)[0, 0])
    assert_close(ours.weights, (x @ x.T / math.sqrt(4)).masked_fill(~mask, float("-inf")).softmax(-1))


def test_mask_as_is_to_mha_is_read_the_other_way_round():
    state = mask_polarity_state("causal", "mha", False, pad=0)
    x = _x()
    want = _torch_mha_weights(x, attn_mask=causal_mask(6))
    assert_close(state.weights, want, equal_nan=True)
    assert state.nan_rows.tolist() == [False] * 5 + [True]  # the last query sees no key
    assert (state.weights[0] > 0).nonzero().flatten().tolist() == [1, 2, 3, 4, 5]  # query 0 sees the future
    assert not state.matches_intent and "NOT" in state.summary
    assert state.fully_masked_rows.tolist() == state.nan_rows.tolist()


def test_fully_masked_rows_are_nan_exactly_where_torch_gives_nan():
    # left padding + causal: the padding queries may see only padding keys, i.e. nothing
    mha = mask_polarity_state("both", "mha", True, pad=2, side="left")
    sdpa = mask_polarity_state("both", "sdpa", False, pad=2, side="left")
    real = torch.arange(6) >= 2
    direct = _torch_mha_weights(_x(), attn_mask=~causal_mask(6), key_padding_mask=~real[None])
    assert_close(mha.weights, direct, equal_nan=True)
    assert mha.nan_rows.tolist() == direct.isnan().any(-1).tolist() == [True, True, False, False, False, False]
    assert mha.padded_rows.tolist() == mha.fully_masked_rows.tolist() == [True, True, False, False, False, False]
    # SDPA (torch >= 2.5) and the course's reference give those rows zeros, not NaN
    assert not sdpa.weights.isnan().any() and (sdpa.weights[:2] == 0).all()
    assert sdpa.matches_intent and sdpa.fully_masked_rows[:2].all()
    # the rows with a key are the same in both APIs
    assert_close(mha.weights[2:], sdpa.weights[2:])
    assert mha.rows_as_meant.tolist() == [False, False, True, True, True, True]
    assert "except 2 NaN rows" in mha.summary


def test_inverted_mask_to_sdpa_attends_to_what_should_be_hidden():
    state = mask_polarity_state("padding", "sdpa", True, pad=2)
    assert (state.weights[:, :4] == 0).all()  # the real keys get nothing
    assert_close(state.weights[:, 4:].sum(-1), torch.ones(6))  # every query attends to the padding only
    none = mask_polarity_state("padding", "sdpa", True, pad=0)  # ~mask blocks every key
    assert none.fully_masked_rows.all() and (none.weights == 0).all() and not none.nan_rows.any()


def test_tokens_rows_and_bad_input():
    state = mask_polarity_state("padding", "mha", False, pad=3, side="left")
    assert state.tokens == ["<pad>"] * 3 + ["the", "cat", "sat"]
    assert state.padded_rows.tolist() == [True] * 3 + [False] * 3
    for kwargs, name in [({"kind": "future"}, "kind"), ({"api": "keras"}, "api"), ({"side": "top"}, "side"),
                         ({"pad": 6}, "pad"), ({"pad": -1}, "pad")]:
        with pytest.raises(ValueError, match=name):
            mask_polarity_state(**kwargs)


def test_figure_writes_nan_as_text_and_marks_rows():
    state = mask_polarity_state("both", "mha", True, pad=2, side="left")
    fig = mask_polarity_figure(state)
    ax_mask, ax_weights = fig.axes
    texts = [t.get_text() for t in ax_weights.texts]
    assert texts.count("NaN") == int(state.weights.isnan().sum()) == 12
    assert texts[2 * 6] == f"{state.weights[2, 0].item():.2f}"  # after the NaN cells, the numbers
    assert not (ax_weights.images[0].get_array() != ax_weights.images[0].get_array()).any()  # no NaN colour
    assert [t.get_color() for t in ax_weights.get_yticklabels()][:3] == ["red", "red", "black"]
    assert ax_mask.get_xlabel() and ax_weights.get_ylabel() and fig._suptitle.get_text().startswith("nn.Multi")
    plt.close(fig)


def _same(drawn, want):
    for field in dataclasses.fields(want):
        got, expected = getattr(drawn, field.name), getattr(want, field.name)
        if isinstance(expected, torch.Tensor):
            assert_close(got, expected, equal_nan=True, rtol=0, atol=0)
        else:
            assert got == expected, field.name


@pytest.mark.slow  # draws the explorer's figures (widgets layer): `make unit` runs it, `make quick` leaves it out
def test_explorer_draws_the_state_of_its_controls():
    pytest.importorskip("ipywidgets")
    box = mask_polarity_explorer()
    c = box.controls
    assert set(c) == {"kind", "api", "inverted", "side", "pad"}
    _same(box.state, mask_polarity_state("both", "sdpa", False, pad=2, side="right"))
    before = png(box)
    c["api"].value = "mha"
    _same(box.state, mask_polarity_state("both", "mha", False, pad=2, side="right"))
    assert png(box) != before
    c["inverted"].value = True
    c["side"].value = "left"
    c["pad"].value = 3
    want = mask_polarity_state("both", "mha", True, pad=3, side="left")
    _same(box.state, want)
    assert want.summary in box.children[-2].value
    assert plt.get_fignums() == []
