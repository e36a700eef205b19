"""One definition per exercise, shared by the notebook check cells, the grader and the pipeline tests.

An :class:`Exercise` says everything about one exercise: its id (``"ch2.causal_mask"``), the name of
the function the learner writes, a reference solution, a generator of random test cases, the names
the learner may not call, its points, and a list of :class:`Mistake` s: plausible wrong answers, each
with the diagnosis a learner should read when their output matches it.

Checking is split in two halves so that the grader can put a process boundary between them:

* :func:`run_cases` calls the learner's function on every case and records an :class:`Outcome`
  (the raw output, or the error it raised, and which inputs it changed in place). In a notebook this
  runs in the kernel; in the grader it runs in the sandboxed student process.
* :func:`judge` compares the outcomes with the reference, computed afresh, and returns a
  :class:`Verdict`. It runs in the trusted process and never calls the learner's code.

``check(exercise, fn)`` glues the two together for a check cell and prints one line that starts
with ``✅`` or ``❌``.
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import inspect
import linecache
import math
import random
import textwrap
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

Case = dict[str, Any]
"""Keyword arguments for one call: tensors, ints, floats, bools, strings, None or tuples of ints."""

PASS, FAIL = "✅", "❌"
_COURSE_PACKAGE = __name__.split(".")[0]  # "utils": the course's own code, trusted by the checks


@dataclass(frozen=True)
class Mistake:
    """A plausible wrong answer and what to tell a learner whose output matches it.

    Args:
        name: short id, e.g. ``"no_scale"``; used by tests.
        fn: a wrong implementation with the same signature as the reference.
        diagnosis: one sentence the learner can act on.
    """

    name: str
    fn: Callable[..., Any]
    diagnosis: str


@dataclass(frozen=True)
class Exercise:
    """Everything about one exercise. See the module docstring.

    Args:
        id: ``"<chapter>.<function name>"``, e.g. ``"ch1.project_qkv"``; the notebook metadata and the
            grader use it.
        reference: the correct function. Its ``__name__`` need not match ``func_name``.
        make_cases: ``make_cases(rng: random.Random, gen: torch.Generator) -> list[Case]``; random
            inputs with varied shapes including edge shapes. Never returns the same cases for two seeds.
        points: the points the exercise is worth (the notebook metadata must agree; a test checks).
        mistakes: plausible wrong answers with diagnoses, at least two per exercise.
        forbidden: dotted names the learner may not use, e.g.
            ``"torch.nn.functional.scaled_dot_product_attention"``; checked in the source (AST) and at
            run time.
        atol, rtol: tolerances for float outputs (compared in float64).
        hint: shown after a generic mismatch.
    """

    id: str
    reference: Callable[..., Any]
    make_cases: Callable[[random.Random, torch.Generator], list[Case]]
    points: int = 1
    mistakes: Sequence[Mistake] = ()
    forbidden: Sequence[str] = ()
    atol: float = 1e-5
    rtol: float = 1e-4
    hint: str = ""

    @property
    def func_name(self) -> str:
        return self.id.split(".", 1)[1]

    @property
    def chapter(self) -> str:
        return self.id.split(".", 1)[0]

    def cases(self, seed: int = 0) -> list[Case]:
        """The test cases for ``seed``: the same seed gives the same cases."""
        gen = torch.Generator().manual_seed(seed)
        return self.make_cases(random.Random(seed), gen)


# --------------------------------------------------------------------------------------------------
# Outcomes: what the learner's function did. Plain data, so the grader can ship it across processes.
# --------------------------------------------------------------------------------------------------


@dataclass
class Outcome:
    """What one call of the learner's function produced.

    ``output`` is a tensor, a tuple of tensors (or None) or a Python number; ``error`` is
    ``(exception type name, message)`` when it raised instead. ``mutated`` lists the arguments it
    changed in place. ``forbidden`` names a forbidden call made at run time.
    """

    output: Any = None
    error: tuple[str, str] | None = None
    mutated: list[str] = field(default_factory=list)
    forbidden: str | None = None


@dataclass(frozen=True)
class Verdict:
    """The result of judging one exercise. ``status`` is one of the grader's statuses."""

    passed: bool
    status: str  # passed | failed | error | forbidden
    message: str

    @property
    def line(self) -> str:
        return f"{PASS if self.passed else FAIL} {self.message}"

    def _ipython_display_(self) -> None:
        """A check cell already printed :attr:`line`; show nothing more for the returned verdict."""


