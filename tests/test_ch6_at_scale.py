"""Chapter 6 utils: exercise references against torch/utils, each Mistake differs, figures, explorer, quiz,
window masks and the KV-cache decoder."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close
from widget_support import assert_same_state, png

from utils import at_scale
from utils.decoder import TinyDecoder
from utils.exercises import check
from utils.exercises.at_scale import BLOCK_GRAD, CACHE, EXERCISES, ONLINE, WINDOW
from utils.plotting import at_scale as plots
from utils.tiled_attention import online_softmax_update
from utils.widgets import at_scale as widgets
from utils.widgets.quiz import Quiz


def _same(a, b) -> bool:
    if isinstance(a, tuple):
        return all(_same(x, y) for x, y in zip(a, b)) and len(a) == len(b)
    return a.shape == b.shape and a.dtype == b.dtype and torch.allclose(a.double(), b.double(), atol=1e-5, rtol=1e-4)


def _differs(fn, reference, case) -> bool:
    try:
        got = fn(**case)
    except Exception:  # noqa: BLE001 - a mistake may raise (a shape error), which differs from the reference
        return True
    return not _same(got, reference(**case))


@pytest.mark.parametrize("exercise", EXERCISES, ids=lambda e: e.id)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_each_mistake_differs_from_reference(exercise, seed):
    cases = exercise.cases(seed)
    assert 4 <= len(cases) <= 6
    for mistake in exercise.mistakes:
        assert any(_differs(mistake.fn, exercise.reference, c) for c in cases), mistake.name


# --------------------------------------------------------------------------------------------------
# The chapter's named bugs get ❌ and a diagnosis that names them; correct alternatives get ✅
# --------------------------------------------------------------------------------------------------
NEG_INF = float("-inf")


def _no_guard(running_max, running_sum, block):
    new_max = torch.maximum(running_max, block.amax(dim=-1))
    return new_max, running_sum * torch.exp(running_max - new_max) + torch.exp(block - new_max[..., None]).sum(-1)


def _guard_rescale_only(running_max, running_sum, block):
    new_max = torch.maximum(running_max, block.amax(dim=-1))
    rescale = torch.where(running_max == NEG_INF, torch.zeros_like(running_max), torch.exp(running_max - new_max))
    return new_max, running_sum * rescale + torch.exp(block - new_max[..., None]).sum(-1)


def _guard_block_only(running_max, running_sum, block):
    new_max = torch.maximum(running_max, block.amax(dim=-1))
    shift = torch.where(new_max == NEG_INF, 0.0, new_max)
    return new_max, running_sum * torch.exp(running_max - new_max) + torch.exp(block - shift[..., None]).sum(-1)


def _clamp_minus_1e9(running_max, running_sum, block):
    new_max = torch.maximum(running_max, block.amax(dim=-1)).clamp(min=-1e9)
    return new_max, running_sum * torch.exp(running_max - new_max) + torch.exp(block - new_max[..., None]).sum(-1)


def _shift_minus_1e9(running_max, running_sum, block):
    new_max = torch.maximum(running_max, block.amax(dim=-1))
    shift = torch.where(new_max == NEG_INF, -1e9, new_max)
    return new_max, running_sum * torch.exp(running_max - shift) + torch.exp(block - shift[..., None]).sum(-1)


def _tensor_softmax(running_max, running_sum, block):
    new_max = torch.maximum(running_max, block.amax(dim=-1))
    return new_max, running_sum + block.softmax(-1).sum(-1)


def _nan_to_num_terms(running_max, running_sum, block):
    new_max = torch.maximum(running_max, block.amax(dim=-1))
    rescale = torch.nan_to_num(torch.exp(running_max - new_max), nan=0.0)
    return new_max, running_sum * rescale + torch.nan_to_num(torch.exp(block - new_max[..., None]), nan=0.0).sum(-1)


def _window_lt(L, window):
    positions = torch.arange(L)
    return (positions[:, None] - positions[None, :]).abs() < window


def _window_half(L, window):
    positions = torch.arange(L)
    return (positions[:, None] - positions[None, :]).abs() <= window // 2


def _window_past(L, window):
    offset = torch.arange(L)[:, None] - torch.arange(L)[None, :]
    return (offset >= 0) & (offset <= window)


def _window_triu_tril(L, window):
    return torch.ones(L, L, dtype=torch.bool).triu(-window).tril(window)


def _attend_before_append(q_new, k_new, v_new, k_cache, v_cache):
    weights = torch.softmax(q_new @ k_cache.transpose(-2, -1) / q_new.shape[-1] ** 0.5, dim=-1)
    return weights @ v_cache, torch.cat([k_cache, k_new], -2), torch.cat([v_cache, v_new], -2)


def _causal_first_row(q_new, k_new, v_new, k_cache, v_cache):
    k, v = torch.cat([k_cache, k_new], -2), torch.cat([v_cache, v_new], -2)
    keep = torch.ones(k.shape[-2], k.shape[-2], dtype=torch.bool).tril()[:1]  # (1, S): key 0 only
    scores = (q_new @ k.transpose(-2, -1) / q_new.shape[-1] ** 0.5).masked_fill(~keep, NEG_INF)
    return scores.softmax(-1) @ v, k, v


def _block_delta_einsum(grad_out, out, weights, value):  # a right answer, written another way
    delta = torch.einsum("...ld,...ld->...l", grad_out, out)[..., None]  # (..., L, 1)
    return weights * (torch.einsum("...ld,...bd->...lb", grad_out, value) - delta)


def _block_delta_from_block(grad_out, out, weights, value):
    grad_weights = grad_out @ value.mT  # (..., L, B)
    return weights * (grad_weights - (weights * grad_weights).sum(-1, keepdim=True))


def _cache_einsum(q_new, k_new, v_new, k_cache, v_cache):
    k, v = torch.cat((k_cache, k_new), 2), torch.cat((v_cache, v_new), 2)
    weights = torch.softmax(torch.einsum("nhqd,nhkd->nhqk", q_new, k) / q_new.size(-1) ** 0.5, dim=-1)
    return torch.einsum("nhqk,nhkd->nhqd", weights, v), k, v


NAMED_BUGS = [
    ("online_softmax_update", _no_guard, ["-inf - (-inf) = NaN", "Fully masked rows"]),
    ("online_softmax_update", _guard_rescale_only, ["guarding only one of them is not enough"]),
    ("online_softmax_update", _guard_block_only, ["guarding only one of them is not enough"]),
    ("online_softmax_update", _clamp_minus_1e9, ["-1e9", "myth check"]),
    ("online_softmax_update", _shift_minus_1e9, ["-1e9", "float16"]),
    ("online_softmax_update", _tensor_softmax, ["softmax", "implement it yourself"]),
    ("block_score_grad", _block_delta_from_block, ["needs the whole row", "rowsum(dO ⊙ O)", "section 3"]),
    ("sliding_window_mask", _window_lt, ["use <=, not <"]),
    ("sliding_window_mask", _window_half, ["*each* side", "don't halve it"]),
    ("sliding_window_mask", _window_past, ["only looks back", "both sides"]),
    ("attend_with_cache", _attend_before_append, ["*before* attending", "itself included"]),
    ("attend_with_cache", _causal_first_row, ["only the first key", "needs no mask"]),
]


@pytest.mark.parametrize(("name", "fn", "words"), NAMED_BUGS, ids=[fn.__name__ for _, fn, _ in NAMED_BUGS])
def test_named_bug_fails_with_its_diagnosis(name, fn, words, capsys):
    verdict = getattr(check, name)(fn)
    capsys.readouterr()
    assert not verdict.passed
    for word in words:
        assert word in verdict.message, verdict.message


@pytest.mark.parametrize(("name", "fn"), [("online_softmax_update", _nan_to_num_terms),
                                          ("block_score_grad", _block_delta_einsum),
                                          ("sliding_window_mask", _window_triu_tril),
                                          ("attend_with_cache", _cache_einsum)])
def test_correct_alternatives_pass(name, fn, capsys):
    assert getattr(check, name)(fn).passed, capsys.readouterr().out


@pytest.mark.parametrize("seed", [0, 1, 7])
def test_online_cases_hold_the_fully_masked_trap(seed):
    """Every seed has a float32 and a float16 case with a row that saw only -inf and gets an all -inf block;
    the reference keeps its max -inf and its sum 0 (never NaN)."""
    dtypes = set()
    for case in ONLINE.cases(seed):
        trap = (case["running_max"] == NEG_INF) & (case["block"] == NEG_INF).all(-1)
        if trap.any():
            new_max, new_sum = ONLINE.reference(**case)
            assert (new_max[trap] == NEG_INF).all() and (new_sum[trap] == 0).all()
            assert not new_sum.isnan().any()
            dtypes.add(case["block"].dtype)
    assert dtypes == {torch.float32, torch.float16}


def test_points_and_ids():
    assert [(e.id, e.points) for e in EXERCISES] == [
        ("ch6.online_softmax_update", 2), ("ch6.block_score_grad", 2), ("ch6.sliding_window_mask", 1),
        ("ch6.attend_with_cache", 3)]
    assert all(len(e.mistakes) >= 2 for e in EXERCISES)


@pytest.mark.parametrize("seed", [0, 3])
def test_online_reference_matches_utils_and_softmax(seed):
    for case in ONLINE.cases(seed):
        assert _same(ONLINE.reference(**case), online_softmax_update(**case))
    # folding every block of a row gives logsumexp
    x = torch.randn(3, 11, generator=torch.Generator().manual_seed(seed))
    m, s = torch.full((3,), float("-inf")), torch.zeros(3)
    for start in range(0, 11, 4):
        m, s = ONLINE.reference(m, s, x[:, start:start + 4])
    assert_close(m + s.log(), torch.logsumexp(x, dim=-1))


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("is_causal", [False, True])
@pytest.mark.parametrize(("L", "S", "block"), [(7, 7, 3), (5, 12, 4), (9, 6, 6)])
def test_block_grad_reference_rebuilds_sdpas_gradients(seed, is_causal, L, S, block):
    """dS block by block (blocks that do and do not divide S, L != S, causal) is autograd's gradient of the
    scores, and dQ = dS K·scale, dK = dSᵀ Q·scale, dV = Pᵀ dO are SDPA's gradients."""
    gen = torch.Generator().manual_seed(seed)
    q, k = torch.randn(2, 3, L, 8, generator=gen), torch.randn(2, 3, S, 8, generator=gen)  # (N, H, L|S, D)
    v, grad_out = torch.randn(2, 3, S, 5, generator=gen), torch.randn(2, 3, L, 5, generator=gen)
    scale = 8 ** -0.5
    scores = (q @ k.mT * scale).requires_grad_()  # (N, H, L, S)
    keep = torch.ones(L, S, dtype=torch.bool).tril(S - L)  # bottom-right causal: no row is empty when S >= L
    weights = torch.softmax(scores.masked_fill(~keep, NEG_INF) if is_causal and S >= L else scores, dim=-1)
    out = weights @ v  # (N, H, L, Dv)
    out.backward(grad_out)
    grad_scores = torch.cat([BLOCK_GRAD.reference(grad_out, out.detach(), weights.detach()[..., j:j + block],
                                                  v[..., j:j + block, :]) for j in range(0, S, block)], dim=-1)
    assert_close(grad_scores, scores.grad)
    ours = grad_scores @ k * scale, grad_scores.mT @ q * scale, weights.detach().mT @ grad_out
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    mask = keep if is_causal and S >= L else None
    theirs = torch.autograd.grad(F.scaled_dot_product_attention(q, k, v, attn_mask=mask), (q, k, v), grad_out)
    for mine, reference in zip(ours, theirs):
        assert_close(mine, reference)


