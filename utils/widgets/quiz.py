"""A small quiz widget: multiple-choice and numeric questions with feedback on every answer.

The answer-checking logic is plain Python (:meth:`Choice.grade`, :meth:`Numeric.grade`), so pytest
tests it without a browser; :class:`Quiz` only wires it to ipywidgets.

>>> q = Choice("2 + 2?", ["3", "4"], answer=1, feedback=["Off by one.", "Yes."], explanation="Arithmetic.")
>>> q.grade(0)
(False, 'Off by one.')
>>> Numeric("sqrt(64)?", answer=8, explanation="8 * 8 = 64").grade("8.0")[0]
True
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from utils.i18n.messages import tr

__all__ = ["Choice", "Numeric", "Quiz"]


@dataclass(frozen=True)
class Choice:
    """A multiple-choice question.

    Args:
        question: the question (Markdown-free plain text).
        options: the answers to choose from.
        answer: index of the correct option.
        feedback: one line per option, shown when it is picked: say *why* it is right or wrong.
        explanation: shown after a correct answer, the take-away.
    """

    question: str
    options: Sequence[str]
    answer: int
    feedback: Sequence[str] = field(default_factory=tuple)
    explanation: str = ""

    def __post_init__(self) -> None:
        if len(self.options) < 2:
            raise ValueError(f"options: a multiple-choice question needs at least 2, got {len(self.options)}")
        if not 0 <= self.answer < len(self.options):
            raise ValueError(f"answer={self.answer} is not an index into {len(self.options)} options")
        if self.feedback and len(self.feedback) != len(self.options):
            raise ValueError(f"feedback: got {len(self.feedback)} lines for {len(self.options)} options")

    def grade(self, choice: int | None) -> tuple[bool, str]:
        """Return (correct, feedback) for the option index ``choice``."""
        if choice is None:
            return False, tr("Pick an answer first.")
        if not 0 <= choice < len(self.options):
            raise ValueError(f"choice={choice} is not an index into {len(self.options)} options")
        correct = choice == self.answer
        text = self.feedback[choice] if self.feedback else (tr("Correct.") if correct else tr("Not quite."))
        return correct, text


@dataclass(frozen=True)
class Numeric:
    """A question whose answer is a number, accepted within ``tolerance`` (absolute)."""

    question: str
    answer: float
    tolerance: float = 1e-6
    explanation: str = ""
    hint: str = ""

    def grade(self, value: str | float | None) -> tuple[bool, str]:
        """Return (correct, feedback) for the typed ``value``."""
        try:
            number = float(value)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return False, tr("{value!r} is not a number.", value=value)
        if math.isclose(number, self.answer, abs_tol=self.tolerance, rel_tol=0.0):
            return True, tr("Correct.")
        if not self.hint:
            return False, tr("Too high.") if number > self.answer else tr("Too low.")
        if number > self.answer:
            return False, tr("Too high. {hint}", hint=self.hint)
        return False, tr("Too low. {hint}", hint=self.hint)


class Quiz:
    """Show questions as ipywidgets, each with a *Check* button and feedback.

    Args:
        questions: :class:`Choice` and :class:`Numeric` questions.
        title: shown above the questions. Default: "Quick quiz" (in the learner's language).
    """

    def __init__(self, questions: Sequence[Choice | Numeric], title: str | None = None) -> None:
        if not questions:
            raise ValueError("questions: a quiz needs at least one question")
        self.questions = list(questions)
        self.title = tr("Quick quiz") if title is None else title
        self._widget = None
        self._controls: list[dict] = []

    def score(self, answers: Sequence[int | float | str | None]) -> int:
        """How many of ``answers`` (one per question) are correct."""
        if len(answers) != len(self.questions):
            raise ValueError(f"answers: got {len(answers)} for {len(self.questions)} questions")
        return sum(q.grade(a)[0] for q, a in zip(self.questions, answers))

    @property
    def widget(self):
        """The ``ipywidgets.VBox`` that shows the quiz (built on first use)."""
        if self._widget is None:
            self._widget = self._build()
        return self._widget

    @property
    def controls(self) -> list[dict]:
        """One dict per question: its ``"picker"`` (``RadioButtons`` or ``Text``), its ``"check"`` button
        and the ``"feedback"`` ``HTML`` that the button fills in."""
        self.widget  # noqa: B018  (builds the controls)
        return self._controls

    def _build(self):
        import ipywidgets as w

        boxes = [w.HTML(f"<h3>{self.title}</h3>")]
        for number, question in enumerate(self.questions, 1):
            label = w.HTML(f"<b>{number}. {question.question}</b>")
            if isinstance(question, Choice):
                picker = w.RadioButtons(
                    options=list(question.options), value=None, layout=w.Layout(width="max-content")
                )
            else:
                picker = w.Text(placeholder=tr("type a number"))
            button = w.Button(description=tr("Check"), button_style="info")
            result = w.HTML()
            button.on_click(self._handler(question, picker, result))
            self._controls.append({"picker": picker, "check": button, "feedback": result})
            boxes.append(w.VBox([label, picker, w.HBox([button, result])]))
        return w.VBox(boxes)

    @staticmethod
    def _handler(question, picker, result):
        def on_click(_button) -> None:
            if isinstance(question, Choice):
                choice = None if picker.value is None else list(question.options).index(picker.value)
                correct, text = question.grade(choice)
            else:
                correct, text = question.grade(picker.value)
            extra = f" {question.explanation}" if correct and question.explanation else ""
            result.value = f"{'✅' if correct else '❌'} {text}{extra}"

        return on_click

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.widget)
