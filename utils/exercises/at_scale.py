"""Exercises of chapter 6: the online-softmax update, the gradient of one block of scores (the tiled
backward), the sliding-window mask, one decoding step with a KV cache. See :mod:`utils.exercises.definition`
for the contract. Masks: True = may attend. The wrong answers themselves are in
:mod:`utils.exercises.mistakes.at_scale` and :mod:`utils.exercises.mistakes.at_scale_cache`; the
online-softmax public cases and the block-gradient cases, public and hidden, in
:mod:`utils.exercises.edges.at_scale`.
"""

from __future__ import annotations

import math
import random

import torch

from utils.exercises.common import Case
from utils.exercises.definition import TORCH_ATTENTION, TORCH_AUTODIFF, Exercise, Mistake
from utils.exercises.edges import at_scale as edges
from utils.exercises.mistakes import at_scale as wrong
from utils.exercises.mistakes import at_scale_cache as wrong_cache
from utils.exercises.probing.at_scale import BLOCK_GRAD_PROBES, CACHE_PROBES, ONLINE_PROBES, WINDOW_PROBES

__all__ = [
    "BLOCK_GRAD",
    "CACHE",
    "EXERCISES",
    "ONLINE",
    "WINDOW",
    "attend_with_cache_reference",
    "block_score_grad_reference",
    "online_softmax_update_reference",
    "sliding_window_mask_reference",
]


# --------------------------------------------------------------------------------------------------
# ch6.online_softmax_update
# --------------------------------------------------------------------------------------------------

_NEG_INF = float("-inf")
_FULLY_MASKED = "see 'Fully masked rows' in section 2"
_MINUS_1E9 = ("your running max is -1e9 where it must stay -inf (a fully masked row), and in float16 -1e9 does not "
              "even exist (clamp or masked_fill with it raises): a large finite number is not -inf — chapter 2's "
              f"myth check on -1e9 ('Three masking myths, run'); guard the shift instead — {_FULLY_MASKED}")


def online_softmax_update_reference(running_max: torch.Tensor, running_sum: torch.Tensor, block: torch.Tensor):
    new_max = torch.maximum(running_max, block.amax(dim=-1))  # (...,)
    shift = torch.where(new_max == _NEG_INF, 0.0, new_max)  # (...,): nothing but -inf so far -> no shift
    new_sum = running_sum * torch.exp(running_max - shift) + torch.exp(block - shift[..., None]).sum(-1)
    return new_max, new_sum