@pytest.mark.parametrize("seed", [0, 1, 5])
def test_block_grad_cases_hold_their_traps(seed):
    """Every seed has a block inside its rows (weights summing to less than 1: D from the block's own weights
    is wrong there), a square block (L = B = Dv: a wrong axis still broadcasts), and a query that sees no
    key, whose gradient is zero, not NaN."""
    cases = BLOCK_GRAD.cases(seed)
    partial = [c for c in cases if (c["weights"].sum(-1) < 0.99).any()]
    assert partial and all(_differs(_block_delta_from_block, BLOCK_GRAD.reference, c) for c in partial[:1])
    assert any(c["grad_out"].shape[-2] == c["weights"].shape[-1] == c["value"].shape[-1] for c in cases)
    empty = [c for c in cases if (c["weights"].abs().sum(-1) == 0).any()]
    assert empty
    for case in empty:
        grad = BLOCK_GRAD.reference(**case)
        rows = (case["weights"].abs().sum(-1) == 0) & (case["out"].abs().sum(-1) == 0)
        assert rows.any() and not grad.isnan().any() and (grad[rows] == 0).all()


def test_window_reference_matches_utils():
    for case in WINDOW.cases(0):
        assert torch.equal(WINDOW.reference(**case), at_scale.sliding_window_mask(case["L"], case["window"]))


