"""An exercise that Gradescope's ``--budget`` never ran (issue 35, W5): before publication its test shown at
once said "timeout: your code ran too long", of code that never started. It now has its own fixed message,
in both languages; an exercise that did run past its time keeps "your code ran too long".
"""

from __future__ import annotations

import grader_fixtures as gf

from utils.exercises.common import Status
from utils.grading import unit
from utils.grading.course import CourseExercise
from utils.grading.gradescope_results import gradescope_results
from utils.i18n.messages import tr, using_language

NOT_RUN = "not run: the grading time of this submission ran out before its turn"
RAN_LONG = "your code ran too long"


def spent_budget_rows() -> list:
    """The rows of a toy submission whose first exercise ran out of time and whose budget then ran out."""
    tasks = [unit.Task(CourseExercise(e, gf.TOY_POINTS[e], "01_toy.ipynb", gf.TOY_REGISTRY[e]), "")
             for e in ("ch1.add_one", "ch1.attend", "ch1.total")]
    guard = unit.Guard()
    guard.verdicts[0] = (Status.TIMEOUT, "stopped: the grading time of this submission ran out while it ran")
    settings = unit.Settings(timeout=1.0, seed=1, deadline=0.0, budget=12.0)  # the budget is already spent
    assert unit._out_of_budget(tasks, settings, guard)
    return unit.unit_rows("ann", tasks, guard.verdicts, "lost")


def shown_now(data: dict, exercise: str) -> list[str]:
    return [t["output"] for t in data["tests"] if t["visibility"] == "visible" and t["name"].startswith(exercise)]


def test_rows_the_budget_never_ran_are_marked_as_not_run():
    rows = spent_budget_rows()
    assert [row.status for row in rows] == [Status.TIMEOUT] * 3
    assert [row.ran for row in rows] == [True, False, False]


def test_an_exercise_the_budget_never_ran_shows_its_own_message_at_once_in_both_languages():
    rows = spent_budget_rows()
    for lang in ("en", "zh"):
        with using_language(lang):
            data = gradescope_results(rows, 1.0)
            not_run, ran_long = tr(NOT_RUN), tr(RAN_LONG)
        if lang == "zh":
            assert not_run != NOT_RUN and ran_long != RAN_LONG  # translated
        assert shown_now(data, "ch1.add_one") == [f"timeout: {ran_long}"], data["tests"]
        for exercise in ("ch1.attend", "ch1.total"):
            assert shown_now(data, exercise) == [f"timeout: {not_run}"], data["tests"]
        held = [t for t in data["tests"] if t["visibility"] != "visible"]
        assert len(held) == 3 and all(t["score"] == 0 for t in held)
