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
import sys
import types
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch

from utils.exercises.common import (
    ERROR_MESSAGE_CHARS,
    ODD_OUTPUT,
    Case,
    Outcome,
    differentiates,
    exception_text,
    gradient_report,
    holds_in_order,
    name_words,
    one_line,
    plain_copy,
    read_namesake_spaces,
    resolve,
    torch_namesakes,
)

PREAMBLE = "import math\nimport torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"
"""The only names an exercise cell may rely on besides what it defines itself. Every notebook's
setup imports them too, so a cell behaves the same in the notebook, in tests and in the grader."""


_TENSOR_BASE = torch._C.TensorBase  # noqa: SLF001  (an immutable type: a cell cannot patch its methods)
_TRUSTED = {"tensor": torch.Tensor, "equal": torch.equal, "nan_to_num": torch.nan_to_num, "isnan": torch.isnan,
            "view_as_real": torch.view_as_real, "detach": _TENSOR_BASE.detach, "view": _TENSOR_BASE.view,
            "is_complex": _TENSOR_BASE.is_complex, "element_size": _TENSOR_BASE.element_size,
            "clone": _TENSOR_BASE.clone, "size": _TENSOR_BASE.size, "dtype": _TENSOR_BASE.dtype.__get__,
            "is_floating_point": _TENSOR_BASE.is_floating_point, "isinstance": isinstance, "text": Exception.__str__,
            "layout": _TENSOR_BASE.layout.__get__, "device": _TENSOR_BASE.device.__get__, "tuple_iter": tuple.__iter__,
            "list_iter": list.__iter__}
"""What the runner uses after the learner's code ran, bound when it is imported (before any cell runs): a cell
that rebinds ``torch.equal`` or ``torch.Tensor.clone`` cannot hide that it changed its inputs (red team R16)."""
_OP_NAMES = torch._C._dispatch_get_all_op_names  # noqa: SLF001
_ATEN_PREFIXES = ("special", "linalg", "fft", "native", "fused", "masked", "safe", "cudnn", "miopen", "quantized",
                  "mkldnn")
