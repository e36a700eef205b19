"""Chapter 1, "Queries, keys and values": vocab, exercises, figures, explorer and quiz."""

from __future__ import annotations

import math
import warnings

import matplotlib
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.testing import assert_close

matplotlib.use("Agg")
from widget_support import assert_same_state, png  # noqa: E402

from utils import vocab  # noqa: E402
from utils.exercises import check, get  # noqa: E402
from utils.exercises.judging import compare, judge  # noqa: E402
from utils.exercises.qkv import EXERCISES, attention_scores_reference, project_qkv_reference  # noqa: E402
from utils.exercises.runner import run_cases  # noqa: E402
from utils.explorers.qkv import qkv_explorer_scores, random_projection  # noqa: E402
from utils.plotting.qkv import (  # noqa: E402
    linear_weight_figure,
    parameter_free_figure,
    query_scores_figure,
    scores_figure,
)
from utils.widgets.qkv import ch1_quiz, qkv_explorer  # noqa: E402

# --- vocab ------------------------------------------------------------------------------------------


def test_pronoun_sentence_tokens():
    tokens, x = vocab.toy_sentence("pronoun", d_model=8)
    assert tokens == "the animal didn't cross the street because it was too tired".split()
    assert x.shape == (11, 8) and x.dtype == torch.float32


@pytest.mark.parametrize("d_model", [1, 4, 16])
def test_embed_is_deterministic_and_per_token(d_model):
    a = vocab.embed(["it", "was", "it"], d_model, seed=3)
    b = vocab.embed(["it"], d_model, seed=3)
    assert_close(a[0], a[2], rtol=0, atol=0)
    assert_close(a[0], b[0], rtol=0, atol=0)
    assert not torch.equal(vocab.embed(["it"], d_model, seed=4), b)


def test_embed_rows_are_standard_normal_like_nn_embedding():
    x = vocab.embed([f"w{i}" for i in range(400)], 64)
    assert abs(x.mean().item()) < 0.05
    assert abs(x.std().item() - 1.0) < 0.05


def test_vocab_table_matches_embed():
    v = vocab.Vocab()
    tokens, x = vocab.toy_sentence("short", d_model=6)
    table = v.embedding_table(6)
    assert_close(F.embedding(v.encode(tokens), table), x)
    assert table[0].abs().sum() == 0  # <pad>
    assert v.decode(v.encode(tokens)) == tokens
    assert v.encode(["zzz-unknown"]).tolist() == [1]


def test_embed_batch_pads():
    tokens, x, lengths = vocab.embed_batch(["short", "pronoun"], d_model=4)
    assert x.shape == (2, 11, 4)
    assert lengths.tolist() == [6, 11]
    assert tokens[0][6:] == [vocab.PAD] * 5
    assert x[0, 6:].abs().sum() == 0


@pytest.mark.parametrize("bad, error", [(0, ValueError), (-3, ValueError), (2.0, TypeError), (True, TypeError)])
def test_embed_rejects_bad_d_model(bad, error):
    with pytest.raises(error, match="d_model"):
        vocab.embed(["a"], bad)


@pytest.mark.parametrize(
    "call",
    [
        lambda d_model: vocab.token_vector("it", d_model),
        lambda d_model: vocab.toy_sentence("short", d_model=d_model),
        lambda d_model: vocab.embed_batch(["short"], d_model=d_model),
        lambda d_model: vocab.Vocab(["a"]).embedding_table(d_model),
    ],
    ids=["token_vector", "toy_sentence", "embed_batch", "embedding_table"],
)
@pytest.mark.parametrize("bad, error", [(0, ValueError), (2.0, TypeError), (True, TypeError)])
def test_every_vocab_function_checks_d_model(call, bad, error):
    with pytest.raises(error, match=r"d_model: expected a positive int, got "):
        call(bad)


def test_embed_rejects_a_string():
    with pytest.raises(TypeError, match="tokenize"):
        vocab.embed("the cat", 4)


# --- exercises: references agree with torch ---------------------------------------------------------


