"""Partial credit by named parts: the rule, exact points, whole-exercise verdicts, determinism, and
what results.csv, grades.csv and the feedback files say."""

from __future__ import annotations

import csv
import dataclasses
import io
from fractions import Fraction

import grader_fixtures as gf
import pytest
import torch

from utils.exercises import credit
from utils.exercises.common import Outcome, Status
from utils.exercises.definition import Exercise, Part, exact_points, points_text
from utils.exercises.runner import run_cases
from utils.exercises.sdpa import SDPA
from utils.grading import batch, report
from utils.grading.unit import PartRow, Row

# --------------------------------------------------------------------------------------------------
# Part tables
# --------------------------------------------------------------------------------------------------


def test_parts_must_add_up_and_end_with_a_catch_all():
    def make(rng, gen):
        return [{"x": torch.ones(2)}]

    with pytest.raises(ValueError, match="add up to 1.5 points, not 2"):
        Exercise("ch1.f", lambda x: x, make, points=2, parts=(Part("a", "0.5", lambda c: True), Part("b", 1)))
    with pytest.raises(ValueError, match="the last part must take every remaining case"):
        Exercise("ch1.f", lambda x: x, make, points=2, parts=(Part("a", 1), Part("b", 1, lambda c: True)))
    with pytest.raises(ValueError, match="two parts share a name"):
        Exercise("ch1.f", lambda x: x, make, points=2, parts=(Part("a", 1, lambda c: True), Part("a", 1)))
    with pytest.raises(ValueError, match="exact"):
        Part("a", 0.5)
    with pytest.raises(ValueError, match="multiple of 1/100"):
        Part("a", Fraction(1, 3))
    assert exact_points("0.25") == Fraction(1, 4) and Part("a", "1.5").points == Fraction(3, 2)
    assert [points_text(v) for v in (Fraction(5, 2), 3, Fraction(1, 100), Fraction(0))] == ["2.5", "3", "0.01", "0"]


def test_every_chapter_part_table_adds_up_to_the_notebook_points():
    from utils.exercises import all_exercises

    for exercise in all_exercises().values():
        assert sum(p.points for p in exercise.part_list()) == exercise.points


# --------------------------------------------------------------------------------------------------
# The rule, on the real chapter 2 exercise (4 parts: 0.5 + 0.5 + 1 + 1 = 3 points)
# --------------------------------------------------------------------------------------------------


def _graded(fn, exercise: Exercise = SDPA, seed: int = 11) -> credit.Graded:
    public = exercise.public_cases()
    cases = public + exercise.hidden_cases(seed)
    outcomes = run_cases(fn, cases, exercise.forbidden, exercise.gradients)
    return credit.credit_for(exercise, cases, outcomes, len(public))


def _nan_rows(q, k, v, mask=None):
    """Right everywhere except that a query with no allowed key gets NaN (the softmax of all -inf)."""
    scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights


def test_a_part_earns_its_points_only_when_all_its_cases_pass():
    graded = _graded(_nan_rows)
    by_name = {p.name: p for p in graded.parts}
    assert graded.points == Fraction(5, 2) and graded.max_points == 3 and graded.status == Status.FAILED
    assert by_name["fully masked rows"].points == 0 and not by_name["fully masked rows"].passed
    assert all(by_name[n].passed for n in ("float16, bfloat16 and float64", "values without a mask", "with a mask"))
    reason = by_name["fully masked rows"].reason("public")
    assert "NaN" in reason and "hidden cases: 0 of" in reason and "(non-finite values)" in reason


def test_the_same_submission_and_seed_always_give_the_same_points():
    first = [(p.name, p.points, p.reason("full")) for p in _graded(_nan_rows, seed=5).parts]
    again = [(p.name, p.points, p.reason("full")) for p in _graded(_nan_rows, seed=5).parts]
    assert first == again


def test_a_function_finished_for_some_inputs_only_earns_those_parts():
    def no_mask_only(q, k, v, mask=None):
        if mask is not None:
            raise NotImplementedError
        weights = torch.softmax(q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5, dim=-1)
        return weights @ v, weights

    graded = _graded(no_mask_only)
    assert graded.points == 1 and [p.name for p in graded.parts if p.passed] == ["values without a mask"]
    with_mask = next(p for p in graded.parts if p.name == "with a mask")
    assert with_mask.status == Status.NOT_ATTEMPTED and "not implemented yet" in with_mask.reason("public")


def test_whole_exercise_verdicts_give_zero_for_every_part():
    def stub(q, k, v, mask=None):
        raise NotImplementedError

    graded = _graded(stub)
    assert graded.status == Status.NOT_ATTEMPTED and graded.points == 0 and graded.decided is not None
    assert "not implemented yet" in graded.reason("public") and all(p.points == 0 for p in graded.parts)
    cases = SDPA.public_cases()
    outcomes = [Outcome(output=SDPA.reference(**c)) for c in cases]
    outcomes[-1] = Outcome(forbidden="torch.nn.functional.scaled_dot_product_attention")
    graded = credit.credit_for(SDPA, cases, outcomes, len(cases))
    assert graded.status == Status.FORBIDDEN and graded.points == 0 and "implement yourself" in graded.reason()


