"""The public cases tell every listed mistake apart (issue 34, section 2).

The judge names a mistake only when no listed mistake with another diagnosis reproduces the learner on
every case run (:func:`utils.exercises.judging._best_mistake`). So for a learner who makes a listed
mistake to read its diagnosis in the check cell, the public cases must hold, for every pair of mistakes
with different diagnoses, a case where their outcomes differ, and for every mistake a case where it
differs from the reference. Mistakes that share a diagnosis (two ways to write one slip) may coincide.
"""

from __future__ import annotations

import itertools

import pytest

from utils.exercises.common import ERROR_MESSAGE_CHARS, clone_case, one_line, plain_copy
from utils.exercises.judging import compare
from utils.exercises.registry import all_exercises

EXERCISES = list(all_exercises().values())


def _outcome(fn, case):
    try:
        return "output", plain_copy(fn(**clone_case(case)))
    except Exception as exc:  # a mistake may raise: its error is its outcome, as the judge reads it
        return "error", (type(exc).__name__, one_line(str(exc), ERROR_MESSAGE_CHARS))


def _differ(exercise, a, b) -> bool:
    """Whether two outcomes differ as the judge sees them (either way round, within the tolerance)."""
    if a[0] != b[0] or a[0] == "error":
        return a != b
    return any(compare(x, y, exercise.atol, exercise.rtol) is not None for x, y in ((a[1], b[1]), (b[1], a[1])))


def _coinciding(exercise) -> tuple[list[str], list[str]]:
    """(mistakes equal to the reference on every public case, pairs equal to each other on every one)."""
    cases = exercise.public_cases()
    reference = [_outcome(exercise.reference, case) for case in cases]
    outcomes = {m.name: [_outcome(m.fn, case) for case in cases] for m in exercise.mistakes}
    silent = [m.name for m in exercise.mistakes
              if not any(_differ(exercise, o, r) for o, r in zip(outcomes[m.name], reference))]
    tied = [f"{a.name} ~ {b.name}" for a, b in itertools.combinations(exercise.mistakes, 2)
            if a.diagnosis != b.diagnosis
            and not any(_differ(exercise, x, y) for x, y in zip(outcomes[a.name], outcomes[b.name]))]
    return silent, tied


@pytest.mark.parametrize("exercise", EXERCISES, ids=lambda e: e.id)
def test_public_cases_tell_the_mistakes_apart(exercise):
    silent, tied = _coinciding(exercise)
    assert not silent, f"{exercise.id}: no public case fails these mistakes: {silent}"
    assert not tied, (f"{exercise.id}: no public case tells these mistakes apart (add one to make_cases, or "
                      f"give them one diagnosis if they are one slip): {tied}")


def test_the_check_sees_a_coincidence():
    """The helper itself: two mistakes that are the same function coincide; a mistake equal to the
    reference is silent."""
    from utils.exercises.definition import Exercise, Mistake

    def make_cases(rng, gen):
        return [{"x": 1.0}, {"x": -2.0}]

    exercise = Exercise(id="ch9.double", reference=lambda x: 2 * x, make_cases=make_cases, mistakes=(
        Mistake("a", lambda x: 3 * x, "A"), Mistake("b", lambda x: x + 2 * x, "B"), Mistake("c", lambda x: x * 2, "C")))
    assert _coinciding(exercise) == (["c"], ["a ~ b"])