def test_exercise_ids_and_points():
    assert [e.id for e in EXERCISES] == ["ch1.project_qkv", "ch1.attention_scores"]
    assert [e.points for e in EXERCISES] == [2, 2]
    assert get("ch1.project_qkv") is EXERCISES[0]


@pytest.mark.parametrize("seed", range(4))
def test_project_qkv_reference_equals_nn_linear(seed):
    for case in get("ch1.project_qkv").cases(seed):
        x, weights = case["x"], (case["w_q"], case["w_k"], case["w_v"])
        outputs = project_qkv_reference(**case)
        for weight, out in zip(weights, outputs):
            linear = nn.Linear(weight.shape[0], weight.shape[1], bias=False, dtype=weight.dtype)
            with torch.no_grad():
                linear.weight.copy_(weight.T)  # nn.Linear stores (D, E)
            assert_close(out, linear(x))
            assert_close(out, F.linear(x, weight.T))


@pytest.mark.parametrize("seed", range(4))
def test_attention_scores_reference_equals_einsum_and_sdpa(seed):
    for case in get("ch1.attention_scores").cases(seed):
        q, k = case["q"], case["k"]
        scores = attention_scores_reference(q, k)
        assert scores.shape == (*q.shape[:-1], k.shape[-2])
        assert_close(scores, torch.einsum("...ld,...sd->...ls", q, k))
        # softmax(scores) @ v is SDPA with scale 1: the scores are the unscaled ones
        v = torch.randn(*k.shape[:-1], 3, dtype=q.dtype)
        assert_close(scores.softmax(-1) @ v, F.scaled_dot_product_attention(q, k, v, scale=1.0))


@pytest.mark.parametrize("exercise", EXERCISES, ids=lambda e: e.id)
def test_cases_cover_edge_shapes(exercise):
    cases = exercise.cases(0)
    assert 4 <= len(cases) <= 6
    first_arg = "x" if "x" in cases[0] else "q"
    inputs = [c[first_arg] for c in cases]
    assert any(t.dim() == 2 for t in inputs), "a case without a batch dimension"
    assert any(t.dim() >= 3 and t.shape[0] == 1 for t in inputs), "a case with batch 1"
    assert any(t.shape[-2] == 1 for t in inputs), "a case with length 1"
    assert inputs[0].dim() >= 3, "the first case is batched, so that batch mistakes show there"
    assert torch.equal(exercise.cases(0)[0][first_arg], inputs[0]), "the same seed gives the same cases"
    other = exercise.cases(1)[0][first_arg]
    assert other.shape != inputs[0].shape or not torch.equal(other, inputs[0]), "seeds give different cases"


def test_attention_scores_has_non_square_and_4d_cases():
    cases = get("ch1.attention_scores").cases(0)
    assert any(c["q"].shape[-2] != c["k"].shape[-2] for c in cases)
    assert any(c["q"].dim() == 4 for c in cases)


# --- exercises: every mistake is caught with its diagnosis ------------------------------------------


@pytest.mark.parametrize("exercise", EXERCISES, ids=lambda e: e.id)
def test_reference_passes(exercise):
    verdict = _check(exercise, exercise.reference)
    assert verdict.passed, verdict.message


def _check(exercise, fn):
    cases = exercise.cases(0)
    return judge(exercise, cases, run_cases(fn, cases, exercise.forbidden, exercise.gradients))


@pytest.mark.parametrize(
    "exercise_id, mistake",
    [(e.id, m) for e in EXERCISES for m in e.mistakes],
    ids=lambda v: v if isinstance(v, str) else v.name,
)
def test_each_mistake_differs_and_gets_its_diagnosis(exercise_id, mistake):
    exercise = get(exercise_id)
    cases = exercise.cases(0)
    differs = False
    for case in cases:
        expected = exercise.reference(**case)
        try:
            wrong = mistake.fn(**case)
        except (RuntimeError, IndexError):  # e.g. k.transpose(1, 2) on a 2-D k
            differs = True
            continue
        differs |= compare(wrong, expected, exercise.atol, exercise.rtol) is not None
    assert differs, f"{mistake.name} never differs from the reference"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # k.T on a 3-D tensor warns before it fails
        verdict = _check(exercise, mistake.fn)
    assert not verdict.passed
    assert mistake.diagnosis in verdict.message, verdict.message


