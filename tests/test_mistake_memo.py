"""What a listed mistake does on a case is found once per case's contents (make test's time, issue 38).

The mistake search asks every listed mistake about every case run, for every failing learner: a class's
failing learners, and the search itself, ask the same questions again. A mistake is a fixed function of its
inputs, so :func:`utils.exercises.mistake_search.mistake_outcome` keeps each answer, keyed by the mistake and by
everything the case holds. These tests count calls; the diagnoses themselves are the other tests' business
(tests/test_learner_answers.py and every chapter's mistake tests run through it).
"""

from __future__ import annotations

import pytest
import torch

from utils.exercises import mistake_search as ms
from utils.exercises.common import Outcome
from utils.exercises.definition import Mistake


@pytest.fixture(autouse=True)
def empty(monkeypatch):
    monkeypatch.setattr(ms, "_OUTCOMES", {})
    monkeypatch.setattr(ms, "_KEYS", {})


def counting(calls: list, fn):
    def mistake(**kwargs):
        calls.append(kwargs)
        return fn(**kwargs)
    return Mistake("m", mistake, "a slip")


def test_a_mistake_runs_once_per_case_contents():
    calls: list = []
    mistake = counting(calls, lambda x: x * 2)
    case = {"x": torch.arange(6.0).reshape(2, 3)}
    first = ms.mistake_outcome(mistake, case)
    assert ms.mistake_outcome(mistake, case) is first
    assert ms.mistake_outcome(mistake, {"x": torch.arange(6.0).reshape(2, 3)}) is first  # equal, not the same
    assert len(calls) == 1 and first[0] == "output"
    torch.testing.assert_close(first[1], torch.arange(6.0).reshape(2, 3) * 2)


@pytest.mark.parametrize("other", [
    {"x": torch.arange(6.0).reshape(2, 3) + torch.tensor([0.0, 0, 0, 0, 0, 1e-3]).reshape(2, 3)},  # one value
    {"x": torch.arange(6.0).reshape(3, 2)},  # the shape
    {"x": torch.arange(6.0, dtype=torch.float64).reshape(2, 3)},  # the dtype
    {"x": torch.arange(6.0).reshape(3, 2).T},  # the strides (a transposed view)
    {"x": torch.arange(6.0).reshape(2, 3).requires_grad_()},  # a gradient asked for
    {"x": torch.arange(6.0).reshape(2, 3), "y": 1},  # another argument
])
def test_a_case_that_differs_in_anything_runs_again(other):
    calls: list = []
    mistake = counting(calls, lambda x, y=0: x * 2 + y)
    ms.mistake_outcome(mistake, {"x": torch.arange(6.0).reshape(2, 3)})
    ms.mistake_outcome(mistake, other)
    assert len(calls) == 2


def test_each_mistake_has_its_own_answers_and_errors_are_kept_too():
    calls: list = []
    doubles, fails = counting(calls, lambda x: x * 2), counting(calls, lambda x: x.view(-1, 7))
    case = {"x": torch.ones(2, 3)}
    assert ms.mistake_outcome(doubles, case)[0] == "output"
    kind, error = ms.mistake_outcome(fails, case)
    assert kind == "error" and error[0] == "RuntimeError" and "invalid for input of size 6" in error[1]
    assert ms.mistake_outcome(fails, case) == (kind, error) and len(calls) == 2
    assert ms.reproduces(None, fails, case, Outcome(error=error), lambda *a: None)  # the learner's same error
    assert not ms.reproduces(None, fails, case, Outcome(error=("RuntimeError", "other")), lambda *a: None)


def test_a_case_that_cannot_be_keyed_runs_every_time():
    calls: list = []
    mistake = counting(calls, lambda x, extra: x)
    case = {"x": torch.ones(2), "extra": {"a": 1}}
    assert ms.case_key(case) is None
    ms.mistake_outcome(mistake, case)
    ms.mistake_outcome(mistake, case)
    assert len(calls) == 2


def test_at_most_outcomes_kept_are_kept(monkeypatch):
    monkeypatch.setattr(ms, "OUTCOMES_KEPT", 5)
    mistake = counting([], lambda n: n + 1)
    for n in range(12):
        assert ms.mistake_outcome(mistake, {"n": n}) == ("output", n + 1)
    assert len(ms._OUTCOMES) == 5 and len(ms._KEYS) <= 5


def test_threads_that_judge_at_once_never_trip_over_the_kept_outcomes(monkeypatch):
    """The grader judges its job slots' students in threads of one process: keeping and dropping outcomes from
    several threads at once must never raise (a KeyError there would cost a student's grade)."""
    import sys
    import threading

    monkeypatch.setattr(ms, "OUTCOMES_KEPT", 3)
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible
    mistake = counting([], lambda n: n + 1)
    errors: list[BaseException] = []

    def judge(offset: int) -> None:
        try:
            for n in range(3000):
                value = (n * 7 + offset) % 11
                assert ms.mistake_outcome(mistake, {"n": value}) == ("output", value + 1)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    try:
        threads = [threading.Thread(target=judge, args=(i,)) for i in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    assert errors == []
