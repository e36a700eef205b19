"""Plausible wrong answers to the exercises of chapter 1, "Queries, keys and values".

Each function is the ``fn`` of a :class:`~utils.exercises.definition.Mistake` declared, with its
diagnosis, in :mod:`utils.exercises.qkv`: first those of ``ch1.project_qkv``, then those of
``ch1.attention_scores``.
"""

from __future__ import annotations

import math
import warnings

import torch
import torch.nn.functional as F

# --------------------------------------------------------------------------------------------------
# ch1.project_qkv
# --------------------------------------------------------------------------------------------------


def _transposed(x, w_q, w_k, w_v):
    return x @ w_q.T, x @ w_k.T, x @ w_v.T


def _reshaped_weight(x, w_q, w_k, w_v):  # "transposes" with reshape: the right shape, scrambled numbers
    return tuple(x @ w.reshape(w.shape[1], w.shape[0]).T for w in (w_q, w_k, w_v))


def _weight_first(x, w_q, w_k, w_v):  # the column-vector habit, W x
    return w_q @ x, w_k @ x, w_v @ x


def _transposed_output(x, w_q, w_k, w_v):  # Wᵀ Xᵀ = (X W)ᵀ, never transposed back
    return tuple(w.T @ x.transpose(-2, -1) for w in (w_q, w_k, w_v))


def _x_dot_T(x, w_q, w_k, w_v):
    with warnings.catch_warnings():  # torch warns about .T on 3-D tensors; the diagnosis says it better
        warnings.simplefilter("ignore", UserWarning)
        return x.T @ w_q, x.T @ w_k, x.T @ w_v


def _mm(x, w_q, w_k, w_v):
    return torch.mm(x, w_q), torch.mm(x, w_k), torch.mm(x, w_v)


def _bmm(x, w_q, w_k, w_v):
    return torch.bmm(x, w_q), torch.bmm(x, w_k), torch.bmm(x, w_v)


def _einsum_no_batch(x, w_q, w_k, w_v):
    return tuple(torch.einsum("le,ed->ld", x, w) for w in (w_q, w_k, w_v))


def _einsum_batch_only(x, w_q, w_k, w_v):
    return tuple(torch.einsum("nle,ed->nld", x, w) for w in (w_q, w_k, w_v))


def _reordered(order: str):
    def wrong(x, w_q, w_k, w_v):
        projected = dict(zip("QKV", (x @ w_q, x @ w_k, x @ w_v)))  # the reference's projections
        return tuple(projected[name] for name in order)

    wrong.__name__ = f"_order_{order.lower()}"
    return wrong


def _no_q(x, w_q, w_k, w_v):
    return x, x @ w_k, x @ w_v


def _no_k(x, w_q, w_k, w_v):
    return x @ w_q, x, x @ w_v


def _no_v(x, w_q, w_k, w_v):
    return x @ w_q, x @ w_k, x


def _k_uses_w_q(x, w_q, w_k, w_v):
    return x @ w_q, x @ w_q, x @ w_v


def _v_uses_w_k(x, w_q, w_k, w_v):
    return x @ w_q, x @ w_k, x @ w_k


def _v_uses_w_q(x, w_q, w_k, w_v):
    return x @ w_q, x @ w_k, x @ w_q


def _all_use_w_q(x, w_q, w_k, w_v):  # the first line copied twice, never edited
    return x @ w_q, x @ w_q, x @ w_q


def _scaled_by_sqrt_e(x, w_q, w_k, w_v):
    scale = math.sqrt(x.shape[-1])
    return x @ w_q / scale, x @ w_k / scale, x @ w_v / scale


def _scaled_by_notebook_e(x, w_q, w_k, w_v):  # the notebook's global E = 16 (no case has E = 16)
    return x @ w_q / 4.0, x @ w_k / 4.0, x @ w_v / 4.0


def _scaled_by_sqrt_dk(x, w_q, w_k, w_v):  # chapter 2's 1/sqrt(D_k), applied to the projections
    scale = math.sqrt(w_q.shape[-1])
    return x @ w_q / scale, x @ w_k / scale, x @ w_v / scale


def _scaled_q_only(x, w_q, w_k, w_v):  # the scale folded into the queries, as some libraries do
    return x @ w_q / math.sqrt(w_q.shape[-1]), x @ w_k, x @ w_v