def test_stub_says_not_implemented(capsys):
    def project_qkv(x, w_q, w_k, w_v):
        raise NotImplementedError

    verdict = check.project_qkv(project_qkv)
    assert not verdict.passed and "not implemented" in verdict.message
    assert capsys.readouterr().out.startswith("❌")


def test_check_prints_a_tick(capsys):
    check.attention_scores(lambda q, k: q @ k.mT)
    assert capsys.readouterr().out.startswith("✅")


def test_wrong_shape_is_explained():
    exercise = get("ch1.project_qkv")
    verdict = _check(exercise, lambda x, w_q, w_k, w_v: (x @ w_q, x @ w_k, x @ w_v, x))
    assert not verdict.passed and "tuple of 3" in verdict.message
    verdict = _check(exercise, lambda x, w_q, w_k, w_v: (x @ w_q, x @ w_k))
    assert not verdict.passed and "all three" in verdict.message


# --- figures ----------------------------------------------------------------------------------------


def test_parameter_free_figure():
    tokens, x = vocab.toy_sentence("pronoun", d_model=16)
    scores = x @ x.T
    weights = scores.softmax(-1)
    fig = parameter_free_figure(tokens, scores, weights)
    heat_left, heat_right = fig.axes[0], fig.axes[1]
    assert len(fig.axes) == 4  # two heatmaps and their colour bars
    assert "symmetric" in heat_left.get_title() and "diagonal" in heat_right.get_title()
    assert "itself" in fig._suptitle.get_text()
    assert [t.get_text() for t in heat_left.get_xticklabels()] == tokens
    assert heat_left.get_xlabel() == "key token (S)" and heat_left.get_ylabel() == "query token (L)"
    assert_close(torch.as_tensor(heat_left.images[0].get_array()), scores)
    assert_close(torch.as_tensor(heat_right.images[0].get_array()), weights)
    assert heat_right.images[0].get_cmap().name == "viridis"
    assert _colorbar_label(heat_left) == "score x_i · x_j"
    assert _colorbar_label(heat_right) == "weight (each row sums to 1)"


def _colorbar_label(ax) -> str:
    return ax.images[0].colorbar.ax.get_ylabel()


def test_parameter_free_figure_rejects_wrong_shape():
    with pytest.raises(ValueError, match="scores"):
        parameter_free_figure(["a", "b"], torch.zeros(3, 3), torch.zeros(2, 2))


def test_linear_weight_figure():
    torch.manual_seed(0)
    linear = nn.Linear(6, 4)
    weight = linear.weight.detach().T
    fig = linear_weight_figure(weight, linear)
    assert [ax.get_title() for ax in fig.axes[:3]] == [
        "W: (E, D) = (6, 4)", "linear.weight: (D, E) = (4, 6)", "linear.bias: (D,) = (4,)"]
    assert_close(torch.as_tensor(fig.axes[0].images[0].get_array()), weight)
    assert_close(torch.as_tensor(fig.axes[1].images[0].get_array()), linear.weight.detach())
    assert_close(torch.as_tensor(fig.axes[2].images[0].get_array())[:, 0], linear.bias.detach())
    assert fig.axes[0].get_xlabel() == "output feature (D)" and fig.axes[0].get_ylabel() == "input feature (E)"
    assert "transposed" in fig._suptitle.get_text()
    assert len(fig.axes) == 4 and "all three panels" in fig.axes[3].get_ylabel()  # one shared colour bar
    assert len({ax.images[0].get_clim() for ax in fig.axes[:3]}) == 1
    with pytest.raises(ValueError, match="weight"):
        linear_weight_figure(linear.weight.detach(), linear)
    named = linear_weight_figure(weight, linear, name="lin")  # the chapter's own name for the layer
    assert [ax.get_title() for ax in named.axes[1:3]] == ["lin.weight: (D, E) = (4, 6)", "lin.bias: (D,) = (4,)"]
    with pytest.raises(ValueError, match="name: .*'lin.w'"):
        linear_weight_figure(weight, linear, name="lin.w")


