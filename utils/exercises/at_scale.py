"""Exercises of chapter 6: the online-softmax update, the gradient of one block of scores (the tiled
backward), the sliding-window mask, one decoding step with a KV cache. See :mod:`utils.exercises.definition`
for the contract. Masks: True = may attend. The wrong answers themselves are in
:mod:`utils.exercises.mistakes.at_scale`; the block-gradient cases, public and hidden, in
:mod:`utils.exercises.edges.at_scale`.
"""

from __future__ import annotations

import math
import random

import torch

from utils.exercises.common import Case
from utils.exercises.definition import Exercise, Mistake
from utils.exercises.edges import at_scale as edges
from utils.exercises.mistakes import at_scale as wrong

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


def online_softmax_update_reference(running_max: torch.Tensor, running_sum: torch.Tensor, block: torch.Tensor):
    new_max = torch.maximum(running_max, block.amax(dim=-1))  # (...,)
    shift = torch.where(new_max == _NEG_INF, 0.0, new_max)  # (...,): nothing but -inf so far -> no shift
    new_sum = running_sum * torch.exp(running_max - shift) + torch.exp(block - shift[..., None]).sum(-1)
    return new_max, new_sum


def _masked_rows_case(rng: random.Random, gen: torch.Generator) -> Case:
    """Rows in all four states of a masked row: -inf so far or not, an all -inf block or not.

    Row 0 has seen only -inf and gets an all -inf block (its max stays -inf, its sum 0: the NaN trap);
    row 1 has seen only -inf and gets a partly masked block; row 2 has a history and gets an all -inf
    block (nothing changes); the others have a history and get partly masked blocks above and below it.
    """
    R, B = rng.randint(5, 7), rng.randint(3, 5)
    running_max = torch.randn(R, generator=gen) * 2
    running_sum = torch.rand(R, generator=gen) * 4 + 1.0  # >= 1: it contains exp(max - max) = 1
    block = torch.randn(R, B, generator=gen) * 2
    block[3] += 5.0  # the max rises
    running_max[:2], running_sum[:2] = _NEG_INF, 0.0
    block[0], block[2] = _NEG_INF, _NEG_INF
    block[1:, 0] = _NEG_INF  # every other row is partly masked; column 1 stays finite
    return {"running_max": running_max, "running_sum": running_sum, "block": block}


def _masked_rows_half_case(rng: random.Random, gen: torch.Generator) -> Case:
    """The same four states in float16 with (2, 3) rows. The finite scores equal their row's max, so
    every sum is a small integer and exact in float16 however it is computed."""
    B = 4
    rows = []  # (running_max, running_sum, block)
    for history, masked_block in ((False, True), (False, False), (True, True), (True, False), (True, False),
                                  (False, False)):
        top = rng.choice([-1.5, -0.25, 0.5, 1.0, 2.75])
        keep = [j for j in range(B) if rng.random() < 0.5] or [rng.randrange(B)]
        row = [top if j in keep and not masked_block else _NEG_INF for j in range(B)]
        rows.append((top if history else _NEG_INF, float(rng.randint(1, 4)) if history else 0.0, row))
    return {"running_max": torch.tensor([r[0] for r in rows], dtype=torch.float16).view(2, 3),
            "running_sum": torch.tensor([r[1] for r in rows], dtype=torch.float16).view(2, 3),
            "block": torch.tensor([r[2] for r in rows], dtype=torch.float16).view(2, 3, B)}


def _online_cases(rng: random.Random, gen: torch.Generator) -> list[Case]:
    def state(shape, scale=3.0):
        m = torch.randn(shape, generator=gen) * scale
        s = torch.rand(shape, generator=gen) * 5 + 1.0  # >= 1: it contains exp(max - max) = 1
        return m, s

    m, s = state((rng.randint(2, 5),))
    # a block whose values sit well above the running max: the max must rise and the old sum shrink
    cases = [{"running_max": m, "running_sum": s,
              "block": torch.randn(m.shape[0], rng.randint(2, 6), generator=gen) * 2 + 6}]
    cases.append(_masked_rows_case(rng, gen))  # the NaN trap: -inf history and an all -inf block
    m, s = state((2, 3))
    cases.append({"running_max": m, "running_sum": s, "block": torch.randn(2, 3, rng.randint(1, 4), generator=gen) - 6})
    # the first block: running max -inf, sum 0
    B = rng.randint(2, 5)
    cases.append({"running_max": torch.full((3,), _NEG_INF), "running_sum": torch.zeros(3),
                  "block": torch.randn(3, B, generator=gen)})
    cases.append(_masked_rows_half_case(rng, gen))  # float16: a -1e9 stand-in for -inf breaks here
    # one row, a block of one score
    cases.append({"running_max": torch.tensor([0.5]), "running_sum": torch.tensor([2.0]),
                  "block": torch.tensor([[3.0]])})
    return cases


