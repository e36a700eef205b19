"""Review batch 5 (review5): the wrong answers to chapter 2 that issue 36's learner reviewers tried and whose
diagnoses were tuned (tests/test_diagnoses_round4.py)."""
import math

import torch  # noqa: F401
import torch.nn as nn  # noqa: F401
import torch.nn.functional as F  # noqa: F401


def scaled_dot_product_attention__bool_mask_added(q, k, v, mask=None):
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        s = s + mask
    w = s.softmax(-1)
    return w @ v, w


def scaled_dot_product_attention__renormalised_after_softmax(q, k, v, mask=None):
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    w = s.softmax(-1)
    if mask is not None:
        w = w * mask
        w = w / w.sum(-1, keepdim=True).clamp_min(1e-30)
    return w @ v, w


ANSWERS = [
    {"exercise": "ch2.scaled_dot_product_attention", "fn": scaled_dot_product_attention__bool_mask_added,
     "mistake": "the bool mask added to the scores (True becomes +1, False 0)", "part": "masking"},
    {"exercise": "ch2.scaled_dot_product_attention", "fn": scaled_dot_product_attention__renormalised_after_softmax,
     "mistake": "mask applied to the weights after the softmax and renormalised (with a clamp): fails when a "
                "blocked key dominates", "part": "masking"},
]