def test_query_scores_figure():
    tokens, x = vocab.toy_sentence("pronoun", d_model=16)
    scores = x @ x.T
    fig = query_scores_figure(tokens, scores, 7)
    bars_ax, heat_ax = fig.axes[0], fig.axes[1]
    heights = torch.tensor([p.get_height() for p in bars_ax.patches])
    assert_close(heights, scores[7].double(), atol=1e-5, rtol=1e-5)
    assert bars_ax.get_title() == "scores of query 'it' (row 7)"
    assert [t.get_text() for t in bars_ax.get_xticklabels()] == tokens
    assert bars_ax.get_xlabel() == "key token (S)"
    assert heat_ax.get_ylabel() == "query token (L)"
    top = int(scores[7].argmax())
    assert f"'{tokens[top]}'" in fig._suptitle.get_text()
    assert _colorbar_label(heat_ax).startswith("score q_i · k_j")
    with pytest.raises(ValueError, match="query_index"):
        query_scores_figure(tokens, scores, 11)


def test_scores_figure():
    tokens, x = vocab.toy_sentence("pronoun", d_model=16)
    scores = x @ x.mT
    fig = scores_figure(tokens, scores, title="Q Kᵀ")
    ax = fig.axes[0]
    assert ax.get_title() == "Q Kᵀ"
    assert ax.get_xlabel() == "key token (S)" and ax.get_ylabel() == "query token (L)"
    assert [t.get_text() for t in ax.get_yticklabels()] == tokens
    assert_close(torch.as_tensor(ax.images[0].get_array()), scores)
    assert _colorbar_label(ax).startswith("score q_i · k_j")
    with pytest.raises(ValueError, match="scores"):
        scores_figure(tokens[:3], scores, title="t")


# --- the explorer -----------------------------------------------------------------------------------


def test_explorer_scores_no_projection_is_symmetric_and_self_attending():
    tokens, x = vocab.toy_sentence("pronoun", d_model=16)
    out = qkv_explorer_scores(x, projected=False)
    assert_close(out.scores, x @ x.T)
    assert out.symmetric
    assert out.self_top >= 0.8


@pytest.mark.parametrize("d_k", [1, 8, 64])
def test_explorer_scores_projected_matches_nn_linear(d_k):
    tokens, x = vocab.toy_sentence("pronoun", d_model=16)
    out = qkv_explorer_scores(x, projected=True, d_k=d_k, seed=2)
    w_q, w_k = random_projection(16, d_k, seed=2), random_projection(16, d_k, seed=3)
    assert_close(out.scores, F.linear(x, w_q.T) @ F.linear(x, w_k.T).T)
    assert not out.symmetric


def test_random_projection_keeps_size():
    w = random_projection(256, 512, seed=0)
    assert abs(w.std().item() * math.sqrt(256) - 1.0) < 0.02


@pytest.mark.slow  # draws the explorer's figures (widgets layer): `make unit` runs it, `make quick` leaves it out
def test_explorer_draws_the_state_of_its_controls():
    box = qkv_explorer("pronoun", d_model=16)
    tokens, x = vocab.toy_sentence("pronoun", 16)
    query, mode, d_k, w_seed = (box.controls[name] for name in ("query", "mode", "d_k", "w_seed"))
    assert query.description and mode.description and d_k.description and w_seed.description
    assert d_k.disabled  # no projection: D_k means nothing
    assert_same_state(box.state, qkv_explorer_scores(x, projected=False))
    before = png(box)
    mode.value = True
    assert not d_k.disabled
    assert_same_state(box.state, qkv_explorer_scores(x, projected=True, d_k=8, seed=0))
    assert png(box) != before
    d_k.value = 64
    assert_same_state(box.state, qkv_explorer_scores(x, projected=True, d_k=64, seed=0))
    w_seed.value = 3
    assert_same_state(box.state, qkv_explorer_scores(x, projected=True, d_k=64, seed=6))
    after_seed = png(box)
    query.value = 1  # the same scores, another row drawn
    assert png(box) != after_seed


