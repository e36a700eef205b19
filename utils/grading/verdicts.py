"""What one run of an exercise in a stopped sandbox says: its outcomes, or a verdict on the whole exercise.

Trusted side. Every file and status line comes from the sandbox and is read as hostile
(:mod:`utils.grading.serialize`, :mod:`utils.grading.files`).

**Hidden means hidden.** Each exercise runs twice (:mod:`utils.grading.unit`): its public cases first
(every public run of a student before any hidden one), then its hidden cases. Anything the learner's
code can choose that comes out of a hidden run (an exception's text, a ``sys.exit`` code, a signal, a
forged results file, a count of records) may carry what it saw of the hidden inputs, so in ``public``
and ``score`` feedback a hidden run that decides the whole exercise says only its category and a
fixed message (:func:`hidden`), and a forbidden name that is not one of the exercise's is replaced by
a fixed text (:func:`checked`). ``full`` feedback, for the instructor, says everything.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

from utils.exercises.common import Outcome, Status, with_namesakes
from utils.grading import serialize
from utils.i18n.messages import tr

MEMORY_MARKERS = ("can't allocate memory", "not enough memory", "bad_alloc", "out of memory")
StatusAndReason = tuple[Status, str]


def is_memory(kind: str, message: str) -> bool:
    return kind == "MemoryError" or any(marker in message for marker in MEMORY_MARKERS)


def memory() -> StatusAndReason:
    return (Status.MEMORY, tr("your code ran out of memory; use smaller intermediate tensors"))


def over_bound(megabytes: int) -> StatusAndReason:
    return (Status.MEMORY, tr("your code's processes together used more than {mb} MiB; use smaller intermediate "
                              "tensors and do not start processes", mb=megabytes))


def timeout(seconds: float) -> StatusAndReason:
    return (Status.TIMEOUT, tr("your code ran longer than {seconds:g} s; look for an endless loop or needless work",
                               seconds=seconds))


def exited(code: str) -> StatusAndReason:
    return (Status.ERROR, tr("your code ended the process that runs it (exit status {code}); do not call os._exit, "
                             "sys.exit or kill processes in an exercise", code=code))


def crash(signal_name: str, cpu_seconds: int) -> StatusAndReason:
    if signal_name == "SIGXCPU":
        return (Status.TIMEOUT, tr("your code used more than {seconds} s of CPU time; look for an endless loop or "
                                   "needless work", seconds=cpu_seconds))
    if signal_name in ("SIGKILL", "SIGSEGV", "SIGABRT", "SIGBUS"):
        return (Status.MEMORY, tr("the process running your code crashed ({how}), most likely out of memory; use "
                                  "smaller intermediate tensors", how=signal_name))
    return (Status.ERROR, tr("the process running your code was killed by {signal}; do not send signals or "
                             "kill processes in an exercise", signal=signal_name))


def death(how: str, killed_by_grader: bool, line: str | None = "") -> StatusAndReason:
    """The verdict when the worker itself stopped answering as agreed (``line`` is what it said, ``how``
    its exit description)."""
    if line:
        return (Status.ERROR, tr("the grader stopped your sandbox because it sent an unexpected status line "
                                 "({line!r}): your code wrote to the grader's status pipe or interfered with the "
                                 "process that runs it", line=" ".join(line.split())[:60]))
    if killed_by_grader:
        return (Status.ERROR, tr("the grader stopped the process running your code because it stopped answering"))
    if "SIGXCPU" in how:
        return (Status.TIMEOUT, tr("your code used too much CPU time; look for an endless loop"))
    if "SIGKILL" in how or "SIGSEGV" in how or "SIGABRT" in how or "SIGBUS" in how:
        return (Status.MEMORY, tr("the process running your code crashed ({how}), most likely out of memory; use "
                                  "smaller intermediate tensors", how=how))
    return (Status.ERROR, tr("your code ended the process that runs it ({how}); do not call os._exit, sys.exit "
                         "or kill processes in an exercise", how=how))


def hidden(verdict: StatusAndReason, mode: str) -> StatusAndReason:
    """``verdict`` of a hidden run as ``mode`` may show it: in ``full``, as it is; otherwise its status
    and a fixed message, whatever the learner's code wrote or chose."""
    if mode == "full":
        return verdict
    status = verdict[0]
    if mode == "score":
        return (status if status in (Status.TIMEOUT, Status.MEMORY) else Status.ERROR,
                tr("not every case of this exercise passes"))
    if status == Status.TIMEOUT:
        return (status, tr("your code ran out of time on the hidden cases; look for an endless loop or needless "
                           "work"))
    if status == Status.MEMORY:
        return (status, tr("your code ran out of memory on the hidden cases; use smaller intermediate tensors"))
    return (Status.ERROR, tr("your code stopped on the hidden cases before its results were written (an error "
                             "that is not an Exception, an exit or a crash); make it work for inputs other than "
                             "the public cases"))


