"""Plain data and helpers that both sides of the grader's trust boundary use.

The runner (:mod:`utils.exercises.runner`, beside the learner's code) records an :class:`Outcome` per
case; the judge (:mod:`utils.exercises.judging`, trusted) turns outcomes into a verdict whose status is
a :class:`Status`. This module knows nothing about references, mistakes or how a grade is decided, so
the sandboxed worker may import it.
"""

from __future__ import annotations

import importlib
import re
import types
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import torch

Case = dict[str, Any]
"""Keyword arguments for one call: tensors, ints, floats, bools, strings, None or tuples of ints."""

PASS, FAIL = "✅", "❌"
"""The marks that start a check cell's line and a feedback row."""

ERROR_MESSAGE_CHARS = 200
"""An error message raised by learner code is kept to this many characters (runner and judge agree)."""
ODD_OUTPUT = "unreadable output"
"""The error kind the runner gives an output it cannot compare (a sparse, mkldnn or meta tensor): the function
returned it, it raised nothing, and the judge says so."""


class Status(str, Enum):
    """Every status an exercise can end with: in a check cell's verdict, a grader row and the reports.

    A ``str`` enum, so a status is also its plain string (``Status.PASSED == "passed"``, and ``str()``
    and f-strings give ``"passed"`` on every Python version) in CSV and JSON. (``enum.StrEnum`` would
    say this in one word, but it needs Python 3.11.)
    """

    __str__ = str.__str__
    __format__ = str.__format__

    PASSED = "passed"
    FAILED = "failed"  # ran, and the output is wrong (or an input was changed in place)
    ERROR = "error"  # raised, could not run, or ended its process
    NOT_ATTEMPTED = "not attempted"  # every call still raises NotImplementedError (the template's stub)
    TIMEOUT = "timeout"
    MEMORY = "memory"
    FORBIDDEN = "forbidden"
    MISSING = "missing"  # grader only: no exercise cell in the submission
    INVALID = "invalid"  # grader only: the notebook could not be read


