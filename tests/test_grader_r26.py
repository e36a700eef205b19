"""Red team R26 (issue 35): a module reached under another module's name, and torch's attention under a subclass.

* **F1**: ``torch.distributions.kl.torch.testing.assert_close(...)`` passed the module allow-list: the check looked
  the spelled-out path up as a module (``torch.distributions.kl.torch`` is an attribute holding ``torch``), found
  none, and stopped. A module is now counted by its own ``__name__``: that chain reaches ``torch.testing``.
* **F2**: through F1, ``torch.ao.quantization``'s config handed out ``torch.ao.nn.quantizable.MultiheadAttention``
  (a subclass of ``nn.MultiheadAttention`` with its own ``forward``), whose ``forward`` called directly got full
  marks in ch3, ch5 and ch6 on every grader. Both quantization classes are on ``TORCH_ATTENTION`` now, and at run
  time a forbidden module class can be neither called nor made, so no subclass instance can be built either.
* **F4**: the refusal of ``torch.testing`` read "... use torch.allclose(a, b) or torch.equal(a, b) instead, which no
  exercise cell may use": the pointer now sits inside the reason.
"""

from __future__ import annotations

import pytest
import torch

from utils.exercises.definition import TORCH_ATTENTION
from utils.exercises.forbidden import unsafe_in_source
from utils.exercises.runner import run_cases

REACHED_UNDER_ANOTHER_NAME = {  # the cell -> the module it reaches
    "testing": ("def f(x):\n    return torch.distributions.kl.torch.testing.assert_close(x, x)\n", "torch.testing"),
    "masked": ("def f(x):\n    return torch.distributions.kl.torch.masked.amax(x)\n", "torch.masked"),
    "sparse": ("def f(x):\n    return torch.distributions.kl.torch.sparse.mm(x, x)\n", "torch.sparse"),
    "ao": ("def f(x):\n    return torch.distributions.kl.torch.ao.quantization.get_default_custom_config_dict()\n",
           "torch.ao"),
    "alias": ("def f(x):\n    k = torch.distributions.kl\n    return k.torch.testing.assert_close(x, x)\n",
              "torch.testing"),
}
FAIR = [
    "def f(x):\n    return torch.distributions.constraints.simplex.check(x)\n",
    "def f(x):\n    return torch.distributions.Categorical(logits=x).entropy()\n",
    "def f(x):\n    w = torch.empty(2, 2)\n    nn.init.xavier_uniform_(w)\n    return x + w.sum()\n",
    "def f(x):\n    return torch.distributions.kl.torch.zeros(2) + x\n",  # torch itself, by whatever name
]


@pytest.mark.parametrize("name", sorted(REACHED_UNDER_ANOTHER_NAME))
def test_a_module_reached_under_another_module_s_name_counts_by_its_own(name):
    cell, module = REACHED_UNDER_ANOTHER_NAME[name]
    said = unsafe_in_source(cell)
    assert said is not None and f"{module} is a module an exercise cell may not use" in said, said


@pytest.mark.parametrize("cell", FAIR)
def test_fair_reaches_through_allowed_modules_stay_fair(cell):
    assert unsafe_in_source(cell) is None


def test_the_self_check_pointer_sits_inside_the_reason():
    said = unsafe_in_source("def f(x):\n    torch.testing.assert_close(x, x)\n    return x\n")
    assert said.endswith("; to check a result in the cell, use torch.allclose(a, b) or torch.equal(a, b))"), said


def test_torch_s_quantization_attention_classes_are_forbidden_attention():
    assert {"torch.ao.nn.quantizable.MultiheadAttention", "torch.ao.nn.quantized.MultiheadAttention"} <= set(
        TORCH_ATTENTION)


_MINE = type("Mine", (torch.nn.MultiheadAttention,), {})
_QUANTIZABLE = torch.ao.nn.quantizable.MultiheadAttention


@pytest.mark.parametrize("make", [
    lambda: _QUANTIZABLE(4, 1, bias=False),  # R26's class, reached without its name (a config dict's value)
    lambda: _MINE(4, 1),  # any subclass made before the call
    lambda: torch.nn.MultiheadAttention(4, 1),
])
def test_a_forbidden_module_class_and_its_subclasses_cannot_be_made_during_the_call(make):
    def uses(x):
        layer = make()
        return layer.forward(x, x, x, need_weights=False)[0]

    outcome = run_cases(uses, [{"x": torch.randn(3, 1, 4)}], TORCH_ATTENTION)[0]
    assert outcome.forbidden is not None and outcome.output is None, outcome
    assert torch.nn.MultiheadAttention(4, 1)(torch.ones(2, 1, 4), torch.ones(2, 1, 4), torch.ones(2, 1, 4))[0] \
        .shape == (2, 1, 4)  # restored after the call
