"""Red team R22 (issue 35): code a learner leaves to run later, outside the run-time block.

* A function hung a paused generator (or an object with ``__del__``) on an input; its ``finally`` ran when the runner
  let go of the inputs, outside :func:`~utils.exercises.runner.forbid`, and wrote a forbidden computation into the
  output already recorded, which was the learner's own tensor (ch6 ``block_score_grad`` 2/2 through ``backward()``
  on all three graders). The runner now records a copy of the values (:func:`~utils.exercises.common.plain_copy`).
* A class defined a special method the static check did not see: ``if True: def __del__``, a loop, ``with``, walrus,
  ``import ... as``, ``match`` capture or nested class binding a dunder. Every binding in the class's scope counts.
"""

from __future__ import annotations

import pytest
import torch

from utils.exercises.forbidden import unsafe_in_source
from utils.exercises.runner import load_function, run_cases

LATER_GENERATOR = (
    "def later(out):\n"
    "    try:\n"
    "        yield\n"
    "    finally:\n"
    "        out.copy_(torch.logsumexp(torch.zeros(2, 3), -1))\n"
    "def fn(x):\n"
    "    out = torch.zeros(2)\n"
    "    g = later(out)\n"
    "    next(g)\n"
    "    x.later = g\n"
    "    return out\n"
)
LATER_DEL = (
    "class Later:\n"
    "    def __init__(self, out):\n"
    "        self.out = out\n"
    "    if True:\n"
    "        def __del__(self):\n"
    "            self.out.copy_(torch.logsumexp(torch.zeros(2, 3), -1))\n"
    "def fn(x):\n"
    "    out = torch.zeros(2)\n"
    "    x.later = Later(out)\n"
    "    return out\n"
)


@pytest.mark.parametrize("source", [LATER_GENERATOR, LATER_DEL], ids=["generator_finally", "del"])
def test_code_run_after_the_call_cannot_rewrite_the_recorded_output(source):
    fn = load_function(source, "fn", ())  # the run-time half: the static check is a separate line
    outcomes = run_cases(fn, [{"x": torch.ones(2)}, {"x": torch.ones(2)}], forbidden=["torch.logsumexp"])
    for outcome in outcomes:
        assert torch.equal(outcome.output, torch.zeros(2)), outcome  # what the function returned, not log(3)


def test_the_recorded_output_is_a_copy_even_of_a_plain_tensor():
    kept = {}

    def fn(x):
        kept["out"] = torch.zeros(2)
        return kept["out"]

    outcome = run_cases(fn, [{"x": torch.ones(2)}])[0]
    kept["out"].fill_(7.0)
    assert torch.equal(outcome.output, torch.zeros(2))


INDIRECT = {
    "if_def_del": "class A:\n    if True:\n        def __del__(self):\n            pass\n",
    "for_target": "class A:\n    for __torch_function__ in [1]:\n        pass\n",
    "walrus": "class A:\n    [(__float__ := 1)]\n",
    "with_as": "class A:\n    with A() as __x__:\n        pass\n",
    "import_as": "class A:\n    from math import floor as __eq__\n",
    "nested_class": "class A:\n    class __x__:\n        pass\n",
    "match_capture": "class A:\n    match 1:\n        case __y__:\n            pass\n",
    "assigned_lambda": "class A:\n    __eq__ = lambda s, o: True\n",
    "try_except_as": "class A:\n    try:\n        pass\n    except Exception as __e__:\n        pass\n",
}


@pytest.mark.parametrize("name", list(INDIRECT))
def test_a_special_method_bound_any_way_in_a_class_body_is_refused(name):
    said = unsafe_in_source(INDIRECT[name])
    assert said is not None and "a class may define only these special methods" in said, (name, said)


FAIR = {
    "init_eq_slots": "class A:\n    __slots__ = ('a',)\n    def __init__(self):\n        self.a = 1\n"
                     "    def __eq__(self, other):\n        return True\n",
    "helper_in_if": "class A:\n    if True:\n        def helper(self):\n            __local__ = 1\n"
                    "            return __local__\n",
    "dataclass": "import dataclasses\n@dataclasses.dataclass\nclass P:\n    a: int = 1\n"
                 "    def __post_init__(self):\n        pass\n",
    "module": "class Norm(nn.Module):\n    def __init__(self, d):\n        super().__init__()\n"
              "        self.w = nn.Parameter(torch.ones(d))\n    def forward(self, x):\n        return x * self.w\n",
}


@pytest.mark.parametrize("name", list(FAIR))
def test_fair_classes_still_pass(name):
    assert unsafe_in_source(FAIR[name]) is None