class ForbiddenCall(Exception):
    """Raised inside the learner's function when it calls something the exercise forbids."""


def clone_case(case: Case) -> Case:
    return {k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in case.items()}


def _resolve(dotted: str) -> tuple[Any, str] | None:
    """``(owner, attribute)`` for ``"package.module.attribute"``, or None when it does not exist here
    (or is a bare package name, which has no owner to patch)."""
    module_name, _, attr = dotted.rpartition(".")
    if not module_name:
        return None
    try:
        owner = importlib.import_module(module_name)
    except ImportError:
        return None
    return (owner, attr) if hasattr(owner, attr) else None


@contextlib.contextmanager
def forbid(names: Sequence[str]) -> Iterator[list[str]]:
    """Replace each dotted name (``"torch.nn.MultiheadAttention"``) by a function that raises
    :class:`ForbiddenCall`, for the duration of the block. Unknown names are ignored.

    Yields the list of forbidden names called inside the block, so a call is noticed even when the
    caller swallows the :class:`ForbiddenCall` (``try: ... except Exception: ...``)."""
    saved = []
    called: list[str] = []
    try:
        for dotted in names:
            # A bare package ("utils") cannot be patched out at run time (_resolve gives None); the
            # static check (forbidden_in_source) catches any use of it in the learner's source.
            resolved = _resolve(dotted)
            if resolved is None:
                continue
            owner, attr = resolved

            def _blocked(*args: Any, _name: str = dotted, **kwargs: Any) -> Any:
                called.append(_name)
                raise ForbiddenCall(_name)

            saved.append((owner, attr, getattr(owner, attr)))
            setattr(owner, attr, _blocked)
        yield called
    finally:
        for owner, attr, original in reversed(saved):
            setattr(owner, attr, original)


