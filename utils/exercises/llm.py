"""Exercises of chapter 7, "Attention in a real model": the parts a 2024 decoder adds to chapter 5's layer.
See :mod:`utils.exercises.definition` for the contract.

* ``ch7.rms_norm(x, weight, eps=1e-6) -> (..., E)``: ``x / sqrt(mean(x²) + eps) * weight`` over the last dim.
* ``ch7.rotate_half_rope(x, positions, base=10000.0) -> (..., L, D)``: pair ``(i, i + D/2)`` turned by
  ``positions · base^(-2i/D)``, as Llama, Qwen and SmolLM write RoPE.
* ``ch7.grouped_query_attention(query, key, value, is_causal=False) -> (N, H, L, Dv)``: H query heads sharing
  H_kv key/value heads, query head h reading head h // (H / H_kv).
* ``ch7.sink_window_mask(L, window, sinks) -> bool (L, L)``: the ``window`` most recent positions (itself
  included) and the first ``sinks`` positions, never a later one; True = may attend.

The references are the course's own (:mod:`utils.llm`), whose argument checks name a bad argument. The
diagnoses name the notebook section that explains each mistake; the wrong answers are in
:mod:`utils.exercises.mistakes.llm`, the cases in :mod:`utils.exercises.edges.llm`, the probes in
:mod:`utils.exercises.probing.llm` and :mod:`utils.exercises.probing.llm_attention`.
"""

from __future__ import annotations

import torch

from utils._checks import check_positive_int, check_tensor, fmt_shape
from utils.exercises.definition import TORCH_ATTENTION, TORCH_NORMS, Exercise, Mistake
from utils.exercises.edges import llm as edges
from utils.exercises.mistakes import llm as wrong
from utils.exercises.probing.llm import RMS_PROBES, ROPE_PROBES
from utils.exercises.probing.llm_attention import GQA_PROBES, SINK_PROBES
from utils.llm.blocks import grouped_query_attention as _grouped_query_attention
from utils.llm.blocks import rms_norm as _rms_norm
from utils.llm.blocks import rotate_half_rope as _rotate_half_rope
from utils.llm.cache import sink_window_mask as _sink_window_mask

__all__ = [
    "EXERCISES",
    "GQA",
    "RMS_NORM",
    "ROPE",
    "SINK_MASK",
    "grouped_query_attention_reference",
    "rms_norm_reference",
    "rotate_half_rope_reference",
    "sink_window_mask_reference",
]

_RMSNORM = "— see 'RMSNorm'"
_ROPE = "— see 'Rotate-half RoPE'"
_GQA = "— see 'Grouped-query attention'"
_SINKS = "— see 'Attention sinks and StreamingLLM'"


# --------------------------------------------------------------------------------------------------
# ch7.rms_norm
# --------------------------------------------------------------------------------------------------


