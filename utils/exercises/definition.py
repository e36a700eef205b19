"""One definition per exercise, shared by the notebook check cells, the grader and the pipeline tests.

An :class:`Exercise` says everything about one exercise: its id (``"ch2.causal_mask"``), the name of
the function the learner writes, a reference solution, a generator of random test cases, the names
the learner may not call, its points, and a list of :class:`Mistake` s: plausible wrong answers, each
with the diagnosis a learner should read when their output matches it.

Checking is split in two halves, in two modules, so that the grader can put a process boundary
between them:

* :mod:`utils.exercises.runner` calls the learner's function on every case and records an
  :class:`~utils.exercises.common.Outcome` (the raw output, or the error it raised, and which inputs
  it changed in place). In a notebook it runs in the kernel; in the grader it runs in the sandboxed
  worker, which imports nothing else of this package but :mod:`utils.exercises.common`.
* :mod:`utils.exercises.judging` compares the outcomes with the reference, computed afresh, and
  returns a :class:`~utils.exercises.judging.Verdict`. It runs in the trusted process and never calls
  the learner's code.

:func:`utils.exercises.check_cell.run_public_check` glues the two together for a check cell.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from utils.exercises.common import Case


@dataclass(frozen=True)
class Mistake:
    """A plausible wrong answer and what to tell a learner whose output matches it.

    Args:
        name: short id, e.g. ``"no_scale"``; used by tests.
        fn: a wrong implementation with the same signature as the reference.
        diagnosis: one sentence the learner can act on.
    """

    name: str
    fn: Callable[..., Any]
    diagnosis: str


@dataclass(frozen=True)
class Exercise:
    """Everything about one exercise. See the module docstring.

    Args:
        id: ``"<chapter>.<function name>"``, e.g. ``"ch1.project_qkv"``; the notebook metadata and the
            grader use it.
        reference: the correct function, named ``<function name>_reference`` in its chapter module.
        make_cases: ``make_cases(rng: random.Random, gen: torch.Generator) -> list[Case]``; random
            inputs with varied shapes including edge shapes. Never returns the same cases for two seeds.
        points: the points the exercise is worth (the notebook metadata must agree; a test checks).
        mistakes: plausible wrong answers with diagnoses, at least two per exercise.
        forbidden: dotted names the learner may not use, e.g.
            ``"torch.nn.functional.scaled_dot_product_attention"``; checked in the source (AST) and at
            run time.
        atol, rtol: tolerances for float outputs (compared in float64).
        hint: shown after a generic mismatch.
        gradients: also require that the gradients the reference passes back reach the learner's inputs,
            finite, through a backward pass that works (catches ``.detach()``, ``torch.no_grad()``, an
            in-place write autograd needs, NaN gradients hidden by a right output). For exercises whose
            function is meant to be trained through.
    """

    id: str
    reference: Callable[..., Any]
    make_cases: Callable[[random.Random, torch.Generator], list[Case]]
    points: int = 1
    mistakes: Sequence[Mistake] = ()
    forbidden: tuple[str, ...] = ()
    atol: float = 1e-5
    rtol: float = 1e-4
    hint: str = ""
    gradients: bool = False

    @property
    def func_name(self) -> str:
        return self.id.split(".", 1)[1]

    @property
    def chapter(self) -> str:
        return self.id.split(".", 1)[0]

    def cases(self, seed: int = 0) -> list[Case]:
        """The test cases for ``seed``: the same seed gives the same cases."""
        gen = torch.Generator().manual_seed(seed)
        return self.make_cases(random.Random(seed), gen)