ONLINE = Exercise(
    id="ch6.online_softmax_update",
    reference=online_softmax_update_reference,
    make_cases=edges.online_cases,
    make_edge_cases=edges.online_edges, probes=ONLINE_PROBES,
    parts=edges.ONLINE_PARTS,
    points=2,
    mistakes=(
        Mistake("no_inf_guard", wrong._online_no_guard,
                "NaN in a fully masked row: where the running max and the whole block are -inf, both "
                "exp(running_max - new_max) and exp(block - new_max) compute -inf - (-inf) = NaN. Such a row "
                "must come out as max -inf, sum 0: shift both exponentials by 0 where the new max is -inf "
                "(guarding only one of them is not enough, and -1e9 is no help: float16 turns it into -inf) "
                f"— {_FULLY_MASKED}"),
        Mistake("clamped_max", wrong._online_clamped_max, _MINUS_1E9),
        Mistake("minus_1e9_everywhere", wrong._online_minus_1e9_everywhere, _MINUS_1E9),  # the same, in the inputs
        Mistake("no_rescale", wrong._online_no_rescale,
                "when the max rises from m to m', the old sum was measured relative to m: multiply it by "
                "exp(m - m') before adding the new block's terms"),
        Mistake("wrong_sign", wrong._online_wrong_sign,
                "your rescale factor is upside down: it is exp(old_max - new_max), which is <= 1, not "
                "exp(new_max - old_max)"),
        Mistake("exp_ratio", wrong._online_exp_ratio,
                "you rescale with exp(running_max) / exp(new_max): each exp overflows on its own once the scores "
                "pass 88 in float32 (11 in float16), and inf / inf is NaN. Subtract first, then exponentiate: "
                "exp(running_max - new_max) <= 1 — the formula in section 2 ('The online softmax, on one row')"),
        Mistake("block_max", wrong._online_block_max,
                "the new running max is the larger of the old max and the block's max, row by row "
                "(torch.maximum), not the block's max alone: the max never goes down"),
        Mistake("global_max", wrong._online_global_max,
                "take the max of each row (block.amax(dim=-1)), not block.max() over the whole block: every "
                "row is a separate softmax with its own running max"),
        Mistake("old_max_shift", wrong._online_old_max_shift,
                "shift the block's terms by the *new* max m' (the one the new sum is measured against), not "
                "by the old one"),
        Mistake("history_guard", wrong._online_history_guard,
                "your shift is 0 wherever the *old* max is -inf, even when the block brings finite scores: the "
                "new sum must be measured relative to the new max, so guard on the new max (it is -inf only "
                f"when everything so far is -inf) — {_FULLY_MASKED}"),
        Mistake("no_shift", wrong._online_no_shift,
                "your sum is sum(exp(x)), not sum(exp(x - running max)): the sum is measured relative to the "
                "running max (that is what keeps exp from overflowing: exp(89) is inf in float32), so "
                "subtract the new max and rescale the old sum"),
        Mistake("sum_dim0", wrong._online_sum_dim0,
                "sum the block's terms over its last dim, the B scores of each row (dim=-1), not over dim 0"),
        Mistake("swapped", wrong._online_swapped, "return (new_max, new_sum) in that order; yours are swapped"),
        Mistake("keepdim", wrong._online_keepdim,
                "return one value per row, shape (...,) like running_max: drop the keepdim=True / the "
                "trailing size-1 dim"),
        Mistake("log_sum", wrong._online_log_sum, "return the running sum itself, not its log"),
        Mistake("logsumexp", wrong._online_logsumexp,
                "return the running sum, not the logsumexp m + log(sum): the next block needs the sum"),
        Mistake("max_tuple", wrong._online_max_tuple,
                "block.max(dim=-1) returns a (values, indices) pair: take .values, or use block.amax(dim=-1)"),
        Mistake("python_max", wrong._online_python_max,
                "Python's max() compares whole tensors (and fails on more than one row): use torch.maximum "
                "for the elementwise larger of two tensors"),
    ),
    forbidden=("torch.logsumexp", "torch.nn.functional.softmax", "torch.softmax", "torch.log_softmax",
               "torch.nn.functional.log_softmax", "utils.tiled_attention.online_softmax_update",
               # the same computations under other objects (red team R10, issue 35): torch.special's, the
               # Tensor methods, a row's last logcumsumexp, cross_entropy (logsumexp less one logit), softmin
               "torch.special.logsumexp", "torch.special.softmax", "torch.special.log_softmax",
               "torch.Tensor.logsumexp", "torch.Tensor.softmax", "torch.Tensor.log_softmax",
               "torch.logcumsumexp", "torch.Tensor.logcumsumexp", "torch.nn.functional.cross_entropy",
               "torch.nn.functional.softmin",
               # and CTC's loss, a log-space sum over alignments: one step per score is a row's logsumexp (R21)
               "torch.nn.functional.ctc_loss",
               # and folded two at a time by logaddexp (red team R14): the Tensor methods first, since a method
               # called on an expression is named by the first of the names that end alike
               "torch.Tensor.logaddexp", "torch.Tensor.logaddexp2", "torch.logaddexp", "torch.logaddexp2",
               "numpy.logaddexp", "numpy.logaddexp2",
               # and torch's attention routines, whose softmax gives the sum too (red team R16: 1 / w - 1 for the
               # weight w of an extra key scored 0); torch's other names for all these (nn.LogSoftmax,
               # distributions.SoftmaxTransform, F.linear_cross_entropy: red team R19) are common.torch_namesakes
               *TORCH_ATTENTION),
    hint="the new max is the elementwise larger of the old max and each row's block max; the old sum was "
         "measured relative to the old max, so rescale it before adding the block's terms, which are measured "
         "relative to the new max; a row whose new max is still -inf must come out as max -inf, sum 0",
)


# --------------------------------------------------------------------------------------------------
# ch6.block_score_grad
# --------------------------------------------------------------------------------------------------


def block_score_grad_reference(grad_out, out, weights, value):
    delta = (grad_out * out).sum(dim=-1, keepdim=True)  # (..., L, 1): Δ = rowsum(dO * O), the whole row's
    return weights * (grad_out @ value.transpose(-2, -1) - delta)  # (..., L, B): P * (dP - Δ)


_BACKWARD = "— see 'The backward pass without the L × L matrix' in section 3"