ONLINE = Exercise(
    id="ch6.online_softmax_update",
    reference=online_softmax_update_reference,
    make_cases=_online_cases,
    make_edge_cases=edges.online_edges,
    parts=edges.ONLINE_PARTS,
    points=2,
    mistakes=(
        Mistake("no_inf_guard", wrong._online_no_guard,
                "NaN in a fully masked row: where the running max and the whole block are -inf, both "
                "exp(running_max - new_max) and exp(block - new_max) compute -inf - (-inf) = NaN. Such a row "
                "must come out as max -inf, sum 0: shift both exponentials by 0 where the new max is -inf "
                "(guarding only one of them is not enough, and -1e9 is no help: float16 turns it into -inf) "
                f"— {_FULLY_MASKED}"),
        Mistake("clamped_max", wrong._online_clamped_max,
                "your running max is -1e9 where it must stay -inf (a fully masked row), and in float16 "
                "-1e9 does not even exist (clamp raises): a large finite number is not -inf — chapter 2's "
                f"myth check on -1e9 ('Three masking myths, run'); guard the shift instead — {_FULLY_MASKED}"),
        Mistake("no_rescale", wrong._online_no_rescale,
                "when the max rises from m to m', the old sum was measured relative to m: multiply it by "
                "exp(m - m') before adding the new block's terms"),
        Mistake("wrong_sign", wrong._online_wrong_sign,
                "your rescale factor is upside down: it is exp(old_max - new_max), which is <= 1, not "
                "exp(new_max - old_max)"),
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
    forbidden=("torch.logsumexp", "torch.nn.functional.softmax", "torch.softmax",
               "utils.tiled_attention.online_softmax_update"),
    hint="the new max is the elementwise larger of the old max and each row's block max; the old sum was "
         "measured relative to the old max, so rescale it before adding the block's terms, which are measured "
         "relative to the new max; a row whose new max is still -inf must come out as max -inf, sum 0",
)


# --------------------------------------------------------------------------------------------------
# ch6.block_score_grad
# --------------------------------------------------------------------------------------------------


def block_score_grad_reference(grad_out, out, weights, value):
    delta = (grad_out * out).sum(dim=-1, keepdim=True)  # (..., L, 1): D = rowsum(dO * O), the whole row's
    return weights * (grad_out @ value.transpose(-2, -1) - delta)  # (..., L, B): P * (dP - D)


_BACKWARD = "— see 'The backward pass without the L × L matrix' in section 3"

BLOCK_GRAD = Exercise(
    id="ch6.block_score_grad",
    reference=block_score_grad_reference,
    make_cases=edges.block_grad_cases,
    make_edge_cases=edges.block_grad_edges,
    points=2,
    mistakes=(
        Mistake("block_delta", wrong._grad_block_delta,
                "your D is sum_j P_j dP_j over this block's B keys only: a block holds part of each row (its "
                "weights do not sum to 1), and D needs the whole row. The output already sums over every key: "
                f"D = rowsum(dO ⊙ O) {_BACKWARD}"),
        Mistake("no_delta", wrong._grad_no_delta,
                "you left out − D: every weight of a row depends on every score of that row (the softmax's "
                f"Jacobian p_j(δ_jk − p_k)), so dS = P ⊙ (dP − D), not P ⊙ dP {_BACKWARD}"),
        Mistake("plus_delta", wrong._grad_plus_delta,
                f"the sign of D: dS = P ⊙ (dP − D), with a minus {_BACKWARD}"),
        Mistake("no_weights", wrong._grad_no_weights,
                "multiply by P: dS = P ⊙ (dP − D), so a masked key (P = 0) gets no gradient; you returned dP − D"),
        Mistake("delta_wrong_axis", wrong._grad_delta_wrong_axis,
                "D has one number per query row: sum dO ⊙ O over the last dim, Dv (dim=-1), not over the L rows "
                "(dim=-2)"),
        Mistake("delta_no_keepdim", wrong._grad_delta_no_keepdim,
                "D (..., L) must broadcast along the B keys: keep its last dim, (..., L, 1) (keepdim=True or "
                "[..., None]); without it, D's L numbers line up with the keys instead of the queries"),
        Mistake("delta_from_value", wrong._grad_delta_from_value,
                f"D = rowsum(dO ⊙ O), with the output O (out), not the values V {_BACKWARD}"),
        Mistake("delta_matrix", wrong._grad_delta_matrix,
                "D is one number per query row, rowsum(dO ⊙ O), shape (..., L, 1): dO Oᵀ is an (L, L) matrix, "
                "the very thing the backward avoids; multiply elementwise, then sum over Dv"),
        Mistake("product_of_sums", wrong._grad_product_of_sums,
                "multiply first, then sum: D = rowsum(dO ⊙ O) = Σ_d dO_d O_d, not rowsum(dO) · rowsum(O)"),
        Mistake("delta_mean", wrong._grad_delta_mean,
                "D is a sum over Dv, not a mean: D = dO · O, the dot product of the two rows"),
        Mistake("no_transpose", wrong._grad_no_transpose,
                "dP = dO Vᵀ: (..., L, Dv) @ (..., Dv, B) needs the values' last two dims swapped"),
        Mistake("scaled", wrong._grad_scaled,
                "dS is the gradient of the scores S themselves, already scaled: the 1/sqrt(D) comes in later, in "
                f"dQ = dS K · scale and dK = dSᵀ Q · scale {_BACKWARD}"),
    ),
    forbidden=("torch.autograd.grad", "torch.autograd.backward", "torch.func.vjp",
               "utils.tiled_backward.tiled_attention_backward"),
    hint="dP = dO Vᵀ for this block's keys; D = rowsum(dO ⊙ O), one number per query row, kept as (..., L, 1) "
         "so that it broadcasts along the keys; then dS = P ⊙ (dP − D)",
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
    make_edge_cases=edges.window_edges,
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
    ),
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
    make_edge_cases=edges.cache_edges,
    points=3,
    mistakes=(
        Mistake("only_new", wrong._cache_only_new,
                "your new query attends only to the new key, so its weight is always 1: it must attend to "
                f"the whole cache plus the new key {_STEP}"),
        Mistake("before_append", wrong._cache_before_append,
                "your new query does not see its own key: append k_new and v_new to the caches *before* "
                f"attending (and mask nothing), so it attends to all T + 1 positions, itself included {_STEP}"),
        Mistake("prepend", wrong._cache_prepend,
                "your caches are in the wrong order: the new token is the latest one, so it goes at the end "
                "of the caches, not at the front"),
        Mistake("not_updated", wrong._cache_not_updated,
                "return the *updated* caches (T + 1 positions), or the next step will forget this token"),
        Mistake("swapped", wrong._cache_swapped,
                "return (output, k_cache, v_cache) in that order: your key and value caches are swapped"),
        Mistake("no_scale", wrong._cache_no_scale,
                "your weights are too peaked: divide the scores by sqrt(D), D = q_new.shape[-1]"),
        Mistake("scale_by_length", wrong._cache_scale_by_length,
                "scale by sqrt(D), the head dim (q_new.shape[-1]), not by the square root of the number of keys"),
        Mistake("scale_by_d", wrong._cache_scale_by_d, "divide the scores by sqrt(D), not by D itself"),
        Mistake("scale_by_model_dim", wrong._cache_scale_by_model_dim,
                "scale by sqrt(D) of one head (q_new.shape[-1]), not sqrt(H·D): each head is its own attention"),
        Mistake("softmax_queries", wrong._cache_softmax_queries,
                "take the softmax over the keys (dim=-1): over dim=-2 there is only the one new query, so "
                "every weight is 1"),
        Mistake("first_key_only", wrong._cache_first_key_only,
                "your new query sees only the first key: a causal mask's *first* row (tril(ones(1, S)), "
                "causal_mask(S)[0], or is_causal with one query, which is aligned top-left) keeps key 0 alone. "
                f"The new token is the last position and may see every key: it needs no mask {_STEP}"),
        Mistake("weights", wrong._cache_weights,
                "you returned the attention weights (N, H, 1, T + 1): the output is the weights times the values"),
        Mistake("query_appended", wrong._cache_query_appended,
                "append k_new to the key cache, not q_new: the cache keeps keys and values, never queries"),
        Mistake("squeezed", wrong._cache_squeezed, "keep the query dim: the output is (N, H, 1, D), like q_new"),
        Mistake("values_not_appended", wrong._cache_values_not_appended,
                "append v_new to the value cache too: T + 1 weights need T + 1 values"),
        Mistake("cat_last", wrong._cache_cat_last,
                "join the caches along the sequence dim (-2), where the T cached positions are: dim -1 is D"),
        Mistake("cat_heads", wrong._cache_cat_heads,
                "join the caches along the sequence dim (-2), where the T cached positions are: dim 1 is H"),
        Mistake("stack", wrong._cache_stack,
                "torch.stack makes a new dim (and needs equal shapes); appending joins along an existing one, "
                "the sequence dim -2: torch.cat"),
        Mistake("no_transpose", wrong._cache_no_transpose,
                "q_new @ k needs the keys' last two dims swapped: (N, H, 1, D) @ (N, H, D, T + 1)"),
    ),
    forbidden=("torch.nn.functional.scaled_dot_product_attention", "torch.nn.MultiheadAttention",
               "utils.at_scale.attend_with_cache"),
    hint="append the new key and value at the end of the caches, along the sequence dim; then the one new "
         "query attends to all T + 1 keys, itself included (chapter 2's attention, scaled by the head dim D); "
         "return the output and both updated caches",
)

EXERCISES: tuple[Exercise, ...] = (ONLINE, BLOCK_GRAD, WINDOW, CACHE)  # notebook order
