"""Chapter 3 (multi-head attention): exercises, figures, head similarity, explorer and quiz."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.testing import assert_close
from widget_support import assert_same_state, png

from utils import heads as hand_heads
from utils.attention import MultiHeadAttention, merge_heads, split_heads
from utils.exercises import get
from utils.exercises.check_cell import run_public_check
from utils.exercises.judging import compare
from utils.exercises.multihead import EXERCISES, multi_head_attention_reference
from utils.explorers import multihead as explorers
from utils.plotting import multihead as plots
from utils.widgets import multihead as widgets

IDS = ["ch3.split_heads", "ch3.merge_heads", "ch3.multi_head_attention"]



# --- exercises ------------------------------------------------------------------------------------


def test_ids_points_registered():
    assert [e.id for e in EXERCISES] == IDS
    assert [e.points for e in EXERCISES] == [1, 1, 3]
    for e in EXERCISES:
        assert get(e.id) is e
        assert len(e.mistakes) >= 2


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_split_merge_references_match_utils(seed):
    split, merge = get("ch3.split_heads"), get("ch3.merge_heads")
    for case in split.cases(seed):
        assert_close(split.reference(**case), split_heads(case["x"], case["num_heads"]), rtol=0, atol=0)
        # merging undoes splitting
        assert_close(merge.reference(split.reference(**case)), case["x"], rtol=0, atol=0)
    for case in merge.cases(seed):
        assert_close(merge.reference(**case), merge_heads(case["x"]), rtol=0, atol=0)


def _torch_mha_from_weights(w_q, w_k, w_v, w_o, num_heads):
    E = w_q.shape[0]
    m = nn.MultiheadAttention(E, num_heads, bias=False, batch_first=True)
    with torch.no_grad():
        m.in_proj_weight.copy_(torch.cat([w_q.T, w_k.T, w_v.T]))  # nn stores W.T
        m.out_proj.weight.copy_(w_o.T)
    return m.eval()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_functional_reference_matches_torch(seed):
    """The reference agrees with nn.MultiheadAttention (in float64) on every case; on the query rows whose
    keys are all masked, where torch's answer depends on its version and path, the reference gives zero."""
    ex = get("ch3.multi_head_attention")
    cases = ex.cases(seed)
    assert {type(c["mask"]).__name__ for c in cases} == {"NoneType", "Tensor"}
    for case in cases:
        wide = {k: (v.double() if isinstance(v, torch.Tensor) and v.is_floating_point() else v)
                for k, v in case.items()}
        m = _torch_mha_from_weights(wide["w_q"], wide["w_k"], wide["w_v"], wide["w_o"], case["num_heads"]).double()
        mask, x, H = case["mask"], wide["x"], case["num_heads"]
        N, L, _ = x.shape
        kwargs = {}
        if mask is not None:  # torch: True = blocked, and a 3-D mask is (N * H, L, S)
            kwargs["attn_mask"] = ~mask if mask.dim() == 2 else ~mask.expand(N, H, L, L).reshape(N * H, L, L)
        expected = m(x, x, x, need_weights=False, **kwargs)[0]
        got = ex.reference(**case)
        assert got.dtype == case["x"].dtype
        empty = torch.zeros(N, L, dtype=torch.bool) if mask is None else ~mask.expand(N, 1, L, L).any(-1)[:, 0]
        assert (got[empty] == 0).all()
        tol = {"rtol": 1e-3, "atol": 1e-3} if case["x"].dtype == torch.float16 else {"rtol": 1e-4, "atol": 1e-5}
        assert_close(got[~empty].double(), expected[~empty], **tol)


def test_case_shapes_are_varied():
    for ex in EXERCISES:
        cases = ex.cases(0)
        assert 4 <= len(cases) <= 10
        shapes = [tuple(c["x"].shape) for c in cases]
        assert len(set(shapes)) >= 4
        assert any(1 in s for s in shapes)  # an edge shape (length, batch, heads or D of 1)
        assert ex.cases(0)[0]["x"].equal(cases[0]["x"]) and not ex.cases(1)[-1]["x"].equal(cases[-1]["x"])


