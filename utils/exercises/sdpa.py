"""Exercises of chapter 2: scaled dot-product attention, the causal mask and the padding mask.

See :mod:`utils.exercises.definition` for the contract. Masks follow the package convention: True = may attend.
"""

from __future__ import annotations

import random

import torch

from utils import attention
from utils.exercises.common import Case
from utils.exercises.definition import TORCH_ATTENTION, Exercise, Mistake
from utils.exercises.edges import sdpa as edges
from utils.exercises.edges import sdpa_inputs as inputs
from utils.exercises.mistakes import sdpa as wrong
from utils.exercises.probing.sdpa import CAUSAL_PROBES, PADDING_PROBES, SDPA_PROBES

__all__ = [
    "CAUSAL",
    "EXERCISES",
    "PADDING",
    "SDPA",
    "causal_mask_reference",
    "padding_mask_reference",
    "scaled_dot_product_attention_reference",
]


# --------------------------------------------------------------------------------------------------
# ch2.scaled_dot_product_attention
# --------------------------------------------------------------------------------------------------


# Bound at import: the check replaces the forbidden names in `utils.attention` while the learner's code runs.
_REFERENCE_SDPA = attention.scaled_dot_product_attention
_REFERENCE_CAUSAL = attention.causal_mask
_MASK_ATTENTION = tuple(name for name in TORCH_ATTENTION if not name.startswith("torch.nn.Transformer"))
_REFERENCE_PADDING = attention.padding_mask


def scaled_dot_product_attention_reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                                           mask: torch.Tensor | None = None):
    return _REFERENCE_SDPA(q, k, v, mask)


# Where the chapter explains each masking rule: the diagnoses point there.
_MYTH_1E9 = "see the myth check \"-1e9 is a safe way to mask\" in section 6"
_MYTH_1E4 = "see the myth check \"-1e4 is negative enough\" in section 6"
_MYTH_INF = "see the myth check \"Use -inf and you are done\" in section 6"
_SCALE = "section 2 measures why"
_STEPS = "the four steps of section 1"
_RENORMALISED = ("you zero the blocked weights after the softmax and renormalise: when the allowed keys score far "
                 "below a blocked one their weights underflow to 0 and you divide 0 by 0. Mask the scores, before "
                 "the softmax")


def _twins(name: str, fn, diagnosis: str) -> tuple[Mistake, Mistake]:
    """A masking slip as written, and the same slip followed by the fully-masked guard: one diagnosis."""
    return Mistake(name, fn, diagnosis), Mistake(f"{name}_guarded", wrong._guarded(fn), diagnosis)


# --------------------------------------------------------------------------------------------------
# The cases
# --------------------------------------------------------------------------------------------------


def _sdpa_cases(rng: random.Random, gen: torch.Generator) -> list[Case]:
    def qkv(batch: tuple[int, ...], L: int, S: int, D: int, Dv: int, dtype=torch.float32):
        return {"q": torch.randn(*batch, L, D, generator=gen, dtype=dtype),
                "k": torch.randn(*batch, S, D, generator=gen, dtype=dtype),
                "v": torch.randn(*batch, S, Dv, generator=gen, dtype=dtype)}

    N, L, S = rng.randint(2, 3), rng.randint(3, 6), rng.randint(4, 8)
    D = rng.choice([16, 32])  # never 8, the notebook's own D
    return [
        # heads (N, H, L, D) first, with a padding-style mask (N, 1, 1, S): separates the dims
        {**qkv((N, 2), L, S, D, 4), "mask": inputs.mixed_mask(gen, (N, 1, 1, S))},
        # no mask, self-attention shapes, a large D so that a wrong scale shows
        {**qkv((N,), L, L, D, rng.randint(2, 6)), "mask": None},
        # cross-attention L != S, one mask per example (N, L, S)
        {**qkv((N,), L, S, D, D + 1), "mask": inputs.mixed_mask(gen, (N, L, S))},
        # scores of order 1e4 (a masked key far above the rest; allowed keys far below -1e4)
        *inputs.large_score_cases(gen, N, L, rng.randint(4, 6)),
        # float16, where -1e9 does not fit
        inputs.sdpa_float16_case(gen),
        # queries whose keys are all masked must get zero weights and a zero output
        inputs.fully_masked_case(gen, N, L, S, D),
        # batch 1, one query, a shared (L, S) mask
        {**qkv((1,), 1, S, 4, 3), "mask": inputs.mixed_mask(gen, (1, S))},
        # one key only: every weight is 1
        {**qkv((N,), L, 1, rng.randint(2, 5), 2), "mask": None},
        # float64, no batch dimension, a causal mask with S > L so every row has a blocked key
        {**qkv((), L, L + 2, 6, 5, torch.float64), "mask": _REFERENCE_CAUSAL(L, L + 2)},
    ]


