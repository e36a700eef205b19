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
        assert_close(out, expected)  # torch >= 2.5: zeros for a query that may see no key
        sees_a_key = torch.ones(weights.shape[:-1], dtype=torch.bool)
        if case["mask"] is not None:
            sees_a_key = case["mask"].expand(weights.shape).any(-1)
        assert_close(weights.sum(-1), sees_a_key.to(weights.dtype))  # 1, or 0 for a fully-masked row


@pytest.mark.parametrize("seed", SEEDS)
def test_sdpa_cases_have_edge_shapes_and_the_chapters_rules(seed):
    cases = ex.SDPA.cases(seed)
    assert any(c["q"].shape[-2] != c["k"].shape[-2] for c in cases)  # L != S
    assert any(c["k"].shape[-2] == 1 for c in cases)  # one key
    assert any(c["q"].shape[-2] == 1 and c["q"].shape[0] == 1 for c in cases)  # batch 1, one query
    assert cases[0]["q"].dim() == 4 and cases[0]["q"].shape[1] > 1  # heads first: separates the dims
    assert any(c["q"].dtype == torch.float16 and c["mask"] is not None for c in cases)  # -1e9 does not fit
    assert any(c["q"].dtype == torch.float64 for c in cases)
    fully_masked = 0
    for case in cases:
        if case["mask"] is None:
            continue
        mask = case["mask"].expand(*case["q"].shape[:-1], case["k"].shape[-2])
        assert (~mask).any(-1).all()  # every row blocks a key
        fully_masked += int((~mask.any(-1)).any())
        out, weights = ex.SDPA.reference(**case)
        assert torch.isfinite(out).all()
        assert (weights[~mask.any(-1)] == 0).all() and (out[~mask.any(-1)] == 0).all()
    assert fully_masked == 1  # one case holds the rows that see no key; elsewhere an inverted mask stays finite
    scores = [c["q"] @ c["k"].transpose(-2, -1) / math.sqrt(c["q"].shape[-1]) for c in cases]
    masks = [c["mask"] for c in cases]
    # (a) a blocked key scoring more than 1e4 above every allowed one, (b) allowed keys all below -1e4
    assert any(m is not None and (s.masked_fill(m, -math.inf).amax(-1) > s.masked_fill(~m, -math.inf).amax(-1) + 1e4)
               .all() for s, m in zip(scores, masks))
    assert any(m is not None and (s.masked_fill(~m, -math.inf).amax(-1) < -1e4).all() for s, m in zip(scores, masks))


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


@pytest.mark.slow  # seconds of CPU: `make unit` runs it, `make quick` leaves it out
@pytest.mark.parametrize("exercise", ex.EXERCISES, ids=lambda e: e.id)
def test_every_mistake_differs_and_is_diagnosed(exercise):
    cases = exercise.cases(0)
    for mistake in exercise.mistakes:
        differs = False
        for case in cases:
            try:
                got = mistake.fn(**{k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in case.items()})
            except Exception:  # e.g. -1e9 in float16, `if mask:`: a raised error differs too
                differs = True
                continue
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


def _learner(fill=None, form="masked_fill", guard=True):
    """A learner's attention: the recipe with the blocked scores filled (or added) with ``fill``."""
    def learner(q, k, v, mask=None):
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        if mask is not None:
            value = torch.finfo(scores.dtype).min if fill == "finfo" else fill
            if form == "masked_fill":
                scores = scores.masked_fill(mask == 0, value)  # seed 004's spelling of ~mask
            else:
                scores = scores + (~mask).to(scores.dtype) * value
        weights = F.softmax(scores, dim=-1)
        if guard:
            weights = weights.nan_to_num(0.0)
        return weights @ v, weights
    return learner


@pytest.mark.parametrize(("learner", "named", "myth"), [
    (_learner(-1e9), "-1e9", "-1e9 is a safe way to mask"),  # seed 004's own code
    (_learner(-1e4), "-1e4", "-1e4 is negative enough"),
    (_learner(-1e4, form="additive"), "-1e4", "-1e4 is negative enough"),
    (_learner(float("-inf"), guard=False), "all masked", "Use -inf and you are done"),
    (_learner("finfo", guard=False), "all masked", "Use -inf and you are done"),
    (_learner(-1e9, form="additive", guard=False), "all masked", "Use -inf and you are done"),
], ids=["seed004_minus_1e9", "fill_minus_1e4", "add_minus_1e4", "nan_rows", "finfo_min", "add_minus_1e9"])
def test_the_chapters_named_masking_bugs_fail_and_point_to_their_myth_check(learner, named, myth):
    verdict = run_public_check(ex.SDPA, learner, quiet=True)
    assert not verdict.passed
    assert named in verdict.message and myth in verdict.message, verdict.message


def test_minus_1e9_fails_only_for_float16_and_says_why():
    verdict = run_public_check(ex.SDPA, _learner(-1e9, guard=True), quiet=True)
    assert "float16" in verdict.message and "65504" in verdict.message