@pytest.mark.slow  # seconds of CPU: `make unit` runs it, `make quick` leaves it out
@pytest.mark.parametrize("exercise", EXERCISES, ids=lambda e: e.id)
def test_reference_passes_and_each_mistake_fails(exercise):
    assert run_public_check(exercise, exercise.reference, quiet=True).passed
    cases = exercise.cases(0)
    for mistake in exercise.mistakes:
        differs = False
        for case in cases:
            try:
                wrong = mistake.fn(**case)
            except (RuntimeError, TypeError):
                differs = True
                break
            if compare(wrong, exercise.reference(**case), exercise.atol, exercise.rtol) is not None:
                differs = True
                break
        assert differs, mistake.name
        verdict = run_public_check(exercise, mistake.fn, quiet=True)
        assert not verdict.passed
        assert mistake.diagnosis in verdict.message, (mistake.name, verdict.message)


# --- the chapter's rules are cases, and its named bugs get their diagnosis ---------------------------


def _learner_mha(fill=float("-inf"), guard=True, scale="head", invert=False, split="right"):
    """Multi-head attention as a learner writes it (no course helpers), with one thing to get wrong."""

    def multi_head_attention(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
        N, L, E = x.shape
        H, D = num_heads, E // num_heads

        def heads(t):
            return t.reshape(N, H, L, D) if split == "no_transpose" else t.view(N, L, H, D).transpose(1, 2)

        q, k, v = heads(x @ w_q), heads(x @ w_k), heads(x @ w_v)
        scores = q @ k.transpose(-2, -1) / math.sqrt({"head": D, "heads": H, "model": E}[scale])
        if mask is not None:
            scores = scores.masked_fill(mask if invert else ~mask, fill)
        weights = torch.softmax(scores, dim=-1)
        if mask is not None and guard:
            weights = weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
        return (weights @ v).transpose(1, 2).reshape(N, L, E) @ w_o

    return multi_head_attention


def _mha_verdict(**options):
    return run_public_check(get("ch3.multi_head_attention"), _learner_mha(**options), quiet=True)


def test_learner_solution_with_the_guard_passes():
    assert _mha_verdict().passed


def test_cases_hold_the_chapter_rules():
    for seed in range(4):
        cases = get("ch3.multi_head_attention").cases(seed)
        assert cases[0]["num_heads"] > 1 and cases[0]["x"].shape[1] > 1  # H > 1 and L > 1 come first
        assert cases[0]["x"].shape[-1] // cases[0]["num_heads"] != cases[0]["num_heads"]  # D != H
        assert any(c["x"].dtype == torch.float16 and c["mask"] is not None for c in cases)
        large = [c for c in cases if c["mask"] is not None and c["x"].dtype == torch.float32
                 and c["x"].abs().max() >= 100]
        assert large, "a case with scores of order 1e4"
        c = large[0]
        D = c["x"].shape[-1] // c["num_heads"]
        q = split_heads(c["x"] @ c["w_q"], c["num_heads"])
        k = split_heads(c["x"] @ c["w_k"], c["num_heads"])
        scores = q @ k.transpose(-2, -1) / math.sqrt(D)  # (N, H, L, L)
        allowed_max = scores.masked_fill(~c["mask"], float("-inf")).amax(-1)
        masked_max = scores.masked_fill(c["mask"], float("-inf")).amax(-1)
        assert (allowed_max < -1.5e4).any() and (masked_max > 1.5e4).any()
        assert any(c["mask"] is not None and not c["mask"].any(-1).all() for c in cases), "a fully masked row"
        for split_case in get("ch3.split_heads").cases(seed):
            assert split_case["x"].shape[-1] % split_case["num_heads"] == 0
        assert any(c["x"].dtype == torch.float16 for c in get("ch3.split_heads").cases(seed))
        assert any(c["x"].dtype == torch.float16 for c in get("ch3.merge_heads").cases(seed))


@pytest.mark.parametrize("guard", [True, False])
def test_minus_1e9_fails_and_names_float16(guard):
    verdict = _mha_verdict(fill=-1e9, guard=guard)
    assert not verdict.passed
    assert "-1e9" in verdict.message and "float16" in verdict.message and "Three masking myths" in verdict.message


@pytest.mark.parametrize("guard", [True, False])
def test_minus_1e4_fails_and_names_large_scores(guard):
    verdict = _mha_verdict(fill=-1e4, guard=guard)
    assert not verdict.passed
    assert "-1e4" in verdict.message and "'-1e4 is negative enough'" in verdict.message


def test_finfo_min_fails_on_fully_masked_rows():
    verdict = run_public_check(get("ch3.multi_head_attention"), _finfo_learner, quiet=True)
    assert not verdict.passed and "all masked" in verdict.message and "zero" in verdict.message


def _finfo_learner(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    N, L, E = x.shape
    q, k, v = ((x @ w).view(N, L, num_heads, -1).transpose(1, 2) for w in (w_q, w_k, w_v))
    scores = q @ k.transpose(-2, -1) / math.sqrt(E // num_heads)
    if mask is not None:
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    return (torch.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(N, L, E) @ w_o


def test_missing_guard_gets_the_fully_masked_row_rule():
    verdict = _mha_verdict(guard=False)
    assert not verdict.passed
    assert "NaN" in verdict.message and "must output zeros" in verdict.message
    assert "Use -inf and you are done" in verdict.message


@pytest.mark.parametrize("guard", [True, False])
def test_inverted_mask_natural_code_gets_its_diagnosis(guard):
    verdict = _mha_verdict(invert=True, guard=guard)
    assert not verdict.passed and "inverted" in verdict.message


def test_sqrt_h_scale_is_not_reported_as_unscaled():
    verdict = _mha_verdict(scale="heads")
    assert "sqrt(H)" in verdict.message and "not scaled" not in verdict.message
    assert "sqrt(E)" in _mha_verdict(scale="model").message


def test_split_without_transpose_gets_its_diagnosis():
    verdict = _mha_verdict(split="no_transpose")
    assert not verdict.passed and "without a transpose" in verdict.message


def test_float_cast_in_split_and_merge_fails_on_dtype():
    def split_heads(x, num_heads):
        N, L, E = x.shape
        return x.float().view(N, L, num_heads, E // num_heads).transpose(1, 2)

    def merge_heads(x):
        N, H, L, D = x.shape
        return x.transpose(1, 2).reshape(N, L, H * D).float()

    for ex, fn in ((get("ch3.split_heads"), split_heads), (get("ch3.merge_heads"), merge_heads)):
        verdict = run_public_check(ex, fn, quiet=True)
        assert not verdict.passed and "dtype" in verdict.message


def _split_stacked_on_dim0(x, num_heads):
    return torch.stack(x.chunk(num_heads, dim=-1), dim=0)


def _split_keys_last(x, num_heads):
    N, L, E = x.shape
    return x.view(N, L, num_heads, E // num_heads).permute(0, 2, 3, 1)


def _split_detached(x, num_heads):
    N, L, E = x.shape
    return x.detach().view(N, L, num_heads, E // num_heads).transpose(1, 2)


def _merge_not_reshaped(x):
    return x.transpose(1, 2)


@pytest.mark.parametrize("exercise,fn,words", [
    ("ch3.split_heads", _split_stacked_on_dim0, "(H, N, L, D)"),
    ("ch3.split_heads", _split_keys_last, "(N, H, D, L)"),
    ("ch3.split_heads", _split_detached, "no gradient reaches `x`"),
    ("ch3.merge_heads", _merge_not_reshaped, "still (N, L, H, D)"),
], ids=["stacked_dim0", "keys_last", "detached", "not_reshaped"])
def test_split_and_merge_mistakes_found_in_review_get_their_diagnosis(exercise, fn, words):
    verdict = run_public_check(get(exercise), fn, quiet=True)
    assert not verdict.passed and words in verdict.message, verdict.message


def _review_mha(*, mask_axes=False, guard="fill", scale_weights=False, fill=float("-inf")):
    """A learner's multi-head attention (no course helpers) with one thing a learner review got wrong."""

    def multi_head_attention(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
        N, L, E = x.shape
        H, D = num_heads, E // num_heads
        q, k, v = ((x @ w).view(N, L, H, D).transpose(1, 2) for w in (w_q, w_k, w_v))
        scores = q @ k.transpose(-2, -1)
        scores = scores if scale_weights else scores / math.sqrt(D)
        if mask is not None:
            mask = mask[None, None] if mask_axes else mask
            scores = scores.masked_fill(~mask, fill)
        weights = torch.softmax(scores, dim=-1)
        weights = weights / math.sqrt(D) if scale_weights else weights
        if mask is not None:
            if guard == "multiply":
                weights = weights * mask.any(dim=-1, keepdim=True)
            elif guard == "no_keepdim":
                weights = weights.masked_fill(~mask.any(dim=-1), 0.0)
            elif guard == "all":
                weights = weights.masked_fill(~mask.all(dim=-1, keepdim=True), 0.0)
            else:
                weights = weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
        return (weights @ v).transpose(1, 2).reshape(N, L, E) @ w_o

    return multi_head_attention


@pytest.mark.parametrize("options,words", [
    ({"mask_axes": True}, "added axes to the mask"),
    ({"guard": "multiply"}, "NaN * 0 is still NaN"),
    ({"guard": "no_keepdim"}, "without keepdim=True"),
    ({"guard": "all"}, "(mask.all)"),
    ({"scale_weights": True}, "divided the weights by sqrt(D) after the softmax"),
], ids=["mask_axes", "guard_multiply", "guard_no_keepdim", "guard_all", "scale_weights"])
def test_mha_mistakes_found_in_review_get_their_diagnosis(options, words):
    verdict = run_public_check(get("ch3.multi_head_attention"), _review_mha(**options), quiet=True)
    assert not verdict.passed and words in verdict.message, verdict.message


def test_guarded_minus_1e9_is_told_only_about_float16():
    """With the guard, -1e9 fails only on float16: the diagnosis must not claim a uniform average."""
    verdict = run_public_check(get("ch3.multi_head_attention"), _review_mha(fill=-1e9), quiet=True)
    assert not verdict.passed and "float16" in verdict.message and "average" not in verdict.message


def test_forbidden_torch_builtins_are_refused():
    ex = get("ch3.multi_head_attention")

    def multi_head_attention(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
        N, L, E = x.shape
        q = (x @ w_q).view(N, L, num_heads, -1).transpose(1, 2)
        k = (x @ w_k).view(N, L, num_heads, -1).transpose(1, 2)
        v = (x @ w_v).view(N, L, num_heads, -1).transpose(1, 2)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return out.transpose(1, 2).reshape(N, L, E) @ w_o

    verdict = run_public_check(ex, multi_head_attention, quiet=True)
    assert verdict.status == "forbidden"


# --- head similarity ------------------------------------------------------------------------------


def test_head_similarity_js_matches_kl_div():
    torch.manual_seed(0)
    w = torch.rand(2, 3, 4, 5).softmax(-1).double()
    sim = hand_heads.head_similarity(w)
    expected = torch.empty(3, 3, dtype=torch.float64)
    for i in range(3):
        for j in range(3):
            p, q = w[:, i], w[:, j]
            m = (p + q) / 2
            js = (0.5 * F.kl_div(m.log(), p, reduction="none").sum(-1)
                  + 0.5 * F.kl_div(m.log(), q, reduction="none").sum(-1))
            expected[i, j] = (1 - js / math.log(2)).mean()
    assert_close(sim, expected)
    assert_close(sim, sim.T)
    assert_close(sim.diagonal(), torch.ones(3, dtype=torch.float64))


def test_head_similarity_cosine_and_extremes():
    torch.manual_seed(1)
    w = torch.rand(2, 2, 3, 4).softmax(-1)
    sim = hand_heads.head_similarity(w, metric="cosine")
    assert_close(sim[0, 1], F.cosine_similarity(w[:, 0], w[:, 1], dim=-1).mean())
    identical = w[:, :1].expand(2, 4, 3, 4)
    assert_close(hand_heads.head_similarity(identical), torch.ones(4, 4))
    disjoint = torch.zeros(1, 2, 1, 2)
    disjoint[0, 0, 0, 0] = disjoint[0, 1, 0, 1] = 1.0
    assert_close(hand_heads.head_similarity(disjoint)[0, 1], torch.tensor(0.0))


def test_head_similarity_skips_fully_masked_rows_and_checks_input():
    w = torch.rand(1, 2, 3, 4).softmax(-1)
    w[0, :, 2] = 0.0  # a fully-masked query row
    sim = hand_heads.head_similarity(w)
    assert torch.isfinite(sim).all()
    assert_close(sim, hand_heads.head_similarity(w[:, :, :2]))
    with pytest.raises(ValueError, match=r"\(N, H, L, S\)"):
        hand_heads.head_similarity(torch.rand(2, 3, 4))
    with pytest.raises(ValueError, match="metric"):
        hand_heads.head_similarity(w, metric="l2")


# --- the apple example ----------------------------------------------------------------------------


def test_apple_example_heads_find_their_relation():
    tokens, x, module = hand_heads.apple_example(3)
    _, weights = module(x)  # (1, 3, L, L)
    top = weights[0].argmax(-1)  # (H, L)
    at = tokens.index
    assert tokens[top[0, at("apple")]] == "eats"
    assert tokens[top[1, at("apple")]] == "red"
    assert tokens[top[2, at("girl")]] == "eats"
    # one head must split apple's attention between the two relations
    _, single = hand_heads.apple_example(1)[2](x)
    row = single[0, 0, at("apple")]
    assert_close(row[at("eats")], row[at("red")])
    assert row[at("eats")] < 0.5


def test_apple_example_matches_torch_module():
    tokens, x, module = hand_heads.apple_example(3)
    torch_mha = nn.MultiheadAttention(12, 3, bias=False, batch_first=True)
    with torch.no_grad():
        torch_mha.in_proj_weight.copy_(torch.cat([module.q_proj.weight, module.k_proj.weight, module.v_proj.weight]))
        torch_mha.out_proj.weight.copy_(module.out_proj.weight)
    out, weights = torch_mha(x, x, x, average_attn_weights=False)
    ours_out, ours_weights = module(x)
    assert_close(ours_out, out)
    assert_close(ours_weights, weights)


# --- figures --------------------------------------------------------------------------------------


def test_head_split_figure():
    fig = plots.head_split_figure(torch.arange(12.0), 3, token="apple")
    ax = fig.axes[0]
    assert "H = 3" in ax.get_title() and "D = 4" in ax.get_title() and "'apple'" in ax.get_title()
    assert ax.get_xlabel().startswith("feature index") and ax.get_ylabel() == "token"
    assert [t.get_text() for t in ax.texts] == ["head 1", "head 2", "head 3"]
    assert ax.images[0].get_array().shape == (1, 12)
    with pytest.raises(ValueError, match="divide"):
        plots.head_split_figure(torch.arange(12.0), 5)


def test_head_maps_figure():
    tokens, x, module = hand_heads.apple_example(3)
    weights = module(x)[1][0].detach()
    fig = plots.head_maps_figure(weights, tokens)
    heads = [ax for ax in fig.axes if ax.get_title().startswith("Head")]
    assert [ax.get_title() for ax in heads] == ["Head 1", "Head 2", "Head 3"]
    assert [t.get_text() for t in heads[0].get_yticklabels()] == tokens
    assert heads[0].get_ylabel() == "query (L)" and heads[0].get_xlabel() == "key (S)"
    assert_close(torch.as_tensor(heads[1].images[0].get_array().data), weights[1])
    assert fig._suptitle.get_text()
    with pytest.raises(ValueError, match="labels"):
        plots.head_maps_figure(weights, tokens[:3])


def test_head_token_figure():
    state = explorers.head_explorer_state(3, head=1, token=5)
    fig = plots.head_token_figure(state.weights, state.tokens, state.head, state.token)
    heat, bars = fig.axes[:2]  # then the colorbar
    assert heat.get_title() == "Head 2 of 3: all queries"
    assert "'apple' looks mostly at 'red'" in bars.get_title()
    idle = explorers.head_explorer_state(6, head=1, token=5)
    fig = plots.head_token_figure(idle.weights, idle.tokens, idle.head, idle.token)
    assert "uniform, no preference" in fig.axes[1].get_title()
    tie = explorers.head_explorer_state(1, head=0, token=5)
    fig = plots.head_token_figure(tie.weights, tie.tokens, tie.head, tie.token)
    assert "looks equally at 'eats' and 'red'" in fig.axes[1].get_title()
    heights = torch.tensor([p.get_height() for p in bars.patches], dtype=torch.float32)
    assert_close(heights, state.row.float())
    assert heat.get_xlabel() == "key (attended to)" and bars.get_ylabel() == "weight"


def test_head_explorer_figure_draws_the_states_head_and_token():
    from utils.plotting.common import figure_png

    state = explorers.head_explorer_state(6, head=3, token=2)
    drawn = figure_png(plots.head_explorer_figure(state))
    assert drawn == figure_png(plots.head_token_figure(state.weights, state.tokens, state.head, state.token))
    assert drawn != figure_png(plots.head_explorer_figure(explorers.head_explorer_state(6, head=3, token=4)))


def test_head_similarity_figure():
    sim = torch.tensor([[1.0, 0.5], [0.5, 1.0]])
    fig = plots.head_similarity_figure(sim)
    ax = fig.axes[0]
    assert "mean off-diagonal 0.50" in ax.get_title()
    assert ax.get_xlabel() == "head" and ax.get_ylabel() == "head"
    assert [t.get_text() for t in ax.texts] == ["1.00", "0.50", "0.50", "1.00"]


def test_speed_ratio_figure():
    rows = [{"name": "fast path", "mode": "forward", "ratio": 0.9, "ratio_min": 0.8, "ratio_max": 1.0},
            {"name": "explicit path", "mode": "forward", "ratio": 1.2, "ratio_min": 1.1, "ratio_max": 1.4}]
    fig = plots.speed_ratio_figure(rows)
    ax = fig.axes[0]
    assert [p.get_height() for p in ax.patches] == [0.9, 1.2]
    assert ax.get_ylabel() == "time / built-in time" and "built-in" in ax.get_title()


# --- explorer and quiz ----------------------------------------------------------------------------


def test_explorer_state():
    assert explorers.head_count_options(12) == [1, 2, 3, 4, 6, 12]
    state = explorers.head_explorer_state(3, head=0, token=5)
    assert state.weights.shape == (3, 7, 7) and state.head_dim == 4 and state.top == "eats"
    assert_close(state.weights.sum(-1), torch.ones(3, 7))
    assert explorers.head_explorer_state(1, head=2, token=5).head == 0  # clipped to H
    assert state.preference == "attends most to 'eats'"
    idle = explorers.head_explorer_state(6, head=1, token=5)  # an idle head: a uniform row has no argmax
    assert idle.top is None and idle.preference == "uniform: no preference"
    assert explorers.head_explorer_state(1, head=0, token=5).preference == "attends most, equally, to 'eats' and 'red'"
    with pytest.raises(ValueError, match="divide"):
        explorers.head_explorer_state(5)


@pytest.mark.slow  # draws the explorer's figures (widgets layer): `make unit` runs it, `make quick` leaves it out
def test_explorer_draws_the_state_of_its_controls():
    box = widgets.head_explorer()
    num_heads, which, query = (box.controls[name] for name in ("heads", "head", "query"))
    info = box.children[1]
    assert num_heads.description and which.description and query.description
    assert list(num_heads.options) == [1, 2, 3, 4, 6, 12]
    assert_same_state(box.state, explorers.head_explorer_state(3, 0, 5))
    before_info, before = info.value, png(box)
    num_heads.value = 1
    assert which.max == 1
    assert_same_state(box.state, explorers.head_explorer_state(1, 0, 5))
    assert info.value != before_info and "H = 1" in info.value
    assert png(box) != before
    num_heads.value = 3
    which.value = 2
    assert_same_state(box.state, explorers.head_explorer_state(3, 1, 5))
    query.value = 4
    assert_same_state(box.state, explorers.head_explorer_state(3, 1, 4))
    assert "'red'" in info.value


def test_quiz():
    quiz = widgets.ch3_quiz()
    assert len(quiz.questions) >= 3
    answers = [q.answer for q in quiz.questions]
    assert quiz.score(answers) == len(quiz.questions)
    for q in quiz.questions:
        if hasattr(q, "options"):
            assert len(q.feedback) == len(q.options) and all(q.feedback)
    assert quiz.widget is not None


def test_quiz_claims_hold():
    """The quiz's answers are facts we can check here."""
    counts = {sum(p.numel() for p in MultiHeadAttention(512, h).parameters()) for h in (8, 16)}
    assert len(counts) == 1
    x = torch.randn(2, 3, 8)
    with pytest.raises(RuntimeError, match="view"):
        x.view(2, 3, 2, 4).transpose(1, 2).view(2, 3, 8)
    m = nn.MultiheadAttention(16, 4, batch_first=True)
    y = torch.randn(2, 5, 16)
    assert m(y, y, y)[1].shape == (2, 5, 5)
    # Q4: view straight to (N, H, L, D) runs and puts features of several tokens in one head's row
    N, L, H, D = 1, 3, 2, 2
    x = torch.arange(float(N * L * H * D)).view(N, L, H * D)  # token t holds t*E .. t*E + E-1
    scrambled = x.view(N, H, L, D)
    assert scrambled.shape == split_heads(x, H).shape and not torch.equal(scrambled, split_heads(x, H))
    assert {int(v) // (H * D) for v in scrambled[0, 0, 1]} != {1}  # head 0's row 1 is not token 1's
    # Q5: a head's dot product of D unit-variance products has variance D, not E or H
    q, k = torch.randn(20000, 64, dtype=torch.float64), torch.randn(20000, 64, dtype=torch.float64)
    assert abs((q * k).sum(-1).var().item() / 64 - 1) < 0.05
    assert multi_head_attention_reference is not None
