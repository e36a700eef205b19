"""Exercises of chapter 1, "Queries, keys and values". See :mod:`utils.exercises.definition`.

* ``ch1.project_qkv``: Q = X W_Q, K = X W_K, V = X W_V, with or without a batch dimension.
* ``ch1.attention_scores``: the unscaled scores Q Kᵀ, for any number of leading (batch, head) dims.

Each case puts a shape first on which every listed mistake gives a *value* the judge can recognise
(square weights, L != S), then varied and edge shapes. The wrong answers themselves are in
:mod:`utils.exercises.mistakes.qkv`.
"""

from __future__ import annotations

import math
import random

import torch

from utils.exercises.common import Case
from utils.exercises.definition import Exercise, Mistake
from utils.exercises.edges import qkv as edges
from utils.exercises.mistakes import qkv as wrong
from utils.exercises.probing import contrasts

__all__ = ["ATTENTION_SCORES", "EXERCISES", "PROJECT_QKV", "attention_scores_reference", "project_qkv_reference"]


def _randn(gen: torch.Generator, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=gen)


# --------------------------------------------------------------------------------------------------
# ch1.project_qkv
# --------------------------------------------------------------------------------------------------


def project_qkv_reference(x: torch.Tensor, w_q: torch.Tensor, w_k: torch.Tensor, w_v: torch.Tensor):
    """x (..., L, E), w_q and w_k (E, D_k), w_v (E, D_v) -> (Q (..., L, D_k), K (..., L, D_k), V (..., L, D_v))."""
    return x @ w_q, x @ w_k, x @ w_v


def _project_cases(rng: random.Random, gen: torch.Generator) -> list[Case]:
    def case(batch: int | None, length: int, d_model: int, d_k: int, d_v: int) -> Case:
        lead = () if batch is None else (batch,)
        # weights drawn with std 1/sqrt(E), so the outputs stay O(1) (nn.Linear's default init is
        # U(-1/sqrt(E), 1/sqrt(E)), whose std is 1/sqrt(3 E): the same order of size)
        return {
            "x": _randn(gen, *lead, length, d_model),
            "w_q": _randn(gen, d_model, d_k) / math.sqrt(d_model),
            "w_k": _randn(gen, d_model, d_k) / math.sqrt(d_model),
            "w_v": _randn(gen, d_model, d_v) / math.sqrt(d_model),
        }

    square = rng.choice([4, 6, 8])
    return [
        case(rng.randint(2, 3), rng.randint(3, 6), square, square, square),  # square: mistakes show as values
        case(None, rng.randint(2, 7), rng.choice([6, 8]), rng.choice([3, 4]), rng.choice([2, 5])),  # (L, E)
        case(rng.randint(2, 4), rng.randint(3, 8), 8, 4, 6),  # D_k != D_v
        case(1, 1, rng.choice([3, 5]), 2, 4),  # batch 1, length 1
        case(None, 1, 2, 1, 1),  # the smallest case
        {k: v.double() for k, v in case(2, 3, 5, 3, 4).items()},  # float64: the output keeps the input's dtype
    ]


_LINEAR_SECTION = "see 'The same projection with nn.Linear' above"
_ORDER = "return the tuple in the order (Q, K, V): queries, then keys, then values."