SDPA = Exercise(
    id="ch2.scaled_dot_product_attention",
    reference=scaled_dot_product_attention_reference,
    make_cases=_sdpa_cases,
    make_edge_cases=edges.sdpa_edges,
    probes=SDPA_PROBES,
    parts=edges.SDPA_PARTS,
    gradients=True,  # it is trained through: a right output that cuts or poisons the gradient fails
    points=3,
    mistakes=(
        # a hand-written softmax first: it fails only the large-score cases, where other mistakes tie with it
        Mistake("softmax_overflow", wrong._sdpa_softmax_overflow,
                "your hand-written softmax gives NaN for large scores: exp(s) / exp(s).sum() overflows (exp of a "
                "score near 1e4 is inf) or underflows to 0/0. Use scores.softmax(-1), which subtracts the row "
                "max first"),
        Mistake("exp_times_mask", wrong._sdpa_exp_times_mask,
                "you multiply exp(scores) by the mask: exp of a large blocked score is inf, and inf · 0 = NaN. Fill "
                "the blocked scores with float('-inf') before a softmax (scores.softmax(-1))"),
        # masking: listed next, so that they win a tie with a mistake that fails the same cases
        Mistake("finite_fill", wrong._sdpa_finfo_min,
                "a query whose keys are all masked gets uniform weights (the mean of v) from your finite fill "
                "(torch.finfo(dtype).min, or a large negative number added); it must get zero weights and a zero "
                f"output: fill with float('-inf') and set such rows to 0 after the softmax ({_MYTH_INF})"),
        # each finite fill twice, without and with the guard: a learner who guards reads the same diagnosis
        *_twins("minus_1e9", wrong._sdpa_minus_1e9,
                "you mask with -1e9 (as the practitioner's article does, `masked_fill(mask == 0, -1e9)`): -1e9 does "
                "not fit in float16 "
                f"(its largest number is 65504), so masked_fill raises; fill with float('-inf') ({_MYTH_1E9})"),
        *_twins("fill_minus_1e4", wrong._sdpa_fill_minus_1e4,
                "you replace the blocked scores by -1e4: a number, not a wall. When every allowed score of a row "
                f"is below -1e4 the blocked keys win; fill with float('-inf') ({_MYTH_1E4})"),
        *_twins("fill_float16_min", wrong._sdpa_fill_float16_min,
                "you replace the blocked scores by -65504, float16's smallest number (torch.finfo(torch.float16)"
                ".min): on float32 scores it is a number, not a wall, and when every allowed score of a row is "
                f"below -65504 the blocked keys win; fill with float('-inf') ({_MYTH_INF})"),
        *_twins("add_minus_1e4", wrong._sdpa_add_minus_1e4,
                "you add -1e4 to the blocked scores: a blocked key whose score is more than about 1e4 above the "
                f"allowed ones still wins; fill with float('-inf') instead ({_MYTH_1E4})"),
        Mistake("guard_all", wrong._sdpa_guard_all,
                "you zero every row that has a blocked key: the guard must find the rows where *no* key is "
                "allowed, `~mask.any(-1, keepdim=True)`, not `~mask.all(-1, keepdim=True)`"),
        Mistake("guard_output_only", wrong._sdpa_guard_output_only,
                "your output is right but your weights still hold NaN for a query whose keys are all masked: "
                f"set those rows of the weights to 0 after the softmax, then mix the values with them ({_MYTH_INF})"),
        Mistake("times_minus_inf", wrong._sdpa_times_minus_inf,
                "`(~mask) * float('-inf')` puts 0 · (-inf) = NaN on every allowed key: put -inf only where the "
                "mask is False, with `scores.masked_fill(~mask, float('-inf'))` or torch.where"),
        Mistake("nan_rows", wrong._sdpa_nan_rows,
                "a query whose keys are all masked gets NaN (the softmax of a row of -inf is 0/0); it must get "
                "zero weights and a zero output, like the reference: set such rows to 0 after the softmax "
                f"({_MYTH_INF})"),
        Mistake("renormalise_after_softmax", wrong._sdpa_renormalise_after_softmax, _RENORMALISED),
        Mistake("renormalise_clamped", wrong._sdpa_renormalise_clamped, _RENORMALISED),
        Mistake("mask_after_softmax", wrong._sdpa_mask_after_softmax,
                "your weights rows no longer sum to 1: you zeroed the blocked weights after the softmax. Mask the "
                "scores before the softmax, so the allowed keys share all the weight"),
        Mistake("bool_added", wrong._sdpa_bool_added,
                "you added the bool mask to the scores: True becomes +1 and False 0, so a blocked key keeps its "
                "score and an allowed one gains 1. Fill the blocked scores instead: "
                "scores.masked_fill(~mask, float('-inf'))"),
        Mistake("fill_zero", wrong._sdpa_fill_zero,
                "your blocked keys still get weight: a score of 0 (masked_fill with 0, or scores * mask) does not "
                "block a key, since exp(0) = 1. Fill the blocked scores with float('-inf')"),
        Mistake("inverted_mask", wrong._sdpa_inverted_mask,
                "your mask works the wrong way round: True means *may attend*, so fill the scores where the mask "
                "is False (`~mask`); True = blocked is nn.MultiheadAttention's reading (myth check \"A boolean "
                "mask is a boolean mask\" in section 5)"),
        Mistake("ignores_mask", wrong._sdpa_ignores_mask,
                "your output ignores the mask: when `mask is not None`, fill the scores where it is False before "
                "the softmax"),
        Mistake("no_none_check", wrong._sdpa_no_none_check,
                "mask may be None (the default, and some cases pass no mask), and `~None` raises: mask only "
                "`if mask is not None:`"),
        Mistake("mask_unsqueezed", wrong._sdpa_mask_unsqueezed,
                "you add a dim to the mask (mask.unsqueeze(1), as tutorials do for masks without a head dim): "
                "here the mask already broadcasts to (..., L, S), so use it as it is"),
        Mistake("if_mask", wrong._sdpa_if_mask,
                "`if mask:` asks a whole tensor for one True/False and raises; test `if mask is not None:`"),
        Mistake("one_minus_mask", wrong._sdpa_one_minus_mask,
                "`1 - mask` does not work on a bool tensor: invert it with `~mask` (or mask.logical_not())"),
        # scaling
        Mistake("no_scale", wrong._sdpa_no_scale,
                f"your weights are too peaked: you forgot to divide the scores by sqrt(D), D = q.shape[-1] ({_SCALE})"),
        Mistake("divide_by_d", wrong._sdpa_divide_by_d,
                "your weights are too flat: the scores are divided by D, not sqrt(D) (scaling both q and k by "
                "1/sqrt(D) does that too); divide the scores once, by math.sqrt(q.shape[-1])"),
        Mistake("times_sqrt_d", wrong._sdpa_times_sqrt_d,
                "your weights are far too peaked: you multiplied the scores by sqrt(D); divide by it"),
        Mistake("sqrt_dv", wrong._sdpa_sqrt_dv,
                "you scale by the value size Dv = v.shape[-1]; the scale is 1/sqrt(D) with D = q.shape[-1], the "
                "size that the dot products sum over"),
        Mistake("sqrt_dim_1", wrong._sdpa_sqrt_dim_1,
                "you scale by sqrt(q.shape[1]), which is L (or H with heads); D is the last dim, q.shape[-1]"),
        Mistake("sqrt_num_keys", wrong._sdpa_sqrt_num_keys,
                "you scale by sqrt(S), the number of keys; D is the size of each query and key, q.shape[-1]"),
        Mistake("torch_sqrt_int", wrong._sdpa_torch_sqrt_int,
                "torch.sqrt takes a tensor, and q.shape[-1] is a Python int: use math.sqrt(q.shape[-1]) (or "
                "q.shape[-1] ** 0.5)"),
        Mistake("sqrt_dim_2", wrong._sdpa_sqrt_dim_2,
                "you scale by sqrt(q.shape[2]), which is D only for 3-D inputs (L for (N, H, L, D)); count from "
                "the end: q.shape[-1]"),
        Mistake("sqrt_num_queries", wrong._sdpa_sqrt_num_queries,
                "you scale by sqrt(L), the number of queries q.shape[-2]; D is the size of each query and key, "
                "q.shape[-1]"),
        Mistake("scale_output", wrong._sdpa_scale_output,
                "you divide the output by sqrt(D) instead of the scores: the scale must act before the softmax, "
                f"on q @ kᵀ, to keep the softmax out of saturation ({_SCALE})"),
        Mistake("fixed_d_8", wrong._sdpa_fixed_d_8,
                "you scale by 1/sqrt(8) whatever the input (the notebook's D = 8?); take D from the input, "
                "q.shape[-1]"),
        Mistake("scale_after_softmax", wrong._sdpa_scale_after_softmax,
                "your weights rows sum to 1/sqrt(D), not 1: divide the scores by sqrt(D) before the softmax, not "
                "the weights after it"),
        Mistake("clamp_scores", wrong._sdpa_clamp_scores,
                "you clamp the scores: large gaps between scores are real, and clamping changes the weights. The "
                "softmax is already stable (it subtracts the row max); use the scores as they are"),
        # softmax
        Mistake("softmax_dim_2", wrong._sdpa_softmax_dim_2,
                "your softmax runs over dim 2, which is the keys only for 3-D inputs (it is L for (N, H, L, S)); "
                "count from the end: dim=-1"),
        Mistake("softmax_dim_1", wrong._sdpa_softmax_dim_1,
                "your softmax runs over dim 1 (L for (N, L, S), H for (N, H, L, S)); the keys are the last dim "
                "whatever the batch dims: dim=-1"),
        Mistake("softmax_no_dim", wrong._sdpa_softmax_no_dim,
                "F.softmax without dim= picks a dim for you (the batch dim for 3-D inputs): pass dim=-1"),
        Mistake("softmax_dim_3", wrong._sdpa_softmax_dim_3,
                "your softmax runs over dim 3, which is the keys only for 4-D inputs (N, H, L, S); count from the "
                "end: dim=-1"),
        Mistake("softmax_over_queries", wrong._sdpa_softmax_over_queries,
                "your weights sum to 1 down each column, over the queries: take the softmax over the keys, the "
                f"last dim, dim=-1 (S): step 3 of {_STEPS}"),
        Mistake("log_softmax", wrong._sdpa_log_softmax,
                "your weights are log-probabilities (log_softmax): the weights are the softmax itself"),
        Mistake("sigmoid", wrong._sdpa_sigmoid,
                "your weights are a sigmoid, so rows do not sum to 1: the weights are the softmax over the keys"),
        # transpose and matmul
        Mistake("k_dot_T", wrong._sdpa_k_dot_T,
                "k.T reverses *all* the dims of a 3-D or 4-D tensor (chapter 1): swap only the last two, "
                "k.transpose(-2, -1)"),
        Mistake("transpose_1_2", wrong._sdpa_transpose_1_2,
                "k.transpose(1, 2) swaps the right dims only for 3-D inputs: count from the end, "
                "k.transpose(-2, -1), so that heads (N, H, S, D) and unbatched (S, D) work too"),
        Mistake("bmm", wrong._sdpa_bmm,
                "torch.bmm takes only 3-D tensors: use @ (torch.matmul), which broadcasts over any batch dims"),
        Mistake("reshape_k", wrong._sdpa_reshape_k,
                "k.reshape(…, D, S) (or view) is not a transpose: it regroups the numbers. Use k.transpose(-2, -1)"),
        # what is returned
        Mistake("swapped", wrong._sdpa_swapped, "return (output, weights), in that order"),
        Mistake("output_only", wrong._sdpa_output_only, "return a pair: (output, weights)"),
        Mistake("scores_as_weights", wrong._sdpa_scores_as_weights,
                "you return the scores as the weights: return the softmax weights, each row summing to 1"),
        Mistake("in_float16", wrong._sdpa_in_float16,
                "you compute in float16 (.half()): keep the dtype of the inputs"),
        Mistake("in_float32", wrong._sdpa_in_float32,
                "you compute in float32 (.float()) and return float32 for float16 and float64 inputs: keep the "
                "dtype of the inputs (or cast the results back with .to(q.dtype))"),
    ),
    forbidden=(
        *TORCH_ATTENTION,
        "utils",  # the course's own reference: caught in the source; run time also blocks the function below
        "utils.attention.scaled_dot_product_attention",
    ),
    hint="take the steps of section 1 (scores, scale by D = q.shape[-1], mask, softmax over the keys, mix the "
         "values), count dims from the end so that batch and head dims pass through, keep q's dtype, and apply no "
         "dropout",
)