def run_cases(fn: Callable[..., Any], cases: Sequence[Case], forbidden: Sequence[str] = ()) -> list[Outcome]:
    """Call ``fn(**case)`` on copies of every case and record what happened.

    Stops early after a ``NotImplementedError``: the rest would only say the same.
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
            outcomes.append(outcome)
            break
        except Exception as exc:  # the learner's code may raise anything; we report it
            outcome.error = (type(exc).__name__, _one_line(str(exc)))
        if called and not outcome.forbidden:  # the learner caught our ForbiddenCall and carried on
            outcome.forbidden = called[0]
        outcome.mutated = [
            k for k, v in case.items() if isinstance(v, torch.Tensor) and not _same(v, args[k])
        ]
        outcome.output = _detach(outcome.output)
        outcomes.append(outcome)
    return outcomes


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and bool(torch.equal(a, b) or _both_nan_equal(a, b))


def _both_nan_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.is_floating_point() and bool(torch.equal(torch.nan_to_num(a), torch.nan_to_num(b)))


def _detach(value: Any) -> Any:
    """A plain copy of an output to compare: tensors become plain CPU ``torch.Tensor`` s (a subclass
    could lie through ``__torch_function__`` or an overridden method), numbers and strings their exact
    built-in type (a subclass could lie through ``__eq__`` or ``__float__``), lists tuples."""
    if isinstance(value, torch.Tensor):
        with torch._C.DisableTorchFunctionSubclass():
            plain = torch.Tensor.cpu(torch.Tensor.detach(value))
        return plain.as_subclass(torch.Tensor) if type(plain) is not torch.Tensor else plain
    if isinstance(value, (tuple, list)):
        return tuple(_detach(v) for v in value)
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return int.__int__(value)
    if isinstance(value, float):
        return float.__float__(value)
    if isinstance(value, str):
        return str.__str__(value)
    return value


def _one_line(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


# --------------------------------------------------------------------------------------------------
# Judging: compare outcomes with the reference. Never calls the learner's code.
# --------------------------------------------------------------------------------------------------


def describe(value: Any) -> str:
    """A short description of a value for messages: ``tensor (2, 3) float32``, ``tuple of 2``…"""
    if isinstance(value, torch.Tensor):
        return f"tensor {tuple(value.shape)} {str(value.dtype).replace('torch.', '')}"
    if isinstance(value, tuple):
        return f"tuple of {len(value)}"
    return type(value).__name__


def compare(got: Any, expected: Any, atol: float, rtol: float, where: str = "output") -> str | None:
    """Return None when ``got`` matches ``expected``, else a one-line reason naming ``where``."""
    got = _detach(got)
    if isinstance(expected, tuple):
        if not isinstance(got, (tuple, list)):
            return f"{where} should be a tuple of {len(expected)} ({', '.join(map(describe, expected))}), got {describe(got)}"
        if len(got) != len(expected):
            return f"{where} should be a tuple of {len(expected)}, got a tuple of {len(got)}"
        for i, (g, e) in enumerate(zip(got, expected)):
            reason = compare(g, e, atol, rtol, f"{where}[{i}]")
            if reason:
                return reason
        return None
    if isinstance(expected, torch.Tensor):
        if not isinstance(got, torch.Tensor):
            return f"{where} should be a tensor of shape {tuple(expected.shape)}, got {describe(got)}"
        if got.shape != expected.shape:
            return f"{where} has shape {tuple(got.shape)}, expected {tuple(expected.shape)}"
        if expected.dtype == torch.bool and got.dtype != torch.bool:
            return f"{where} has dtype {got.dtype}, expected torch.bool (True = may attend)"
        if expected.is_floating_point() and not got.is_floating_point():
            return f"{where} has dtype {got.dtype}, expected a floating-point tensor ({expected.dtype})"
        if got.is_floating_point() and not torch.isfinite(got).all() and torch.isfinite(expected).all():
            bad = int((~torch.isfinite(got)).sum())
            return f"{where} contains {bad} NaN/inf values where the reference is finite"
        if expected.dtype == torch.bool or not expected.is_floating_point():
            if not torch.equal(got.to(expected.dtype), expected):
                wrong = int((got.to(expected.dtype) != expected).sum())
                return f"{where} differs from the reference in {wrong} of {expected.numel()} entries"
            return None
        g, e = got.double(), expected.double()
        if not torch.allclose(g, e, atol=atol, rtol=rtol, equal_nan=True):
            err = (g - e).abs().nan_to_num(nan=math.inf)
            idx = tuple(int(i) for i in torch.unravel_index(err.argmax(), err.shape))
            return f"{where} differs from the reference: max abs error {err.max().item():.3g} at index {idx}"
        return None
    if isinstance(expected, (int, float)) and not isinstance(expected, bool):
        if not isinstance(got, (int, float)) or isinstance(got, bool):
            return f"{where} should be a number, got {describe(got)}"
        if not math.isclose(float(got), float(expected), rel_tol=rtol, abs_tol=atol):
            return f"{where} is {got}, expected {expected}"
        return None
    # Exact types first: an object of another class could claim equality through its __eq__.
    if type(got) is not type(expected) or got != expected:
        return f"{where} is {got!r}, expected {expected!r}"
    return None


def judge(exercise: Exercise, cases: Sequence[Case], outcomes: Sequence[Outcome]) -> Verdict:
    """Compare the learner's outcomes with the reference on the same cases."""
    if not outcomes:
        return Verdict(False, "error", "your function was never called")
    for index, (case, outcome) in enumerate(zip(cases, outcomes)):
        shapes = _case_summary(case)
        if outcome.forbidden:
            return Verdict(
                False, "forbidden",
                f"your function calls {outcome.forbidden}, which this exercise asks you to implement yourself",
            )
        if outcome.error:
            kind, message = outcome.error
            if kind == "NotImplementedError":
                return Verdict(False, "error", "not implemented yet: replace `raise NotImplementedError` with your code")
            mistake = _matching_mistake_error(exercise, case, kind, message)
            advice = f" {mistake.diagnosis}" if mistake else ""
            return Verdict(False, "error", f"your function raised {kind}: {message} (inputs: {shapes}).{advice}")
        if outcome.mutated:
            names = ", ".join(outcome.mutated)
            return Verdict(
                False, "failed",
                f"your function changed its input {names} in place; work on a copy or use out-of-place ops "
                f"(e.g. `x + y`, not `x += y`; `masked_fill`, not `masked_fill_`)",
            )
        expected = _detach(exercise.reference(**clone_case(case)))
        reason = compare(outcome.output, expected, exercise.atol, exercise.rtol)
        if reason is None:
            continue
        mistake = _matching_mistake(exercise, case, outcome.output)
        if mistake is not None:
            return Verdict(False, "failed", f"{mistake.diagnosis} (case {index + 1}: {shapes})")
        hint = f" Hint: {exercise.hint}" if exercise.hint else ""
        return Verdict(False, "failed", f"{reason} (case {index + 1}: {shapes}).{hint}")
    if len(outcomes) < len(cases):  # e.g. the grader's sandbox died part-way: never pass on part
        return Verdict(False, "error", f"your function ran on only {len(outcomes)} of {len(cases)} cases")
    return Verdict(True, "passed", f"{exercise.func_name} matches the reference on {len(cases)} random cases")