def checked(outcomes: Sequence[Outcome], forbidden: Sequence[str]) -> list[Outcome]:
    """``outcomes`` whose ``forbidden`` names are the exercise's own or torch's other names for them (the run
    time names a namesake such as ``torch.native_layer_norm`` by itself); any other text (written by the
    learner's code into its results) becomes a fixed one."""
    allowed = set(with_namesakes(forbidden))
    return [o if not o.forbidden or o.forbidden in allowed else
            dataclasses.replace(o, forbidden=tr("a function this exercise forbids")) for o in outcomes]


def read(out: int | Path, keys: list[str], n_cases: int, n_extra: int = 0) -> list[Outcome] | StatusAndReason:
    """The outcomes in ``out`` (a stopped sandbox's folder) of ``n_cases`` cases followed by up to
    ``n_extra`` probe inputs, or the whole-exercise verdict when they cannot be judged."""
    try:
        record = serialize.read_json(out, "load_error.json")
    except serialize.DecodeError as exc:
        record = None if "missing" in str(exc) else {"load_error": ["Error", "unreadable"]}
    if record is not None:
        try:
            kind, message = (str(x)[:300] for x in record["load_error"][:2])
            stage = str(record["load_error"][2]) if len(record["load_error"]) > 2 else "cell"
        except (KeyError, TypeError, ValueError):
            kind, message, stage = "Error", "unreadable", "cell"
        if is_memory(kind, message):
            return memory()
        if kind == "SystemExit":
            return (Status.ERROR, tr("your code called sys.exit ({message}); return a value instead", message=message))
        if stage == "function":  # a BaseException (not an Exception) escaped the cases: none could be recorded
            return (Status.ERROR, tr("your function raised {kind}, which is not an Exception, so it stopped every "
                                     "case: {message}; raise an Exception (ValueError...) instead",
                                     kind=kind, message=message))
        return (Status.ERROR, tr("your cell raised {kind} when it ran: {message}", kind=kind, message=message))
    try:
        outcomes = serialize.load_outcomes(out, keys, max_records=n_cases + n_extra)
    except serialize.DecodeError as exc:
        if "outcomes.json is missing" in str(exc):
            return (Status.ERROR, tr("your function's results were never written (outcomes.json is missing): "
                                     "your code may have ended, or used up the file descriptors of, the process "
                                     "that runs it"))
        return (Status.ERROR, tr("the grader could not read what your function returned ({problem})", problem=exc))
    for outcome in outcomes[:n_cases]:
        if outcome.error and is_memory(*outcome.error):
            return (Status.MEMORY, tr("your function ran out of memory; use smaller intermediate tensors"))
    if len(outcomes) < n_cases:  # the runner stops early only on MemoryError (handled above)
        return (Status.ERROR, tr("your function ran on {ran} of {total} cases; the rest never returned (did "
                                 "it exit or tamper with the grader?)", ran=len(outcomes), total=n_cases))
    return outcomes
