"""The learner answers of ``tests/learner_answers/`` (issue 34), through the check cell as a learner runs it.

Four batches of realistic wrong answers, written blind (from the notebooks' prose and templates, without
reading the course's listed mistakes), each split at random into a half to tune diagnoses on and a
half held out to measure them (see ``tests/learner_answers/README.md``), a fifth of learner reviewers'
answers that diagnoses were tuned against (``review5/``, some exercises only), and correct answers written in
other styles (einsum, loops, permute, hand-written softmax and LayerNorm).

- No wrong answer gets ✅, on the public cases or the hidden ones.
- Every correct alternative gets ✅ on both: the checks accept other ways of writing the same function.
- A wrong answer's ❌ never states a listed mistake as fact unless that mistake reproduces it: the named
  diagnosis (a line without the judge's "observed" wording) must be a listed ``Mistake`` of the exercise
  that gives the learner's output on every public case.

How well each diagnosis names the mistake or the faulty part is a judgement, recorded by a reader in
``*_classes.json`` beside each half; ``python -m tests.learner_answers.measure`` gives the lines to read.
"""

from __future__ import annotations

import contextlib
import io

import pytest

from tests.learner_answers.measure import CORRECT_SPLITS, SPLITS, answers
from utils.exercises import check, get
from utils.exercises.common import clone_case, plain_copy
from utils.exercises.judging import compare
from utils.i18n.messages import translate, using_language

WRONG = [a for split in SPLITS if split not in CORRECT_SPLITS for a in answers(split)]
SLUG_CHAPTERS = {f"ch{n}" for n in range(1, 7)}  # the chapters of measure.SLUGS
CORRECT = [a for split in CORRECT_SPLITS for a in answers(split)]


_VERDICTS: dict[tuple[str, str], object] = {}  # (answer id, cases) -> its verdict: two tests read each public one


def _verdict(answer: dict, cases: str):
    key = (answer["id"], cases)
    if key not in _VERDICTS:
        checker = getattr(check, get(answer["exercise"]).func_name)
        with using_language("en"), contextlib.redirect_stdout(io.StringIO()):  # the learner's prints, if any
            _VERDICTS[key] = checker(answer["fn"], cases=cases, quiet=True)
    return _VERDICTS[key]


def test_every_exercise_has_wrong_answers_in_both_halves_and_a_correct_alternative():
    from utils.exercises import all_exercises

    ids = {i for i in all_exercises() if i.split(".")[0] in SLUG_CHAPTERS}  # chapter 7's batches: below
    for split in ("tune", "heldout", "tune3", "heldout3", "tune4", "heldout4"):
        assert {a["exercise"] for a in WRONG if a["split"] == split} == ids, split
    for split in ("alternatives", "alternatives2"):
        assert {a["exercise"] for a in CORRECT if a["split"] == split} == ids, split
    chapter7 = {i for i in all_exercises() if i.startswith("ch7.")}
    for split in ("tune_ch7", "heldout_ch7"):
        assert {a["exercise"] for a in WRONG if a["split"] == split} == chapter7, split
    assert {a["exercise"] for a in CORRECT if a["split"] == "alternatives_ch7"} == chapter7
    assert all(a.get("correct") for a in CORRECT) and not any(a.get("correct") for a in WRONG)


def test_the_review_batch_covers_chapters_1_to_6_with_exercises_that_exist():
    """``review5/`` holds only the reviewers' answers (some exercises): every chapter 1 to 6 at least once."""
    from utils.exercises import all_exercises

    ids = {a["exercise"] for a in WRONG if a["split"] == "review5"}
    assert ids <= set(all_exercises()), ids - set(all_exercises())
    assert {exercise_id.split(".")[0] for exercise_id in ids} == SLUG_CHAPTERS, ids


@pytest.mark.slow
@pytest.mark.parametrize("answer", WRONG, ids=lambda a: a["id"])
def test_a_wrong_answer_never_gets_a_pass(answer):
    public, hidden = _verdict(answer, "public"), _verdict(answer, "hidden")
    assert not public.passed, f"{answer['mistake']}: {public.line}"
    assert not hidden.passed, f"{answer['mistake']}: {hidden.line}"


@pytest.mark.slow
@pytest.mark.parametrize("answer", CORRECT, ids=lambda a: a["id"])
def test_a_correct_answer_in_another_style_passes(answer):
    public, hidden = _verdict(answer, "public"), _verdict(answer, "hidden")
    assert public.passed, public.line
    assert hidden.passed, hidden.line


def _outcome(fn, case):
    """``("output", value)`` or ``("error", type name, message)``: what ``fn`` does on ``case``."""
    try:
        return ("output", plain_copy(fn(**clone_case(case))))
    except Exception as exc:  # noqa: BLE001 (a learner's error is an outcome like any other)
        return ("error", type(exc).__name__, str(exc))


def _reproduces_everywhere(exercise, mistake, fn) -> bool:
    """Whether ``mistake`` does what ``fn`` does on every public case: the same output, or the same error."""
    for case in exercise.public_cases():
        got, wrong = _outcome(fn, case), _outcome(mistake.fn, case)
        if got[0] != wrong[0]:
            return False
        if got[0] == "error" and got != wrong:
            return False
        if got[0] == "output" and compare(got[1], wrong[1], exercise.atol, exercise.rtol) is not None:
            return False
    return True


@pytest.mark.slow
@pytest.mark.parametrize("answer", WRONG, ids=lambda a: a["id"])
def test_a_named_mistake_reproduces_the_answer(answer):
    exercise = get(answer["exercise"])
    line = _verdict(answer, "public").line
    if "known slip" in line or "known slips" in line:
        return  # said as an observation, with the cases it does and does not explain
    with using_language("en"):
        by_diagnosis: dict[str, list] = {}
        for mistake in exercise.mistakes:  # two ways of writing one slip may share a diagnosis
            if translate(mistake.diagnosis) in line:
                by_diagnosis.setdefault(mistake.diagnosis, []).append(mistake)
    for mistakes in by_diagnosis.values():
        assert any(_reproduces_everywhere(exercise, mistake, answer["fn"]) for mistake in mistakes), (
            f"{answer['id']} ({answer['mistake']}) is told, as fact, the diagnosis of "
            f"{', '.join(m.name for m in mistakes)}, which does not reproduce it: {line}"
        )