def _matching_mistake(exercise: Exercise, case: Case, got: Any) -> Mistake | None:
    for mistake in exercise.mistakes:
        try:
            wrong = _detach(mistake.fn(**clone_case(case)))
        except Exception:
            continue
        if compare(got, wrong, exercise.atol, exercise.rtol) is None:
            return mistake
    return None


def _matching_mistake_error(exercise: Exercise, case: Case, kind: str, message: str) -> Mistake | None:
    for mistake in exercise.mistakes:
        try:
            mistake.fn(**clone_case(case))
        except Exception as exc:
            if type(exc).__name__ == kind and _one_line(str(exc)) == message:
                return mistake
    return None


def _case_summary(case: Case) -> str:
    parts = []
    for key, value in case.items():
        if isinstance(value, torch.Tensor):
            parts.append(f"{key}{tuple(value.shape)}")
        elif value is None or isinstance(value, (int, float, bool, str, tuple)):
            parts.append(f"{key}={value!r}")
    return ", ".join(parts)


# --------------------------------------------------------------------------------------------------
# Static check of the learner's source for forbidden names
# --------------------------------------------------------------------------------------------------


def forbidden_in_source(source: str, forbidden: Sequence[str]) -> str | None:
    """Return the first forbidden dotted name the source uses (as an attribute, an import, or the
    ``utils`` package), or None. The function's own name is never flagged.

    >>> forbidden_in_source("def f(q):\\n    return F.scaled_dot_product_attention(q, q, q)",
    ...                     ["torch.nn.functional.scaled_dot_product_attention"])
    'torch.nn.functional.scaled_dot_product_attention'
    """
    try:
        tree = ast.parse(textwrap.dedent(source))
    except SyntaxError:
        return None
    by_attr = {name.rpartition(".")[2]: name for name in forbidden}
    packages = {name for name in forbidden if "." not in name}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in by_attr:
            return by_attr[node.attr]
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in packages:
                    return alias.name
        if isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if module.split(".")[0] in packages:
                return module
            for alias in node.names:
                if alias.name in by_attr:
                    return by_attr[alias.name]
        if isinstance(node, ast.Name) and node.id in packages:
            return node.id
    return None