def test_cache_reference_matches_sdpa_on_the_full_sequence():
    for case in CACHE.cases(0):
        out, k_all, v_all = CACHE.reference(**case)
        assert_close(out, F.scaled_dot_product_attention(case["q_new"], k_all, v_all))
        assert_close(k_all[..., -1:, :], case["k_new"])
        ours = at_scale.attend_with_cache(**case)
        for a, b in zip(ours, (out, k_all, v_all)):
            assert_close(a, b)


def test_attend_with_cache_prefill_equals_causal_attention():
    q, k, v = torch.randn(3, 2, 4, 9, 8).unbind(0)  # (N, H, L, D)
    out, k_cache, v_cache = at_scale.attend_with_cache(q[..., :5, :], k[..., :5, :], v[..., :5, :], None, None)
    step, _, _ = at_scale.attend_with_cache(q[..., 5:, :], k[..., 5:, :], v[..., 5:, :], k_cache, v_cache)
    full = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (N, H, L, D)
    assert_close(torch.cat([out, step], dim=-2), full)


def test_check_accepts_references(capsys):
    check.online_softmax_update(ONLINE.reference)
    check.block_score_grad(BLOCK_GRAD.reference)
    check.sliding_window_mask(WINDOW.reference)
    check.attend_with_cache(CACHE.reference)
    assert capsys.readouterr().out.count("✅") == 4