def test_clamped_scores_fail():
    def learner(q, k, v, mask=None):
        scores = (q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).clamp(-5, 5)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = scores.softmax(-1).nan_to_num(0.0)
        return weights @ v, weights

    verdict = run_public_check(ex.SDPA, learner, quiet=True)
    assert not verdict.passed and "clamp" in verdict.message


def _where_guarded(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(k.size(-1))
    if mask is not None:
        scores = torch.where(mask, scores, torch.tensor(float("-inf"), dtype=scores.dtype))
    weights = scores.softmax(-1)
    if mask is not None:
        weights = weights.masked_fill(~mask.any(-1, keepdim=True), 0.0)
    return weights @ v, weights


def _additive_guarded(q, k, v, mask=None):
    scores = (q / math.sqrt(q.shape[-1])) @ k.mT
    if mask is not None:
        scores = scores + torch.zeros_like(scores).masked_fill(mask.logical_not(), -math.inf)
    weights = torch.nan_to_num(F.softmax(scores, dim=-1))
    return torch.matmul(weights, v), weights


def _float32_inside(q, k, v, mask=None):  # "softmax in float32", cast back
    out, weights = _where_guarded(q.float(), k.float(), v.float(), mask)
    return out.to(q.dtype), weights.to(q.dtype)


def _keys_first(q, k, v, mask=None):  # K Q^T, softmax over the queries' axis of (S, L), transposed back
    scores = k @ q.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., S, L)
    if mask is not None:
        scores = scores.masked_fill(~mask.transpose(-2, -1), float("-inf"))
    weights = scores.softmax(-2).transpose(-2, -1).nan_to_num(0.0)
    return weights @ v, weights


@pytest.mark.parametrize("learner", [_learner(float("-inf")), _where_guarded, _float32_inside,
                                     _keys_first], ids=lambda f: getattr(f, "__name__", "nan_to_num"))
@pytest.mark.parametrize("seed", SEEDS)
def test_correct_alternatives_pass(learner, seed):
    verdict = run_public_check(ex.SDPA, learner, seed=seed, quiet=True)
    assert verdict.passed, verdict.message


@pytest.mark.parametrize("seed", SEEDS)
def test_an_additive_minus_inf_mask_passes_forward_but_poisons_the_gradients(seed):
    """Adding -inf and hiding the NaN rows gives the right output, but a fully masked row sends NaN back
    to q and k (cell 35: NaN spreads): the check says so instead of passing it."""
    verdict = run_public_check(ex.SDPA, _additive_guarded, seed=seed, quiet=True)
    assert not verdict.passed
    assert "your output is right" in verdict.message and "contains NaN or inf" in verdict.message


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
    curves = scaling.train_with_and_without_scale(steps=120, seeds=(0, 1))
    assert [len(c) for c in curves["scaled"] + curves["unscaled"]] == [120] * 4
    for scaled, unscaled in zip(curves["scaled"], curves["unscaled"]):
        assert scaling.mean_loss(unscaled, 0, 20) > scaling.mean_loss(scaled, 0, 20)  # starts saturated
        assert scaling.mean_loss(unscaled, 100, 120) > scaling.mean_loss(scaled, 100, 120)  # and stays behind
    before = torch.get_rng_state()
    again = scaling.train_with_and_without_scale(steps=120, seeds=(0, 1))
    assert torch.equal(torch.get_rng_state(), before)  # the notebook's later random cells do not depend on it
    assert again["scaled"] == curves["scaled"]  # deterministic on one machine
    with pytest.raises(ValueError, match="empty window"):
        scaling.mean_loss([1.0], 3, 5)


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
    curves = {"scaled": [[2.0, 1.0], [2.1, 0.9]], "unscaled": [[2.0, 1.9], [2.2, 2.0]]}
    fig = plots.training_figure(curves, dim=256, seeds=(3, 4))
    (ax,) = fig.axes
    assert "D = 256" in ax.get_title() and all(_labels(ax))
    assert list(ax.lines[2].get_ydata()) == [2.0, 1.9]
    assert "seed 4" in ax.get_legend().get_texts()[3].get_text()
    plt.close(fig)


def test_masks_figure():
    sentences = [["the", "cat"], ["a", "dog", "ran"]]
    padding = torch.tensor([[True, True, False], [True, True, True]])
    causal = torch.ones(3, 3, dtype=torch.bool).tril()
    fig = plots.masks_figure(padding, causal, sentences, ["a", "dog", "ran"])
    assert len(fig.axes) == 3  # two masks and their colour key
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == ["the cat", "a dog ran"]
    assert [t.get_text() for t in fig.axes[0].texts] == ["the", "cat", "pad", "a", "dog", "ran"]  # tokens, not 1.00
    assert (fig.axes[1].images[0].get_array() == causal.float().numpy()).all()
    assert "True" in " ".join(t.get_text() for t in fig.axes[2].get_yticklabels())
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