BLOCK_GRAD = Exercise(
    id="ch6.block_score_grad",
    reference=block_score_grad_reference,
    make_cases=edges.block_grad_cases,
    make_edge_cases=edges.block_grad_edges,
    probes=BLOCK_GRAD_PROBES,
    points=2,
    mistakes=(
        Mistake("block_delta", wrong._grad_block_delta,
                "your Δ is sum_j P_j dP_j over this block's B keys only: a block holds part of each row (its "
                "weights do not sum to 1), and Δ needs the whole row. The output already sums over every key: "
                f"Δ = rowsum(dO ⊙ O) {_BACKWARD}"),
        Mistake("no_delta", wrong._grad_no_delta,
                "you left out − Δ: every weight of a row depends on every score of that row (the softmax's "
                f"Jacobian p_j(δ_jk − p_k)), so dS = P ⊙ (dP − Δ), not P ⊙ dP {_BACKWARD}"),
        Mistake("plus_delta", wrong._grad_plus_delta,
                f"the sign of Δ: dS = P ⊙ (dP − Δ), with a minus {_BACKWARD}"),
        Mistake("no_weights", wrong._grad_no_weights,
                "multiply by P: dS = P ⊙ (dP − Δ), so a masked key (P = 0) gets no gradient; you returned dP − Δ"),
        Mistake("delta_wrong_axis", wrong._grad_delta_wrong_axis,
                "Δ has one number per query row: sum dO ⊙ O over the last dim, Dv (dim=-1), not over the L rows "
                "(dim=-2)"),
        Mistake("delta_no_keepdim", wrong._grad_delta_no_keepdim,
                "Δ (..., L) must broadcast along the B keys: keep its last dim, (..., L, 1) (keepdim=True or "
                "[..., None]); without it, Δ's L numbers line up with the keys instead of the queries"),
        Mistake("delta_from_value", wrong._grad_delta_from_value,
                f"Δ = rowsum(dO ⊙ O), with the output O (out), not the values V {_BACKWARD}"),
        Mistake("delta_matrix", wrong._grad_delta_matrix,
                "Δ is one number per query row, rowsum(dO ⊙ O), shape (..., L, 1): dO Oᵀ is an (L, L) matrix, "
                "the very thing the backward avoids; multiply elementwise, then sum over Dv"),
        Mistake("product_of_sums", wrong._grad_product_of_sums,
                "multiply first, then sum: Δ = rowsum(dO ⊙ O) = Σ_d dO_d O_d, not rowsum(dO) · rowsum(O)"),
        Mistake("delta_mean", wrong._grad_delta_mean,
                "Δ is a sum over Dv, not a mean: Δ = dO · O, the dot product of the two rows"),
        Mistake("no_transpose", wrong._grad_no_transpose,
                "dP = dO Vᵀ: (..., L, Dv) @ (..., Dv, B) needs the values' last two dims swapped"),
        Mistake("scaled", wrong._grad_scaled,
                "dS is the gradient of the scores S themselves, already scaled: the 1/sqrt(D) comes in later, in "
                f"dQ = dS K · scale and dK = dSᵀ Q · scale {_BACKWARD}"),
        Mistake("delta_outside", wrong._grad_delta_outside,
                "you subtracted Δ outside the product (P ⊙ dP − Δ): Δ is multiplied by P too, dS = P ⊙ (dP − Δ), "
                f"so a masked key (P = 0) gets no gradient {_BACKWARD}"),
        Mistake("negated", wrong._grad_negated,
                f"your dS has the wrong sign everywhere: it is P ⊙ (dP − Δ), dP first, not P ⊙ (Δ − dP) {_BACKWARD}"),
        Mistake("block_delta_renormalized", wrong._grad_block_delta_renormalized,
                "your Δ is this block's Σ_j P_j dP_j divided by the block's weight sum: renormalizing does not "
                "bring back the keys outside the block, and Δ needs every key of the row. Take it from the "
                f"output: Δ = rowsum(dO ⊙ O) {_BACKWARD}"),
        Mistake("renormalized_weights", wrong._grad_renormalized_weights,
                "use the block's weights P as they come: they are a slice of the row's softmax over all S keys, "
                "and must not be renormalized to sum to 1 (Exercise 2's description of `weights`)"),
        Mistake("diagonal_jacobian", wrong._grad_diagonal_jacobian,
                "you kept only the diagonal of the softmax's Jacobian, p_j(1 − p_j) dP_j: every score of a row "
                "moves every weight of the row, ∂p_j/∂s_k = p_j(δ_jk − p_k), and the terms off the diagonal add "
                f"up to the − Δ: dS = P ⊙ (dP − Δ) {_BACKWARD}"),
        Mistake("delta_out_only", wrong._grad_delta_out_only,
                f"you summed O alone: Δ = rowsum(dO ⊙ O), multiply dO and O elementwise, then sum over "
                f"Dv {_BACKWARD}"),
        Mistake("delta_grad_only", wrong._grad_delta_grad_only,
                f"you summed dO alone: Δ = rowsum(dO ⊙ O), multiply dO and O elementwise, then sum over "
                f"Dv {_BACKWARD}"),
        Mistake("delta_total", wrong._grad_delta_total,
                "Δ has one number per query row: sum dO ⊙ O over the last dim only (dim=-1, keepdim=True), not "
                f"over every element {_BACKWARD}"),
        Mistake("scaled_up", wrong._grad_scaled_up,
                "dS is the gradient of the scores themselves: no sqrt(D) factor here, neither divided nor "
                f"multiplied; the scale comes in later, in dQ = dS K · scale and dK = dSᵀ Q · scale {_BACKWARD}"),
        Mistake("full_transpose", wrong._grad_full_transpose,
                "value.T on a tensor of more than 2 dims reverses all of them: swap only the last two, "
                "value.transpose(-2, -1) or value.mT, so that dP = dO Vᵀ is (..., L, Dv) @ (..., Dv, B)"),
    ),
    forbidden=(*TORCH_AUTODIFF, "utils.tiled_backward.tiled_attention_backward"),
    hint="dP = dO Vᵀ for this block's keys; Δ = rowsum(dO ⊙ O), one number per query row, kept as (..., L, 1) "
         "so that it broadcasts along the keys; then dS = P ⊙ (dP − Δ)",
)


