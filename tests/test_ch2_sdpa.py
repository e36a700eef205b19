"""Chapter 2: exercises, measurements, figures, the explorer and the quiz."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close
from widget_support import assert_same_state, png

from utils import scaling
from utils.exercises import sdpa as ex
from utils.exercises.check_cell import run_public_check
from utils.exercises.judging import compare
from utils.plotting import sdpa as plots
from utils.widgets import sdpa as widgets
from utils.widgets.quiz import Choice, Quiz

SEEDS = [0, 1, 2]


# --------------------------------------------------------------------------------------------------
# Exercises
# --------------------------------------------------------------------------------------------------


def test_exercise_ids_and_points():
    assert [(e.id, e.points) for e in ex.EXERCISES] == [
        ("ch2.scaled_dot_product_attention", 3), ("ch2.causal_mask", 1), ("ch2.padding_mask", 1)]
    for exercise in ex.EXERCISES:
        assert len(exercise.mistakes) >= 2


@pytest.mark.parametrize("seed", SEEDS)
def test_sdpa_reference_matches_torch(seed):
    for case in ex.SDPA.cases(seed):
        out, weights = ex.SDPA.reference(**case)
        expected = F.scaled_dot_product_attention(case["q"], case["k"], case["v"], attn_mask=case["mask"])
        assert_close(out, expected)
        assert_close(weights.sum(-1), torch.ones(weights.shape[:-1], dtype=weights.dtype))


@pytest.mark.parametrize("seed", SEEDS)
def test_sdpa_cases_have_edge_shapes_and_safe_masks(seed):
    cases = ex.SDPA.cases(seed)
    assert 4 <= len(cases) <= 6
    assert any(c["q"].shape[-2] != c["k"].shape[-2] for c in cases)  # L != S
    assert any(c["k"].shape[-2] == 1 for c in cases)  # one key
    assert any(c["q"].shape[-2] == 1 and c["q"].shape[0] == 1 for c in cases)  # batch 1, one query
    for case in cases:
        if case["mask"] is not None:  # every row keeps a key and blocks one, so an inverted mask stays finite
            mask = case["mask"].expand(*case["q"].shape[:-1], case["k"].shape[-2])
            assert mask.any(-1).all() and (~mask).any(-1).all()


def test_cases_differ_between_seeds():
    for exercise in ex.EXERCISES:
        a, b = exercise.cases(0), exercise.cases(1)
        assert any(compare(tuple(x.values()), tuple(y.values()), 0, 0) for x, y in zip(a, b))


def test_causal_reference_matches_torch():
    for case in ex.CAUSAL.cases(0):
        size = case["size"]
        mask = ex.CAUSAL.reference(**case)
        assert mask.dtype == torch.bool and mask.shape == (size, size)
        q = k = v = torch.randn(1, size, 4)
        out, _ = ex.SDPA.reference(q, k, v, mask)
        assert_close(out, F.scaled_dot_product_attention(q, k, v, is_causal=True))


def test_padding_reference():
    for case in ex.PADDING.cases(0):
        mask = ex.PADDING.reference(**case)
        N, S = case["lengths"].shape[0], case["max_len"]
        assert mask.dtype == torch.bool and mask.shape == (N, 1, 1, S)
        assert mask.sum((1, 2, 3)).tolist() == case["lengths"].tolist()
    # against nn.MultiheadAttention's key_padding_mask (True = blocked) on sentences that are not empty
    lengths, max_len = torch.tensor([2, 4, 1]), 4
    x = torch.randn(3, max_len, 8)
    mha = torch.nn.MultiheadAttention(8, 2, batch_first=True).eval()
    expected, _ = mha(x, x, x, key_padding_mask=~ex.PADDING.reference(lengths, max_len)[:, 0, 0])
    q, k, v = F.linear(x, mha.in_proj_weight, mha.in_proj_bias).chunk(3, dim=-1)
    split = lambda t: t.view(3, max_len, 2, 4).transpose(1, 2)  # (N, H, L, D)
    out, _ = ex.SDPA.reference(split(q), split(k), split(v), ex.PADDING.reference(lengths, max_len))
    assert_close(mha.out_proj(out.transpose(1, 2).reshape(3, max_len, 8)), expected)


@pytest.mark.parametrize("exercise", ex.EXERCISES, ids=lambda e: e.id)
def test_every_mistake_differs_and_is_diagnosed(exercise):
    cases = exercise.cases(0)
    for mistake in exercise.mistakes:
        differs = False
        for case in cases:
            got = mistake.fn(**{k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in case.items()})
            if compare(got, exercise.reference(**case), exercise.atol, exercise.rtol) is not None:
                differs = True
        assert differs, mistake.name
        verdict = run_public_check(exercise, mistake.fn, quiet=True)
        assert not verdict.passed and mistake.diagnosis in verdict.message, (mistake.name, verdict.message)


@pytest.mark.parametrize("exercise", ex.EXERCISES, ids=lambda e: e.id)
def test_reference_passes(exercise):
    assert run_public_check(exercise, exercise.reference, quiet=True).passed


def test_inverted_mask_with_minus_1e9_is_diagnosed_too():
    def learner(q, k, v, mask=None):
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        if mask is not None:
            scores = scores.masked_fill(mask, -1e9)
        weights = scores.softmax(-1)
        return weights @ v, weights

    verdict = run_public_check(ex.SDPA, learner, quiet=True)
    assert not verdict.passed and "wrong way round" in verdict.message


def test_forbidden_builtin_is_refused():
    def learner(q, k, v, mask=None):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask), None

    assert run_public_check(ex.SDPA, learner, quiet=True).status == "forbidden"


# --------------------------------------------------------------------------------------------------
# Measurements
# --------------------------------------------------------------------------------------------------


def test_dot_product_variance_grows_like_d():
    data = scaling.dot_product_variance([4, 64, 1024], num_samples=4000)
    for dim, raw, scaled in zip(data["dims"], data["raw"], data["scaled"]):
        assert raw / dim == pytest.approx(1.0, rel=0.1)
        assert scaled == pytest.approx(1.0, rel=0.1)


def test_softmax_saturation_matches_autograd_of_softmax():
    data = scaling.softmax_saturation([4, 64, 1024], num_rows=128)
    assert data["max_weight_raw"][-1] > 0.95
    assert data["max_weight_scaled"][-1] < 0.6
    assert data["grad_norm_raw"][-1] < 0.5 * data["grad_norm_scaled"][-1]
    assert data["grad_norm_raw"] == sorted(data["grad_norm_raw"], reverse=True)
    # the gradient of a softmax is J g with J = diag(p) - p p^T
    logits, upstream = torch.randn(5), torch.randn(5)
    p = logits.softmax(-1)
    jacobian = torch.diag(p) - torch.outer(p, p)
    assert_close(torch.autograd.functional.jacobian(lambda x: x.softmax(-1), logits), jacobian)
    logits.requires_grad_(True)
    (grad,) = torch.autograd.grad((logits.softmax(-1) * upstream).sum(), logits)
    assert_close(grad, jacobian @ upstream)


def test_training_experiment_shows_the_scale_matters():
    curves = scaling.train_with_and_without_scale(steps=300)
    assert len(curves["scaled"]) == len(curves["unscaled"]) == 300
    tail = lambda losses: sum(losses[-30:]) / 30
    assert tail(curves["scaled"]) < 0.6 < 1.5 < tail(curves["unscaled"])
    assert curves == scaling.train_with_and_without_scale(steps=300)  # deterministic


# --------------------------------------------------------------------------------------------------
# Figures
# --------------------------------------------------------------------------------------------------


def _labels(ax):
    return ax.get_xlabel(), ax.get_ylabel()


def test_sdpa_steps_figure():
    scores = torch.randn(3, 3)
    fig = plots.sdpa_steps_figure(scores, scores / 2, scores.softmax(-1), ["a", "b", "c"])
    assert len(fig.axes) == 3
    assert [ax.get_title() for ax in fig.axes][2].startswith("3. softmax")
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["a", "b", "c"]
    plt.close(fig)


def test_variance_figure():
    data = scaling.dot_product_variance([4, 16], num_samples=100)
    fig = plots.variance_figure(data)
    (ax,) = fig.axes
    assert "√D" in ax.get_title() and _labels(ax)[0].startswith("D")
    assert list(ax.lines[0].get_ydata()) == data["raw"]
    plt.close(fig)


def test_saturation_figure():
    data = scaling.softmax_saturation([4, 16], num_rows=8)
    fig = plots.saturation_figure(data)
    assert len(fig.axes) == 2 and all(ax.get_xlabel() for ax in fig.axes)
    assert list(fig.axes[1].lines[1].get_ydata()) == data["grad_norm_raw"]
    plt.close(fig)


def test_training_figure():
    curves = {"scaled": [2.0, 1.0], "unscaled": [2.0, 1.9]}
    fig = plots.training_figure(curves, d_k=256)
    (ax,) = fig.axes
    assert "d_k = 256" in ax.get_title() and all(_labels(ax))
    assert list(ax.lines[1].get_ydata()) == [2.0, 1.9]
    plt.close(fig)


def test_masks_figure():
    sentences = [["the", "cat"], ["a", "dog", "ran"]]
    padding = torch.tensor([[True, True, False], [True, True, True]])
    causal = torch.ones(3, 3, dtype=torch.bool).tril()
    fig = plots.masks_figure(padding, causal, sentences, ["a", "dog", "ran"])
    assert len(fig.axes) == 2
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == ["the cat", "a dog ran"]
    assert (fig.axes[1].images[0].get_array() == causal.float().numpy()).all()
    plt.close(fig)


def test_explorer_figure():
    fig = plots.scale_explorer_figure(widgets.scale_explorer_state(16))
    assert len(fig.axes) == 2 and "entropy" in fig.axes[1].get_title()
    plt.close(fig)


# --------------------------------------------------------------------------------------------------
# Explorer and quiz
# --------------------------------------------------------------------------------------------------


def test_explorer_state():
    on, off = widgets.scale_explorer_state(1024), widgets.scale_explorer_state(1024, scaled=False)
    assert off.max_weight > 0.99 and off.entropy < 0.05
    assert on.entropy > 1.0
    assert_close(on.scores * math.sqrt(1024), off.scores)
    hot = widgets.scale_explorer_state(64, temperature=10.0)
    assert hot.entropy > on.entropy
    p = on.row
    assert on.entropy == pytest.approx(-(p * p.log()).sum().item(), rel=1e-6)
    with pytest.raises(ValueError, match="temperature"):
        widgets.scale_explorer_state(4, temperature=0.0)


def test_explorer_draws_the_state_of_its_controls():
    pytest.importorskip("ipywidgets")
    box = widgets.scale_explorer()
    d_k, temperature, scaled = (box.controls[name] for name in ("d_k", "temperature", "scaled"))
    assert d_k.description and temperature.description and scaled.description
    assert_same_state(box.state, widgets.scale_explorer_state(64, 1.0, True))
    before = png(box)
    scaled.value = False
    assert_same_state(box.state, widgets.scale_explorer_state(64, 1.0, False))
    assert png(box) != before
    d_k.value = 512
    assert_same_state(box.state, widgets.scale_explorer_state(512, 1.0, False))
    temperature.value = 10.0
    assert_same_state(box.state, widgets.scale_explorer_state(512, 10.0, False))
    assert plt.get_fignums() == []


def test_quiz():
    quiz = widgets.ch2_quiz()
    assert isinstance(quiz, Quiz) and len(quiz.questions) >= 3
    for question in quiz.questions:
        assert isinstance(question, Choice) and len(question.feedback) == len(question.options)
    assert quiz.score([q.answer for q in quiz.questions]) == len(quiz.questions)
    assert quiz.widget is not None