def one_line(text: object, limit: int | None = None) -> str:
    """``text`` with its whitespace collapsed to single spaces. Nothing is cut unless a ``limit`` is given
    (a feedback line keeps every sentence); then the text keeps at most ``limit`` characters, ending at the
    last whole sentence that fits (else, when not even one fits, the last whole word) and followed by
    ``(…N more characters)``.

    >>> one_line("a\\n  b"), one_line("First one. Then a second, longer sentence.", limit=40)
    ('a b', 'First one. (…32 more characters)')
    >>> one_line("x" * 12, limit=5)
    'xxxx…'
    """
    text = " ".join(str(text).split())
    if limit is None or len(text) <= limit:
        return text
    room = limit - len(_MORE.format(count=len(text)))
    if room < 10:  # too short for a marker
        return text[: limit - 1] + "…"
    ends = [i + 1 for i, ch in enumerate(text[:room]) if ch in _SENTENCE_END and (text[i + 1] == " " or ord(ch) > 127)]
    spaces = [i for i, ch in enumerate(text[: room + 1]) if ch == " "]
    cut = ends[-1] if ends else (spaces[-1] if spaces and spaces[-1] > room // 2 else room)
    head = text[:cut].rstrip()
    return f"{head}{_MORE.format(count=len(text) - len(head))}"


_SENTENCE_END = ".!?;。！？；"
_MORE = " (…{count} more characters)"


@dataclass
class Outcome:
    """What one call of the learner's function produced. Plain data, so it can cross processes.

    ``output`` is a tensor, a tuple of tensors (or None) or a Python number; ``error`` is
    ``(exception type name, message)`` when it raised instead. ``mutated`` lists the arguments it
    changed in place. ``forbidden`` names a forbidden call made at run time.
    """

    output: Any = None
    error: tuple[str, str] | None = None
    mutated: list[str] = field(default_factory=list)
    forbidden: str | None = None
    gradients: dict[str, str] = field(default_factory=dict)  # input name -> one of GRADIENT_STATES
    backward_error: str | None = None  # what backward through the function raised, in one line
    gradient_values: dict[str, torch.Tensor] = field(default_factory=dict)  # input name -> its gradient
    """The gradients along :func:`cotangent` (finite ones only), which the judge compares with the reference's."""


GRADIENT_STATES = ("flows", "zero", "missing", "non-finite")
"""What reaches a floating input when the output's (finite) sum is differentiated: a gradient with some
nonzero entry, an all-zero one, none (the graph was cut), or one with NaN or inf."""


_TB = torch._C.TensorBase  # noqa: SLF001  (an immutable type: a cell cannot patch its methods)
_TRUSTED: dict[str, Any] = {
    "tensor": torch.Tensor, "isinstance": isinstance, "generator": torch.Generator, "randn": torch.randn,
    "where": torch.where, "isfinite": torch.isfinite, "zeros_like": torch.zeros_like, "grad": torch.autograd.grad,
    "no_subclass": torch._C.DisableTorchFunctionSubclass, "clone": _TB.clone, "detach": _TB.detach, "cpu": _TB.cpu,  # noqa: SLF001
    "as_subclass": _TB.as_subclass, "requires_grad_": _TB.requires_grad_, "requires_grad": _TB.requires_grad.__get__,
    "is_floating_point": _TB.is_floating_point, "double": _TB.double, "sum": _TB.sum, "ne": _TB.ne, "any": _TB.any,
    "all": _TB.all, "shape": _TB.shape.__get__, "manual_seed": torch.Generator.manual_seed,
    "tuple_iter": tuple.__iter__, "list_iter": list.__iter__,
}
"""What the runner's helpers below use after the learner's code ran (its gradient report, the plain copy of its
output), bound when this module is imported, before any cell runs: built-in functions and methods of immutable
types. A cell that rebinds ``torch.where``, ``torch.autograd.grad`` or ``torch.Tensor.detach`` in its process, or
returns a tuple whose ``__iter__`` is its own, changes nothing here (issue 35, after red team R16)."""


def cotangent(t: torch.Tensor, index: int) -> torch.Tensor:
    """The fixed float64 direction the ``index``-th floating output of a call is differentiated along: random
    numbers that depend on its shape and position only, so the runner and the judge (which differentiates the
    reference) use the same one. A sum (all ones) would miss a wrong gradient that is constant along it: the
    one of a softmax's normalisation, or of RMSNorm's factor."""
    gen = _TRUSTED["manual_seed"](_TRUSTED["generator"](), 20240707 + index)
    return _TRUSTED["randn"](tuple(_TRUSTED["shape"](t)), generator=gen, dtype=torch.float64)


def gradient_report(fn: Any, case: Case) -> tuple[dict[str, str], str | None, dict[str, torch.Tensor]]:
    """Call ``fn`` on a copy of ``case`` whose floating tensors require grad, differentiate the sum of
    the finite entries of its floating outputs, and say what reaches each floating input; then, along
    :func:`cotangent`, what the gradients are.

    Returns ``(states, backward_error, values)``: one of :data:`GRADIENT_STATES` per floating input, or ``({},
    message, {})`` when the call or the backward pass raised (the states with the message when only the second
    pass, along the cotangent, raised); ``values``: each finite gradient along the cotangent, as a plain tensor
    (an input that gets none is left out; a non-finite one makes its state ``non-finite``)."""
    t = _TRUSTED
    args = clone_case(case)
    leaves = {key: t["requires_grad_"](value, True) for key, value in args.items()
              if t["isinstance"](value, t["tensor"]) and t["is_floating_point"](value)}
    if not leaves:
        return {}, None, {}
    try:
        outputs = [x for x in _tensors(fn(**args)) if t["is_floating_point"](x) and t["requires_grad"](x)]
        if not outputs:
            return {key: "missing" for key in leaves}, None, {}
        finite = [t["double"](t["where"](t["isfinite"](x), x, t["zeros_like"](x))) for x in outputs]
        grads = t["grad"](sum(t["sum"](x) for x in finite), list(leaves.values()), allow_unused=True, retain_graph=True)
    except Exception as exc:  # the learner's code may raise anything in its backward pass
        return {}, one_line(f"{type(exc).__name__}: {exception_text(exc)}", ERROR_MESSAGE_CHARS), {}
    states = {}
    for key, grad in zip(leaves, grads):
        if grad is None:
            states[key] = "missing"
        elif not bool(t["all"](t["isfinite"](grad))):
            states[key] = "non-finite"
        else:
            states[key] = "flows" if bool(t["any"](t["ne"](grad, 0))) else "zero"
    try:  # the values, along the cotangent, through the same graph (kept by retain_graph above)
        total = sum(t["sum"](x * cotangent(x, i)) for i, x in enumerate(finite))
        grads = t["grad"](total, list(leaves.values()), allow_unused=True)
    except Exception as exc:  # a backward that refuses a second run hid a wrong first one (red team R23)
        return states, one_line(f"{type(exc).__name__}: {exception_text(exc)}", ERROR_MESSAGE_CHARS), {}
    values = {}
    for key, grad in zip(leaves, grads):
        if grad is not None and not bool(t["all"](t["isfinite"](grad))):
            states[key] = "non-finite"  # NaN on the second run only is no finite gradient either (R23)
        elif grad is not None:
            values[key] = plain_copy(grad)
    return states, None, values


def _tensors(value: Any) -> list[torch.Tensor]:
    """The tensors of an output, a tuple's or list's by its own items (not its class's ``__iter__``)."""
    if _TRUSTED["isinstance"](value, _TRUSTED["tensor"]):
        return [value]
    if _TRUSTED["isinstance"](value, (tuple, list)):
        return [x for item in _items(value) for x in _tensors(item)]
    return []


def _items(value: tuple | list) -> Any:
    return _TRUSTED["tuple_iter"](value) if _TRUSTED["isinstance"](value, tuple) else _TRUSTED["list_iter"](value)


def exception_text(exc: BaseException) -> str:
    """``str(exc)``; where that raises (a class of the learner's whose ``__str__`` fails), its class's name."""
    try:
        return str(exc)
    except Exception:  # noqa: BLE001  (the learner's __str__ may raise anything)
        return f"<{type(exc).__name__}>"


def clone_case(case: Case) -> Case:
    """A copy of ``case`` whose tensors are clones, so a call cannot change the original."""
    t = _TRUSTED
    return {k: (t["clone"](v) if t["isinstance"](v, t["tensor"]) else v) for k, v in case.items()}


def plain_copy(value: Any) -> Any:
    """A plain copy of an output to compare: tensors become plain CPU ``torch.Tensor`` s (a subclass
    could lie through ``__torch_function__`` or an overridden method), numbers and strings their exact
    built-in type (a subclass could lie through ``__eq__`` or ``__float__``), tuples and lists plain ones
    (a list stays a list, so that a message can say which one the function returned), by their own items: a
    subclass's ``__iter__`` is not called (it would run the learner's code after its call, outside
    :func:`~utils.exercises.runner.forbid`)."""
    t = _TRUSTED
    if t["isinstance"](value, t["tensor"]):
        with t["no_subclass"]():  # a copy of the values: code the learner left to run later (a generator's
            plain = t["clone"](t["cpu"](t["detach"](value)))  # finally, a __del__) cannot rewrite it (R22)
        return t["as_subclass"](plain, t["tensor"]) if type(plain) is not t["tensor"] else plain
    if t["isinstance"](value, (tuple, list)):
        items = [plain_copy(v) for v in _items(value)]
        return items if t["isinstance"](value, list) else tuple(items)
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return int.__int__(value)
    if isinstance(value, float):
        return float.__float__(value)
    if isinstance(value, str):
        return str.__str__(value)
    return value


def resolve(dotted: str) -> tuple[Any, str] | None:
    """``(owner, attribute)`` for ``"package.module.attribute"``, or None when it does not exist here
    (or is a bare package name, which has no owner). The runner patches the attribute out; the
    forbidden-name check looks for the object it holds."""
    module_name, _, attr = dotted.rpartition(".")
    if not module_name:
        return None
    try:
        owner = importlib.import_module(module_name)
    except ImportError:
        return None
    return (owner, attr) if hasattr(owner, attr) else None


NAMESAKE_SPACES = ("torch", "torch.nn", "torch.nn.functional", "torch.special", "torch.Tensor", "torch.distributions")
"""Where :func:`torch_namesakes` looks for torch's other names of a forbidden routine."""
_NAMESAKES: dict[str, tuple[str, ...]] = {}
_SPACES: dict[str, tuple[int, tuple[tuple[str, tuple[str, ...]], ...]]] = {}  # space -> (size, callables' words)
_WORD_BREAK = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])|(?<=[A-Za-z])(?=[0-9])")


