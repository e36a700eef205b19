"""Partial credit by named parts, and what each feedback mode may say about hidden cases.

Trusted side only, like :mod:`utils.exercises.judging`, whose :func:`~utils.exercises.judging.judge`
decides every case here (there is no second comparison).

**The rule.** Each case, public or hidden, belongs to one :class:`~utils.exercises.definition.Part` of
its exercise (:meth:`~utils.exercises.definition.Exercise.part_of`). A part earns all its points when
every one of its cases passes, and 0 otherwise (a part with no case earns 0: never points for nothing).
The exercise's points are the sum, exact (:class:`~fractions.Fraction`, parts are in hundredths). A
verdict about the whole function decides the whole exercise, 0 points with its reason: a forbidden
call (``forbidden``), or ``NotImplementedError`` on every case (``not attempted``). The same cases and
outcomes always give the same points: nothing here is random.

**Feedback modes** (:data:`FEEDBACK_MODES`), for what :meth:`PartResult.reason` and :meth:`Graded.reason`
say:

* ``full``: every diagnosis, hidden cases' included (their shapes, never their values);
* ``public`` (the default): the full diagnosis for public cases; for hidden cases only how many pass
  and the diagnosis categories (:data:`~utils.exercises.judging.CATEGORIES`), never their inputs,
  expected values or a mistake's diagnosis;
* ``score``: points and which parts passed, no diagnosis.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from utils.exercises.common import Case, Outcome, Status
from utils.exercises.definition import Exercise, Part
from utils.exercises.judging import Verdict, category_text, judge
from utils.exercises.probes import Evidence
from utils.i18n.messages import tr, translate

FEEDBACK_MODES = ("full", "public", "score")
DEFAULT_FEEDBACK = "public"


def check_mode(mode: str) -> str:
    """``mode`` if it is one of :data:`FEEDBACK_MODES`; else a ``ValueError`` naming the argument."""
    if mode not in FEEDBACK_MODES:
        raise ValueError(f"feedback must be one of {', '.join(FEEDBACK_MODES)}, got {mode!r}")
    return mode


def _count(n: int, hidden: bool) -> str:
    if hidden:
        return tr("{n} hidden case", n=n) if n == 1 else tr("{n} hidden cases", n=n)
    return tr("{n} public case", n=n) if n == 1 else tr("{n} public cases", n=n)


def part_text(name: str) -> str:
    """A part's name (kept English in data: it names a grade's column) as a learner reads it."""
    return tr("all cases") if name == "all cases" else translate(name)


def status_text(status: str) -> str:
    """A :class:`~utils.exercises.common.Status` (kept English in data) as a learner reads it."""
    texts = {"passed": tr("passed"), "failed": tr("failed"), "error": tr("error"),
             "not attempted": tr("not attempted"), "timeout": tr("timeout"), "memory": tr("memory"),
             "forbidden": tr("forbidden"), "missing": tr("missing"), "invalid": tr("invalid")}
    return texts.get(str(status), str(status))


@dataclass(frozen=True)
class PartResult:
    """One part's credit. ``public``/``hidden`` are ``(passed, total)`` case counts; the verdicts judge
    the part's public (hidden) cases together, for the diagnosis (None when it has no such case)."""

    name: str
    points: Fraction
    max_points: Fraction
    public: tuple[int, int]
    hidden: tuple[int, int]
    public_verdict: Verdict | None
    hidden_verdict: Verdict | None
    hidden_categories: tuple[str, ...] = ()
    failing_statuses: tuple[Status, ...] = ()  # of its failing cases, each judged alone

    @property
    def passed(self) -> bool:
        return self.points == self.max_points and self.public[1] + self.hidden[1] > 0

    @property
    def status(self) -> Status:
        if self.passed:
            return Status.PASSED
        failing = set(self.failing_statuses)
        if failing == {Status.NOT_ATTEMPTED}:
            return Status.NOT_ATTEMPTED  # this part's inputs all still raise NotImplementedError
        return Status.ERROR if failing and failing <= {Status.ERROR, Status.NOT_ATTEMPTED} else Status.FAILED

    @property
    def public_passed(self) -> bool:
        """Every public case of this part passes (true when it has none)."""
        return self.public[0] == self.public[1]

    def public_reason(self) -> str:
        """What the part's public cases alone say: the learner's own check shows the same."""
        pub_ok, pub_n = self.public
        if pub_n == 0:
            return tr("this part has no public case")
        if pub_ok < pub_n and self.public_verdict is not None:
            return self.public_verdict.message
        return tr("{ok} of {cases} pass", ok=pub_ok, cases=_count(pub_n, False))

    def reason(self, mode: str = DEFAULT_FEEDBACK) -> str:
        """Why this part earned its points, as much as ``mode`` may say."""
        check_mode(mode)
        (pub_ok, pub_n), (hid_ok, hid_n) = self.public, self.hidden
        if pub_n + hid_n == 0:
            return tr("no case of this part was run, so it earns nothing")
        if self.passed:
            if mode == "score":
                return tr("passed")
            if pub_n and hid_n:
                return tr("all {public} and {hidden} pass", public=_count(pub_n, False), hidden=_count(hid_n, True))
            return tr("all {cases} pass", cases=_count(pub_n, False) if pub_n else _count(hid_n, True))
        if mode == "score":
            return tr("not every case of this part passes")
        said = []
        if pub_n:
            said.append(self.public_verdict.message if pub_ok < pub_n and self.public_verdict
                        else (tr("its public case passes") if pub_n == 1
                              else tr("its {n} public cases pass", n=pub_n)))
        if hid_n:
            hidden = tr("hidden cases: {ok} of {n} pass", ok=hid_ok, n=hid_n)
            if hid_ok < hid_n and mode == "full" and self.hidden_verdict is not None:
                hidden = tr("{counts}: {reason}", counts=hidden, reason=self.hidden_verdict.message)
            elif hid_ok < hid_n and self.hidden_categories:
                hidden = tr("{counts} ({categories})", counts=hidden,
                            categories=tr(", ").join(map(category_text, self.hidden_categories)))
            said.append(hidden)
        return tr("; ").join(said)