# --------------------------------------------------------------------------------------------------
# ch6.sliding_window_mask
# --------------------------------------------------------------------------------------------------


def sliding_window_mask_reference(L: int, window: int) -> torch.Tensor:
    positions = torch.arange(L)
    return (positions[:, None] - positions[None, :]).abs() <= window  # (L, L)


def _window_cases(rng: random.Random, gen: torch.Generator) -> list[Case]:
    return [
        # an odd window of 3 or more first: it tells `< window`, `<= window // 2` and `2 * window` apart
        {"L": rng.randint(10, 12), "window": rng.choice([3, 5])},
        {"L": rng.randint(3, 5), "window": 0},  # each query sees only itself
        {"L": 1, "window": rng.randint(1, 3)},
        {"L": rng.randint(4, 6), "window": 10},  # a window wider than the sequence: everything
        {"L": rng.randint(13, 20), "window": rng.randint(2, 5)},
    ]


_BOTH_SIDES = "— see 'Sliding-window attention' in section 4"

WINDOW = Exercise(
    id="ch6.sliding_window_mask",
    reference=sliding_window_mask_reference,
    make_cases=_window_cases,
    make_edge_cases=edges.window_edges, probes=WINDOW_PROBES,
    points=1,
    mistakes=(
        Mistake("strict", wrong._window_strict,
                "a key exactly `window` positions away is inside the window: use <=, not < (or window - 1)"),
        Mistake("half_width", wrong._window_half_width,
                f"`window` is the reach on *each* side (2·window + 1 keys in all), not the total width: don't "
                f"halve it {_BOTH_SIDES}"),
        Mistake("double_width", wrong._window_double_width,
                f"`window` is already the reach on each side: a key at most `window` away, not 2·window "
                f"{_BOTH_SIDES}"),
        Mistake("past_only", wrong._window_past_only,
                f"your band only looks back (a causal window); Longformer's window is symmetric: keys up to "
                f"`window` away on both sides of the query {_BOTH_SIDES}"),
        Mistake("future_only", wrong._window_future_only,
                f"your band only looks ahead: the window also covers the `window` keys before the query "
                f"(both sides) {_BOTH_SIDES}"),
        Mistake("no_abs", wrong._window_no_abs,
                "your band has no upper edge: every key after the query is kept, however far (i - j <= window "
                "holds for all j > i). Bound the distance on both sides: |i - j|, or cut with both triu and tril"),
        Mistake("tril_only", wrong._window_tril_only,
                "your band has no lower edge: tril(window) alone keeps every key before the query, however "
                "far; cut the other side too"),
        Mistake("empty", wrong._window_empty,
                "your mask keeps nothing for window > 0: triu(k) keeps j - i >= k and tril(k) keeps "
                "j - i <= k, so their signs are swapped"),
        Mistake("inverted", wrong._window_inverted,
                "your mask is True outside the window; here True means *may attend*"),
        Mistake("no_self", wrong._window_no_self,
                "each query must see itself: the key at distance |i - j| = 0 is inside the window"),
        Mistake("loop_end", wrong._window_loop_end,
                "your rows miss the key `window` positions *after* the query: a slice end is exclusive, so "
                "the slice must end one past i + window"),
        Mistake("loop_negative_start", wrong._window_loop_negative_start,
                "the first rows are wrong: for i < window, the slice start i - window is negative, and a "
                "negative start counts from the *end* in Python; clamp it at 0"),
        Mistake("long_after", wrong._window_long_after,
                "your band reaches one key too far *after* the query: tril(k) keeps j - i <= k, the diagonal k "
                f"included, so tril(window) already keeps the key `window` positions after {_BOTH_SIDES}"),
        Mistake("short_before", wrong._window_short_before,
                "your band misses the key `window` positions *before* the query: triu(k) keeps j - i >= k, the "
                "diagonal included, so use triu(-window) (in a loop: start the row at i - window, clamped at 0) "
                f"{_BOTH_SIDES}"),
        Mistake("plus_one", wrong._window_plus_one,
                "your band is one key wider on each side: |i - j| <= window, not window + 1 (2·window + 1 keys "
                f"in all, the query included) {_BOTH_SIDES}"),
    ),
    forbidden=("utils", "utils.at_scale.sliding_window_mask"),  # the course's own, as every exercise lists
    hint="query i may see key j when they are at most `window` positions apart, on either side, the edge "
         "included; all (L, L) pairs at once: broadcast a column of positions against a row",
)