_PROJECT_MISTAKES = [
    Mistake("transposed_weight", wrong._transposed,
            "you multiplied by the transposed weights: x @ w.T, F.linear(x, w) (which computes x @ w.T) and an "
            "nn.Linear whose weight you set to w instead of w.T all do that. Here the weights are stored "
            "(E, D), so (..., L, E) @ (E, D) needs no transpose; only nn.Linear's (D, E) layout does: "
            f"{_LINEAR_SECTION}."),
    Mistake("reshaped_weight", wrong._reshaped_weight,
            "you reshaped a weight to (D, E) and transposed it back: reshape (and view) keeps the numbers "
            "in memory order, so it scrambles the matrix instead of transposing it. The weights are "
            "already (E, D): use them as they are."),
    Mistake("weight_first", wrong._weight_first,
            "you wrote w @ x, the column-vector habit (W x). Here every token is a row: x is (..., L, E) and "
            "w is (E, D), so x goes on the left and its last dim E meets w's first dim E."),
    Mistake("transposed_output", wrong._transposed_output,
            "your Q has shape (..., D, L): you computed Wᵀ Xᵀ = (X W)ᵀ, the column-vector form. Tokens are "
            "rows here, so Q must be (..., L, D_k): keep x on the left and drop the transposes."),
    Mistake("x_dot_T", wrong._x_dot_T,
            "x.T reverses *all* dimensions of x, and you need no transpose of x at all: x (..., L, E) already "
            "has E last, where w (E, D) needs it. See 'Myth check: `x @ x.T`' below for what .T does to a batch."),
    Mistake("mm", wrong._mm,
            "torch.mm only takes 2-D matrices, but x may carry a batch dim, (N, L, E). `@` (torch.matmul) "
            "treats leading dims as a batch and applies the same w to each: see 'The batch dimension' above."),
    Mistake("bmm", wrong._bmm,
            "torch.bmm needs two 3-D tensors with the same batch size, but w is a 2-D (E, D) matrix and x may "
            "be 2-D too. `@` (torch.matmul) broadcasts one w over any leading dims: see 'The batch dimension' above."),
    Mistake("einsum_no_batch", wrong._einsum_no_batch,
            "your einsum names exactly two dims for x, so it fails on a batched x (N, L, E). Write '...' for "
            "the leading dims (or use `@`), so that one expression handles (L, E) and (N, L, E)."),
    Mistake("einsum_batch_only", wrong._einsum_batch_only,
            "your einsum names exactly three dims for x, so it fails on an unbatched x (L, E). Write '...' for "
            "the leading dims (or use `@`), so that one expression handles (L, E) and (N, L, E)."),
    Mistake("order_kqv", wrong._reordered("KQV"), f"Q and K are swapped: {_ORDER}"),
    Mistake("order_qvk", wrong._reordered("QVK"), f"K and V are swapped: {_ORDER}"),
    Mistake("order_vkq", wrong._reordered("VKQ"), f"Q and V are swapped: {_ORDER}"),
    Mistake("order_vqk", wrong._reordered("VQK"), f"your tuple is (V, Q, K): {_ORDER}"),
    Mistake("order_kvq", wrong._reordered("KVQ"), f"your tuple is (K, V, Q): {_ORDER}"),
    Mistake("no_q_projection", wrong._no_q, "your Q equals x: you forgot to project the queries with w_q."),
    Mistake("no_k_projection", wrong._no_k, "your K equals x: you forgot to project the keys with w_k."),
    Mistake("no_v_projection", wrong._no_v, "your V equals x: you forgot to project the values with w_v."),
    Mistake("one_weight", wrong._k_uses_w_q,
            "your K equals your Q: you used w_q for the keys too. Each of Q, K, V has its own weight."),
    Mistake("v_uses_w_k", wrong._v_uses_w_k,
            "your V equals your K: you used w_k for the values too (a copy-paste slip?). V needs w_v."),
    Mistake("v_uses_w_q", wrong._v_uses_w_q,
            "your V equals your Q: you used w_q for the values too (a copy-paste slip?). V needs w_v."),
    Mistake("all_use_w_q", wrong._all_use_w_q,
            "your K and V both equal your Q: you used w_q for all three (a line copied and not edited?). "
            "K needs w_k and V needs w_v."),
    Mistake("scaled_by_sqrt_e", wrong._scaled_by_sqrt_e,
            "your Q, K, V are √E times too small: you divided by √E. The weights already carry that scale "
            "(they are drawn with std 1/√E), so the projection is a plain product, with no scaling of its own."),
    Mistake("scaled_by_notebook_e", wrong._scaled_by_notebook_e,
            "your Q, K, V are 4 = √16 times too small: you divided by √E with the notebook's global E = 16. "
            "A function should use only its arguments (the check's E varies), and the projection needs no "
            "scaling at all: the weights already carry it."),
    Mistake("scaled_by_sqrt_dk", wrong._scaled_by_sqrt_dk,
            "your Q, K, V are √D_k times too small: you divided by √D_k. That is chapter 2's scale, and it "
            "belongs to the scores Q Kᵀ, not to the projections: here Q = X W_Q is a plain product."),
    Mistake("scaled_q_only", wrong._scaled_q_only,
            "your K and V are right but your Q is √D_k times too small: you folded chapter 2's 1/√D_k into the "
            "queries. This exercise asks for the plain projections, Q = X W_Q; the scale comes with the scores."),
    Mistake("elementwise", wrong._elementwise_projection,
            "you wrote x * w, an entry-by-entry product (it only runs when the shapes happen to broadcast). A "
            "projection is a matrix product, x @ w: (..., L, E) @ (E, D) -> (..., L, D)."),
    Mistake("flattened_batch", wrong._flattened_batch,
            "your Q has shape (N·L, D): you flattened the batch to (N·L, E) and did not reshape back. No "
            "flattening is needed: `@` applies the same w to every sentence of (N, L, E) and keeps N and L "
            "(see 'The batch dimension' above)."),
    Mistake("added_batch_dim", wrong._added_batch_dim,
            "for an unbatched x (L, E) you return (1, L, D): you added a batch dim with unsqueeze(0) and did "
            "not remove it. `@` handles (L, E) and (N, L, E) alike, so leave x as it is "
            "(see 'The batch dimension' above)."),
    Mistake("squeezed", wrong._squeezed,
            "you called .squeeze(), which drops every dim of size 1, so a batch of one sentence (1, L, E), or "
            "D = 1, loses a dim. Return the products as they are: (..., L, D)."),
    Mistake("chunked", wrong._chunked,
            "you split a fused projection with chunk(3), which cuts it into three equal parts, but D_v may "
            "differ from D_k: split at the weights' own widths (or project with each weight separately)."),
    Mistake("softmaxed", wrong._softmaxed_projections,
            "your rows sum to 1: you applied a softmax to the projections. Q, K, V are plain linear maps of x; "
            "the softmax comes later, on the scores (chapter 2)."),
    Mistake("only_two", wrong._only_two,
            "you returned two tensors: return all three projections, (Q, K, V)."),
    Mistake("stacked", wrong._stacked,
            "return a tuple of three tensors (Q, K, V), not one stacked tensor: Q, K and V may have different "
            "widths (D_v need not equal D_k), so they cannot always be stacked."),
    Mistake("half", wrong._half,
            "your outputs are float16: you cast the inputs. Keep the input dtype: `@` on float32 tensors "
            "already returns float32."),
    Mistake("double", wrong._double,
            "your outputs are float64: you cast the inputs. Keep the input dtype: `@` on float32 tensors "
            "already returns float32."),
]