def check(exercise: Exercise, fn: Callable[..., Any], *, seed: int = 0, quiet: bool = False) -> Verdict:
    """Check ``fn`` against ``exercise`` and print one ``✅``/``❌`` line (unless ``quiet``)."""
    if not callable(fn):
        verdict = Verdict(False, "error", f"expected your function {exercise.func_name}, got {describe(fn)}")
    else:
        name = _static_forbidden(fn, exercise.forbidden) or forbidden_in_globals(fn, exercise.forbidden)
        if name:
            verdict = Verdict(
                False, "forbidden",
                f"your function uses {name}; this exercise asks you to implement it yourself",
            )
        else:
            cases = exercise.cases(seed)
            verdict = judge(exercise, cases, run_cases(fn, cases, exercise.forbidden))
    if not quiet:
        print(verdict.line)
    return verdict


def forbidden_in_globals(fn: Callable[..., Any], forbidden: Sequence[str]) -> str | None:
    """Return the forbidden name that ``fn`` reaches through a global or closure variable, or None.

    This catches an alias the source check cannot see, e.g. ``from utils.positional import
    sinusoidal_encoding as table`` in an earlier cell and ``return table(...)`` in the exercise.
    Objects are matched by identity with the forbidden dotted names, and anything defined in a
    forbidden bare package (``"utils"``) by its ``__module__``.
    """
    code = getattr(fn, "__code__", None)
    if code is None or not forbidden:
        return None
    targets: dict[int, str] = {}
    packages = {name for name in forbidden if "." not in name}
    own_module = getattr(fn, "__module__", None) or ""
    if own_module.split(".")[0] in packages | {_COURSE_PACKAGE}:
        return None  # the course's own references and mistakes (a learner's cell runs in __main__)
    for dotted in forbidden:
        resolved = _resolve(dotted)
        if resolved is not None:
            targets[id(getattr(*resolved))] = dotted
    referenced = []
    stack = [code]
    while stack:  # names used by fn and by functions, lambdas and comprehensions nested in it
        current = stack.pop()
        referenced.extend(current.co_names)
        stack.extend(c for c in current.co_consts if inspect.iscode(c))
    values = [fn.__globals__[name] for name in referenced if name in getattr(fn, "__globals__", {})]
    values += [cell.cell_contents for cell in (fn.__closure__ or ()) if _cell_filled(cell)]
    for value in values:
        if id(value) in targets:
            return targets[id(value)]
        module = value.__name__ if inspect.ismodule(value) else getattr(value, "__module__", None)
        if isinstance(module, str) and module.split(".")[0] in packages:
            name = getattr(value, "__qualname__", None)
            return f"{module}.{name}" if name and not inspect.ismodule(value) else module
    return None


def _cell_filled(cell: Any) -> bool:
    try:
        cell.cell_contents  # noqa: B018
    except ValueError:
        return False
    return True


def _static_forbidden(fn: Callable[..., Any], forbidden: Sequence[str]) -> str | None:
    if not forbidden:
        return None
    try:
        source = inspect.getsource(fn)
    except (OSError, TypeError):
        return None
    return forbidden_in_source(source, forbidden)


# --------------------------------------------------------------------------------------------------
# Loading an exercise cell's function on its own (pipeline tests, grader sandbox)
# --------------------------------------------------------------------------------------------------

PREAMBLE = "import math\nimport torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"
"""The only names an exercise cell may rely on besides what it defines itself. Every notebook's
setup imports them too, so a cell behaves the same in the notebook, in tests and in the grader."""


def load_function(source: str, func_name: str) -> Callable[..., Any]:
    """Execute an exercise cell's ``source`` after :data:`PREAMBLE` in a fresh namespace and return
    the function ``func_name`` it defines. Raises ``LookupError`` when the cell does not define it.

    Only for trusted sources (the course's own notebooks); the grader does this inside its sandbox.
    """
    namespace: dict[str, Any] = {"__name__": "__exercise__"}
    filename = f"<exercise {func_name}>"
    text = PREAMBLE + source
    # Register the source so that inspect.getsource works on the function: check's static
    # forbidden-name test needs it.
    linecache.cache[filename] = (len(text), None, text.splitlines(keepends=True), filename)
    exec(compile(text, filename, "exec"), namespace)  # noqa: S102
    fn = namespace.get(func_name)
    if not callable(fn):
        raise LookupError(f"the exercise cell does not define a function named {func_name!r}")
    return fn