# --------------------------------------------------------------------------------------------------
# ch2.causal_mask
# --------------------------------------------------------------------------------------------------


def causal_mask_reference(size: int) -> torch.Tensor:
    return _REFERENCE_CAUSAL(size)


def _causal_cases(rng: random.Random, gen: torch.Generator) -> list[Case]:
    return [{"size": rng.randint(3, 6)}, {"size": 2}, {"size": rng.randint(7, 16)}, {"size": 1}]  # 1: all masks agree


CAUSAL = Exercise(
    id="ch2.causal_mask",
    reference=causal_mask_reference,
    make_cases=_causal_cases,
    make_edge_cases=edges.causal_edges,
    probes=CAUSAL_PROBES,
    points=1,
    mistakes=(
        Mistake("future", wrong._causal_future,
                "your mask lets query i see keys i and after: the future (triu, or tril().T). Rows are queries and "
                "columns keys: keep the lower triangle, so that query i sees keys 0..i"),
        Mistake("no_self", wrong._causal_no_self,
                "query i must also see itself: keep the diagonal (tril(), not tril(-1)); otherwise the first "
                "row has no key at all"),
        Mistake("blocked_convention", wrong._causal_blocked,
                "you returned True where a key is *blocked* (nn.MultiheadAttention's convention); here True "
                "means may attend: invert it"),
        Mistake("float", wrong._causal_float,
                "return a bool tensor (dtype=torch.bool), not 1.0/0.0: a float mask would be *added* to the "
                "scores"),
        Mistake("integer", wrong._causal_integer,
                "return a bool tensor (dtype=torch.bool), not 1/0 integers: `~` and masked_fill need a bool mask"),
        Mistake("one_ahead", wrong._causal_one_ahead,
                "query i may also see key i + 1, one step into the future: keep the diagonal and below only "
                "(tril's diagonal=0, not 1)"),
        Mistake("flipped", wrong._causal_flipped,
                "your triangle is flipped left to right: query 0 must see key 0 only, and the last query every key"),
        Mistake("additive", wrong._causal_additive,
                "you return an additive 0/-inf float mask; this exercise asks for the bool form, True = may attend"),
        Mistake("extra_dims", wrong._causal_extra_dims,
                "return shape (size, size); the broadcasting dims are added where the mask is used (it broadcasts "
                "as it is)"),
    ),
    forbidden=("utils.attention.causal_mask",
               # torch's own, an additive 0/-inf mask (red team R21: `== 0` turned it into the answer)
               "torch.nn.Transformer.generate_square_subsequent_mask",
               # and torch's attention: is_causal=True on zero queries and keys with an identity V is the mask (R25);
               # nn.Transformer's classes compute it through F.multi_head_attention_forward, blocked at run time,
               # and stay named so that their generate_square_subsequent_mask is refused by its own name
               *_MASK_ATTENTION),
    hint="rows are queries and columns keys: query i may see keys j <= i. Which triangle of a square bool "
         "matrix is that, and does it include the diagonal?",
)


