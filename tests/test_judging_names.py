"""A listed mistake must earn its name (issue 34, section 2).

The judge names a :class:`~utils.exercises.definition.Mistake` only when it reproduces the learner on
every case run (failing and passing alike) and no mistake with another diagnosis does too. Otherwise it
says what it observed, never a guess stated as fact. A synthetic exercise makes each situation exact:
the reference doubles its input; the mistakes are written to match the learner on chosen cases only.
"""

from __future__ import annotations

import random

import torch

from utils.exercises.common import Status
from utils.exercises.definition import Exercise, Mistake
from utils.exercises.judging import judge
from utils.exercises.runner import run_cases

POSITIVE = torch.tensor([1.0, 2.0])
NEGATIVE = torch.tensor([-1.0, -3.0])
MIXED = torch.tensor([4.0, -0.5, 2.0])
TRIPLED = "TRIPLED: you multiplied by 3"
TRIPLED_POSITIVE = "TRIPLED_POSITIVE: you tripled the positive entries only"
PLUS_ONE = "PLUS_ONE: you added 1 after doubling"


def _double(x):
    return 2 * x


def _tripled(x):
    return 3 * x


def _tripled_positive(x):
    return torch.where(x > 0, 3 * x, 2 * x)


def _plus_one(x):
    return 2 * x + 1


def _exercise(*mistakes: Mistake, cases=(POSITIVE, NEGATIVE, MIXED)) -> Exercise:
    def make_cases(rng: random.Random, gen: torch.Generator) -> list[dict]:
        return [{"x": x.clone()} for x in cases]

    return Exercise(id="ch9.double", reference=_double, make_cases=make_cases, mistakes=mistakes,
                    hint="multiply by 2")


def _verdict(exercise: Exercise, fn):
    cases = exercise.public_cases()
    return judge(exercise, cases, run_cases(fn, cases))


def test_a_mistake_that_matches_one_failing_case_only_is_not_named():
    """Tripled on the first case, something else on the others: TRIPLED explains case 1 only."""
    exercise = _exercise(Mistake("tripled", _tripled, TRIPLED), Mistake("plus_one", _plus_one, PLUS_ONE))

    def learner(x):
        return 3 * x if x.numel() == 2 and bool((x > 0).all()) else 5 * x

    verdict = _verdict(exercise, learner)
    assert not verdict.passed and verdict.status == Status.FAILED
    assert not verdict.message.startswith(TRIPLED), verdict.message  # not stated as the diagnosis
    assert verdict.message.startswith(f"on case 1 of 3 your function does what this known slip does: «{TRIPLED}»")
    assert "it does not explain case 2 of 3" in verdict.message, verdict.message
    assert "Hint: multiply by 2" in verdict.message  # the generic path follows the observation


def test_a_mistake_that_fails_where_the_learner_passes_is_not_named():
    """The learner triples only positive inputs: TRIPLED explains its one failing case, but would fail the
    negative case, which the learner passes."""
    exercise = _exercise(Mistake("tripled", _tripled, TRIPLED), Mistake("plus_one", _plus_one, PLUS_ONE),
                         cases=(POSITIVE, NEGATIVE))

    def learner(x):
        return 3 * x if bool((x > 0).all()) else 2 * x

    verdict = _verdict(exercise, learner)
    assert not verdict.passed
    assert not verdict.message.startswith(TRIPLED), verdict.message
    assert "but your function passes case 2 of 2" in verdict.message, verdict.message
    assert "where that slip fails" in verdict.message


def test_mistakes_that_coincide_on_every_case_are_listed_as_possibilities_not_named():
    """On positive inputs only, TRIPLED and TRIPLED_POSITIVE give the same outputs: neither is named."""
    exercise = _exercise(Mistake("tripled", _tripled, TRIPLED),
                         Mistake("tripled_positive", _tripled_positive, TRIPLED_POSITIVE),
                         cases=(POSITIVE, torch.tensor([0.5, 7.0, 3.0])))
    verdict = _verdict(exercise, _tripled)
    assert not verdict.passed
    assert not verdict.message.startswith((TRIPLED, TRIPLED_POSITIVE)), verdict.message
    assert "cannot tell which one you made" in verdict.message, verdict.message
    assert f"«{TRIPLED}»" in verdict.message and f"«{TRIPLED_POSITIVE}»" in verdict.message


