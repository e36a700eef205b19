"""Exercises of chapter 3, "Multi-head attention": split heads, merge heads, the functional module.

Shapes: N batch, L length, E model dimension, H heads, D = E // H head dimension. The weights of
``multi_head_attention`` are ``(E, E)`` matrices used as ``x @ W`` (the maths convention; ``nn.Linear``
stores the transpose). The rules the chapter states are cases here: float16 (chapter 2: -1e9 cannot be
stored in it), scores of order 1e4 (chapter 2: -1e4 is not a wall), and query rows whose keys are all
masked, which must give a zero output (the course's rule, like :mod:`utils.attention`). The wrong
answers themselves are in :mod:`utils.exercises.mistakes.multihead`.
"""

from __future__ import annotations

import math
import random

import torch

from utils.attention import MultiHeadAttention, causal_mask, padding_mask
from utils.exercises.definition import TORCH_ATTENTION, Exercise, Mistake
from utils.exercises.edges import multihead as edges
from utils.exercises.mistakes import multihead as wrong
from utils.exercises.probing.multihead import MERGE_PROBES, MHA_PROBES, SPLIT_PROBES

__all__ = [
    "EXERCISES",
    "MERGE_HEADS",
    "MULTI_HEAD_ATTENTION",
    "SPLIT_HEADS",
    "merge_heads_reference",
    "multi_head_attention_reference",
    "split_heads_reference",
]

# The learner implements what the course's reference provides, so the bare package "utils" is forbidden:
# the static source check catches any use of it (forbid() skips bare names at run time). The reference
# module itself calls utils.attention's split_heads, merge_heads and scaled_dot_product_attention, so at
# run time only the class is blocked (the reference holds its own handle to it).
_NO_UTILS = ("utils", "utils.attention.MultiHeadAttention")

# Where the chapters explain each rule, by title, so a diagnosis can point there.
_MYTH_1E9 = "chapter 2, 'Three masking myths, run': the myth check on `masked_fill(mask == 0, -1e9)`"
_MYTH_1E4 = "chapter 2, 'Three masking myths, run': the myth check '-1e4 is negative enough'"
_MYTH_ALL_MASKED = "chapter 2's myth check 'Use -inf and you are done', and the task of Exercise 3"
_MYTH_CONTIGUOUS = "the myth check on `.contiguous()` in section 2, 'Split and merge heads'"
_SECTION_SPLIT = "the table in section 2, 'Split and merge heads'"


def _shapes(rng: random.Random) -> list[tuple[int, int, int, int]]:
    """(N, L, H, D) for one case each: a general shape first (N, L, H > 1, D != H), then the edges."""
    fixed = [(2, 4, 3, 2), (1, 1, 2, 3), (2, 5, 1, 4), (1, 3, 4, 1)]  # general; L == 1, H == 1, D == 1
    extra = [(rng.randint(1, 3), rng.randint(2, 7), rng.choice([2, 3, 4]), rng.randint(2, 5)) for _ in range(2)]
    return fixed + extra


# --------------------------------------------------------------------------------------------------
# split_heads
# --------------------------------------------------------------------------------------------------