def test_global_tokens_and_receptive_field():
    mask = at_scale.global_tokens_mask(10, 1, 2)
    assert mask[:2].all() and mask[:, :2].all() and not mask[5, 8]
    field = at_scale.receptive_field(at_scale.sliding_window_mask(10, 1), 3)
    assert field.shape == (3, 10, 10) and field[2, 9].sum() == 4  # t9 reaches t6..t9 after 3 layers


def test_tiny_decoder_cache_is_exact():
    torch.manual_seed(0)
    model = TinyDecoder(vocab_size=40, d_model=32, num_heads=4, num_layers=2, max_len=40).eval()
    prompt = torch.randint(0, 40, (2, 5))
    assert torch.equal(model.generate(prompt, 20, use_cache=True), model.generate(prompt, 20, use_cache=False))
    with pytest.raises(ValueError, match="max_len"):
        model.generate(prompt, 100)


def test_window_state_and_figure():
    state = widgets.window_explorer_state(2, 0, 3, length=16)
    assert state.reach == [3, 5, 7] and state.full_depth is None
    assert state.fraction == pytest.approx(at_scale.sliding_window_mask(16, 2).float().mean().item())
    assert widgets.window_explorer_state(2, 1, 3, length=16).full_depth == 2
    fig = plots.window_explorer_figure(state)
    assert len([ax for ax in fig.axes if ax.get_title()]) == 2
    assert "window=2" in fig.axes[0].get_title() and "t15 sees 7 of 16 inputs after 3 layers" in fig.axes[1].get_title()
    assert fig.axes[0].get_xlabel().startswith("key") and fig.axes[1].get_yticklabels()[0].get_text() == "layer 1"
    plt.close(fig)
    with pytest.raises(ValueError):
        widgets.window_explorer_state(-1)


def test_window_mask_and_online_softmax_figures():
    fig = plots.window_mask_figure(at_scale.global_tokens_mask(8, 1, 1))
    ax, key = fig.axes
    assert ax.get_xticklabels()[0].get_text() == "t0" and "query" in ax.get_ylabel()
    assert ax.images[0].get_array().shape == (8, 8)
    assert [t.get_text() for t in key.get_yticklabels()] == ["blocked\n(False)", "may attend\n(True)"]
    plt.close(fig)
    x = torch.tensor([1.0, 3.0, 0.5, 2.0, 6.0])
    fig = plots.online_softmax_figure(x, 2)
    assert len(fig.axes) == 2 and "max" in fig.axes[0].get_title()
    sums = fig.axes[1].get_lines()[0].get_ydata()
    assert sums[-1] == pytest.approx(torch.exp(x - x.max()).sum().item(), rel=1e-5)
    # ticks only at whole positions and whole block counts
    assert list(fig.axes[0].get_xticks()) == [0, 1, 2, 3, 4] and list(fig.axes[1].get_xticks()) == [1, 2, 3]
    # the running max steps at the block boundaries (between bars), and stops at the last bar's edge
    (stairs,) = [p for p in fig.axes[0].patches if type(p).__name__ == "StepPatch"]
    values, edges, _ = stairs.get_data()
    assert list(edges) == [-0.5, 1.5, 3.5, 4.5] and list(values) == [3.0, 3.0, 6.0]
    plt.close(fig)


