"""The runner: what runs beside the learner's code, in a notebook's kernel or the grader's sandbox.

It loads an exercise cell (:func:`load_function`), calls the learner's function on each case's inputs
with the forbidden names patched out (:func:`run_cases`), and records what happened as plain
:class:`~utils.exercises.common.Outcome` s. It decides nothing: it never sees a reference, a mistake
or an expected output, and imports nothing of the course but :mod:`utils.exercises.common` (a test
checks this), so the sandboxed worker holds nothing about how it will be judged.
"""

from __future__ import annotations

import contextlib
import linecache
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch

from utils.exercises.common import (
    ERROR_MESSAGE_CHARS,
    Case,
    Outcome,
    clone_case,
    gradient_report,
    one_line,
    plain_copy,
    resolve,
)

PREAMBLE = "import math\nimport torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"
"""The only names an exercise cell may rely on besides what it defines itself. Every notebook's
setup imports them too, so a cell behaves the same in the notebook, in tests and in the grader."""


class ForbiddenCall(Exception):
    """Raised inside the learner's function when it calls something the exercise forbids."""


class MissingFunction(LookupError):
    """The exercise cell ran but does not define the function the exercise asks for."""


@contextlib.contextmanager
def forbid(names: Sequence[str]) -> Iterator[list[str]]:
    """Replace each dotted name (``"torch.nn.MultiheadAttention"``) by a function that raises
    :class:`ForbiddenCall`, for the duration of the block. Unknown names are ignored.

    A class's method (``"torch.Tensor.logsumexp"``, so that ``block.logsumexp()`` is blocked too) is
    replaced on the class and, when the class only inherited it, removed again afterwards.

    Yields the list of forbidden names called inside the block, so a call is noticed even when the
    caller swallows the :class:`ForbiddenCall` (``try: ... except Exception: ...``)."""
    saved = []
    called: list[str] = []
    try:
        for dotted in names:
            # A bare package ("utils") cannot be patched out at run time (resolve gives None); the
            # static check (forbidden_in_source) catches any use of it in the learner's source.
            resolved = resolve(dotted) or _class_member(dotted)
            if resolved is None:
                continue
            owner, attr = resolved

            def _blocked(*args: Any, _name: str = dotted, **kwargs: Any) -> Any:
                called.append(_name)
                raise ForbiddenCall(_name)

            saved.append((owner, attr, getattr(owner, attr), attr in vars(owner)))
            setattr(owner, attr, _blocked)
        yield called
    finally:
        for owner, attr, original, own in reversed(saved):
            if own:
                setattr(owner, attr, original)
            else:
                delattr(owner, attr)


def _class_member(dotted: str) -> tuple[type, str] | None:
    """``(torch.Tensor, "logsumexp")`` for ``"torch.Tensor.logsumexp"``: a class of a module and an attribute
    it has (its own or inherited); None for anything else."""
    owner = resolve(dotted.rpartition(".")[0])
    cls = getattr(*owner) if owner is not None else None
    attr = dotted.rpartition(".")[2]
    return (cls, attr) if isinstance(cls, type) and hasattr(cls, attr) else None


def run_cases(fn: Callable[..., Any], cases: Sequence[Case], forbidden: Sequence[str] = (),
              gradients: bool = False) -> list[Outcome]:
    """Call ``fn(**case)`` on copies of every case and record what happened; with ``gradients``, also
    what a backward pass through a right-shaped call reaches (:func:`~utils.exercises.common.gradient_report`).

    Stops early after a ``MemoryError`` (a memory bomb would cost its time again on every case). A
    ``NotImplementedError`` does not stop it: a function finished for some inputs only (``raise
    NotImplementedError`` left in one branch) still earns the parts it does (:mod:`utils.exercises.credit`).
    """
    outcomes = []
    for case in cases:
        args = clone_case(case)
        outcome = Outcome()
        called: list[str] = []
        try:
            with forbid(forbidden) as called:
                outcome.output = fn(**args)
        except ForbiddenCall as exc:
            outcome.forbidden = str(exc)
        except NotImplementedError:
            outcome.error = ("NotImplementedError", "")
        except MemoryError as exc:
            outcome.error = ("MemoryError", one_line(str(exc), ERROR_MESSAGE_CHARS))
            outcomes.append(outcome)
            break
        except Exception as exc:  # the learner's code may raise anything; we report it
            outcome.error = (type(exc).__name__, one_line(str(exc), ERROR_MESSAGE_CHARS))
        if called and not outcome.forbidden:  # the learner caught our ForbiddenCall and carried on
            outcome.forbidden = called[0]
        outcome.mutated = [
            k for k, v in case.items() if isinstance(v, torch.Tensor) and not _same(v, args[k])
        ]
        outcome.output = plain_copy(outcome.output)
        if gradients and outcome.error is None and not outcome.forbidden and not outcome.mutated:
            # Once more with gradients on: a right output whose graph is cut (.detach(), no_grad) or
            # cannot be differentiated (an in-place write autograd needs) would never train.
            try:
                with forbid(forbidden):
                    outcome.gradients, outcome.backward_error, outcome.gradient_values = gradient_report(fn, case)
            except ForbiddenCall:
                pass
        outcomes.append(outcome)
    return outcomes


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and bool(torch.equal(a, b) or _both_nan_equal(a, b))


def _both_nan_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.is_floating_point() and bool(torch.equal(torch.nan_to_num(a), torch.nan_to_num(b)))


def load_function(source: str, func_name: str, forbidden: Sequence[str] = ()) -> Callable[..., Any]:
    """Execute an exercise cell's ``source`` after :data:`PREAMBLE` in a fresh namespace, with the
    ``forbidden`` names patched out, and return the function ``func_name`` it defines.

    Raises :class:`MissingFunction` (a ``LookupError``) when the cell does not define it; whatever the
    cell's top level raises propagates. Runs the cell in this process: in the grader, only inside
    its sandbox.
    """
    namespace: dict[str, Any] = {"__name__": "__exercise__"}
    filename = f"<exercise {func_name}>"
    text = PREAMBLE + source
    # Register the source so that inspect.getsource works on the function: the static
    # forbidden-name test of a check cell needs it.
    linecache.cache[filename] = (len(text), None, text.splitlines(keepends=True), filename)
    code = compile(text, filename, "exec")
    with forbid(forbidden):
        exec(code, namespace)  # noqa: S102  (the point: run the learner's cell)
    fn = namespace.get(func_name)
    if not callable(fn):
        raise MissingFunction(f"the exercise cell does not define a function named {func_name!r}")
    return fn
