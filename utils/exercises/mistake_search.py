"""Which listed :class:`~utils.exercises.definition.Mistake` earns its name on a failing learner's cases.

Trusted side only, a part of :mod:`utils.exercises.judging` (which prints what is found): a mistake is
*named* when it reproduces the learner on every case run, *tied* with others when the cases cannot tell
them apart, and otherwise the one that reproduces the most failing cases is a *partial* match, which
the judge reports as an observation, never as a diagnosis.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from utils.exercises.common import ERROR_MESSAGE_CHARS, Case, Outcome, clone_case, one_line, plain_copy
from utils.exercises.definition import Exercise, Mistake

Compare = Callable[[Any, Any, float, float], "str | None"]
"""The judge's comparison: None when two outputs match within a tolerance, else a reason."""


@dataclass(frozen=True)
class Match:
    """How far one listed mistake reproduces the learner on the cases run (indices into those cases)."""

    mistake: Mistake
    explained: tuple[int, ...]  # failing cases where the mistake gives the learner's outcome
    missed: tuple[int, ...]  # failing cases where it does not
    passes_where_it_fails: tuple[int, ...]  # cases the learner passes and the mistake does not
    ran: tuple[int, ...]  # every case run

    @property
    def everywhere(self) -> bool:
        return not self.missed and not self.passes_where_it_fails


@dataclass(frozen=True)
class MistakeSearch:
    """What the listed mistakes say about a failing learner (see :func:`_best_mistake`)."""

    named: Match | None = None  # the mistake that earns its name
    tied: tuple[Match, ...] = ()  # mistakes with different diagnoses that all reproduce every case
    partial: Match | None = None  # the mistake that reproduces the most failing cases, not all


def best_mistake(exercise: Exercise, failures: Sequence[tuple[int, Case, Outcome, tuple[str, str] | None]],
                 ran: Sequence[tuple[Case, Outcome]], compare: Compare) -> MistakeSearch:
    """Which listed mistake, if any, earns its name on the cases ``ran`` (``failures`` are the failing ones).

    A mistake is **named** only when it reproduces the learner's outcome (output, or error type and
    message) on every case run, failing and passing alike, and no listed mistake with another diagnosis
    does too: every other one differs from the learner, hence from it, on some case run. Mistakes with
    different diagnoses that all reproduce every case are **tied**: the cases cannot tell them apart.
    Otherwise the **partial** match is the mistake that reproduces the most failing cases (the first
    listed wins a tie): what it explains is an observation, never a diagnosis.
    """
    failing = {index: outcome for index, _, outcome, _ in failures}
    matches = []
    for mistake in exercise.mistakes:
        explained = tuple(i for i, outcome in failing.items()
                          if reproduces(exercise, mistake, ran[i][0], outcome, compare))
        if not explained:
            continue
        missed = tuple(i for i in failing if i not in explained)
        passes = tuple(i for i, (case, outcome) in enumerate(ran)
                       if i not in failing and not reproduces(exercise, mistake, case, outcome, compare))
        matches.append(Match(mistake, explained, missed, passes, tuple(range(len(ran)))))
    everywhere = [m for m in matches if m.everywhere]
    diagnoses = {m.mistake.diagnosis: m for m in reversed(everywhere)}  # the first listed per diagnosis
    if len(diagnoses) == 1:
        return MistakeSearch(named=everywhere[0])
    if diagnoses:
        return MistakeSearch(tied=tuple(m for m in everywhere if diagnoses[m.mistake.diagnosis] is m))
    best = max(matches, key=lambda m: len(m.explained), default=None)  # max keeps the first of equals
    return MistakeSearch(partial=best)