def test_receptive_field_title_answers_the_explorer_prompt():
    state = widgets.window_explorer_state(window=1, num_global=0, depth=8, length=32)
    assert state.reach[-1] == 9 and state.full_depth is None
    fig = plots.window_explorer_figure(state)
    assert fig.axes[1].get_title() == "t31 sees 9 of 32 inputs after 8 layers"
    plt.close(fig)
    fig = plots.window_explorer_figure(widgets.window_explorer_state(window=2, num_global=1, depth=3, length=32))
    assert fig.axes[1].get_title().endswith("; all of them from layer 2")
    plt.close(fig)


def test_memory_figure_ticks_every_measured_length():
    rows = [{"impl": impl, "length": n, "peak_mib": float(n), "predicted_mib": None, "skipped": False}
            for impl in ("naive", "sdpa", "tiled") for n in (256, 512, 1024, 2048)]
    fig = plots.memory_scaling_figure(rows)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["256", "512", "1024", "2048"]
    assert all(len(line.get_xdata()) == 4 for line in ax.get_lines())
    plt.close(fig)


def test_backward_memory_figure_draws_the_three_backwards():
    rows = [{"impl": impl, "length": n, "peak_mib": n * n / 1e4 if impl == "tiled_autograd" else n / 100,
             "predicted_mib": None, "skipped": False, "mode": "backward"}
            for n in (512, 1024, 2048) for impl in ("sdpa", "tiled", "tiled_autograd")]
    fig = plots.memory_scaling_figure(rows, heads=8)
    ax = fig.axes[0]
    labels = [line.get_label() for line in ax.get_lines()]
    assert labels[:3] == ["tiled loop under autograd", "SDPA's fused backward",
                          "tiled_attention's recomputing backward"]
    assert all(len(line.get_xdata()) == 3 for line in ax.get_lines())
    assert ax.get_title().startswith("Autograd through the tiled loop grows as L²") and "H=8" in ax.get_title()
    assert "gradients" in ax.get_ylabel() and ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["512", "1024", "2048"]
    plt.close(fig)


def test_memory_growth_and_sizes():
    from utils.benchmark.memory import memory_growth

    rows = [{"impl": "naive", "length": n, "peak_mib": n * n / 1e4, "skipped": False} for n in (256, 512)]
    rows += [{"impl": "tiled", "length": n, "peak_mib": n / 100, "skipped": False} for n in (256, 512)]
    rows += [{"impl": "naive", "length": 1024, "peak_mib": None, "skipped": True}]
    assert memory_growth(rows) == pytest.approx({"naive": 4.0, "tiled": 2.0})
    rows += [{"impl": "naive", "length": 128, "peak_mib": 128 * 128 / 1e4, "skipped": False}]
    assert memory_growth(rows, span="all")["naive"] == pytest.approx(16.0)  # 512 / 128, not 512 / 256
    with pytest.raises(ValueError, match="span must be 'last' or 'all'"):
        memory_growth(rows, span="first")
    sizes = at_scale.attention_memory_bytes(16384, 128, heads=8, head_dim=64)
    assert sizes["naive scores"] == 8 * 2**30 and sizes["naive scores + weights"] == 16 * 2**30
    assert sizes["keys tiled"] == 128 * 2**20 and sizes["queries and keys tiled"] == 2**20
    assert sizes["output"] == 32 * 2**20


@pytest.mark.slow  # draws the explorer's figures (widgets layer): `make unit` runs it, `make quick` leaves it out
def test_explorer_draws_the_state_of_its_controls():
    box = widgets.window_explorer(length=16)
    window, num_global, depth = (box.controls[name] for name in ("window", "num_global", "depth"))
    assert window.description and num_global.description and depth.description
    assert_same_state(box.state, widgets.window_explorer_state(2, 0, 3, length=16))
    before = png(box)
    window.value = 4
    assert_same_state(box.state, widgets.window_explorer_state(4, 0, 3, length=16))
    assert png(box) != before
    num_global.value = 1
    assert_same_state(box.state, widgets.window_explorer_state(4, 1, 3, length=16))
    depth.value = 5
    assert_same_state(box.state, widgets.window_explorer_state(4, 1, 5, length=16))


def test_quiz_has_feedback_for_every_option():
    quiz = widgets.ch6_quiz()
    assert isinstance(quiz, Quiz) and len(quiz.questions) >= 3 and quiz.title.startswith("Chapter 6 quiz")
    for q in quiz.questions:
        assert len(q.feedback) == len(q.options)
        assert q.grade(q.answer)[0]