# --------------------------------------------------------------------------------------------------
# ch2.padding_mask
# --------------------------------------------------------------------------------------------------


def padding_mask_reference(lengths: torch.Tensor, max_len: int) -> torch.Tensor:
    return _REFERENCE_PADDING(lengths, max_len)


def _padding_cases(rng: random.Random, gen: torch.Generator) -> list[Case]:
    cases = []
    for batch, max_len in ((rng.randint(3, 5), rng.randint(5, 9)), (1, rng.randint(2, 6)), (2, 1)):
        lengths = torch.randint(1, max_len + 1, (batch,), generator=gen)
        lengths[0] = max_len  # one full sentence in every batch
        cases.append({"lengths": lengths, "max_len": max_len})
    cases.append({"lengths": torch.tensor([1, rng.randint(2, 4), 0]), "max_len": 5})  # an empty one; none full
    return cases


PADDING = Exercise(
    id="ch2.padding_mask",
    reference=padding_mask_reference,
    make_cases=_padding_cases,
    make_edge_cases=edges.padding_edges,
    probes=PADDING_PROBES,
    points=1,
    mistakes=(
        Mistake("flat", wrong._padding_flat,
                "your mask has shape (N, S); reshape it to (N, 1, 1, S) (e.g. mask[:, None, None, :]) so that "
                "it broadcasts over heads and queries"),
        Mistake("inverted", wrong._padding_inverted,
                "your mask is True at the padding; here True means a real token that may be attended to"),
        Mistake("off_by_one", wrong._padding_off_by_one,
                "a sentence of length n has real tokens at positions 0..n-1: use `<`, not `<=`"),
        Mistake("drops_last", wrong._padding_drops_last,
                "you drop the last real token: positions start at 0 (torch.arange(max_len)), and position j is "
                "real when j < length"),
        Mistake("key_axis_first", wrong._padding_key_axis_first,
                "the key axis must be last: (N, 1, 1, S), so that it lines up with the scores (N, H, L, S)"),
        Mistake("query_axis", wrong._padding_query_axis,
                "your mask is (N, 1, S, 1): its positions run along the query axis. The padding mask marks keys, "
                "the last axis: (N, 1, 1, S), e.g. real[:, None, None, :]"),
        Mistake("dims_in_front", wrong._padding_dims_in_front,
                "your mask is (1, 1, N, S): the new dims went in front of the batch. Insert them after it: "
                "(N, 1, 1, S), e.g. real[:, None, None, :]"),
        Mistake("three_dims", wrong._padding_three_dims,
                "return (N, 1, 1, S): one broadcasting dim for the heads H and one for the queries L; (N, 1, S) "
                "would line the batch up with the heads"),
        Mistake("queries_too", wrong._padding_queries_too,
                "the padding mask depends only on the key: return (N, 1, 1, S). Masking the padded queries too "
                "leaves their rows with no key at all"),
        Mistake("no_new_axis", wrong._padding_no_new_axis,
                "compare torch.arange(max_len) (S,) with lengths[:, None] (N, 1), so that broadcasting gives "
                "(N, S); without the new axis it compares position n with lengths[n]"),
        Mistake("float", wrong._padding_float,
                "return a bool tensor, not 1.0/0.0: a float mask would be *added* to the scores"),
        Mistake("integer", wrong._padding_integer,
                "return a bool tensor, not 1/0 integers: `~` and masked_fill need a bool mask"),
        Mistake("longest", wrong._padding_longest,
                "the mask must be max_len wide even when no sentence fills it: use max_len, not lengths.max()"),
        Mistake("additive", wrong._padding_additive,
                "you return an additive 0/-inf float mask; this exercise asks for the bool form, True = real token"),
    ),
    forbidden=("utils.attention.padding_mask", *_MASK_ATTENTION),  # as causal_mask (R25)
    hint="position j of sentence n is real when j < lengths[n]: compare every position with every length by "
         "broadcasting, then add the broadcasting dims for the heads and the queries",
)

EXERCISES: tuple[Exercise, ...] = (SDPA, CAUSAL, PADDING)  # notebook order