# --- quiz -------------------------------------------------------------------------------------------


def test_quiz_answers_and_feedback():
    quiz = ch1_quiz()
    assert len(quiz.questions) >= 3
    correct = [q.answer for q in quiz.questions]
    assert quiz.score(correct) == len(quiz.questions)
    for question in quiz.questions:
        if hasattr(question, "options"):
            assert len(question.feedback) == len(question.options)
            wrong = [i for i in range(len(question.options)) if i != question.answer]
            assert all(not question.grade(i)[0] for i in wrong)
    assert quiz.score([None] * (len(correct) - 1) + ["399"]) == 0


def test_quiz_numeric_answer_is_computed():
    q = torch.randn(4, 10, 8)
    assert attention_scores_reference(q, q).numel() == ch1_quiz().questions[-1].answer


def test_quiz_widget_builds():
    box = ch1_quiz().widget
    assert len(box.children) == 1 + len(ch1_quiz().questions)


# --- the chapter's named bugs: each gets ❌ with a diagnosis that names it and points to its cell ----


def _nn_linear_with_bias(x, w_q, w_k, w_v):  # the recipe of 'The same projection with nn.Linear', bias on
    outputs = []
    for weight in (w_q, w_k, w_v):
        linear = nn.Linear(*weight.shape)
        with torch.no_grad():
            linear.weight.copy_(weight.T)
        outputs.append(linear(x))
    return tuple(outputs)


def _dim_patch(q, k):  # patched after a first failure: right for 2-D and 3-D, wrong with heads
    return q @ k.T if k.dim() == 2 else q @ k.transpose(1, 2)


@pytest.mark.parametrize(
    "exercise_id, fn, expected",
    [
        ("ch1.project_qkv", lambda x, w_q, w_k, w_v: (F.linear(x, w_q), F.linear(x, w_k), F.linear(x, w_v)),
         ["F.linear(x, w)", "'The same projection with nn.Linear'"]),
        ("ch1.project_qkv", lambda x, w_q, w_k, w_v: (x @ w_q.T, x @ w_k.T, x @ w_v.T),
         ["transposed weights", "'The same projection with nn.Linear'"]),
        ("ch1.project_qkv", lambda x, w_q, w_k, w_v: tuple(torch.bmm(x, w) for w in (w_q, w_k, w_v)),
         ["torch.bmm", "'The batch dimension'"]),
        ("ch1.project_qkv", lambda x, w_q, w_k, w_v: tuple(torch.mm(x, w) for w in (w_q, w_k, w_v)),
         ["torch.mm", "'The batch dimension'"]),
        ("ch1.project_qkv", lambda x, w_q, w_k, w_v: tuple(x @ w / math.sqrt(16) for w in (w_q, w_k, w_v)),
         ["global E = 16"]),
        ("ch1.project_qkv", _nn_linear_with_bias, ["bias=False"]),  # a random bias: only the hint can say it
        ("ch1.attention_scores", lambda q, k: q @ k.T, ["k.T reverses *all* dimensions", "'Myth check: `x @ x.T`"]),
        ("ch1.attention_scores", lambda q, k: q @ k.transpose(1, 2), ["k.transpose(1, 2) counts dims from the front"]),
        ("ch1.attention_scores", _dim_patch, ["k.transpose(1, 2) counts dims from the front"]),
        ("ch1.attention_scores", lambda q, k: torch.bmm(q, k.mT), ["torch.bmm only takes 3-D"]),
        ("ch1.attention_scores", lambda q, k: q @ k.t(), ["k.t() only accepts"]),
        ("ch1.attention_scores", lambda q, k: F.normalize(q, dim=-1) @ F.normalize(k, dim=-1).mT,
         ["cosine", "'Myth check: \"Q Kᵀ computes how similar"]),
        ("ch1.attention_scores", lambda q, k: q @ k.mT / math.sqrt(q.shape[-1]), ["chapter 2"]),
        ("ch1.attention_scores", lambda q, k: (q @ k.mT).softmax(-1), ["softmax"]),
    ],
    ids=["F.linear", "x@w.T", "bmm", "mm", "global_E", "nn.Linear_bias", "k.T", "transpose_1_2", "dim_patch",
         "scores_bmm", "k.t", "cosine", "scaled", "softmax"],
)
def test_named_bug_fails_and_is_named(exercise_id, fn, expected):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        verdict = _check(get(exercise_id), fn)
    assert not verdict.passed
    for text in expected:
        assert text in verdict.message, verdict.message