def split_heads_reference(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    N, L, E = x.shape
    return x.view(N, L, num_heads, E // num_heads).transpose(1, 2)  # (N, H, L, D)


def _split_cases(rng: random.Random, gen: torch.Generator) -> list[dict]:
    cases = [{"x": torch.randn(N, L, H * D, generator=gen), "num_heads": H} for N, L, H, D in _shapes(rng)]
    cases.insert(1, {"x": torch.randn(2, 3, 8, generator=gen).half(), "num_heads": 2})  # keep the dtype
    return cases


# --------------------------------------------------------------------------------------------------
# merge_heads
# --------------------------------------------------------------------------------------------------


def merge_heads_reference(x: torch.Tensor) -> torch.Tensor:
    N, H, L, D = x.shape
    return x.transpose(1, 2).reshape(N, L, H * D)  # (N, L, E)


def _merge_cases(rng: random.Random, gen: torch.Generator) -> list[dict]:
    cases = [{"x": torch.randn(N, H, L, D, generator=gen)} for N, L, H, D in _shapes(rng)]
    cases.insert(1, {"x": torch.randn(2, 2, 3, 4, generator=gen).half()})  # keep the dtype
    return cases


# --------------------------------------------------------------------------------------------------
# multi_head_attention
# --------------------------------------------------------------------------------------------------


def multi_head_attention_reference(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    """The reference: :class:`utils.attention.MultiHeadAttention` (no biases) loaded with these weights.

    ``nn.Linear`` computes ``x @ weight.T``, so a weight ``W`` in the ``x @ W`` convention is stored as
    ``W.T``. A query row whose keys are all masked gets a zero output.
    """
    E = x.shape[-1]
    module = MultiHeadAttention(E, num_heads, bias=False).to(x.dtype)
    weights = {"q_proj.weight": w_q.T, "k_proj.weight": w_k.T, "v_proj.weight": w_v.T, "out_proj.weight": w_o.T}
    # functional_call runs the module with these tensors as its weights, so gradients reach x and every W
    out, _ = torch.func.functional_call(module, weights, (x,), {"mask": mask})
    return out  # (N, L, E)


def _random_case(gen: torch.Generator, N: int, L: int, H: int, D: int, mask: str) -> dict:
    E = H * D
    case = {"x": torch.randn(N, L, E, generator=gen)}
    for name in ("w_q", "w_k", "w_v", "w_o"):
        case[name] = torch.randn(E, E, generator=gen) / math.sqrt(E)
    case["num_heads"] = H
    if mask == "causal":
        case["mask"] = causal_mask(L)  # (L, L)
    elif mask == "padding":  # right padding: every sample keeps at least one key
        lengths = torch.randint(1, L + 1, (N,), generator=gen)
        lengths[0] = max(1, L - 1)  # at least one padded key when L > 1
        case["mask"] = padding_mask(lengths, L)  # (N, 1, 1, L)
    elif mask == "left_padding_causal":  # the first queries of a left-padded sample see no key at all
        lengths = torch.full((N,), L)
        lengths[-1] = L // 2
        keys = torch.arange(L) >= (L - lengths)[:, None]  # (N, S): left padding
        case["mask"] = causal_mask(L) & keys[:, None, None, :]  # (N, 1, L, L)
    else:
        case["mask"] = None
    return case


def _mha_cases(rng: random.Random, gen: torch.Generator) -> list[dict]:
    # Cases that tell mistakes apart come first: H > 1, L > 1 and D != H, then the chapters' rules
    # (float16, large scores, fully masked rows), then the edge shapes L == 1, H == 1, D == 1.
    cases = [_random_case(gen, 2, 5, 3, 2, "padding"), edges.mha_float16_case(gen), edges.large_score_case(gen),
             _random_case(gen, 2, 4, 2, 3, "left_padding_causal")]
    for (N, L, H, D), kind in zip(_shapes(rng)[1:], ["none", "causal", "none", "causal", "padding"]):
        cases.append(_random_case(gen, N, L, H, D, kind))
    return cases


def _mistake(name: str, diagnosis: str, **options) -> Mistake:
    """A :class:`Mistake` whose function is ``wrong._mha_with`` with ``options``."""
    return Mistake(name, wrong._mha_variant(name, **options), diagnosis)


_FINITE_FILL = (
    "on a query row whose keys are all masked your output is the plain average of the values: a finite "
    "fill (-1e9, -1e4, torch.finfo(dtype).min) gives every key the same weight there. Fill with "
    f"float('-inf') and give such a row a zero output — see {_MYTH_ALL_MASKED}."
)
_NAN_ROW = (
    "your output is NaN on the query rows whose keys are all masked (softmax of a row of -inf is 0/0). "
    "Such a row must output zeros: e.g. weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0) after "
    "the softmax (multiplying the weights by mask.any(...) is not enough: NaN * 0 is still NaN) — see "
    f"{_MYTH_ALL_MASKED}."
)
_INVERTED = (
    "your mask is inverted: here True means *may attend* (like F.scaled_dot_product_attention, unlike "
    "nn.MultiheadAttention), so fill the scores with -inf where the mask is False: masked_fill(~mask, ...) "
    "— see section 4's 'The inverted mask'."
)
_BOOL_ARITHMETIC = (
    "you used the boolean mask as a number (scores + mask or scores * mask); a 0 score is not a blocked "
    "key. Fill the blocked scores with -inf: scores.masked_fill(~mask, float('-inf'))."
)
_SOFTMAX_DIM = "your softmax runs over the wrong axis: each query's row of weights is over the keys, so use dim=-1."
_K_TRANSPOSE = (
    "k must be transposed on its last two axes only: q @ k.transpose(-2, -1) is (N, H, L, D) @ (N, H, D, S); "
    "k.transpose(1, 2) or k.T (which reverses all four axes) mixes heads and tokens."
)
_LARGE_SCORES_SOFTMAX = (
    "your softmax overflows when scores are large (exp(2e4) is inf, inf / inf is NaN): use torch.softmax, "
    "which subtracts the row maximum first."
)

_GUARD = "the guard `weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)` of Exercise 3's task"

MULTI_HEAD_MISTAKES = [
    _mistake("mask_rank_raised",  # first: on (N, 1, 1, S) masks its output is the unmerged one below
             "you added axes to the mask (mask[None, None] or a double unsqueeze): it is already "
             "broadcastable to (N, H, L, S) — (L, S) or (N, 1, 1, S) — and extra leading axes make the "
             "scores 6-D, so the merge scrambles tokens and heads. Use the mask as given.",
             masking="rank_raised"),
    _mistake("merge_no_transpose",
             "the heads are merged in the wrong order: you reshaped (N, H, L, D) straight to (N, L, E); "
             "transpose(1, 2) before the reshape so that each token gets its own heads' outputs — see "
             f"{_MYTH_CONTIGUOUS}.", merge="no_transpose"),
    _mistake("merge_feature_major",
             "the heads are merged in the wrong order: features are interleaved across heads; "
             "concatenate heads side by side with .transpose(1, 2).reshape(N, L, E).", merge="feature_major"),
    _mistake("merge_view",
             "after transpose(1, 2) the heads are not contiguous, so .view(N, L, E) raises; use "
             f".reshape(N, L, E) or .contiguous().view(N, L, E) — see {_MYTH_CONTIGUOUS}.", merge="view"),
    _mistake("split_no_transpose",
             "you reshaped each (N, L, E) projection straight to (N, H, L, D) without a transpose, which "
             "scrambles tokens and heads; view as (N, L, H, D), then transpose(1, 2) — see "
             f"{_SECTION_SPLIT}.", split="no_transpose"),
    _mistake("split_interleaved",
             "your head h takes every H-th feature instead of the block h*D .. (h+1)*D-1: split the last "
             f"axis as (H, D), heads first, view(N, L, H, D) — see {_SECTION_SPLIT}.", split="interleaved"),
    _mistake("split_and_merge_interleaved",
             "your heads take every H-th feature (view(N, L, D, H)), and your merge puts them back the same way: "
             "head h is the block of features h*D .. (h+1)*D-1, so split with view(N, L, H, D).transpose(1, 2) "
             f"and merge with .transpose(1, 2).reshape(N, L, E) — see {_SECTION_SPLIT}.",
             split="interleaved", merge="feature_major"),
    _mistake("v_split_no_transpose",
             "your q and k are split right, but v is reshaped straight to (N, H, L, D) without a transpose, "
             "which scrambles tokens and heads in the values; split v like q and k: view(N, L, H, D), then "
             f"transpose(1, 2) — see {_SECTION_SPLIT}.", split_v="no_transpose"),
    _mistake("one_head",
             "you ran a single head over all E features: split into num_heads heads of D = E // num_heads "
             "features and attend in each.", split="one_head"),
    _mistake("missing_w_o",
             "your output equals the concatenated heads: you forgot the output projection "
             "(multiply the merged (N, L, E) tensor by w_o).", out="none"),
    _mistake("w_o_transposed",
             "only w_o is used transposed: the weights here are all used as x @ w, so the last step is "
             "merged @ w_o, with w_o of shape (H*D, E) — a transposed w_o has the same shape here, so "
             "nothing raises (section 3, 'The full module').", out="x@w.T"),
    _mistake("qkv_transposed",
             "you used x @ w.T for the projections (nn.Linear's storage convention); the weights here are "
             "given for x @ w: compute x @ w_q, x @ w_k and x @ w_v.", project="x@w.T"),
    _mistake("linear_convention",
             "you used x @ W.T (nn.Linear's storage convention); the weights here are given for "
             "x @ W, so compute x @ w_q, x @ w_k, x @ w_v and merged @ w_o.", project="x@w.T", out="x@w.T"),
    _mistake("scale_by_model_dim",
             "you scaled the scores by 1/sqrt(E); each head works in D = E // num_heads dimensions, "
             "so divide by sqrt(D).", scale="model"),
    _mistake("scale_by_num_heads",
             "you scaled the scores by 1/sqrt(H), the number of heads; the scale is 1/sqrt(D), with "
             "D = E // num_heads the features of one head.", scale="heads"),
    _mistake("no_scale",
             "your scores are not scaled: divide q @ k^T by sqrt(D), with D = E // num_heads.", scale="none"),
    _mistake("scale_after_softmax",
             "you divided the weights by sqrt(D) after the softmax, so their rows no longer sum to 1: "
             "scale the scores q @ k^T by 1/sqrt(D) before the softmax.", scale="none", scale_weights=True),
    _mistake("scale_by_head_dim",
             "your scores are divided by D (or q and k each by sqrt(D)); divide q @ k^T once by sqrt(D).",
             scale="dim"),
    _mistake("finite_fill", _FINITE_FILL, fill=-1e9, masking="additive", guard=False),
    _mistake("fill_minus_1e9_guarded",
             f"you filled with -1e9: float16 cannot store it (largest finite value 65504), so masked_fill "
             f"raises on a float16 input. Use float('-inf') — see {_MYTH_1E9}.", fill=-1e9),
    _mistake("fill_minus_1e9",
             f"you filled with -1e9: float16 cannot store it (largest finite value 65504), so masked_fill "
             f"raises, and on a row with no allowed key it gives a uniform average. Use float('-inf') — see "
             f"{_MYTH_1E9}.", fill=-1e9, guard=False),
    *(_mistake(f"fill_{name}{suffix}",
               "you filled the masked scores with a finite number (-1e4, or float16's -65504): when every allowed "
               "score of a row is below it (scores of order 1e4 occur in an unscaled or diverging model) the "
               f"masked keys win. Use float('-inf') — see {_MYTH_1E4}.", fill=fill, guard=guard)
      for name, fill in (("minus_1e4", -1e4), ("float16_min", -65504.0))
      for suffix, guard in (("", False), ("_guarded", True))),
    *(_mistake(f"additive_minus_1e4{suffix}",
               "you added -1e4 to the masked scores: a masked key scoring 2e4 above the allowed ones still "
               f"wins. Use masked_fill(~mask, float('-inf')) — see {_MYTH_1E4}.",
               fill=-1e4, masking="additive", guard=guard) for suffix, guard in (("", False), ("_guarded", True))),
    _mistake("no_fully_masked_guard", _NAN_ROW, guard=False),
    _mistake("guard_multiplied", _NAN_ROW, guard_kind="multiply"),  # the same NaN as no guard at all
    _mistake("guard_without_keepdim",
             "mask.any(dim=-1) without keepdim=True drops the key axis, so it lines up with the wrong axis "
             "(it zeroes key columns, or fails to broadcast): use mask.any(dim=-1, keepdim=True), one "
             f"value per query row, (..., L, 1) — see {_GUARD}.", guard_kind="no_keepdim"),
    _mistake("guard_all",
             "you zeroed every query row that has a blocked key (mask.all): zero only the rows with *no* "
             f"allowed key, ~mask.any(dim=-1, keepdim=True) — see {_GUARD}.", guard_kind="all"),
    _mistake("inverted_mask", _INVERTED, masking="invert", guard=False),
    _mistake("inverted_mask_guarded", _INVERTED, masking="invert"),
    _mistake("mask_ignored",
             "the mask is not applied: fill the scores with -inf where the mask is False, before the "
             "softmax.", masking="none", guard=False),
    _mistake("mask_added", _BOOL_ARITHMETIC, masking="bool_add", guard=False),
    _mistake("mask_multiplied", _BOOL_ARITHMETIC, masking="multiply", guard=False),
    _mistake("mask_after_softmax",
             "you masked the weights after the softmax, so the rows no longer sum to 1; mask the scores "
             "(fill with -inf) before the softmax.", masking="after_softmax"),
    _mistake("mask_on_queries",
             "your mask is applied along the queries: its last axis is the keys (S), as given; use it "
             "without transposing.", masking="queries"),
    _mistake("mask_unsqueezed",
             "the mask is already broadcastable to (N, H, L, S) — (L, S) or (N, 1, 1, S) — so use it as "
             "given; mask.unsqueeze(1) moves its axes.", masking="unsqueeze"),
    _mistake("extra_causal",
             "you always applied a causal mask: this function attends to every key unless `mask` says "
             "otherwise.", causal=True),
    _mistake("softmax_over_queries", _SOFTMAX_DIM, softmax_dim=-2),
    _mistake("softmax_over_heads", _SOFTMAX_DIM, softmax_dim=1),
    _mistake("keys_values_swapped",
             "keys and values are swapped: scores are q @ k^T, and the weights multiply v.", swap_kv=True),
    _mistake("manual_softmax", _LARGE_SCORES_SOFTMAX, manual_softmax=True, guard=False),
    _mistake("manual_softmax_guarded", _LARGE_SCORES_SOFTMAX, manual_softmax=True),
    _mistake("softmax_in_float32",
             "keep the input's dtype: your softmax returns float32 for a float16 input (dtype=torch.float32 "
             "or .float()), which then meets float16 values; cast the weights back with .to(x.dtype).",
             softmax_dtype=torch.float32, guard=False),
    _mistake("returns_weights",
             "return only the output (N, L, E), not (output, weights).", return_weights=True),
    _mistake("k_transpose_1_2", _K_TRANSPOSE, k_transpose="1_2"),
    _mistake("k_dot_T", _K_TRANSPOSE, k_transpose="all"),
    Mistake("float_head_dim", wrong._mha_float_head_dim,
            "D = E / num_heads is a float, and shapes need integers: use E // num_heads."),
]


SPLIT_HEADS = Exercise(
    id="ch3.split_heads",
    reference=split_heads_reference,
    make_cases=_split_cases,
    make_edge_cases=edges.split_edges, probes=SPLIT_PROBES,
    gradients=True,  # the module trains through it: a detached split would pass on values alone
    points=1,
    mistakes=[
        Mistake("missing_transpose", wrong._split_missing_transpose,
                "your output is (N, L, H, D): after the view, call .transpose(1, 2) to bring the heads "
                "axis in front of the tokens, giving (N, H, L, D)."),
        Mistake("view_straight_to_NHLD", wrong._split_no_transpose,
                "you reshaped (N, L, E) straight to (N, H, L, D), which mixes features of different tokens "
                f"into one head's row; view as (N, L, H, D) first, then transpose(1, 2) — see {_SECTION_SPLIT}."),
        Mistake("strided_heads", wrong._split_strided,
                "your head h takes every H-th feature (h, h+H, ...) instead of the block h*D to (h+1)*D-1; "
                "split the last axis as (H, D), heads first: x.view(N, L, H, D)."),
        Mistake("heads_and_dim_swapped", wrong._split_heads_and_dim_swapped,
                "you made D heads of H features: the last axis splits as (H, D), with H = num_heads and "
                "D = E // num_heads, so view(N, L, num_heads, E // num_heads)."),
        Mistake("last_axes_transposed", wrong._split_last_axes,
                "you transposed the last two axes, giving (N, L, D, H); the heads go in front of the tokens: "
                ".transpose(1, 2) swaps L and H."),
        Mistake("float_head_dim", wrong._split_float_dim,
                "D = E / num_heads is a float, and shapes need integers: use E // num_heads."),
        Mistake("tuple_of_heads", wrong._split_chunks,
                "you returned H separate tensors; return one (N, H, L, D) tensor, e.g. "
                "torch.stack(x.chunk(num_heads, dim=-1), dim=1)."),
        Mistake("batch_axis_moved", wrong._split_batch_first,
                "you transposed axes 0 and 2, moving the batch axis; keep N first and swap the tokens and "
                "heads axes: .transpose(1, 2)."),
        Mistake("heads_axis_first", wrong._split_heads_axis_first,  # before batch_mixed: equal when N == H
                "your heads axis is in front of the batch axis, (H, N, L, D) (torch.stack(..., dim=0)?): "
                "keep N first, (N, H, L, D), e.g. torch.stack(x.chunk(num_heads, dim=-1), dim=1)."),
        Mistake("keys_last", wrong._split_keys_last,
                "your output is (N, H, D, L): after view(N, L, H, D), swap only the tokens and heads axes, "
                ".transpose(1, 2) (permute(0, 2, 1, 3)), so each head is a (L, D) block."),
        Mistake("batch_mixed", wrong._split_batch_mixed,
                "your reshape mixes tokens of different samples when N > 1: keep the batch axis in place and "
                "split only the last axis, view(N, L, H, D)."),
    ],
    forbidden=("utils",),
    hint="cut the last axis into (H, D) with view, then bring the heads axis in front of the tokens.",
)

MERGE_HEADS = Exercise(
    id="ch3.merge_heads",
    reference=merge_heads_reference,
    make_cases=_merge_cases,
    make_edge_cases=edges.merge_edges, probes=MERGE_PROBES,
    gradients=True,  # the module trains through it: a detached merge would pass on values alone
    points=1,
    mistakes=[
        Mistake("view_after_transpose", wrong._merge_view,
                "after transpose(1, 2) the tensor is not contiguous, so .view cannot reinterpret it; use "
                f".reshape(N, L, H * D) or .contiguous().view(N, L, H * D) — see {_MYTH_CONTIGUOUS}."),
        Mistake("no_transpose", wrong._merge_no_transpose,
                "you reshaped (N, H, L, D) straight to (N, L, H*D), which scrambles tokens and heads "
                "(no error, just wrong numbers); transpose(1, 2) to (N, L, H, D) first, then reshape — see "
                f"{_MYTH_CONTIGUOUS}."),
        Mistake("feature_major", wrong._merge_feature_major,
                "your features come out interleaved (feature 0 of every head, then feature 1, ...); "
                "the heads must sit side by side: head 0's D features, then head 1's. Transpose only "
                "axes 1 and 2."),
        Mistake("last_axes_transposed", wrong._merge_last_axes,
                "you transposed axes 2 and 3 (L and D); the heads axis (1) must move behind the tokens: "
                "transpose(1, 2), then reshape."),
        Mistake("mean_of_heads", wrong._merge_mean,
                "you averaged the heads: merging concatenates them, head 0's D features then head 1's, into "
                "H * D features per token."),
        Mistake("sum_of_heads", wrong._merge_sum,
                "you summed the heads: merging concatenates them, head 0's D features then head 1's, into "
                "H * D features per token."),
        Mistake("heads_along_tokens", wrong._merge_along_tokens,
                "you concatenated the heads along the tokens, giving (N, H * L, D); concatenate along the "
                "features: (N, L, H * D)."),
        Mistake("wrong_unpack", wrong._merge_wrong_unpack,
                "the input is (N, H, L, D): unpack it as N, H, L, D = x.shape."),
        Mistake("no_reshape", wrong._merge_no_reshape,
                "your output is still (N, L, H, D): after transpose(1, 2), reshape(N, L, H * D) to put each "
                "token's heads side by side."),
        Mistake("token_axis_flattened", wrong._merge_flat,
                "you flattened the tokens into the features, giving (N, L * H * D); keep L: "
                "reshape(N, L, H * D)."),
    ],
    forbidden=("utils",),
    hint="bring the heads axis back behind the tokens, then reshape to (N, L, H * D).",
)

MULTI_HEAD_ATTENTION = Exercise(
    id="ch3.multi_head_attention",
    reference=multi_head_attention_reference,
    make_cases=_mha_cases,
    make_edge_cases=edges.mha_edges, probes=MHA_PROBES,
    parts=edges.MHA_PARTS,
    gradients=True,  # it is trained through: a right output that cuts or poisons the gradient fails
    points=3,
    mistakes=MULTI_HEAD_MISTAKES,
    forbidden=(*TORCH_ATTENTION, *_NO_UTILS),
    hint="project with x @ w_q (and w_k, w_v), split heads, attend with scale 1/sqrt(D) and the mask, "
         "merge, then @ w_o.",
)

EXERCISES: tuple[Exercise, ...] = (SPLIT_HEADS, MERGE_HEADS, MULTI_HEAD_ATTENTION)  # notebook order