def name_words(name: str) -> list[str]:
    """The words of a name, its case, underscores and digits read as breaks: ``["log", "softmax", "with",
    "loss"]`` for ``AdaptiveLogSoftmaxWithLoss``, ``["batch", "norm", "1d"]`` for ``BatchNorm1d``.

    >>> name_words("_native_layer_norm"), name_words("RMSNorm"), name_words("logaddexp2")
    (['native', 'layer', 'norm'], ['rms', 'norm'], ['logaddexp', '2'])
    """
    spaced = _WORD_BREAK.sub("_", name)
    return [word for word in spaced.lower().split("_") if word]


def holds_in_order(words: Sequence[str], parts: Sequence[str]) -> bool:
    """Whether ``parts`` holds every one of ``words`` in their order (other words between them allowed)."""
    remaining = iter(parts)
    return all(word in remaining for word in words)


def torch_namesakes(dotted: str) -> tuple[str, ...]:
    """torch's other callables, in :data:`NAMESAKE_SPACES`, that compute what the forbidden torch name ``dotted``
    does under another name: those whose name holds its words in order (red team R19: ``torch.native_layer_norm``
    and ``torch.native_batch_norm`` for ``layer_norm`` and ``batch_norm``, ``F.linear_cross_entropy`` and
    ``nn.LinearCrossEntropyLoss`` for ``cross_entropy``, ``torch.distributions.SoftmaxTransform`` for
    ``softmax``), private ones included (``torch._softmax``). Modules and other values are left out. Empty for a
    name outside torch, and for torch.autograd's and torch.func's (:func:`differentiates`): a gradient's word is
    in ``torch.no_grad``, ``requires_grad_``... A fair cell computes a norm with ``F.normalize`` or
    ``torch.linalg.vector_norm``, whose words hold no forbidden name's. The static check refuses each namesake by
    its name, the run time blocks it (:func:`utils.exercises.runner.forbid`)."""
    root, _, last = dotted.rpartition(".")
    if not root.startswith("torch") or differentiates(root):
        return ()
    if dotted not in _NAMESAKES:
        words = name_words(last)
        _NAMESAKES[dotted] = tuple(f"{space}.{name}" for space in NAMESAKE_SPACES for name, parts in _callables(space)
                                   if f"{space}.{name}" != dotted and holds_in_order(words, parts))
    return _NAMESAKES[dotted]