# --------------------------------------------------------------------------------------------------
# ch1.attention_scores
# --------------------------------------------------------------------------------------------------


def attention_scores_reference(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """q (..., L, D), k (..., S, D) -> unscaled scores (..., L, S), scores[..., i, j] = q_i · k_j."""
    return q @ k.transpose(-2, -1)


def _scores_cases(rng: random.Random, gen: torch.Generator) -> list[Case]:
    def case(lead: tuple[int, ...], length: int, source: int, dim: int) -> Case:
        return {"q": _randn(gen, *lead, length, dim), "k": _randn(gen, *lead, source, dim)}

    batch = rng.randint(2, 3)
    return [
        case((batch,), 5, 3, rng.choice([4, 8])),  # batched, L != S, D distinct: `k.T` breaks here
        case((), rng.randint(2, 6), rng.randint(2, 6), rng.choice([3, 8])),  # no batch: (L, D), (S, D)
        case((2, rng.randint(2, 3)), rng.randint(3, 5), rng.randint(3, 5), 4),  # (N, H, L, D): 4-D
        case((1,), 1, rng.randint(2, 5), rng.choice([2, 6])),  # batch 1, one query
        case((rng.randint(2, 3),), rng.randint(2, 4), 1, 3),  # one key
        {k: v.double() for k, v in case((2,), 3, 4, 3).items()},  # float64: the scores keep the input's dtype
    ]


_DOT_T_MYTH = "see 'Myth check: `x @ x.T` is how you write X Xᵀ' above"
_FROM_THE_END = ("Count the two dims to swap from the end, so that one expression works for (L, D), "
                 "(N, S, D) and (N, H, S, D)")

_SCORES_MISTAKES = [
    Mistake("transposed_result", wrong._transposed_result,
            "your scores are transposed: you computed K Qᵀ (or (Q Kᵀ)ᵀ), shape (..., S, L). Rows belong to "
            "queries and columns to keys: the scores must be (..., L, S)."),
    Mistake("transposed_query", wrong._transposed_query,
            "you transposed q instead of k: Qᵀ K contracts over the tokens and, where it runs at all, gives "
            "(..., D, D). Each score is a dot product over D, so it is the keys that need the transpose."),
    Mistake("scaled", wrong._scaled,
            "you divided by √D. This exercise asks for the raw scores Q Kᵀ; the scaling comes in chapter 2."),
    Mistake("scaled_by_sqrt_s", wrong._scaled_by_sqrt_s,
            "your scores are √S times too small: you divided by the square root of the number of keys "
            "S = k.shape[-2]. This exercise asks for the raw scores Q Kᵀ, with no scaling (chapter 2 divides "
            "by √D, the size of each query and key, not by √S)."),
    Mistake("query_with_itself", wrong._query_with_itself,
            "your scores are Q Qᵀ: you multiplied q by its own transpose. Each score is a query against a key: "
            "q @ k.transpose(-2, -1), shape (..., L, S)."),
    Mistake("squeezed", wrong._squeezed_scores,
            "you called .squeeze(), which drops every dim of size 1, so a batch of 1, one query or one key "
            "loses a dim. Return q @ k.transpose(-2, -1) as it is: (..., L, S)."),
    Mistake("divided_by_d", wrong._divided_by_d,
            "your scores are D times too small: you divided by D, or averaged the products over D instead of "
            "summing them. A score is the plain dot product, a sum over D, with no scaling in this exercise."),
    Mistake("transpose_12", wrong._transpose_12,
            "k.transpose(1, 2) counts dims from the front, so it is right only for a 3-D (N, S, D) k: without "
            "a batch dim there is no dim 2, and with heads (N, H, S, D) it swaps H and S. "
            f"{_FROM_THE_END}: see 'Myth check: `x @ x.T`' above."),
    Mistake("dot_T", wrong._dot_T,
            "k.T reverses *all* dimensions, so it only works without a batch dimension. Swap just the last "
            f"two dims of k: {_DOT_T_MYTH}."),
    Mistake("t_method", wrong._t_method,
            "k.t() only accepts tensors with at most 2 dims, but k may be (N, S, D) or (N, H, S, D). "
            f"{_FROM_THE_END}: {_DOT_T_MYTH}."),
    Mistake("transpose_01", wrong._transpose_01,
            "k.transpose(0, 1) swaps the batch and length axes when there is a batch dimension. "
            f"{_FROM_THE_END}."),
    Mistake("permute_021", wrong._permute_021,
            "k.permute(0, 2, 1) names exactly three dims, so it fails for a 2-D k (S, D) and a 4-D "
            f"k (N, H, S, D). {_FROM_THE_END}."),
    Mistake("bmm", wrong._bmm_scores,
            "torch.bmm only takes 3-D tensors, but q and k may be (L, D) or (N, H, L, D). `@` (torch.matmul) "
            "treats any number of leading dims as a batch."),
    Mistake("einsum_3d", wrong._einsum_3d,
            "your einsum names exactly three dims for q and k, so it fails for (L, D) and (N, H, L, D). Write "
            "'...' for the leading dims, so that one expression handles any number of them."),
    Mistake("reshaped_key", wrong._reshaped_key,
            "you reshaped k to (..., D, S): reshape (and view) keeps the numbers in memory order, so the shape "
            "is right but the matrix is scrambled. Only a transpose of the last two dims moves the numbers."),
    Mistake("elementwise", wrong._elementwise,
            "q * k multiplies entry by entry (and only runs when L = S). A score is a dot product of one query "
            "with one key, for every (query, key) pair: a matrix product, (..., L, D) with (..., D, S)."),
    Mistake("elementwise_summed", wrong._elementwise_summed,
            "(q * k).sum(-1) gives one score per position, query i with key i only (and runs only when L = S). "
            "A score is needed for every (query, key) pair: a matrix product, (..., L, D) with (..., D, S)."),
    Mistake("cosine", wrong._cosine,
            "you normalised q and k: these are cosine similarities. The scores are raw dot products, whose "
            "size depends on the vectors' lengths: see 'Myth check: \"Q Kᵀ computes how similar each word "
            "is to every other word.\"' above."),
    Mistake("softmaxed", wrong._softmaxed,
            "your rows sum to 1: you applied a softmax. This exercise asks for the raw scores Q Kᵀ; "
            "the softmax comes in chapter 2."),
    Mistake("half", wrong._half_scores,
            "your scores are float16: you cast the inputs. Keep the input dtype: `@` on float32 tensors "
            "already returns float32."),
    Mistake("double", wrong._double_scores,
            "your scores are float64: you cast the inputs. Keep the input dtype: `@` on float32 tensors "
            "already returns float32."),
]


PROJECT_QKV = Exercise(
    id="ch1.project_qkv",
    reference=project_qkv_reference,
    make_cases=_project_cases,
    make_edge_cases=edges.project_edges,
    probes=(contrasts.PROJECT_QKV_CONTRAST,),
    parts=edges.PROJECT_PARTS,
    gradients=True,  # the weights are learned through it: a right output that cuts the gradient fails
    points=2,
    mistakes=_PROJECT_MISTAKES,
    hint="each of Q, K, V is x times its own weight, in that order. x is (..., L, E) and each weight is "
         "(E, D), so the E's must meet; `@` (torch.matmul) keeps any leading dims of x. No transpose, no "
         "scaling, no softmax, and no bias (a fresh nn.Linear adds one unless you pass bias=False).",
)

ATTENTION_SCORES = Exercise(
    id="ch1.attention_scores",
    reference=attention_scores_reference,
    make_cases=_scores_cases,
    make_edge_cases=edges.scores_edges,
    probes=(contrasts.ATTENTION_SCORES_CONTRAST,),
    parts=edges.SCORES_PARTS,
    gradients=True,  # trained through in every later chapter
    points=2,
    mistakes=_SCORES_MISTAKES,
    hint="scores[..., i, j] is the dot product of query i with key j, summed over D. As a matrix product "
         "the D of q must meet the D of k, so k needs its last two dims swapped, counted from the end so "
         "that any number of leading dims works. No scaling and no softmax.",
)

EXERCISES: tuple[Exercise, ...] = (PROJECT_QKV, ATTENTION_SCORES)  # notebook order