def test_missing_outcomes_fail_their_cases_and_a_part_without_cases_earns_nothing():
    cases = SDPA.public_cases()
    outcomes = [Outcome(output=SDPA.reference(**c)) for c in cases[:2]]
    graded = credit.credit_for(SDPA, cases, outcomes, len(cases))
    assert graded.points < 3
    empty = credit.PartResult("x", Fraction(0), Fraction(1), (0, 0), (0, 0), None, None)
    assert not empty.passed and "earns nothing" in empty.reason()


def test_feedback_modes_say_more_or_less_about_hidden_cases():
    parts = {p.name: p for p in _graded(_nan_rows).parts}
    fully = parts["fully masked rows"]
    public, full, score = fully.reason("public"), fully.reason("full"), fully.reason("score")
    assert "hidden cases: 0 of" in public and "case 1 of" not in public.split("hidden cases:")[1]
    assert "hidden cases: 0 of" in full and "case 1 of" in full.split("hidden cases:")[1]  # the diagnosis, too
    assert score == "not every case of this part passes"
    with pytest.raises(ValueError, match="feedback must be one of full, public, score, got 'all'"):
        fully.reason("all")


# --------------------------------------------------------------------------------------------------
# The reports
# --------------------------------------------------------------------------------------------------


def _row(points, parts) -> Row:
    return Row("ann", "ch2.scaled_dot_product_attention", points, 3, Status.FAILED, "fully masked rows: NaN", parts)


def test_results_csv_has_a_line_per_part_and_grades_csv_the_exact_total():
    parts = (PartRow("fully masked rows", 0, Fraction(1, 2), Status.FAILED, "NaN"),
             PartRow("float16", Fraction(1, 2), Fraction(1, 2), Status.PASSED, "all pass"),
             PartRow("with a mask", 2, 2, Status.PASSED, "all pass"))
    row = _row(Fraction(5, 2), parts)
    lines = list(csv.reader(io.StringIO(report.results_csv([row]))))
    assert lines[0] == list(report.RESULTS_HEADER) and lines[0][2] == "part"
    assert [line[2:5] for line in lines[1:]] == [["fully masked rows", "0", "0.5"], ["float16", "0.5", "0.5"],
                                                 ["with a mask", "2", "2"]]
    grades = list(csv.reader(io.StringIO(report.grades_csv([row], ["ann"], [row.exercise]))))
    assert grades[1] == ["ann", "2.5", "2.5", "3", "ann"]  # the last column: the raw student_id
    text = report.feedback_md("ann", [row])
    assert "**Total: 2.5 / 3 points**" in text and "↳ fully masked rows | 0 / 0.5 | ❌ failed | NaN" in text


@pytest.mark.sandbox
def test_a_batch_with_parts_writes_part_lines_and_is_deterministic(tmp_path):
    parted = dataclasses.replace(gf.ATTEND, parts=(Part("a batch of 1", "0.5", lambda c: c["q"].shape[0] == 1),
                                                   Part("larger batches", "2.5")))
    registry = {**gf.TOY_REGISTRY, "ch1.attend": parted}
    batch_one_wrong = ("def attend(q, k, v):\n"
                       "    scale = 1.0 if q.shape[0] == 1 else math.sqrt(q.shape[-1])\n"
                       "    return torch.softmax(q @ k.transpose(-2, -1) / scale, dim=-1) @ v\n")
    subs = tmp_path / "subs"
    gf.student(subs, "bea", {"01_toy.ipynb": gf.toy_submission({"ch1.attend": batch_one_wrong})})
    course = gf.make_toy_course(tmp_path / "course")
    texts = []
    for out in ("one", "two"):
        batch.grade(subs, tmp_path / out, jobs=1, timeout=20, seed=8, course_root=course, registry=registry,
                  memory_mb=512, progress=False)
        texts.append((tmp_path / out / "results.csv").read_text(encoding="utf-8"))
    assert texts[0] == texts[1]
    lines = {(r["exercise"], r["part"]): r for r in csv.DictReader(io.StringIO(texts[0]))}
    assert lines[("ch1.attend", "larger batches")]["points"] == "2.5"
    assert lines[("ch1.attend", "a batch of 1")]["points"] == "0"
    said = lines[("ch1.attend", "a batch of 1")]["feedback"]
    assert "forgot to divide the scores by sqrt(d)" in said or "pass (values)" in said, said
    grades = list(csv.reader((tmp_path / "one" / "grades.csv").open(encoding="utf-8")))
    assert grades[1] == ["bea", "2", "2.5", "1", "5.5", "6", "bea"]  # the last column: the raw student_id


def test_one_failing_case_costs_its_whole_part_and_only_that_part():
    public = SDPA.public_cases()
    cases = public + SDPA.hidden_cases(3)
    outcomes = [Outcome(output=SDPA.reference(**c)) for c in cases]
    last_unmasked = max(i for i, c in enumerate(cases) if SDPA.part_of(c) == "values without a mask")
    outcomes[last_unmasked] = Outcome(output=tuple(t + 1 for t in outcomes[last_unmasked].output))
    graded = credit.credit_for(SDPA, cases, outcomes, len(public))
    part = next(p for p in graded.parts if p.name == "values without a mask")
    assert part.points == 0 and part.public[0] + part.hidden[0] == part.public[1] + part.hidden[1] - 1
    assert graded.points == 2 and all(p.passed for p in graded.parts if p is not part)