def _elementwise_projection(x, w_q, w_k, w_v):  # `*` for `@`
    return x * w_q, x * w_k, x * w_v


def _flattened_batch(x, w_q, w_k, w_v):  # (N, L, E) -> (N·L, E), never reshaped back
    flat = x.reshape(-1, x.shape[-1])
    return flat @ w_q, flat @ w_k, flat @ w_v


def _added_batch_dim(x, w_q, w_k, w_v):  # (L, E) -> (1, L, E), never squeezed back
    if x.dim() == 2:
        x = x.unsqueeze(0)
    return x @ w_q, x @ w_k, x @ w_v


def _squeezed(x, w_q, w_k, w_v):  # .squeeze() drops every dim of size 1, the batch of 1 included
    return tuple((x @ w).squeeze() for w in (w_q, w_k, w_v))


def _chunked(x, w_q, w_k, w_v):  # fused projection split into three equal parts: wrong when D_v != D_k
    return tuple((x @ torch.cat([w_q, w_k, w_v], dim=-1)).chunk(3, dim=-1))


def _softmaxed_projections(x, w_q, w_k, w_v):
    return tuple((x @ w).softmax(dim=-1) for w in (w_q, w_k, w_v))


def _only_two(x, w_q, w_k, w_v):
    return x @ w_q, x @ w_k


def _stacked(x, w_q, w_k, w_v):
    return torch.stack([x @ w_q, x @ w_k, x @ w_v])


def _half(x, w_q, w_k, w_v):
    return tuple(x.half() @ w.half() for w in (w_q, w_k, w_v))


def _double(x, w_q, w_k, w_v):
    return tuple(x.double() @ w.double() for w in (w_q, w_k, w_v))


# --------------------------------------------------------------------------------------------------
# ch1.attention_scores
# --------------------------------------------------------------------------------------------------


def _transposed_result(q, k):
    return k @ q.transpose(-2, -1)


def _transposed_query(q, k):  # Qᵀ K: the transpose on the wrong factor
    return q.transpose(-2, -1) @ k


def _scaled(q, k):
    return q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])


def _divided_by_d(q, k):  # also the broadcast product averaged over D instead of summed
    return q @ k.transpose(-2, -1) / q.shape[-1]


def _scaled_by_sqrt_s(q, k):  # the number of keys S instead of D (and no scaling belongs here anyway)
    return q @ k.transpose(-2, -1) / math.sqrt(k.shape[-2])


def _query_with_itself(q, k):  # a copy-paste slip: Q Qᵀ
    return q @ q.transpose(-2, -1)


def _squeezed_scores(q, k):
    return (q @ k.transpose(-2, -1)).squeeze()


def _dot_T(q, k):
    with warnings.catch_warnings():  # torch warns about .T on 3-D tensors; the diagnosis says it better
        warnings.simplefilter("ignore", UserWarning)
        return q @ k.T


def _t_method(q, k):
    return q @ k.t()


def _transpose_01(q, k):
    return q @ k.transpose(0, 1)


def _transpose_12(q, k):  # right for (N, S, D) only
    return q @ k.transpose(1, 2)


def _permute_021(q, k):
    return q @ k.permute(0, 2, 1)


def _bmm_scores(q, k):
    return torch.bmm(q, k.transpose(-2, -1))


def _einsum_3d(q, k):
    return torch.einsum("nld,nsd->nls", q, k)


def _reshaped_key(q, k):  # reshape (or view) to (..., D, S): the right shape, scrambled numbers
    return q @ k.reshape(*k.shape[:-2], k.shape[-1], k.shape[-2])


def _elementwise(q, k):
    return q * k


def _elementwise_summed(q, k):  # one score per position, query i with key i only
    return (q * k).sum(-1)


def _cosine(q, k):
    return F.normalize(q, dim=-1) @ F.normalize(k, dim=-1).transpose(-2, -1)


def _softmaxed(q, k):
    return torch.softmax(q @ k.transpose(-2, -1), dim=-1)


def _half_scores(q, k):
    return q.half() @ k.half().transpose(-2, -1)


def _double_scores(q, k):
    return q.double() @ k.double().transpose(-2, -1)
