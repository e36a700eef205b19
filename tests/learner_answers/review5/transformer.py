"""Review batch 5 (review5): the wrong answer to chapter 5 that issue 36's learner reviewers tried (its diagnosis
is still generic: see tests/learner_answers/README.md, "Review batch 5")."""
import math  # noqa: F401

import torch
import torch.nn as nn  # noqa: F401
import torch.nn.functional as F  # noqa: F401


def feed_forward__weights_swapped(x, w1, b1, w2, b2):
    return torch.relu(x @ w2.T + b1) @ w1.T + b2


ANSWERS = [
    {"exercise": "ch5.feed_forward", "fn": feed_forward__weights_swapped,
     "mistake": "w2.T where w1 goes and w1.T where w2 goes (the shapes allow it)", "part": "weights"},
]