@pytest.mark.slow  # draws the explorer's figures (widgets layer): `make unit` runs it, `make quick` leaves it out
def test_explorer_draws_the_state_of_its_controls():
    pytest.importorskip("ipywidgets")
    box = widgets.scale_explorer()
    dim, temperature, scaled = (box.controls[name] for name in ("dim", "temperature", "scaled"))
    assert dim.description == "D" and temperature.description and scaled.description
    assert_same_state(box.state, widgets.scale_explorer_state(64, 1.0, True))
    before = png(box)
    scaled.value = False
    assert_same_state(box.state, widgets.scale_explorer_state(64, 1.0, False))
    assert png(box) != before
    dim.value = 512
    assert_same_state(box.state, widgets.scale_explorer_state(512, 1.0, False))
    temperature.value = 10.0
    assert_same_state(box.state, widgets.scale_explorer_state(512, 10.0, False))
    assert plt.get_fignums() == []


def test_quiz():
    quiz = widgets.ch2_quiz()
    assert isinstance(quiz, Quiz) and len(quiz.questions) == 4  # as its docstring says
    assert "Four" in widgets.ch2_quiz.__doc__
    for question in quiz.questions:
        assert isinstance(question, Choice) and len(question.feedback) == len(question.options)
    assert quiz.score([q.answer for q in quiz.questions]) == len(quiz.questions)
    assert quiz.widget is not None


def _recipe(*, scale=None, guard="any", prepare=None, softmax=None, none_check=True, out_guard=False):
    """A learner's attention, written independently of the Mistake functions, with one thing changed."""
    def learner(q, k, v, mask=None):
        d = q.shape[-1]
        scores = q @ k.mT / (math.sqrt(d) if scale is None else scale(q))
        if mask is not None or not none_check:
            mask = mask if prepare is None else prepare(mask)
            scores = scores.masked_fill(~mask, float("-inf")) if softmax is None else scores
        weights = scores.softmax(-1) if softmax is None else softmax(scores, mask)
        if mask is not None and guard:
            rows = mask.any(-1, keepdim=True) if guard == "any" else mask.all(-1, keepdim=True)
            weights = torch.where(rows, weights, 0.0)
        if out_guard:
            return torch.nan_to_num(weights @ v), weights
        return weights @ v, weights
    return learner


def _exp_eps(scores, mask):  # exp, times the mask, divided by the sum plus an epsilon
    e = torch.exp(scores) * (1.0 if mask is None else mask)
    return e / (e.sum(-1, keepdim=True) + 1e-9)


def _exp_over_sum(scores, mask):  # -inf fill, then exp / sum without the row max
    e = torch.exp(scores if mask is None else scores.masked_fill(~mask, float("-inf")))
    return e / e.sum(-1, keepdim=True)


@pytest.mark.parametrize(("learner", "expected"), [
    # found in a learner review: each used to get another mistake's diagnosis, or the hint alone
    (_recipe(softmax=_exp_eps, guard=None), "you multiply exp(scores) by the mask"),  # was "(~mask) * -inf"
    (_recipe(softmax=_exp_over_sum), "hand-written softmax"),  # was "(~mask) * -inf"
    (_recipe(guard="all"), "not `~mask.all(-1, keepdim=True)`"),  # was "masking after the softmax"
    (_recipe(guard=None, out_guard=True), "your weights still hold NaN"),
    (_recipe(none_check=False), "mask may be None"),
    (_recipe(prepare=lambda m: m[:, None]), "you add a dim to the mask"),
    (_recipe(scale=lambda q: torch.sqrt(q.size(-1))), "torch.sqrt takes a tensor"),
    (_recipe(scale=lambda q: q.size(2) ** 0.5), "sqrt(q.shape[2])"),
    (_recipe(scale=lambda q: q.size(-2) ** 0.5), "the number of queries"),
    (_recipe(prepare=lambda m: m.logical_not(), guard=None), "section 5"),
], ids=["exp_times_mask_eps", "exp_over_sum", "guard_all", "guard_output", "no_none_check", "mask_unsqueezed",
        "torch_sqrt", "shape_2", "shape_minus_2", "inverted_points_to_myth"])
def test_learner_variants_get_their_diagnosis(learner, expected):
    verdict = run_public_check(ex.SDPA, learner, quiet=True)
    assert not verdict.passed and expected in verdict.message, verdict.message


@pytest.mark.parametrize(("learner", "expected"), [
    (lambda lengths, max_len: (torch.arange(max_len) < lengths[:, None]).unsqueeze(1).unsqueeze(-1), "(N, 1, S, 1)"),
    (lambda lengths, max_len: (lengths.unsqueeze(1) > torch.arange(max_len)).view(1, 1, *lengths.shape, max_len),
     "(1, 1, N, S)"),
], ids=["query_axis", "dims_in_front"])
def test_padding_variants_get_their_diagnosis(learner, expected):
    verdict = run_public_check(ex.PADDING, learner, quiet=True)
    assert not verdict.passed and expected in verdict.message, verdict.message
