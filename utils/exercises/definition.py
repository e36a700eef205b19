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

**Public and hidden cases.** The *public* cases are ``make_cases`` at seed :data:`PUBLIC_SEED` (0): the
check cell runs them and prints a full diagnosis. The *hidden* cases are the same generator at another
seed followed by ``make_edge_cases`` (edge cases the public ones leave out); only the grader runs them,
at a seed drawn per student and ``--seed`` (:meth:`Exercise.hidden_cases`). They are made in the trusted
process: only their inputs, never their labels, reach the sandbox.

**Partial credit** (:mod:`utils.exercises.credit`): an exercise's points split across named
:class:`Part` s. Every case, public or hidden, belongs to the first part whose ``applies`` accepts it
(the last part takes the rest). A part earns its points when all its cases pass, else 0.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import torch

from utils.exercises.common import Case
from utils.exercises.probes import Probe


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


PUBLIC_SEED = 0
"""The seed of the public cases: what the check cell runs, and what the grader runs first."""

HIDDEN_CHECK_SEED = 2718
"""The seed of ``check.<name>(fn, cases="hidden")`` when no seed is given (an nbgrader hidden test, for
one). The grader itself draws a seed per student from ``--seed``; never publish the seed it uses."""

TORCH_ATTENTION = (
    "torch.nn.functional.scaled_dot_product_attention",
    "torch.nn.functional.multi_head_attention_forward",
    "torch.nn.MultiheadAttention",
    "torch.nn.attention.flex_attention.flex_attention",
    "torch.nn.attention.flex_attention.flex_attention_hop",  # what flex_attention calls; callable on its own
    "torch.nn.Transformer",
    "torch.nn.TransformerEncoder",
    "torch.nn.TransformerEncoderLayer",
    "torch.nn.TransformerDecoder",
    "torch.nn.TransformerDecoderLayer",
    # nn.MultiheadAttention's quantization subclasses (red team R26: reached without its name, forward called)
    "torch.ao.nn.quantizable.MultiheadAttention",
    "torch.ao.nn.quantized.MultiheadAttention",
)
"""torch's routines that compute attention, forbidden in every exercise whose task is attention (chapters 2,
3, 5 and 6). The static check also refuses any of these names as a string (``getattr(F, "flex_attention")``).
``torch.nn.attention.varlen.varlen_attn`` is left out: it runs only on CUDA's flash kernels (on the CPU, where
the grader runs, it raises), and blocking it at run time would import its module, about a second of CPU
time, in every exercise's process."""

TORCH_AUTODIFF = (
    "torch.autograd.grad",
    "torch.autograd.backward",  # tensor.backward() calls it: blocked at run time, read as the tensor's own statically
    "torch.autograd.forward_ad.make_dual",  # forward mode; torch.func's jvp and jacfwd call it too
    "torch.autograd.forward_ad.unpack_dual",
    "torch.autograd.forward_ad.dual_level",
    "torch.autograd.functional.jacobian",
    "torch.autograd.functional.jvp",
    "torch.autograd.functional.vjp",
    "torch.autograd.functional.hvp",
    "torch.autograd.functional.vhp",
    "torch.autograd.functional.hessian",
    "torch.func.grad",
    "torch.func.grad_and_value",
    "torch.func.vjp",
    "torch.func.jvp",
    "torch.func.jacrev",
    "torch.func.jacfwd",
    "torch.func.hessian",
    "torch.func.linearize",
)
"""torch's automatic differentiation, reverse and forward mode (red team R17: ``torch.func.jacfwd`` and
``forward_ad.make_dual`` computed chapter 6's block gradient), forbidden in every exercise whose task is a
gradient. ``torch.func.functional_call`` is left out: it calls a module with other parameters and computes no
gradient. ``grad`` and ``backward`` are refused by the static check only on a chain that resolves to torch (a
class's own ``backward`` method, a namedtuple's ``grad`` field are fair); the run time blocks every route."""

TORCH_NORMS = (
    "torch.nn.functional.layer_norm", "torch.layer_norm", "torch.nn.LayerNorm",
    "torch.nn.functional.group_norm", "torch.group_norm", "torch.nn.GroupNorm",
    "torch.nn.functional.instance_norm", "torch.instance_norm",
    "torch.nn.InstanceNorm1d", "torch.nn.InstanceNorm2d", "torch.nn.InstanceNorm3d",
    "torch.nn.LazyInstanceNorm1d", "torch.nn.LazyInstanceNorm2d", "torch.nn.LazyInstanceNorm3d",
    "torch.nn.functional.batch_norm", "torch.batch_norm",
    "torch.nn.BatchNorm1d", "torch.nn.BatchNorm2d", "torch.nn.BatchNorm3d", "torch.nn.SyncBatchNorm",
    "torch.nn.LazyBatchNorm1d", "torch.nn.LazyBatchNorm2d", "torch.nn.LazyBatchNorm3d",
    "torch.nn.functional.local_response_norm", "torch.nn.LocalResponseNorm",
)
"""torch's normalisation layers other than RMSNorm, forbidden in ``ch7.rms_norm`` (red team R17:
``F.layer_norm`` on ``cat([x, -x])`` has mean zero, so it divides by the root mean square). Computing a norm stays
allowed (``F.normalize``, ``torch.linalg.vector_norm``, ``torch.norm``): that is part of implementing RMSNorm.
torch's other names for these (``torch.native_layer_norm``, ``torch.native_batch_norm``, ``torch.batch_norm_stats``:
red team R19) are refused and blocked as their namesakes (:func:`utils.exercises.common.torch_namesakes`)."""