_ATEN_PACKETS: dict[str, list[str]] = {}
_ATEN_WORDS: list = [-1, ()]  # how many operators were read, and each aten one's name and words


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

    torch's other names for the same routine (:func:`~utils.exercises.common.torch_namesakes`:
    ``torch.native_layer_norm`` for ``torch.nn.functional.layer_norm``) are replaced too, and a forbidden class's
    instances made another way (``transform_to(constraints.simplex)`` is a ``SoftmaxTransform``) cannot be
    called: each is named, when called, by its own name (the name the learner reached), the listed name for a
    listed one.

    Yields the list of forbidden names called inside the block, so a call is noticed even when the
    caller swallows the :class:`ForbiddenCall` (``try: ... except Exception: ...``)."""
    saved = []
    called: list[str] = []
    try:
        done: set[tuple[int, str]] = set()
        for dotted in names:
            for packet in _aten_packets(dotted):  # torch.ops.aten.logsumexp(.default), named nowhere in the cell
                if (id(packet), "_op") not in done:
                    done.add((id(packet), "_op"))
                    saved.append((packet, "_op", packet._op, True))  # noqa: SLF001
                    packet._op = _blocker(dotted, called)  # noqa: SLF001
        # Each listed name first, under its own name; then its namesakes. A bare package ("utils") cannot be
        # patched out at run time (resolve gives None); the static check (forbidden_in_source) catches any use of
        # it in the learner's source.
        for name in [*names, *(other for listed in names for other in torch_namesakes(listed))]:
            resolved = resolve(name) or _class_member(name)
            if resolved is None or (id(resolved[0]), resolved[1]) in done:
                continue
            value = getattr(*resolved)
            # a module class's instances can be neither called nor made: a subclass's own forward (R26) needs one
            for target, key in (resolved, *([(value, "__call__"), (value, "__init__")] if _calls_instances(value)
                                            else [])):
                if (id(target), key) not in done:
                    done.add((id(target), key))
                    saved.append((target, key, getattr(target, key), key in vars(target)))
                    setattr(target, key, _blocker(name, called))
        yield called
    finally:
        for owner, attr, original, own in reversed(saved):
            if own:
                setattr(owner, attr, original)
            else:
                delattr(owner, attr)


def _blocker(name: str, called: list[str]) -> Callable[..., Any]:
    def _blocked(*args: Any, **kwargs: Any) -> Any:
        called.append(name)
        raise ForbiddenCall(name)

    return _blocked


def _calls_instances(value: Any) -> bool:
    """Whether ``value`` is a class of torch's whose instances are called (an ``nn.Module``, a distributions
    ``Transform``): its ``__call__`` and ``__init__`` are blocked too (so is making a subclass's instance)."""
    return isinstance(value, type) and value.__module__.startswith("torch") and any(
        "__call__" in vars(cls) for cls in value.__mro__[:-1])


def _aten_packets(dotted: str) -> list[Any]:
    """torch's operators (``torch.ops.aten.<op>`` and each overload, ``.default`` ...) that compute what the
    forbidden torch name ``dotted`` does: those whose name, less leading underscores and a prefix such as
    ``special_``, starts with the name's first word and holds its words in order
    (``_scaled_dot_product_flash_attention_for_cpu`` for ``scaled_dot_product_attention``). Reached only by
    a computed name, which the static check refuses: this is the run-time half (red team R16)."""
    root, _, last = dotted.rpartition(".")
    if not root.startswith("torch") or differentiates(root):
        return []
    if last not in _ATEN_PACKETS:
        words = name_words(last)
        found = [name for name, parts in _aten_words() if parts[0] == words[0] and holds_in_order(words, parts)]
        packets = []
        for name in sorted(found):
            packet = getattr(torch.ops.aten, name, None)
            if packet is not None:
                packets += [packet, *(getattr(packet, overload) for overload in packet.overloads())]
        _ATEN_PACKETS[last] = packets
    return _ATEN_PACKETS[last]


def _aten_words() -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Each aten operator's name (without its overload) and the words :func:`_aten_packets` matches, less a
    prefix such as ``special_``: read once per process, again only when the number of operators changed."""
    names = _OP_NAMES()
    if _ATEN_WORDS[0] != len(names):
        words: dict[str, tuple[str, ...]] = {}
        for full in names:
            namespace, _, rest = full.partition("::")
            name = rest.split(".")[0]
            if namespace == "aten" and name not in words:
                parts = name_words(name) or [""]
                words[name] = tuple(parts[1:] if parts[0] in _ATEN_PREFIXES and len(parts) > 1 else parts)
        _ATEN_WORDS[:] = [len(names), tuple(words.items())]
    return _ATEN_WORDS[1]


def read_torch_names() -> None:
    """Read torch's names that :func:`forbid` matches forbidden names against (its callables and aten
    operators), so that a process forked later finds them read: the grader's worker calls this before it
    forks any exercise's process."""
    read_namesake_spaces()
    _aten_words()


def read_forbidden(names: Sequence[str]) -> None:
    """Find what :func:`forbid` will patch for ``names`` (their namesakes and aten operators) and keep it, without
    patching anything: a process forked later starts with it found."""
    for name in names:
        _aten_packets(name)
        torch_namesakes(name)


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
        args = _clone_case(case)
        outcome, out_of_memory = Outcome(), False
        with forbid(forbidden) as called:  # all that may run the cell's code: the call, its error's __str__, its output
            try:
                result = fn(**args)
            except ForbiddenCall as exc:
                outcome.forbidden = _TRUSTED["text"](exc)
            except NotImplementedError:
                outcome.error = ("NotImplementedError", "")
            except MemoryError as exc:
                outcome.error, out_of_memory = ("MemoryError", one_line(exception_text(exc), ERROR_MESSAGE_CHARS)), True
            except Exception as exc:  # the learner's code may raise anything; we report it
                outcome.error = (type(exc).__name__, one_line(exception_text(exc), ERROR_MESSAGE_CHARS))
            else:
                outcome.output, outcome.error = _read_output(result)
        if out_of_memory:
            outcomes.append(outcome)
            break
        if called and not outcome.forbidden:  # the learner caught our ForbiddenCall and carried on
            outcome.forbidden = called[0]
        outcome.mutated = [
            k for k, v in case.items() if _TRUSTED["isinstance"](v, _TRUSTED["tensor"]) and not _same(v, args[k])
        ]
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


def _read_output(result: Any) -> tuple[Any, tuple[str, str] | None]:
    """``(plain copy, None)`` of an output, or ``(None, (ODD_OUTPUT, why))`` where it holds a tensor that has no
    ordinary values to compare (sparse, mkldnn, on the meta device), or cannot be copied. A ``NotImplementedError``
    raised while copying (``.cpu()`` of a meta tensor) is no stub of the learner's: never "not attempted"
    (red team R19)."""
    try:
        odd = _odd_tensor(result)
        return (None, (ODD_OUTPUT, odd)) if odd is not None else (plain_copy(result), None)
    except Exception as exc:  # an output torch cannot copy; the learner's code may raise anything here too
        text = one_line(f"{type(exc).__name__}: {exception_text(exc)}", ERROR_MESSAGE_CHARS)
        return None, (ODD_OUTPUT, f"the output could not be read ({text}): return ordinary tensors or numbers")