# --------------------------------------------------------------------------------------------------
# ch6.attend_with_cache
# --------------------------------------------------------------------------------------------------


def attend_with_cache_reference(q_new, k_new, v_new, k_cache, v_cache):
    k_all = torch.cat([k_cache, k_new], dim=-2)  # (N, H, T + 1, D)
    v_all = torch.cat([v_cache, v_new], dim=-2)  # (N, H, T + 1, D)
    weights = torch.softmax(q_new @ k_all.transpose(-2, -1) / math.sqrt(q_new.shape[-1]), dim=-1)  # (N, H, 1, T + 1)
    return weights @ v_all, k_all, v_all


def _cache_cases(rng: random.Random, gen: torch.Generator) -> list[Case]:
    def case(N, H, T, D):
        return {"q_new": torch.randn(N, H, 1, D, generator=gen), "k_new": torch.randn(N, H, 1, D, generator=gen),
                "v_new": torch.randn(N, H, 1, D, generator=gen), "k_cache": torch.randn(N, H, T, D, generator=gen),
                "v_cache": torch.randn(N, H, T, D, generator=gen)}

    D = rng.choice([16, 32])
    return [
        case(rng.randint(2, 3), rng.randint(2, 4), rng.randint(3, 9), D),
        case(1, 1, 1, rng.randint(4, 8)),  # one cached token, batch 1, one head
        case(2, 2, rng.randint(10, 20), 8),
        case(1, rng.randint(2, 4), rng.randint(2, 5), D),
    ]


_STEP = "— see 'The KV cache for decoding' in section 5"

