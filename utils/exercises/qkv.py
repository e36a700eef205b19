"""Exercises of chapter 1, "Queries, keys and values". See :mod:`utils.exercises.definition`.

* ``ch1.project_qkv``: Q = X W_Q, K = X W_K, V = X W_V, with or without a batch dimension.
* ``ch1.attention_scores``: the unscaled scores Q Kᵀ, for any number of leading (batch, head) dims.

Each case puts a shape first on which every listed mistake gives a *value* the judge can recognise
(square weights, L != S), then varied and edge shapes.
"""

from __future__ import annotations

import math
import random
import warnings

import torch

from utils.exercises.common import Case
from utils.exercises.definition import Exercise, Mistake

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
        # weights scaled by 1/sqrt(E), like nn.Linear's init, so the outputs stay O(1)
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
    ]


def _transposed(x, w_q, w_k, w_v):
    return x @ w_q.T, x @ w_k.T, x @ w_v.T


def _order_kqv(x, w_q, w_k, w_v):
    q, k, v = project_qkv_reference(x, w_q, w_k, w_v)
    return k, q, v


def _order_qvk(x, w_q, w_k, w_v):
    q, k, v = project_qkv_reference(x, w_q, w_k, w_v)
    return q, v, k


def _no_q(x, w_q, w_k, w_v):
    return x, x @ w_k, x @ w_v


def _no_k(x, w_q, w_k, w_v):
    return x @ w_q, x, x @ w_v


def _no_v(x, w_q, w_k, w_v):
    return x @ w_q, x @ w_k, x


def _one_weight(x, w_q, w_k, w_v):
    return x @ w_q, x @ w_q, x @ w_v


_PROJECT_MISTAKES = [
    Mistake("transposed_weight", _transposed,
            "you multiplied by the transposed weights (x @ w.T). Here the weights are stored (E, D), so "
            "compute x @ w_q: (..., L, E) @ (E, D_k) -> (..., L, D_k). Only nn.Linear, which stores (D, E), "
            "needs the transpose."),
    Mistake("order_kqv", _order_kqv,
            "Q and K are swapped: return the tuple in the order (Q, K, V), i.e. (x @ w_q, x @ w_k, x @ w_v)."),
    Mistake("order_qvk", _order_qvk,
            "K and V are swapped: return the tuple in the order (Q, K, V), i.e. (x @ w_q, x @ w_k, x @ w_v)."),
    Mistake("no_q_projection", _no_q, "your Q equals x: you forgot to project the queries with w_q."),
    Mistake("no_k_projection", _no_k, "your K equals x: you forgot to project the keys with w_k."),
    Mistake("no_v_projection", _no_v, "your V equals x: you forgot to project the values with w_v."),
    Mistake("one_weight", _one_weight,
            "your K equals your Q: you used w_q for the keys too. Each of Q, K, V has its own weight."),
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
    ]


def _transposed_result(q, k):
    return k @ q.transpose(-2, -1)


def _scaled(q, k):
    return q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])


def _dot_T(q, k):
    with warnings.catch_warnings():  # torch warns about .T on 3-D tensors; the diagnosis says it better
        warnings.simplefilter("ignore", UserWarning)
        return q @ k.T


def _transpose_01(q, k):
    return q @ k.transpose(0, 1)


def _softmaxed(q, k):
    return torch.softmax(q @ k.transpose(-2, -1), dim=-1)


_SCORES_MISTAKES = [
    Mistake("transposed_result", _transposed_result,
            "your scores are transposed: you computed K Qᵀ, shape (..., S, L). Rows belong to queries: "
            "compute q @ k.transpose(-2, -1), shape (..., L, S)."),
    Mistake("scaled", _scaled,
            "you divided by sqrt(D). This exercise asks for the raw scores Q Kᵀ; the scaling comes in chapter 2."),
    Mistake("dot_T", _dot_T,
            "k.T reverses *all* dimensions, so it only works without a batch dimension. Use "
            "k.transpose(-2, -1) (or k.mT), which swaps just the last two."),
    Mistake("transpose_01", _transpose_01,
            "k.transpose(0, 1) swaps the batch and length axes when there is a batch dimension. Use "
            "k.transpose(-2, -1), which counts from the end and works for any number of leading dims."),
    Mistake("softmaxed", _softmaxed,
            "your rows sum to 1: you applied a softmax. This exercise asks for the raw scores Q Kᵀ; "
            "the softmax comes in chapter 2."),
]


PROJECT_QKV = Exercise(
    id="ch1.project_qkv",
    reference=project_qkv_reference,
    make_cases=_project_cases,
    points=2,
    mistakes=_PROJECT_MISTAKES,
    hint="return (x @ w_q, x @ w_k, x @ w_v); `@` multiplies the last dim of x with the first of w.",
)

ATTENTION_SCORES = Exercise(
    id="ch1.attention_scores",
    reference=attention_scores_reference,
    make_cases=_scores_cases,
    points=2,
    mistakes=_SCORES_MISTAKES,
    hint="scores[..., i, j] = q[..., i, :] · k[..., j, :]; that is q @ k.transpose(-2, -1).",
)

EXERCISES: tuple[Exercise, ...] = (PROJECT_QKV, ATTENTION_SCORES)  # notebook order