def _odd_tensor(value: Any, depth: int = 0) -> str | None:
    """What is odd about the first tensor of an output (a tuple's or list's by its own items, with :data:`_TRUSTED`
    only) that has no ordinary values, or None."""
    t = _TRUSTED
    if t["isinstance"](value, t["tensor"]):
        layout, device = t["layout"](value), t["device"](value)
        if device.type == "meta":
            return ("the output is a tensor on the meta device, which holds no values: compute it from the inputs, "
                    "on their device")
        if layout != torch.strided:
            return f"the output is a {layout} tensor, not a dense one: return an ordinary (strided) tensor"
        return None
    if t["isinstance"](value, (tuple, list)) and depth < 8:
        items = t["tuple_iter"](value) if t["isinstance"](value, tuple) else t["list_iter"](value)
        return next((odd for odd in (_odd_tensor(item, depth + 1) for item in items) if odd is not None), None)
    return None


def _clone_case(case: Case) -> Case:
    """A copy of ``case`` whose tensors are clones (by :data:`_TRUSTED`'s clone), so a call cannot change it."""
    return {k: (_TRUSTED["clone"](v) if _TRUSTED["isinstance"](v, _TRUSTED["tensor"]) else v) for k, v in case.items()}


_BITS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
"""The integer dtype of each element size: two tensors are the same when their bits are (R25: -0.0 and a NaN's
payload count; a complex NaN left alone is no change)."""


def _same(a: torch.Tensor, b: Any) -> bool:
    """Whether the case's tensor ``a`` and what its copy ``b`` is after the call are the same, bit for bit, with
    only what :data:`_TRUSTED` bound before the learner's code ran."""
    t = _TRUSTED
    if not t["isinstance"](b, t["tensor"]) or t["size"](a) != t["size"](b) or t["dtype"](a) is not t["dtype"](b):
        return False
    if not t["is_floating_point"](a) and not t["is_complex"](a):
        return bool(t["equal"](a, b))
    if t["is_complex"](a):
        a, b = t["view_as_real"](t["detach"](a)), t["view_as_real"](t["detach"](b))
    bits = _BITS.get(t["element_size"](a))
    if bits is None:  # no integer of that size: values, NaNs in the same places (R24)
        return bool(t["equal"](t["isnan"](a), t["isnan"](b))) and bool(t["equal"](t["nan_to_num"](a, nan=0.0),
                                                                                   t["nan_to_num"](b, nan=0.0)))
    return bool(t["equal"](t["view"](t["detach"](a), bits), t["view"](t["detach"](b), bits)))


def load_function(source: str, func_name: str, forbidden: Sequence[str] = ()) -> Callable[..., Any]:
    """Execute an exercise cell's ``source`` after :data:`PREAMBLE` in a fresh namespace, with the
    ``forbidden`` names patched out, and return the function ``func_name`` it defines.

    Raises :class:`MissingFunction` (a ``LookupError``) when the cell does not define it; whatever the
    cell's top level raises propagates. Runs the cell in this process: in the grader, only inside
    its sandbox.
    """
    module = types.ModuleType("__exercise__")  # in sys.modules while it runs: dataclasses looks its module up
    namespace: dict[str, Any] = module.__dict__
    filename = f"<exercise {func_name}>"
    # Register the source so that inspect.getsource works on the function: the static
    # forbidden-name test of a check cell needs it. The preamble is compiled on its own, so that the
    # cell may start with ``from __future__ import annotations``.
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    code = compile(source, filename, "exec")
    previous = sys.modules.get("__exercise__")
    sys.modules["__exercise__"] = module
    try:
        with forbid(forbidden):
            exec(compile(PREAMBLE, "<exercise preamble>", "exec"), namespace)  # noqa: S102
            exec(code, namespace)  # noqa: S102  (the point: run the learner's cell)
    finally:
        if previous is None:
            sys.modules.pop("__exercise__", None)
        else:
            sys.modules["__exercise__"] = previous
    fn = namespace.get(func_name)
    if not callable(fn):
        raise MissingFunction(f"the exercise cell does not define a function named {func_name!r}")
    return fn
