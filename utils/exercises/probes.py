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

import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from utils.exercises.common import Case, Outcome, clone_case, plain_copy
from utils.exercises.relations import Failure, ProbedExercise, relate
from utils.i18n.messages import tr

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


PROBE_SEED = 34
"""The seed of every probe's ``make_inputs`` generator: probe inputs are the same on every run."""

LARGE = 1000.0
"""The finiteness probe multiplies the first public case's floating inputs by this."""

PREAMBLE_NAMES = frozenset({"math", "torch", "nn", "F"})


@dataclass(frozen=True)
class Evidence:
    """What the probes read besides the cases: the probe inputs, the learner's outcomes on them (in the
    order of :func:`probe_inputs`), and the notebook variables the function reads (check cell only)."""

    inputs: Sequence[Case] = ()
    outcomes: Sequence[Outcome] = ()
    notebook_names: tuple[str, ...] = ()


def _generic(exercise: ProbedExercise) -> list[tuple[str, list[Case]]]:
    first = exercise.public_cases()[:1]
    if not first:
        return []
    case = first[0]
    double = {k: v.double() if isinstance(v, torch.Tensor) and v.is_floating_point() else v for k, v in case.items()}
    large = {k: v * LARGE if isinstance(v, torch.Tensor) and v.is_floating_point() else v for k, v in case.items()}
    biggest = max(exercise.public_cases(), key=_size)  # dropout with few units may draw the same twice
    return [("determinism", [clone_case(biggest) for _ in range(3)]), ("dtype", [double]), ("finite", [large])]


def _size(case: Case) -> int:
    return sum(v.numel() for v in case.values() if isinstance(v, torch.Tensor))


def _groups(exercise: ProbedExercise) -> list[tuple[str, list[Case]]]:
    groups = _generic(exercise)
    for probe in exercise.probes:
        groups.append((probe.name, list(probe.make_inputs(torch.Generator().manual_seed(PROBE_SEED)))))
    return groups


def probe_inputs(exercise: ProbedExercise) -> list[Case]:
    """Every probe input of ``exercise``, generic ones first, in the order the runner runs them (after
    the cases). Trusted side; the same list on every call."""
    return [case for _, cases in _groups(exercise) for case in cases]


def notebook_names(fn: Callable[..., Any]) -> tuple[str, ...]:
    """The notebook variables ``fn`` reads: global names of its code (and of functions nested in it) bound
    to data (a tensor, a number, a list…) in its globals, not to a module, function or class, and not
    one of the preamble's ``math torch nn F``. A kernel-side inspection: it never calls ``fn``."""
    code = getattr(fn, "__code__", None)
    scope = getattr(fn, "__globals__", None)
    if code is None or not isinstance(scope, dict):
        return ()
    names: list[str] = []
    todo = [code]
    while todo:
        current = todo.pop()
        names += [n for n in current.co_names if n not in names]
        todo += [c for c in current.co_consts if hasattr(c, "co_names")]
    found = []
    for name in names:
        if name in PREAMBLE_NAMES or name not in scope or name.startswith("__"):
            continue
        value = scope[name]
        if not (callable(value) or isinstance(value, types.ModuleType)):
            found.append(name)
    return tuple(found)


def evidence_for(exercise: ProbedExercise, outcomes: Sequence[Outcome],
                 fn: Callable[..., Any] | None = None) -> Evidence:
    """The :class:`Evidence` from the outcomes on :func:`probe_inputs` (and ``fn``'s notebook variables)."""
    return Evidence(probe_inputs(exercise), list(outcomes), notebook_names(fn) if fn is not None else ())


