"""Review batch 5 (review5): the wrong answers to chapter 3 that issue 36's learner reviewers tried and whose
diagnoses were tuned (tests/test_diagnoses_round4.py)."""
import math

import torch  # noqa: F401
import torch.nn as nn  # noqa: F401
import torch.nn.functional as F  # noqa: F401


def merge_heads__heads_reversed(x):
    N, H, L, D = x.shape
    return x.flip(1).transpose(1, 2).reshape(N, L, H * D)


def split_heads__view_straight(x, num_heads):
    N, L, E = x.shape
    return x.view(N, num_heads, L, E // num_heads)


def split_heads__batch_of_two(x, num_heads):
    N, L, E = x.shape
    return x.view(2, L, num_heads, E // num_heads).transpose(1, 2)


def split_heads__float_cast(x, num_heads):
    N, L, E = x.shape
    return x.view(N, L, num_heads, E // num_heads).transpose(1, 2).float()


def merge_heads__float_cast(x):
    N, H, L, D = x.shape
    return x.transpose(1, 2).reshape(N, L, H * D).float()


def _attention(q, k, v, mask):
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    w = s.softmax(-1)
    if mask is not None:
        w = w.masked_fill(~mask.any(-1, keepdim=True), 0.0)
    return w @ v


def multi_head_attention__bool_mask_added(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    N, L, E = x.shape
    D = E // num_heads
    q, k, v = ((x @ w).view(N, L, num_heads, D).transpose(1, 2) for w in (w_q, w_k, w_v))
    s = q @ k.transpose(-2, -1) / math.sqrt(D)
    if mask is not None:
        s = s + mask
    return (s.softmax(-1) @ v).transpose(1, 2).reshape(N, L, E) @ w_o


def multi_head_attention__mask_inverted(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    N, L, E = x.shape
    D = E // num_heads
    q, k, v = ((x @ w).view(N, L, num_heads, D).transpose(1, 2) for w in (w_q, w_k, w_v))
    heads = _attention(q, k, v, None if mask is None else ~mask)
    return heads.transpose(1, 2).reshape(N, L, E) @ w_o


def multi_head_attention__interleaved_split_and_merge(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    N, L, E = x.shape
    D = E // num_heads
    q, k, v = ((x @ w).view(N, L, D, num_heads).permute(0, 3, 1, 2) for w in (w_q, w_k, w_v))
    heads = _attention(q, k, v, mask)
    return heads.permute(0, 2, 3, 1).reshape(N, L, E) @ w_o


def multi_head_attention__v_without_transpose(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    N, L, E = x.shape
    D = E // num_heads
    q, k = ((x @ w).view(N, L, num_heads, D).transpose(1, 2) for w in (w_q, w_k))
    v = (x @ w_v).view(N, num_heads, L, D)
    heads = _attention(q, k, v, mask)
    return heads.transpose(1, 2).reshape(N, L, E) @ w_o


ANSWERS = [
    {"exercise": "ch3.merge_heads", "fn": merge_heads__heads_reversed,
     "mistake": "heads merged in reversed order (flip(1))", "part": "head order"},
    {"exercise": "ch3.split_heads", "fn": split_heads__view_straight,
     "mistake": "(N, L, E) viewed straight as (N, H, L, D)", "part": "split"},
    {"exercise": "ch3.split_heads", "fn": split_heads__batch_of_two,
     "mistake": "the batch size hard-coded as 2", "part": "batch shape"},
    {"exercise": "ch3.split_heads", "fn": split_heads__float_cast,
     "mistake": "a .float() cast: float16 and float64 inputs come back float32", "part": "dtype"},
    {"exercise": "ch3.merge_heads", "fn": merge_heads__float_cast,
     "mistake": "a .float() cast: float16 and float64 inputs come back float32", "part": "dtype"},
    {"exercise": "ch3.multi_head_attention", "fn": multi_head_attention__bool_mask_added,
     "mistake": "the bool mask added to the scores", "part": "masking"},
    {"exercise": "ch3.multi_head_attention", "fn": multi_head_attention__mask_inverted,
     "mistake": "mask inverted: -inf where the mask is True", "part": "masking"},
    {"exercise": "ch3.multi_head_attention", "fn": multi_head_attention__interleaved_split_and_merge,
     "mistake": "heads cut interleaved (view(N, L, D, H)), consistently in the split and the merge",
     "part": "split and merge"},
    {"exercise": "ch3.multi_head_attention", "fn": multi_head_attention__v_without_transpose,
     "mistake": "v alone reshaped to (N, H, L, D) without the transpose", "part": "split of v"},
]