POINT_STEP = Fraction(1, 100)
"""Part points are exact multiples of a hundredth (kept as :class:`~fractions.Fraction`), so that a
total is exact and prints as a short decimal."""


def exact_points(value: int | str | Fraction) -> Fraction:
    """``value`` as an exact :class:`~fractions.Fraction`; raises ``ValueError`` for a float (inexact),
    a negative value or one that is not a multiple of :data:`POINT_STEP`.

    >>> exact_points("0.25"), exact_points(2)
    (Fraction(1, 4), Fraction(2, 1))
    """
    if isinstance(value, float) or isinstance(value, bool):
        raise ValueError(f"points must be an int, a decimal string or a Fraction (exact), got {value!r}")
    points = Fraction(value)
    if points < 0 or (points / POINT_STEP).denominator != 1:
        raise ValueError(f"points must be a non-negative multiple of 1/100, got {value!r}")
    return points


def points_text(value: int | Fraction) -> str:
    """Points as a spreadsheet reads them: ``2``, ``1.5``, ``0.25`` (exact: every part is in hundredths).

    >>> points_text(Fraction(3, 2)), points_text(Fraction(4, 2)), points_text(Fraction(1, 3))
    ('1.5', '2', '1/3')
    """
    value = Fraction(value)
    if value.denominator == 1:
        return str(value.numerator)
    if (value / POINT_STEP).denominator != 1:
        return str(value)  # not from a part table (never happens in a grade): still exact
    hundredths = int(value / POINT_STEP)
    sign, hundredths = ("-" if hundredths < 0 else ""), abs(hundredths)
    return f"{sign}{hundredths // 100}.{hundredths % 100:02d}".rstrip("0")


def plain_points(value: int | Fraction) -> int | Fraction:
    """An ``int`` when ``value`` is whole (so whole-point grades stay plain ints), else the Fraction."""
    value = Fraction(value)
    return value.numerator if value.denominator == 1 else value


@dataclass(frozen=True)
class Part:
    """A named share of an exercise's points, e.g. ``Part("with a mask", 1, lambda case: case["mask"] is not None)``.

    Args:
        name: what the learner reads in the feedback ("values without a mask", "float16", ...).
        points: an int, a decimal string ("0.5") or a Fraction; exact, in hundredths.
        applies: ``applies(case) -> bool`` on a case's inputs; None takes every case (the last part).
    """

    name: str
    points: int | str | Fraction
    applies: Callable[[Case], bool] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "points", exact_points(self.points))


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
            finite, through a backward pass that works, and equal the reference's along a fixed direction
            (:mod:`utils.exercises.gradient_check`: catches ``.detach()``, ``torch.no_grad()`` on the whole or
            a part, an in-place write autograd needs, NaN gradients hidden by a right output). For exercises
            whose function is meant to be trained through.
        make_edge_cases: ``make_edge_cases(rng, gen) -> list[Case]``: edge cases only the grader runs
            (hidden), e.g. fully masked rows, float16 or bfloat16, L != S, a batch of 1.
        parts: how ``points`` split (see :class:`Part`); their points must add up to ``points``. Empty:
            one part, "all cases", worth all the points.
        probes: :class:`~utils.exercises.probes.Probe` s, inputs chosen to tell this exercise's parts
            apart and how to read the learner's outcomes on them; run after the cases, never counted
            toward points. The generic probes (determinism, finiteness, keeps dtype) need no entry.
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
    make_edge_cases: Callable[[random.Random, torch.Generator], list[Case]] | None = None
    parts: tuple[Part, ...] = ()
    probes: tuple[Probe, ...] = ()

    def __post_init__(self) -> None:
        if self.parts:
            names = [part.name for part in self.parts]
            if len(set(names)) != len(names):
                raise ValueError(f"{self.id}: two parts share a name: {names}")
            if self.parts[-1].applies is not None:
                raise ValueError(f"{self.id}: the last part must take every remaining case (applies=None)")
            total = sum(part.points for part in self.parts)
            if total != self.points:
                raise ValueError(f"{self.id}: its parts add up to {points_text(total)} points, not {self.points}")

    @property
    def func_name(self) -> str:
        return self.id.split(".", 1)[1]

    @property
    def chapter(self) -> str:
        return self.id.split(".", 1)[0]

    def cases(self, seed: int = PUBLIC_SEED) -> list[Case]:
        """The test cases for ``seed``: the same seed gives the same cases."""
        gen = torch.Generator().manual_seed(seed)
        return self.make_cases(random.Random(seed), gen)

    def public_cases(self) -> list[Case]:
        """What the check cell runs: ``cases(PUBLIC_SEED)``."""
        return self.cases(PUBLIC_SEED)

    def hidden_cases(self, seed: int = HIDDEN_CHECK_SEED) -> list[Case]:
        """What only the grader runs: the same generator at ``seed``, then the edge cases for ``seed``."""
        if seed == PUBLIC_SEED:
            raise ValueError(f"seed {PUBLIC_SEED} gives the public cases; hidden cases need another seed")
        rng, gen = random.Random(seed), torch.Generator().manual_seed(seed)
        cases = self.make_cases(rng, gen)
        if self.make_edge_cases is not None:
            cases += self.make_edge_cases(rng, gen)
        return cases

    def part_list(self) -> tuple[Part, ...]:
        """The exercise's parts: ``parts``, or one part "all cases" worth all its points."""
        return self.parts or (Part("all cases", self.points),)

    def part_of(self, case: Case) -> str:
        """The name of the part ``case`` belongs to: the first whose ``applies`` accepts it."""
        for part in self.part_list():
            if part.applies is None or part.applies(case):
                return part.name
        raise AssertionError("unreachable: the last part takes every case")
