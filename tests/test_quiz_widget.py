"""The quiz widget: answering wrong, then right, shows each answer's feedback, for every chapter's quiz."""

from __future__ import annotations

import importlib

import pytest

from utils.widgets.quiz import Choice, Numeric, Quiz

CHAPTERS = {1: "qkv", 2: "sdpa", 3: "multihead", 4: "positional", 5: "transformer", 6: "at_scale"}


def _quiz(number: int) -> Quiz:
    return getattr(importlib.import_module(f"utils.widgets.{CHAPTERS[number]}"), f"ch{number}_quiz")()


def _answer(controls: dict, value) -> str:
    controls["picker"].value = value
    controls["check"].click()
    return controls["feedback"].value


@pytest.mark.parametrize("number", sorted(CHAPTERS))
def test_wrong_then_right_answer_shows_its_feedback(number):
    quiz = _quiz(number)
    assert len(quiz.controls) == len(quiz.questions)
    for question, controls in zip(quiz.questions, quiz.controls):
        assert controls["feedback"].value == ""  # nothing shown before the first check
        if isinstance(question, Choice):
            wrong = (question.answer + 1) % len(question.options)
            assert _answer(controls, question.options[wrong]) == f"❌ {question.feedback[wrong]}"
            right = _answer(controls, question.options[question.answer])
            explanation = f" {question.explanation}" if question.explanation else ""
            assert right == f"✅ {question.feedback[question.answer]}{explanation}"
        else:
            assert isinstance(question, Numeric)
            assert _answer(controls, str(question.answer + 1000)) == f"❌ {question.grade(question.answer + 1000)[1]}"
            assert _answer(controls, "not a number").startswith("❌ 'not a number' is not a number")
            explanation = f" {question.explanation}" if question.explanation else ""
            assert _answer(controls, str(question.answer)) == f"✅ Correct.{explanation}"


def test_check_without_a_choice_asks_for_one():
    quiz = Quiz([Choice("2 + 2?", ["3", "4"], answer=1, feedback=["Off by one.", "Yes."])])
    (controls,) = quiz.controls
    controls["check"].click()
    assert controls["feedback"].value == "❌ Pick an answer first."
    assert _answer(controls, "3") == "❌ Off by one."
    assert _answer(controls, "4") == "✅ Yes."
