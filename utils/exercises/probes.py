"""Probes: find the faulty part of a wrong answer from what the learner's function does.

When no listed :class:`~utils.exercises.definition.Mistake` reproduces a learner's output, the judge
asks the probes before it falls back to the exercise's fixed hint. A probe reads what the learner's
function did and returns a short observation in the learner's terms (``"your output is √D times the
reference's"``), or None when it sees nothing. The first observation found wins; the judge prints it
as ``"{observation} ({where})"``.

Two kinds:

* **Relations** read from outcomes already recorded (no extra run): a failing case's output compared
  with the reference's, e.g. a constant factor, a transpose, a shift by one position, differences
  confined to masked rows. They run wherever the judge runs.
* **Controlled inputs** (:class:`Probe`): inputs chosen to tell the parts of an exercise apart, run
  through the learner's function after the cases by the same runner (in the check cell's kernel or
  the grader's sandbox), then read on the trusted side by ``explain``. Every exercise gets the
  built-in generic probes (determinism, finiteness, keeps dtype); an exercise adds its own with
  ``Exercise(..., probes=(Probe(...), ...))``. Probe outcomes never count toward points or parts,
  and probe inputs are not hidden cases: an observation may show them.

Contract of a :class:`Probe`::

    Probe(name, make_inputs, explain)
    make_inputs(gen: torch.Generator) -> list[Case]          # trusted side; deterministic in gen
    explain(reference, inputs, outcomes) -> str | None       # trusted side; never calls the learner
        reference: the exercise's reference function (call it on clone_case(inputs[i]) yourself)
        inputs:    the list make_inputs returned
        outcomes:  one Outcome per input, what the learner's function did (output or error); shorter
                   than inputs when the run stopped early (a MemoryError): check before indexing
        returns:   one sentence the learner can act on, through tr("literal"), or None
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from utils.exercises.common import Case, Outcome

Explain = Callable[[Callable[..., Any], list[Case], list[Outcome]], "str | None"]


@dataclass(frozen=True)
class Probe:
    """Inputs chosen to tell an exercise's parts apart, and how to read the learner's outcomes on them.

    Args:
        name: short id, e.g. ``"mask_only"``; used by tests and in no learner-facing text.
        make_inputs: ``make_inputs(gen) -> list[Case]``; keyword arguments of the learner's function,
            deterministic in ``gen`` (a seeded ``torch.Generator``). Keep them small: they run on every
            check.
        explain: ``explain(reference, inputs, outcomes) -> str | None`` (see the module docstring).
    """

    name: str
    make_inputs: Callable[[torch.Generator], list[Case]]
    explain: Explain