@dataclass(frozen=True)
class Graded:
    """An exercise's credit: its parts, and the verdict that decided all of it at once (if any)."""

    status: Status
    points: Fraction
    max_points: Fraction
    parts: tuple[PartResult, ...]
    decided: Verdict | None = None

    def reason(self, mode: str = DEFAULT_FEEDBACK) -> str:
        """One line for the whole exercise, as much as ``mode`` may say."""
        check_mode(mode)
        if self.decided is not None:
            return self.decided.message
        if self.status == Status.PASSED:
            n_pub = sum(p.public[1] for p in self.parts)
            n_hid = sum(p.hidden[1] for p in self.parts)
            return tr("all {n} cases pass ({public} public, {hidden} hidden)", n=n_pub + n_hid, public=n_pub,
                      hidden=n_hid)
        failing = [p for p in self.parts if not p.passed]
        if mode == "score":
            return tr("parts not passed: {parts}", parts=tr(", ").join(part_text(p.name) for p in failing))
        return tr("; ").join(tr("{part}: {reason}", part=part_text(p.name), reason=p.reason(mode)) for p in failing)


def credit_for(exercise: Exercise, cases: Sequence[Case], outcomes: Sequence[Outcome], n_public: int, *,
          diagnose_hidden: bool = True, evidence: Evidence | None = None) -> Graded:
    """Credit for ``outcomes`` on ``cases``, whose first ``n_public`` are public and the rest hidden.

    Missing outcomes (a list shorter than ``cases``) fail their cases. Each case is judged alone (without
    the search for a matching mistake) to count what passes; a part's failing public cases, and its
    failing hidden ones when ``diagnose_hidden`` (only ``full`` feedback shows that), are judged
    together for the diagnosis. ``evidence`` (the outcomes on the probe inputs, which never count) goes
    to the judge for those diagnoses.
    """
    maximum = Fraction(exercise.points)
    parts = exercise.part_list()
    outcomes = list(outcomes)[: len(cases)]
    whole = judge(exercise, cases[: len(outcomes)], outcomes, evidence=evidence) if _decides_all(outcomes) else None
    if whole is not None:
        zero = tuple(PartResult(p.name, Fraction(0), p.points, (0, 0), (0, 0), None, None) for p in parts)
        return Graded(whole.status, Fraction(0), maximum, zero, decided=whole)
    each = [judge(exercise, [case], [outcome], diagnose=False) for case, outcome in zip(cases, outcomes)]
    owner = [exercise.part_of(case) for case in cases]
    results = tuple(_part(exercise, part, cases, outcomes, each, owner, n_public, diagnose_hidden, evidence)
                    for part in parts)
    points = sum((r.points for r in results), Fraction(0))
    if all(r.passed for r in results):
        status = Status.PASSED
    elif any(r.status == Status.FAILED for r in results if not r.passed):
        status = Status.FAILED
    else:
        status = Status.ERROR
    return Graded(status, points, maximum, results)


def _decides_all(outcomes: Sequence[Outcome]) -> bool:
    """A forbidden call anywhere, or NotImplementedError everywhere: judged as one."""
    if not outcomes:
        return True
    return any(o.forbidden for o in outcomes) or all(
        o.error is not None and o.error[0] == "NotImplementedError" for o in outcomes)


def _part(exercise: Exercise, part: Part, cases: Sequence[Case], outcomes: Sequence[Outcome],
          each: Sequence[Verdict], owner: Sequence[str], n_public: int, diagnose_hidden: bool,
          evidence: Evidence | None = None) -> PartResult:
    mine = [i for i, name in enumerate(owner) if name == part.name]
    groups = []
    for hidden, indices in ((False, [i for i in mine if i < n_public]), (True, [i for i in mine if i >= n_public])):
        ok = sum(1 for i in indices if i < len(each) and each[i].passed)
        verdict = None
        if indices and ok < len(indices) and (diagnose_hidden or not hidden):  # one diagnosis across its failures
            ran = [i for i in indices if i < len(outcomes)]
            verdict = judge(exercise, [cases[i] for i in indices], [outcomes[i] for i in ran],
                            evidence=evidence) if ran else \
                Verdict(False, Status.ERROR, tr("your function never ran on these cases"), "error")
        groups.append(((ok, len(indices)), verdict, indices))
    (public, public_verdict, _), (hidden, hidden_verdict, hidden_indices) = groups
    categories: list[str] = []
    for i in hidden_indices:
        category = each[i].category if i < len(each) else "error"
        if i >= len(each) or not each[i].passed:
            if category and category not in categories:
                categories.append(category)
    passed = public[1] + hidden[1] > 0 and public[0] == public[1] and hidden[0] == hidden[1]
    statuses = tuple(each[i].status if i < len(each) else Status.ERROR for i in mine
                     if i >= len(each) or not each[i].passed)
    return PartResult(part.name, part.points if passed else Fraction(0), part.points, public, hidden,
                      public_verdict, hidden_verdict, tuple(categories), statuses)