def observe(exercise: ProbedExercise, failures: Sequence[Failure], evidence: Evidence | None = None
            ) -> tuple[str, int | None] | None:
    """The first observation that explains ``failures`` (``(index, case, outcome, reason)`` as the judge
    records them), and the position in ``failures`` of the case it is about, or None when it is about the
    probes' own inputs (the judge then cites the first failing case as such); None when no probe fits.
    Order: globals, determinism, an input added to the output, the exercise's own probes, finiteness, other
    relations to the reference, dtype."""
    evidence = evidence or Evidence()
    for position, (_, _, outcome, _) in enumerate(failures):
        if outcome.error and outcome.error[0] == "NameError":
            name = _undefined_name(outcome.error[1])
            if name:
                return tr("your function uses `{name}`, which it neither receives nor defines (a notebook "
                          "variable? the grader runs your exercise cell alone): use its argument instead, or "
                          "define it inside the function", name=name), position
    if evidence.notebook_names:
        return tr("your function reads the notebook variable `{name}`; use its argument instead (the grader runs "
                  "your exercise cell alone, without your notebook's variables)",
                  name=evidence.notebook_names[0]), None
    groups, outcomes = _groups(exercise), list(evidence.outcomes)
    by_name: dict[str, tuple[list[Case], list[Outcome]]] = {}
    start = 0
    if list(evidence.inputs):
        for name, cases in groups:
            by_name[name] = (cases, outcomes[start:start + len(cases)])
            start += len(cases)
    determinism = _safe(_nondeterministic, *by_name.get("determinism", ([], [])))
    if determinism and _safe(relate, exercise, failures, ("plus_bias",)):
        return tr("your function gives a different output on every call, and each differs from the reference's "
                  "by one vector added to every token: a layer built inside your function (a new nn.Linear draws "
                  "new random weights and a bias on every call); use the weights you are given, x @ w"), None
    if determinism:
        return determinism, None
    residual = _safe(relate, exercise, failures, ("plus_input",))  # unmistakable: before the probes' guesses
    if residual:
        return residual
    for probe in exercise.probes:
        inputs, got = by_name.get(probe.name, ([], []))
        text = _safe(probe.explain, exercise.reference, inputs, got) if inputs else None
        if text:
            return text, None
    inputs, got = by_name.get("finite", ([], []))
    overflow = _safe(_finite, exercise, inputs, got) if inputs else None
    if overflow:  # true of the function whatever the cases show, and the cause of many of their differences
        return overflow, None
    relation = _safe(relate, exercise, failures)
    if relation:
        return relation
    if any(reason is not None and reason[0] == "dtype" for _, _, _, reason in failures):
        return None  # a failing case already shows the dtype it lost, in its own terms
    inputs, got = by_name.get("dtype", ([], []))
    text = _safe(_keeps_dtype, exercise, inputs, got) if inputs else None
    return (text, None) if text else None


def _safe(fn: Callable[..., Any], *args: Any) -> Any:
    try:  # a probe must never stop the judge: a hostile output, a probe bug, are "nothing observed"
        return fn(*args)
    except Exception:
        return None


def _undefined_name(message: str) -> str:
    parts = message.split("'")
    return parts[1] if len(parts) >= 3 and "is not defined" in message else ""


def _nondeterministic(inputs: list[Case], outcomes: list[Outcome]) -> str | None:
    if len(outcomes) < 3 or any(o.error or o.forbidden for o in outcomes[:3]):
        return None
    a, b, c = (plain_copy(o.output) for o in outcomes[:3])
    if _equal(a, b) and _equal(a, c):
        return None
    return tr("your function gives different outputs when called twice on the same inputs: something random is "
              "left on (dropout, `torch.rand`…); a check must see the same output every time")


def _equal(a: Any, b: Any) -> bool:
    """Whether two outputs of the same call are the same; anything but tensors, numbers, text and ``None``
    (an object of the learner's own class, whose ``==`` may lie) counts as the same: no evidence of
    randomness."""
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.shape == b.shape and bool(torch.equal(torch.nan_to_num(a.double()), torch.nan_to_num(b.double())))
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, (torch.Tensor, tuple, list)) or isinstance(b, (torch.Tensor, tuple, list)):
        return False  # a tensor (or a sequence) one time, something else the other
    plain = (bool, int, float, str, type(None))
    if type(a) in plain and type(b) in plain:
        return type(a) is type(b) and a == b
    return True


def _first_tensor(value: Any) -> torch.Tensor | None:
    if isinstance(value, (tuple, list)):
        value = value[0] if value else None
    return value if isinstance(value, torch.Tensor) else None


def _keeps_dtype(exercise: ProbedExercise, inputs: list[Case], outcomes: list[Outcome]) -> str | None:
    if not outcomes or outcomes[0].error:
        return None
    expected = _first_tensor(plain_copy(exercise.reference(**clone_case(inputs[0]))))
    got = _first_tensor(plain_copy(outcomes[0].output))
    if expected is None or got is None or expected.dtype != torch.float64 or got.dtype == torch.float64:
        return None
    return tr("your function does not keep its input's dtype: float64 inputs come back as {dtype} (look for a "
              "`.float()` cast, or a tensor made without `dtype=`)", dtype=str(got.dtype).replace("torch.", ""))


def _finite(exercise: ProbedExercise, inputs: list[Case], outcomes: list[Outcome]) -> str | None:
    if not outcomes or outcomes[0].error:
        return None
    expected = _first_tensor(plain_copy(exercise.reference(**clone_case(inputs[0]))))
    got = _first_tensor(plain_copy(outcomes[0].output))
    if expected is None or got is None or not got.is_floating_point() or not expected.is_floating_point():
        return None  # a bool or integer output (a mask) cannot overflow: its dtype is what a failing case shows
    if not torch.isfinite(expected).all() or torch.isfinite(got).all():
        return None
    return tr("with inputs {scale:g} times larger your output contains NaN or inf where the reference's is finite: "
              "something overflows (e.g. `exp` of large scores: subtract the row maximum first)", scale=LARGE)