def rms_norm_reference(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """``x / sqrt(mean(x²) + eps) * weight`` over the last dim: x (..., E), weight (E,). Returns (..., E)."""
    check_tensor("x", x, min_ndim=1, expected="(..., E)")
    check_tensor("weight", weight, ndim=1, expected="(E,)")
    if weight.shape[0] != x.shape[-1]:
        raise ValueError(f"weight: expected (E,) with E = {x.shape[-1]} for x {fmt_shape(x.shape)}, got "
                         f"{fmt_shape(weight.shape)}")
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or eps < 0:
        raise ValueError(f"eps: expected a non-negative number, got {eps!r}")
    return _rms_norm(x, weight, eps=eps)


RMS_NORM = Exercise(
    id="ch7.rms_norm",
    reference=rms_norm_reference,
    make_cases=edges.rms_cases,
    make_edge_cases=edges.rms_edges,
    probes=RMS_PROBES,
    gradients=True,  # every block of the model is trained through it
    points=1,
    mistakes=(
        Mistake("layer_norm", wrong._rms_layer_norm,
                "you subtracted the mean: that is LayerNorm. RMSNorm divides x itself by its root mean square, "
                f"sqrt(mean(x²) + eps), with no centring and no bias {_RMSNORM}"),
        Mistake("eps_outside", wrong._rms_eps_outside,
                "eps goes inside the square root: sqrt(mean(x²) + eps), not sqrt(mean(x²)) + eps (it shows when "
                f"x is small or eps large) {_RMSNORM}"),
        Mistake("eps_floor", wrong._rms_eps_floor,
                "eps is used as a floor (a clamp or max, as rms.clamp_min(eps) or F.normalize's eps do): your "
                "function divides by sqrt(mean(x²)) itself wherever that is larger, so eps changes nothing there; "
                "RMSNorm adds eps to the mean square, inside the root, sqrt(mean(x²) + eps), for every vector "
                f"{_RMSNORM}"),
        Mistake("no_eps", wrong._rms_no_eps,
                "you left out eps: a vector of zeros (or a very small one) is then divided by 0; add eps to the "
                f"mean square, inside the root {_RMSNORM}"),
        Mistake("sum_not_mean", wrong._rms_sum,
                "take the *mean* of x² over the last dim, not the sum: the root mean square of E features is "
                f"sqrt(sum(x²) / E); with the sum every output is sqrt(E) times too small {_RMSNORM}"),
        Mistake("no_weight", wrong._rms_no_weight,
                f"you left out the gain: multiply the normalised x by weight, feature by feature {_RMSNORM}"),
        Mistake("weight_added", wrong._rms_weight_added,
                f"the gain multiplies the normalised x; you added it {_RMSNORM}"),
        Mistake("wrong_dim", wrong._rms_rows,
                "normalise each vector over its own E features, the last dim (dim=-1): your mean square runs over "
                f"another dim, across the vectors {_RMSNORM}"),
        Mistake("wrong_dim_first", wrong._rms_first_dim,
                "normalise each vector over its own E features, the last dim (dim=-1): your mean square runs over "
                f"another dim, across the vectors {_RMSNORM}"),
        Mistake("std", wrong._rms_std,
                "RMSNorm divides by the root mean square, sqrt(mean(x²) + eps), not by the standard deviation: "
                f"var and std subtract the mean first (and torch.var divides by E - 1) {_RMSNORM}"),
        Mistake("std_biased", wrong._rms_std_biased,
                "RMSNorm divides by the root mean square, sqrt(mean(x²) + eps), not by the standard deviation: "
                f"var and std subtract the mean first (and torch.var divides by E - 1) {_RMSNORM}"),
        Mistake("no_sqrt", wrong._rms_no_sqrt,
                f"take the square root of mean(x²) + eps: you divided by the mean square itself {_RMSNORM}"),
        Mistake("no_keepdim", wrong._rms_no_keepdim,
                "keep the last dim of the mean square, mean(dim=-1, keepdim=True), shape (..., 1): without it the "
                "(...,) means line up with the features instead of the vectors"),
        Mistake("eps_ignored", wrong._rms_eps_ignored,
                "you ignore the eps argument: your function adds 1e-6 whatever eps it is given (the check passes "
                f"eps = 0.1, among others); add the `eps` you receive to the mean square, inside the root {_RMSNORM}"),
    ),
    forbidden=("utils", "utils.llm.blocks.rms_norm", "torch.nn.functional.rms_norm", "torch.rms_norm",
               "torch.nn.RMSNorm", *TORCH_NORMS),
    hint="each vector (the last dim) is divided by its root mean square sqrt(mean(x²) + eps), eps inside the root, "
         "then multiplied by weight feature by feature; no mean is subtracted",
)


# --------------------------------------------------------------------------------------------------
# ch7.rotate_half_rope
# --------------------------------------------------------------------------------------------------


def rotate_half_rope_reference(x: torch.Tensor, positions: torch.Tensor, base: float = 10000.0) -> torch.Tensor:
    """Pair ``(i, i + D/2)`` of ``x (..., L, D)`` turned by ``positions (L,) · base^(-2i/D)``. Returns (..., L, D)."""
    check_tensor("positions", positions, ndim=1, expected="(L,)")
    if positions.is_floating_point() or positions.is_complex():
        raise TypeError(f"positions: expected integer positions (a LongTensor), got {positions.dtype}")
    if isinstance(base, bool) or not isinstance(base, (int, float)) or base <= 0:
        raise ValueError(f"base: expected a positive number, got {base!r}")
    return _rotate_half_rope(x, positions, base=float(base))


ROPE = Exercise(
    id="ch7.rotate_half_rope",
    reference=rotate_half_rope_reference,
    make_cases=edges.rope_cases,
    make_edge_cases=edges.rope_edges,
    probes=ROPE_PROBES,
    parts=edges.ROPE_PARTS,
    gradients=True,  # queries and keys are trained through it
    points=2,
    atol=1e-4,
    mistakes=(
        Mistake("interleaved", wrong._rope_interleaved,
                "you rotated the neighbouring pairs (2i, 2i + 1): that is chapter 4's interleaved layout. Llama, Qwen "
                "and SmolLM pair feature i with feature i + D/2 (rotate_half): the same rotations of a permuted "
                f"vector, but weights trained for one layout break in the other {_ROPE}"),
        Mistake("sign_flipped", wrong._rope_sign_flipped,
                "each pair of your output turns by −angle, the other way: check the sign in rotate_half "
                "(rotate_half([x1, x2]) = [-x2, x1], the minus on the second half), or the sign of the angle, "
                f"+positions · θ {_ROPE}"),
        Mistake("angles_repeat_interleaved", wrong._rope_repeat_interleaved,
                "you filled the D angles with repeat_interleave (θ0, θ0, θ1, θ1, …), the interleaved layout's order: "
                "in rotate-half, feature i and feature i + D/2 share angle i, so the D angles are the D/2 angles "
                f"twice, torch.cat((angle, angle), dim=-1) {_ROPE}"),
        Mistake("positions_ignored", wrong._rope_positions_ignored,
                "your angles use 0, 1, …, L − 1 instead of the positions you were given: a token decoded after a "
                f"cache of T tokens is at position T; multiply the frequencies by `positions` {_ROPE}"),
        Mistake("base_ignored", wrong._rope_base_ignored,
                "you used base 10000 whatever `base` says (SmolLM2's is 100000): θ_i = base^(-2i/D) "
                f"{_ROPE}"),
        Mistake("exponent_pair_index", wrong._rope_pair_index,
                "the exponent of pair i is 2i/D (torch.arange(0, D, 2) / D); you used i/D, so the frequencies "
                f"fall half as fast {_ROPE}"),
        Mistake("exponent_doubled", wrong._rope_exponent_doubled,
                "the exponent of pair i is 2i/D: torch.arange(0, D, 2) already is 2i, so divide it by D, not by "
                f"D/2 {_ROPE}"),
        Mistake("exponent_positive", wrong._rope_exponent_positive,
                "your frequencies grow with the pair index: θ_i = base^(-2i/D), a negative exponent (or "
                f"1 / base^(2i/D)) {_ROPE}"),
        Mistake("cos_sin_swapped", wrong._rope_cos_sin_swapped,
                "cos and sin are swapped: out = x · cos + rotate_half(x) · sin, so that position 0 (angle 0) "
                f"leaves x unchanged {_ROPE}"),
        Mistake("no_minus", wrong._rope_no_minus,
                "your rotate_half has no minus sign: [x2, x1] swaps the halves, which is a reflection, not a "
                "rotation (it changes the length of the vectors); rotate_half([x1, x2]) = [-x2, x1], "
                f"torch.cat((-x2, x1), dim=-1) {_ROPE}"),
        Mistake("chunk_first_dim", wrong._rope_chunk_first_dim,
                "x.chunk(2) splits dim 0 (the batch, or the positions), not the features: with one entry there "
                "it gives one piece, hence 'not enough values to unpack'; cut the last dim, x.chunk(2, dim=-1) "
                f"{_ROPE}"),
        Mistake("angles_cat_first_dim", wrong._rope_angles_cat_first_dim,
                "torch.cat((angle, angle)) stacks the two copies along dim 0, giving (2L, D/2) angles, hence the "
                "size mismatch with x; join them along the last dim, torch.cat((angle, angle), dim=-1), (L, D) "
                f"{_ROPE}"),
        Mistake("no_outer_product", wrong._rope_no_outer_product,
                "positions * θ multiplies two 1-D tensors entry by entry (a size mismatch unless L = D/2, and "
                "wrong angles even then): each position needs its own row of D/2 angles, the outer product "
                f"positions[:, None] * θ[None, :], shape (L, D/2) {_ROPE}"),
    ),
    forbidden=("utils", "utils.llm.blocks.rotate_half_rope"),
    hint="θ_i = base^(-2i/D) for i < D/2; angle = positions[:, None] · θ, written twice, torch.cat((angle, angle), "
         "dim=-1); out = x · cos(angle) + rotate_half(x) · sin(angle), rotate_half([x1, x2]) = [-x2, x1]",
)


# --------------------------------------------------------------------------------------------------
# ch7.grouped_query_attention
# --------------------------------------------------------------------------------------------------


def grouped_query_attention_reference(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                                      is_causal: bool = False) -> torch.Tensor:
    """H query heads ``(N, H, L, D)`` sharing H_kv key/value heads ``(N, H_kv, S, D | Dv)``: query head h reads
    head h // (H / H_kv). Returns the output ``(N, H, L, Dv)``."""
    if not isinstance(is_causal, bool):
        raise TypeError(f"is_causal: expected True or False, got {is_causal!r}")
    output, _ = _grouped_query_attention(query, key, value, is_causal=is_causal, need_weights=True)
    return output


GQA = Exercise(
    id="ch7.grouped_query_attention",
    reference=grouped_query_attention_reference,
    make_cases=edges.gqa_cases,
    make_edge_cases=edges.gqa_edges,
    probes=GQA_PROBES,
    parts=edges.GQA_PARTS,
    gradients=True,
    points=2,
    mistakes=(
        Mistake("tiled", wrong._gqa_tiled,
                "query head h reads key/value head h // G (query heads 0 … G − 1 share the first one); yours are "
                "tiled (kv0, kv1, kv0, kv1, …), so head h reads head h % H_kv: .repeat(1, G, 1, 1) gives that "
                "order, and so does expanding a new dim before H_kv (key[:, None]); use repeat_interleave(G, "
                f"dim=1), or expand a new dim after H_kv, key[:, :, None], then reshape {_GQA}"),
        Mistake("query_mean", wrong._gqa_query_mean,
                "GQA shares the keys and values, not the queries: each of the H query heads keeps its own query "
                f"and attends over its group's shared K and V; your query heads of one group were merged {_GQA}"),
        Mistake("query_heads_dropped", wrong._gqa_query_heads_dropped,
                "GQA shares the keys and values, not the queries: each of the H query heads keeps its own query "
                f"and attends over its group's shared K and V; your query heads of one group were merged {_GQA}"),
        Mistake("no_scale", wrong._gqa_no_scale,
                "you did not scale: divide the scores by sqrt(D), D = query.shape[-1]; without the scale the weights "
                f"are too peaked {_GQA}"),
        Mistake("scale_dv", wrong._gqa_scale_dv,
                "scale by sqrt(D), the head dim of the queries and keys (query.shape[-1]), not by the values' Dv"),
        Mistake("scale_keys", wrong._gqa_scale_keys,
                "scale by sqrt(D), the head dim of the queries and keys (query.shape[-1]); you divided by "
                f"sqrt(S), the number of keys (key.shape[-2]) {_GQA}"),
        Mistake("softmax_queries", wrong._gqa_softmax_queries,
                "take the softmax over the keys (dim=-1): yours runs over the queries (dim=-2)"),
        Mistake("causal_one_ahead", wrong._gqa_causal_one_ahead,
                "your causal mask lets query i see key i + 1: keep j <= i, tril with diagonal=0 (triu(1) is what "
                f"to mask) {_GQA}"),
        Mistake("causal_no_self", wrong._gqa_causal_no_self,
                "your causal mask hides each query's own position (query 0 then sees nothing): keep j <= i, the "
                "diagonal included, tril with diagonal=0"),
        Mistake("causal_ignored", wrong._gqa_causal_ignored,
                "with is_causal=True mask the future: query i sees keys 0 … i only"),
        Mistake("causal_always", wrong._gqa_causal_always,
                "with is_causal=False every query sees every key, but your function masks the future anyway: apply "
                f"the causal mask only when is_causal is True (inside an `if is_causal:`) {_GQA}"),
        Mistake("causal_multiplied", wrong._gqa_causal_multiplied,
                "you multiplied the scores by a 0/1 causal mask: a future key then scores 0, and exp(0) = 1 still "
                "gives it weight; fill the future scores with -inf before the softmax, "
                f"scores.masked_fill(future, float('-inf')) {_GQA}"),
        Mistake("causal_inverted", wrong._gqa_causal_inverted,
                "masked_fill fills where the mask is True: filling the tril with -inf hid the past (and the query "
                "itself) and kept the future; fill the future, triu(diagonal=1), or the negation of the tril "
                f"{_GQA}"),
        Mistake("returns_weights", wrong._gqa_returns_weights,
                "return the output only, not (output, weights): this function returns one tensor, (N, H, L, Dv) "
                f"{_GQA}"),
        Mistake("values_not_repeated", wrong._gqa_values_not_repeated,
                "you repeated the keys but not the values: V keeps its H_kv heads, so weights (N, H, L, S) @ V fail "
                "to broadcast (a size mismatch at dim 1) unless H_kv is 1; repeat the values like the keys, "
                f"value.repeat_interleave(G, dim=1) {_GQA}"),
        Mistake("group_inverted", wrong._gqa_group_inverted,
                "your group size is H_kv // H, which is 0 when there are more query heads than K/V heads (hence the "
                "size mismatch): G = H // H_kv, query.shape[1] // key.shape[1], the number of query heads that "
                f"share one K/V head {_GQA}"),
    ),
    # sdpa's and flex_attention's enable_gqa=True do it all
    forbidden=("utils", "utils.llm.blocks.grouped_query_attention", *TORCH_ATTENTION),
    hint="G = H // H_kv; repeat each key/value head G times next to itself (repeat_interleave(G, dim=1)), then "
         "softmax(q kᵀ / sqrt(D)) v per query head, with a causal mask (j <= i) when is_causal",
)


# --------------------------------------------------------------------------------------------------
# ch7.sink_window_mask
# --------------------------------------------------------------------------------------------------


def sink_window_mask_reference(L: int, window: int, sinks: int) -> torch.Tensor:
    """Bool ``(L, L)``: query i sees key j <= i when ``i - j < window`` or ``j < sinks``."""
    check_positive_int("L", L)
    return _sink_window_mask(L, window, sinks)


SINK_MASK = Exercise(
    id="ch7.sink_window_mask",
    reference=sink_window_mask_reference,
    make_cases=edges.sink_cases,
    make_edge_cases=edges.sink_edges,
    probes=SINK_PROBES,
    points=1,
    mistakes=(
        Mistake("window_plus_one", wrong._sink_window_plus_one,
                "your window keeps one key too many: `window` counts the most recent positions with the query "
                f"itself, so query i sees keys i − window + 1 … i (i − j < window, not <=) {_SINKS}"),
        Mistake("window_minus_one", wrong._sink_window_minus_one,
                "your window keeps one key too few: `window` counts the most recent positions with the query "
                f"itself, so query i sees keys i − window + 1 … i (i − j < window) {_SINKS}"),
        Mistake("sinks_see_future", wrong._sink_future,
                "your sink columns are True for every query, even the ones before a sink (query 0 sees key 1 when "
                "sinks >= 2): a sink is a past key like any other, so AND the whole mask with the causal one "
                f"{_SINKS}"),
        Mistake("sinks_future_past_window", wrong._sink_future_past_window,
                "your query may attend to a sink that comes after it (with window = 1 and sinks = 3, query 1 sees "
                "key 2): & binds tighter than |, so (j <= i) & (i − j < window) | (j < sinks) leaves the sinks "
                "outside the causal j <= i; put the | in parentheses, (j <= i) & ((i − j < window) | (j < sinks)) "
                f"{_SINKS}"),
        Mistake("sinks_ignored", wrong._sink_ignored,
                "your mask has no sinks: every query also sees the first `sinks` positions, however far back, "
                f"which StreamingLLM keeps for ever {_SINKS}"),
        Mistake("not_causal", wrong._sink_not_causal,
                "your window reaches into the future: the mask is causal, query i sees keys j <= i only (the "
                f"window is the `window` most recent positions, not a band around the query) {_SINKS}"),
        Mistake("no_lower_bound", wrong._sink_no_lower_bound,
                "your window reaches into the future: the mask is causal, query i sees keys j <= i only (the "
                f"window is the `window` most recent positions, not a band around the query) {_SINKS}"),
        Mistake("sinks_inside_window", wrong._sink_inside_window,
                "your window keeps window − sinks recent keys: the sinks come on top of the window (a cache of "
                f"sinks + window slots), they are not counted in it {_SINKS}"),
        Mistake("one_sink_too_many", wrong._sink_one_too_many,
                "the sinks are the first `sinks` positions, keys 0 … sinks − 1 (j < sinks); yours keep one more"),
        Mistake("inverted", wrong._sink_inverted,
                "your mask is True where a query may not attend: here True means may attend"),
        Mistake("additive", wrong._sink_additive,
                "you returned an additive mask (0 where a query may attend, -inf elsewhere), the form that is added "
                "to the scores; this function returns the bool mask itself, True = may attend: return the "
                f"condition, without torch.where {_SINKS}"),
        Mistake("python_and_or", wrong._sink_python_and_or,
                "Python's `and` / `or` ask a whole tensor for one True or False, hence 'Boolean value of Tensor … "
                "is ambiguous': combine bool tensors entry by entry with & (and) and | (or), each side in "
                f"parentheses {_SINKS}"),
    ),
    forbidden=("utils",),  # the course's own is refused by the static check (it imports utils)
    hint="query i may see key j when j <= i and (i − j < window or j < sinks): the window of the `window` most "
         "recent positions, itself included, plus the first `sinks` positions; broadcast a column of positions "
         "against a row",
)

EXERCISES: tuple[Exercise, ...] = (RMS_NORM, ROPE, GQA, SINK_MASK)  # notebook order