CACHE = Exercise(
    id="ch6.attend_with_cache",
    reference=attend_with_cache_reference,
    make_cases=_cache_cases,
    make_edge_cases=edges.cache_edges, probes=CACHE_PROBES,
    points=3,
    mistakes=(
        Mistake("only_new", wrong_cache._cache_only_new,
                "your new query attends only to the new key, so its weight is always 1: it must attend to "
                f"the whole cache plus the new key {_STEP}"),
        Mistake("before_append", wrong_cache._cache_before_append,
                "your new query does not see its own key: append k_new and v_new to the caches *before* "
                f"attending (and mask nothing), so it attends to all T + 1 positions, itself included {_STEP}"),
        Mistake("prepend", wrong_cache._cache_prepend,
                "your caches are in the wrong order: the new token is the latest one, so it goes at the end "
                "of the caches, not at the front"),
        Mistake("not_updated", wrong_cache._cache_not_updated,
                "return the *updated* caches (T + 1 positions), or the next step will forget this token"),
        Mistake("swapped", wrong_cache._cache_swapped,
                "return (output, k_cache, v_cache) in that order: your key and value caches are swapped"),
        Mistake("no_scale", wrong_cache._cache_no_scale,
                "your weights are too peaked: divide the scores by sqrt(D), D = q_new.shape[-1]"),
        Mistake("scale_by_length", wrong_cache._cache_scale_by_length,
                "scale by sqrt(D), the head dim (q_new.shape[-1]), not by the square root of the number of keys"),
        Mistake("scale_by_d", wrong_cache._cache_scale_by_d, "divide the scores by sqrt(D), not by D itself"),
        Mistake("scale_by_model_dim", wrong_cache._cache_scale_by_model_dim,
                "scale by sqrt(D) of one head (q_new.shape[-1]), not sqrt(H·D): each head is its own attention"),
        Mistake("softmax_queries", wrong_cache._cache_softmax_queries,
                "take the softmax over the keys (dim=-1): over dim=-2 there is only the one new query, so "
                "every weight is 1"),
        Mistake("first_key_only", wrong_cache._cache_first_key_only,
                "your new query sees only the first key: a causal mask's *first* row (tril(ones(1, S)), "
                "causal_mask(S)[0], or is_causal with one query, which is aligned top-left) keeps key 0 alone. "
                f"The new token is the last position and may see every key: it needs no mask {_STEP}"),
        Mistake("weights", wrong_cache._cache_weights,
                "you returned the attention weights (N, H, 1, T + 1): the output is the weights times the values"),
        Mistake("query_appended", wrong_cache._cache_query_appended,
                "append k_new to the key cache, not q_new: the cache keeps keys and values, never queries"),
        Mistake("squeezed", wrong_cache._cache_squeezed, "keep the query dim: the output is (N, H, 1, D), like q_new"),
        Mistake("values_not_appended", wrong_cache._cache_values_not_appended,
                "append v_new to the value cache too: T + 1 weights need T + 1 values"),
        Mistake("cat_last", wrong_cache._cache_cat_last,
                "join the caches along the sequence dim (-2), where the T cached positions are: dim -1 is D"),
        Mistake("cat_heads", wrong_cache._cache_cat_heads,
                "join the caches along the sequence dim (-2), where the T cached positions are: dim 1 is H"),
        Mistake("stack", wrong_cache._cache_stack,
                "torch.stack makes a new dim (and needs equal shapes); appending joins along an existing one, "
                "the sequence dim -2: torch.cat"),
        Mistake("no_transpose", wrong_cache._cache_no_transpose,
                "q_new @ k needs the keys' last two dims swapped: (N, H, 1, D) @ (N, H, D, T + 1)"),
        Mistake("scale_after_softmax", wrong_cache._cache_scale_after_softmax,
                "you divided the weights by sqrt(D) after the softmax, so they no longer sum to 1: the scale goes "
                "on the scores, softmax(q kᵀ / sqrt(D)) @ v (chapter 2's attention, as Exercise 4's hint says)"),
        Mistake("scale_multiplied", wrong_cache._cache_scale_multiplied,
                "multiply the scores by 1/sqrt(D), not by sqrt(D): yours are even more peaked than unscaled ones"),
        Mistake("scale_by_cache_length", wrong_cache._cache_scale_by_cache_length,
                "scale by sqrt(D), the head dim (q_new.shape[-1]), not by the square root of the cache length T "
                "(k_cache.shape[-2])"),
        Mistake("keys_and_values_swapped", wrong_cache._cache_keys_and_values_swapped,
                "you swapped the roles of keys and values: your scores compare the query with the values and "
                "your output averages the keys. Scores come from the keys, softmax(q kᵀ / sqrt(D)); the average "
                "is over the values, weights @ v"),
        Mistake("keys_as_values", wrong_cache._cache_keys_as_values,
                "the weights multiply the values: weights @ v (the value cache with v_new appended), not the keys"),
        Mistake("full_transpose", wrong_cache._cache_full_transpose,
                "k.T on a 4-D tensor reverses all four dims, (D, T + 1, H, N): swap only the last two, "
                "k.transpose(-2, -1) or k.mT"),
        Mistake("cat_default_dim", wrong_cache._cache_cat_default_dim,
                "torch.cat without dim= joins along dim 0, the batch: join the caches along the sequence dim, "
                "dim=-2, where the T cached positions are"),
    ),
    forbidden=(*TORCH_ATTENTION, "utils.at_scale.attend_with_cache"),
    hint="append the new key and value at the end of the caches, along the sequence dim; then the one new "
         "query attends to all T + 1 keys, itself included (chapter 2's attention, scaled by the head dim D); "
         "return the output and both updated caches",
)

EXERCISES: tuple[Exercise, ...] = (ONLINE, BLOCK_GRAD, WINDOW, CACHE)  # notebook order