def reproduces(exercise: Exercise, mistake: Mistake, case: Case, outcome: Outcome, compare: Compare) -> bool:
    """Whether ``mistake`` gives the learner's output, or raises the learner's error, on ``case`` (on a
    case the learner passes, that is the reference's output, within the exercise's tolerance). Compared
    both ways round: a float 0/1 mask and an integer one are different slips."""
    kind, wrong = mistake_outcome(mistake, case)
    if kind == "error":
        return outcome.error == wrong
    return outcome.error is None and all(compare(got, expected, exercise.atol, exercise.rtol) is None
                                         for got, expected in ((outcome.output, wrong), (wrong, outcome.output)))


_OUTCOMES: dict[tuple[Any, tuple], tuple[str, Any]] = {}
_LOCK = threading.Lock()
OUTCOMES_KEPT = 4096
"""How many mistakes' outcomes :func:`mistake_outcome` keeps (the oldest go first)."""


def mistake_outcome(mistake: Mistake, case: Case) -> tuple[str, Any]:
    """``("output", its output)`` or ``("error", (type name, message))``: what ``mistake`` does on ``case``.

    Kept per mistake and per case's contents (:func:`case_key`: every tensor's dtype, shape, strides and bytes):
    every failing learner of a class, and every case a search runs again, asks the same mistakes about the same
    public cases, and a listed mistake is a fixed function of its inputs. The output kept is shared: it is only
    compared, never changed. A case whose contents cannot be keyed is run every time."""
    key = _key_of(case)
    with _LOCK:  # the grader judges its job slots' students in threads of one process
        kept = _OUTCOMES.get((mistake.fn, key)) if key is not None else None
    if kept is not None:
        return kept
    try:
        found: tuple[str, Any] = ("output", plain_copy(mistake.fn(**clone_case(case))))
    except Exception as exc:
        found = ("error", (type(exc).__name__, one_line(str(exc), ERROR_MESSAGE_CHARS)))
    if key is not None:
        with _LOCK:
            while _OUTCOMES and len(_OUTCOMES) >= OUTCOMES_KEPT:
                del _OUTCOMES[next(iter(_OUTCOMES))]
            _OUTCOMES[(mistake.fn, key)] = found
    return found


_KEYS: dict[int, tuple[Case, tuple | None]] = {}


def _key_of(case: Case) -> tuple | None:
    """:func:`case_key`, kept for the case object itself (the judge asks about the same cases many times; a case
    is never changed in place: every function, the learner's and the mistakes', gets a copy)."""
    with _LOCK:
        kept = _KEYS.get(id(case))
    if kept is not None and kept[0] is case:
        return kept[1]
    key = case_key(case)
    with _LOCK:
        while _KEYS and len(_KEYS) >= OUTCOMES_KEPT:
            del _KEYS[next(iter(_KEYS))]
        _KEYS[id(case)] = (case, key)
    return key


def case_key(case: Case) -> tuple | None:
    """A hashable summary of everything a case holds (each tensor's dtype, shape, strides, offset, whether it
    requires a gradient, and a digest of its bytes), or None when it holds something else (a tensor that is not
    a plain CPU one, an object, a dict)."""
    try:
        return tuple(sorted((name, _value_key(value)) for name, value in case.items()))
    except Exception:  # noqa: BLE001  (_Unkeyable, or a tensor whose bytes cannot be read: it is run every time)
        return None


class _Unkeyable(Exception):
    pass


def _value_key(value: Any) -> tuple:
    if isinstance(value, torch.Tensor):
        if type(value) is not torch.Tensor or value.layout != torch.strided or value.device.type != "cpu" \
                or value.is_conj() or value.is_neg():
            raise _Unkeyable
        data = value.detach().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
        return ("tensor", str(value.dtype), tuple(value.shape), value.stride(), value.storage_offset(),
                value.requires_grad, hashlib.blake2b(data, digest_size=16).digest())
    if value is None or type(value) in (bool, int, float, str):
        return (type(value).__name__, value)
    if type(value) in (tuple, list):
        return (type(value).__name__, tuple(_value_key(item) for item in value))
    raise _Unkeyable
