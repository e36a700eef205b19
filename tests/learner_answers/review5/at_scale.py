"""Review batch 5 (review5): the wrong answers to chapter 6 that issue 36's learner reviewers tried and whose
diagnoses were tuned (tests/test_diagnoses_round4.py)."""
import math

import torch
import torch.nn as nn  # noqa: F401
import torch.nn.functional as F  # noqa: F401


def attend_with_cache__keys_and_values_swapped(q_new, k_new, v_new, k_cache, v_cache):
    k = torch.cat([k_cache, k_new], dim=-2)
    v = torch.cat([v_cache, v_new], dim=-2)
    s = q_new @ v.transpose(-2, -1) / math.sqrt(q_new.shape[-1])
    return s.softmax(-1) @ k, k, v


def online_softmax_update__minus_1e9_inputs(running_max, running_sum, block):
    block = block.masked_fill(block == float("-inf"), -1e9)
    rm = running_max.masked_fill(running_max == float("-inf"), -1e9)
    new_max = torch.maximum(rm, block.amax(dim=-1))
    return new_max, running_sum * torch.exp(rm - new_max) + torch.exp(block - new_max[..., None]).sum(dim=-1)


ANSWERS = [
    {"exercise": "ch6.attend_with_cache", "fn": attend_with_cache__keys_and_values_swapped,
     "mistake": "scores against V and the average over K: the roles of keys and values swapped",
     "part": "attention over the cache"},
    {"exercise": "ch6.online_softmax_update", "fn": online_softmax_update__minus_1e9_inputs,
     "mistake": "-inf replaced by -1e9 in the running max and the block", "part": "masked rows"},
]