def _callables(space: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """The callables of ``space`` (one of :data:`NAMESAKE_SPACES`) that may be namesakes, sorted by name, each with
    its :func:`name_words`: read once per process and read again only when the space's size changed (a module
    imported later added names), so that a grader's worker reads them before it forks, not every exercise's
    process again (they cost about 0.5 s of CPU each time)."""
    owner = torch.Tensor if space == "torch.Tensor" else importlib.import_module(space)
    classes = owner.__mro__[:-1] if isinstance(owner, type) else (owner,)
    size = sum(len(vars(cls)) for cls in classes)
    if space not in _SPACES or _SPACES[space][0] != size:
        names = {name for cls in classes for name in vars(cls)}
        entries = []
        for name in sorted(names):
            value = _static_value(owner, name)
            if not name.startswith("__") and callable(value) and not isinstance(value, types.ModuleType):
                entries.append((name, tuple(name_words(name))))
        _SPACES[space] = (size, tuple(entries))
    return _SPACES[space][1]


def read_namesake_spaces() -> None:
    """Read every namesake space now (:func:`_callables`): a forked process then finds them read."""
    for space in NAMESAKE_SPACES:
        _callables(space)


def differentiates(root: str) -> bool:
    """Whether the torch module ``root`` is torch.autograd, torch.func or torch._functorch, or one below them (the
    grader's worker also lists ``torch._functorch.apis.grad``, which ``torch.func.grad`` is)."""
    return any(part in ("autograd", "func", "_functorch") for part in root.split(".")[1:2])


def with_namesakes(forbidden: Sequence[str]) -> list[str]:
    """``forbidden`` followed by each name's :func:`torch_namesakes` that it does not list already."""
    return list(dict.fromkeys([*forbidden, *(other for name in forbidden for other in torch_namesakes(name))]))


def _static_value(owner: Any, name: str) -> Any:
    """``owner``'s ``name`` as stored (a module's dict, a class's MRO): reading it runs no lazy import."""
    if isinstance(owner, type):
        return next((vars(cls)[name] for cls in owner.__mro__ if name in vars(cls)), None)
    return vars(owner).get(name)
