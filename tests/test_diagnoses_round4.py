"""Diagnoses that fresh learner reviewers found misleading, wrong, self-contradicting or generic (issue 34's
follow-up, found by issue 36's reviewers), each pinned: the learner's code, the line it must get, and what the
line must not say.

- A listed slip is named where the reviewers' answer is a common, reproducible slip: the bool mask added to
  the scores, the mask applied after the softmax and renormalised with a clamp, (q * k).sum(-1), w_q used for
  all three projections, heads split and merged interleaved, v alone split without the transpose, a shift matrix
  with cosines only, a sum cast to pe's dtype, keys and values swapped in the KV-cache step, -1e9 put into the
  inputs of the online softmax.
- Observed, not listed: a bias added (a constant vector on every token), and a layer built inside the function
  (that bias changes on every call).
- The machinery: a probe's numbers name the probe's own input; a hidden summary never says "not passed: all
  cases" when some pass; a dtype diagnosis carries no unrelated hint; a sentence after a full stop starts with a
  capital; a listed slip that fails where the learner passes is not added after a probe's observation, and a
  slip that explains every failing case is not followed by a generic line about one of them.

The answers are also in ``tests/learner_answers/review5/``, where ``tests/test_learner_answers.py`` checks that
none passes and that a named mistake reproduces each.
"""

from __future__ import annotations

import math
import warnings

import torch

from tests.learner_answers.review5.qkv import project_qkv__linear_inside, project_qkv__linear_seeded_bias
from utils.exercises import check
from utils.i18n.messages import using_language


def _line(name, fn, cases="public"):
    with using_language("en"):
        verdict = getattr(check, name)(fn, cases=cases, quiet=True)
    assert not verdict.passed
    return verdict.message


# --------------------------------------------------------------------------------------------------
# chapter 1
# --------------------------------------------------------------------------------------------------


# the reviewers' answers themselves, from their learner-answer batch (tests/learner_answers/review5/)
_linear_inside, _linear_seeded = project_qkv__linear_inside, project_qkv__linear_seeded_bias


def test_a_linear_layer_built_inside_the_function_is_named_not_blamed_on_dropout():
    line = _line("project_qkv", _linear_inside)
    assert line.startswith("your function gives a different output on every call, and each differs from the "
                           "reference's by one vector added to every token: a layer built inside your function"), line
    assert "dropout" not in line


def test_a_bias_added_is_read_back_as_a_constant_vector_on_every_token():
    line = _line("project_qkv", _linear_seeded)
    assert "your output is the reference's plus one vector, the same for every token" in line, line
    assert "a bias added where none belongs" in line
    assert "Hint:" not in line


def test_w_q_for_all_three_projections_is_named():
    line = _line("project_qkv", lambda x, w_q, w_k, w_v: (x @ w_q, x @ w_q, x @ w_q))
    assert line.startswith("your K and V both equal your Q: you used w_q for all three"), line


def test_a_permute_for_3d_keys_gets_the_probe_observation_without_a_slip_it_does_not_make():
    def permute_3d(q, k):
        return q @ k.permute(0, 2, 1) if k.dim() == 3 else q @ k.T

    with warnings.catch_warnings():  # torch warns about .T on a 4-D tensor before it raises
        warnings.simplefilter("ignore", UserWarning)
        line = _line("attention_scores", permute_3d)
    assert line.startswith("your function is right on q(4, 3), k(4, 3)"), line
    assert "but not on q(2, 2, 3, 3), k(2, 2, 5, 3)" in line
    assert "known slip" not in line and "k.transpose(1, 2)" not in line


def test_an_entrywise_product_summed_over_d_is_named():
    line = _line("attention_scores", lambda q, k: (q * k).sum(-1))
    assert line.startswith("(q * k).sum(-1) gives one score per position, query i with key i only"), line
    assert "does not explain" not in line


# --------------------------------------------------------------------------------------------------
# chapter 2
# --------------------------------------------------------------------------------------------------


def _bool_added(q, k, v, mask=None):
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        s = s + mask
    w = s.softmax(-1)
    return w @ v, w


def _renormalised(q, k, v, mask=None):
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    w = s.softmax(-1)
    if mask is not None:
        w = w * mask
        w = w / w.sum(-1, keepdim=True).clamp_min(1e-30)
    return w @ v, w