@pytest.mark.parametrize("exercise", EXERCISES, ids=lambda e: e.id)
def test_hint_guides_without_the_solution(exercise):
    assert "return (" not in exercise.hint and "transpose(-2, -1)" not in exercise.hint
    assert "x @ w_q" not in exercise.hint and "q @ k" not in exercise.hint


def _flattened(x, w_q, w_k, w_v):
    flat = x.view(-1, x.size(-1))  # (N·L, E), never reshaped back
    return flat @ w_q, flat @ w_k, flat @ w_v


@pytest.mark.parametrize(
    ("exercise_id", "fn", "expected"),
    [
        # found in a learner review: these used to get another mistake's diagnosis, or the hint alone
        ("ch1.project_qkv", lambda x, w_q, w_k, w_v: tuple(x @ w / w_k.shape[1] ** 0.5 for w in (w_q, w_k, w_v)),
         ["√D_k times too small", "belongs to the scores"]),  # was "you divided by √E"
        ("ch1.project_qkv", lambda x, w_q, w_k, w_v: (torch.matmul(x, w_q) / math.sqrt(w_q.size(-1)), x @ w_k, x @ w_v),
         ["your Q is √D_k times too small"]),
        ("ch1.project_qkv", lambda x, w_q, w_k, w_v: (x * w_q, x * w_k, x * w_v), ["x * w"]),  # was "w @ x"
        ("ch1.project_qkv", _flattened, ["(N·L, D)", "'The batch dimension'"]),
        ("ch1.project_qkv", lambda x, w_q, w_k, w_v: tuple((x if x.dim() == 3 else x[None]) @ w
                                                           for w in (w_q, w_k, w_v)),
         ["(1, L, D)", "'The batch dimension'"]),
        ("ch1.project_qkv", lambda x, w_q, w_k, w_v: (torch.squeeze(x @ w_q), torch.squeeze(x @ w_k),
                                                       torch.squeeze(x @ w_v)), [".squeeze()"]),
        ("ch1.project_qkv", lambda x, w_q, w_k, w_v: ((x @ w_q).detach(), (x @ w_k).detach(), (x @ w_v).detach()),
         ["no gradient reaches"]),  # used to pass: the projections are learned through
        ("ch1.attention_scores", lambda q, k: (q @ k.mT).detach(), ["no gradient reaches"]),
        ("ch1.attention_scores", lambda q, k: q @ k.mT / k.size(-2) ** 0.5, ["√S times too small"]),  # was "√D"
        ("ch1.attention_scores", lambda q, k: q @ q.mT, ["Q Qᵀ"]),
        ("ch1.attention_scores", lambda q, k: torch.matmul(q, k.mT).squeeze(), [".squeeze()"]),
    ],
    ids=["sqrt_dk", "q_only", "x*w", "flattened", "added_batch", "squeezed", "detached", "scores_detached",
         "sqrt_s", "qq", "scores_squeezed"],
)
def test_learner_variants_get_their_diagnosis(exercise_id, fn, expected):
    verdict = _check(get(exercise_id), fn)
    assert not verdict.passed
    for text in expected:
        assert text in verdict.message, verdict.message