def test_mistakes_that_coincide_on_the_one_case_that_ran_say_so_in_the_singular():
    """W10 saw "on all 1 cases": with one case, the line says "the one case that ran"."""
    exercise = _exercise(Mistake("tripled", _tripled, TRIPLED),
                         Mistake("tripled_positive", _tripled_positive, TRIPLED_POSITIVE), cases=(POSITIVE,))
    verdict = _verdict(exercise, _tripled)
    assert not verdict.passed and "cannot tell which one you made" in verdict.message, verdict.message
    assert verdict.message.startswith("on the one case that ran your output equals"), verdict.message
    assert "all 1 cases" not in verdict.message


def test_a_case_that_tells_them_apart_names_the_mistake_made():
    """The same two mistakes with a negative case run: each is named when it is the learner."""
    exercise = _exercise(Mistake("tripled", _tripled, TRIPLED),
                         Mistake("tripled_positive", _tripled_positive, TRIPLED_POSITIVE))
    for fn, diagnosis in ((_tripled, TRIPLED), (_tripled_positive, TRIPLED_POSITIVE)):
        verdict = _verdict(exercise, fn)
        assert verdict.message.startswith(f"{diagnosis} (case 1 of 3"), verdict.message


def test_the_mistake_that_matches_everywhere_is_named_over_one_listed_first():
    """TRIPLED is listed first and reproduces every failing case of a learner who triples positive entries
    only, but fails the negative case the learner passes: TRIPLED_POSITIVE, which matches everywhere, is
    named."""
    exercise = _exercise(Mistake("tripled", _tripled, TRIPLED),
                         Mistake("tripled_positive", _tripled_positive, TRIPLED_POSITIVE),
                         cases=(POSITIVE, NEGATIVE))
    verdict = _verdict(exercise, _tripled_positive)
    assert verdict.message.startswith(f"{TRIPLED_POSITIVE} (case 1 of 2"), verdict.message
    assert verdict.category == "values"


def test_mistakes_with_one_diagnosis_that_coincide_are_named():
    """Two ways to make the same slip (same diagnosis, same outputs): naming it is no guess."""
    exercise = _exercise(Mistake("tripled", _tripled, TRIPLED), Mistake("x_plus_2x", lambda x: x + 2 * x, TRIPLED),
                         Mistake("plus_one", _plus_one, PLUS_ONE))
    verdict = _verdict(exercise, _tripled)
    assert verdict.message.startswith(f"{TRIPLED} (case 1 of 3"), verdict.message


def test_an_error_reproduced_everywhere_names_the_mistake():
    def raises(x):
        raise ValueError("no doubling today")

    exercise = _exercise(Mistake("raises", raises, "RAISES: you raise"), Mistake("plus_one", _plus_one, PLUS_ONE))
    verdict = _verdict(exercise, raises)
    assert verdict.message.startswith("RAISES: you raise (case 1 of 3"), verdict.message
    assert verdict.category == "error"


def test_a_float_mask_is_not_an_integer_mask():
    """Outcomes are compared both ways round: a float 0/1 output does not reproduce an integer one."""
    def make_cases(rng, gen):
        return [{"n": 3}, {"n": 2}]

    def reference(n):
        return torch.ones(n, n, dtype=torch.bool).tril()

    exercise = Exercise(id="ch9.mask", reference=reference, make_cases=make_cases, mistakes=(
        Mistake("integer", lambda n: reference(n).long(), "INTEGER"), Mistake("float", lambda n: reference(n).float(),
                                                                               "FLOAT")))
    assert _verdict(exercise, lambda n: reference(n).float()).message.startswith("FLOAT (case 1 of 2")
    assert _verdict(exercise, lambda n: reference(n).long()).message.startswith("INTEGER (case 1 of 2")


def test_a_failing_check_searches_the_listed_mistakes_once(monkeypatch):
    """The search runs every listed mistake on every case: the costly part of a ❌. A check cell runs it once
    (the first judgement only decides pass or fail), and a passing check never runs it."""
    from utils.exercises import judging, qkv
    from utils.exercises.check_cell import run_check

    calls = []
    search = judging._best_mistake
    monkeypatch.setattr(judging, "_best_mistake", lambda *a, **k: calls.append(1) or search(*a, **k))
    assert not run_check(qkv.ATTENTION_SCORES, lambda q, k: 3 * q @ k.transpose(-2, -1), quiet=True).passed
    assert len(calls) == 1
    assert run_check(qkv.ATTENTION_SCORES, lambda q, k: q @ k.transpose(-2, -1), quiet=True).passed
    assert len(calls) == 1