def test_a_bool_mask_added_to_the_scores_is_named_and_not_taken_for_minus_1e4():
    line = _line("scaled_dot_product_attention", _bool_added)
    assert line.startswith("you added the bool mask to the scores: True becomes +1 and False 0"), line
    assert "-1e4" not in line


def test_a_mask_after_the_softmax_renormalised_with_a_clamp_is_named_not_the_guard():
    line = _line("scaled_dot_product_attention", _renormalised)
    assert line.startswith("you zero the blocked weights after the softmax and renormalise"), line
    assert "mask.all" not in line


# --------------------------------------------------------------------------------------------------
# chapter 3
# --------------------------------------------------------------------------------------------------


def test_a_head_order_read_on_the_probe_names_the_probe_shape():
    def flipped(x):
        N, H, L, D = x.shape
        return x.flip(1).transpose(1, 2).reshape(N, L, H * D)

    line = _line("merge_heads", flipped)
    assert "for x of shape (N, H, L, D) = (2, 2, 3, 3), your blocks of D features hold heads [1, 0]" in line, line


def test_a_hidden_summary_counts_the_failing_cases_of_an_exercise_with_one_part():
    def straight(x, num_heads):
        N, L, E = x.shape
        return x.view(N, num_heads, L, E // num_heads)

    line = _line("split_heads", straight, cases="hidden")
    passed = int(line.split(": ")[1].split(" of ")[0])
    assert 0 < passed < 9, line  # some pass: "all cases" would contradict that
    assert f"not passed: {9 - passed} hidden cases (values)" in line, line
    assert "all cases" not in line


def test_a_dtype_diagnosis_carries_no_unrelated_hint():
    def cast(x, num_heads):
        N, L, E = x.shape
        return x.view(N, L, num_heads, E // num_heads).transpose(1, 2).float()

    line = _line("split_heads", cast)
    assert line.startswith("output has dtype torch.float32, expected torch.float16"), line
    assert "Hint:" not in line


def _mha(x, w_q, w_k, w_v, w_o, num_heads, mask=None, *, interleaved=False, v_straight=False):
    N, L, E = x.shape
    H, D = num_heads, E // num_heads
    if interleaved:
        q, k, v = ((x @ w).view(N, L, D, H).permute(0, 3, 1, 2) for w in (w_q, w_k, w_v))
    else:
        q, k, v = ((x @ w).view(N, L, H, D).transpose(1, 2) for w in (w_q, w_k, w_v))
    if v_straight:
        v = (x @ w_v).view(N, H, L, D)
    s = q @ k.transpose(-2, -1) / math.sqrt(D)
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    w = s.softmax(-1)
    if mask is not None:
        w = w.masked_fill(~mask.any(-1, keepdim=True), 0.0)
    h = w @ v
    merged = h.permute(0, 2, 3, 1).reshape(N, L, E) if interleaved else h.transpose(1, 2).reshape(N, L, E)
    return merged @ w_o


def test_heads_split_and_merged_interleaved_are_named():
    line = _line("multi_head_attention", lambda *a, **k: _mha(*a, **k, interleaved=True))
    assert line.startswith("your heads take every H-th feature (view(N, L, D, H)), and your merge puts them back"), line


def test_v_alone_split_without_the_transpose_is_named():
    line = _line("multi_head_attention", lambda *a, **k: _mha(*a, **k, v_straight=True))
    assert line.startswith("your q and k are split right, but v is reshaped straight to (N, H, L, D)"), line


# --------------------------------------------------------------------------------------------------
# chapter 4
# --------------------------------------------------------------------------------------------------


def test_a_shift_matrix_without_sines_is_named():
    def cosines(k, d_model):
        omega = 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
        return torch.diag(torch.cos(k * omega).repeat_interleave(2)).float()

    line = _line("relative_shift_matrix", cosines)
    assert line.startswith("Your blocks hold cos(k w_i) on their diagonal and nothing beside it"), line
    assert "M_1 @ M_1" not in line


def test_a_slip_made_on_some_inputs_only_is_said_once_without_a_generic_line():
    def odd_only(length, d_model):  # divides by d_model - 1 for an odd d_model only
        pos = torch.arange(length, dtype=torch.float64)[:, None]
        omega = 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / (d_model - d_model % 2))
        table = torch.zeros(length, d_model, dtype=torch.float64)
        table[:, 0::2] = (pos * omega).sin()
        table[:, 1::2] = (pos * omega[: d_model // 2]).cos()
        return table.float()

    line = _line("sinusoidal_encoding", odd_only)
    assert "does what this known slip does: «The exponent divides by d_model, not d_model - 1" in line, line
    assert line.endswith("where that slip fails: you make that slip on some inputs only.")
    assert "output differs" not in line and "Hint:" not in line


def test_a_sum_cast_to_the_table_dtype_is_named():
    line = _line("add_positional_encoding", lambda x, pe: (x + pe[: x.size(1)]).to(pe.dtype))
    assert line.startswith("Your sum takes the dtype of pe, not of x"), line
    assert "known slip" not in line


def test_a_case_a_slip_does_not_explain_is_described_in_a_sentence_of_its_own():
    def rebuilt(x, pe):  # ignores pe; its own table raises for an odd E
        N, L, E = x.shape
        position = torch.arange(L, dtype=torch.float64)[:, None]
        omega = 10000.0 ** (-torch.arange(0, E, 2, dtype=torch.float64) / E)
        table = torch.zeros(L, E, dtype=torch.float64)
        table[:, 0::2] = (position * omega).sin()
        table[:, 1::2] = (position * omega).cos()
        return x + table.to(x.dtype)

    line = _line("add_positional_encoding", rebuilt)
    assert "«You ignored the table you were given and built a sinusoidal one" in line, line
    unexplained = line.split("it does not explain ")[1]
    case = unexplained.split(" (")[0]  # "case 4 of 6"
    assert "). Your function raised RuntimeError: " in unexplained, line  # a capital after the full stop
    assert f"({case}: " in unexplained.split("Your function raised")[1], line  # about the case it does not explain


def test_a_sentence_after_a_full_stop_starts_with_a_capital():
    from utils.exercises.judging import _sentence

    assert _sentence("your function raised") == "Your function raised"
    assert _sentence("`x` is wrong") == "`x` is wrong"
    assert _sentence("你的函数") == "你的函数"


# --------------------------------------------------------------------------------------------------
# chapter 6
# --------------------------------------------------------------------------------------------------


def test_keys_and_values_swapped_in_the_cache_step_are_named_not_the_empty_cache():
    def swapped(q_new, k_new, v_new, k_cache, v_cache):
        k = torch.cat([k_cache, k_new], dim=-2)
        v = torch.cat([v_cache, v_new], dim=-2)
        s = q_new @ v.transpose(-2, -1) / math.sqrt(q_new.shape[-1])
        return s.softmax(-1) @ k, k, v

    line = _line("attend_with_cache", swapped)
    assert line.startswith("you swapped the roles of keys and values"), line
    assert "empty cache" not in line


def test_minus_1e9_put_into_the_online_softmax_inputs_is_named_once():
    def minus_1e9(running_max, running_sum, block):
        block = block.masked_fill(block == float("-inf"), -1e9)
        rm = running_max.masked_fill(running_max == float("-inf"), -1e9)
        new_max = torch.maximum(rm, block.amax(dim=-1))
        return new_max, running_sum * torch.exp(rm - new_max) + torch.exp(block - new_max[..., None]).sum(dim=-1)

    line = _line("online_softmax_update", minus_1e9)
    assert line.startswith("your running max is -1e9 where it must stay -inf"), line
    assert "does not explain" not in line and "known slip" not in line



def test_a_list_returned_is_called_a_list_not_a_tuple():
    """A learner who returns ``.tolist()`` is told "list of 12", not "tuple of 12" (a fresh learner's finding,
    chapter 7): the judge names the type the function returned, before copying it."""
    import contextlib
    import io

    from utils.exercises import check

    def sink_window_mask(L, window, sinks):
        i, j = torch.arange(L)[:, None], torch.arange(L)[None, :]
        return ((j <= i) & ((i - j < window) | (j < sinks))).tolist()

    with contextlib.redirect_stdout(io.StringIO()):
        line = check.sink_window_mask(sink_window_mask, quiet=True).line
    assert "got list of" in line and "tuple" not in line, line
