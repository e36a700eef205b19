"""Forbidden names, as judged: does the learner's source, or the function a check cell received, use
a name the exercise asks them to implement themselves?

Trusted side: :func:`forbidden_in_source` only parses text (the grader calls it before anything
runs); :func:`forbidden_in_globals` inspects a function object without calling it. The run-time half
(patching the names out while the learner's code runs) is :func:`utils.exercises.runner.forbid`.
"""

from __future__ import annotations

import ast
import inspect
import re
import textwrap
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from utils.exercises._cell_rules import LOADER_ATTRIBUTES, NUMPY_ROUTES, own_attributes, refused, refused_in_tree
from utils.exercises._forbidden_scopes import (
    AMBIGUOUS,
    assigned_aliases,
    field_names,
    own_private_names,
    resolves_to_torch,
    torch_has,
    unbound_reads,
)
from utils.exercises._forbidden_scopes import own_method_reads as own_methods
from utils.exercises._submodules import harmless_cuda_reads
from utils.exercises.cell_source import cell_source, out_of_sight
from utils.exercises.common import resolve, with_namesakes
from utils.i18n.messages import tr

_COURSE_PACKAGE = __name__.split(".")[0]  # "utils": the course's own code, trusted by the checks

UNSAFE_BUILTINS = frozenset({"exec", "eval", "compile", "__import__", "globals", "locals", "vars", "setattr",
                             "delattr", "breakpoint", "__builtins__", "__loader__", "__spec__"})
"""Builtins that run text as code, or reach or change objects by computed names."""
UNSAFE_MODULES = frozenset({"importlib", "ctypes", "gc", "inspect", "builtins", "marshal", "pickle", "copyreg",
                            "types", "dill", "cloudpickle", "_thread", "code", "codeop", "runpy", "pdb", "pkgutil",
                            "zipimport", "imp", "site", "pydoc", "string", "logging", "unittest", "modulefinder",
                            "shelve", "multiprocessing", "sys", "subprocess", "pty", "_posixsubprocess",
                            "timeit", "cProfile", "profile", "trace", "doctest", "bdb", "sqlite3"})
"""Modules that import, run or reach code by name, or walk frames and live objects (``pkgutil.resolve_name``,
``pydoc.locate``, ``string.Formatter().get_field``, ``logging.config``'s factories, ``unittest.mock.patch``
import by a string; ``timeit``, ``cProfile``, ``profile``, ``trace`` and ``doctest`` run a string as code;
``sqlite3`` loads a shared library); as an attribute (``torch.sys``), a module reached through another one.
``sys`` itself may be imported; its ``modules`` and ``path`` may not be used. A module whose name starts with
``_`` (``_ctypes``, ``_imp``: the C halves of the modules above) may not be imported either."""
UNSAFE_ATTRIBUTES = frozenset({"f_back", "f_globals", "f_locals", "f_builtins", "f_code", "gi_frame", "cr_frame",
                               "ag_frame", "gi_code", "tb_frame", "tb_next", "_getframe", "_current_frames",
                               "settrace", "setprofile", "attrgetter", "methodcaller", "get_type_hints",
                               "get_annotations", "ForwardRef", "evaluate_forward_ref"})
"""Frame walking (``sys._getframe().f_back``, a generator's or traceback's frame), name-based access, and
typing's functions that evaluate an annotation's string as code."""
PROGRAM_STARTERS = re.compile(r"^(system|popen|exec[lv]p?e?|spawn[lv]p?e?|posix_spawnp?)$")
"""``os``'s functions that start a program (``os.system``, ``os.popen``, ``os.execv``, ``os.spawnlp``,
``os.posix_spawn``), like ``subprocess`` and ``pty`` in :data:`UNSAFE_MODULES`: no program starts from an
exercise's process (seccomp refuses ``execve``). ``os``, ``posix`` and ``nt`` are off the allow-list, so their
import is named first (:data:`utils.exercises._cell_rules.ALLOWED_IMPORTS`); these names are a second net."""
OS_MODULES = ("os", "posix", "nt")
SAFE_DUNDERS = frozenset({"__init__", "__call__", "__name__", "__doc__", "__class__"})
"""The only dunder attributes an exercise cell may touch (``super().__init__()``; ``x.__class__`` only where
:func:`utils.exercises._cell_rules.refused_in_tree` allows it)."""
DOCUMENTED_PRIVATES = frozenset({"_exit", "_replace", "_asdict", "_fields", "_make", "_field_defaults"})
"""Public names starting with ``_`` (``os._exit``, a namedtuple's ``_replace``): allowed unless torch has one."""
_TORCH_MODULES = ("torch",)
UNSAFE_TORCH = frozenset({"jit", "hub", "load", "package", "library", "compile", "fx", "export", "overrides",
                          "utils", "serialization", "multiprocessing", "sys", "os", "_dynamo", "cuda"})
"""torch's machinery that loads, unpickles or compiles code (``torch.load``, ``torch.jit.CompilationUnit``
from a string, ``torch.utils.cpp_extension``) or lists functions to pick by name (``torch.overrides``)."""
UNSAFE_ANYWHERE = (UNSAFE_TORCH - {"cuda"}) | {"ops", "aten", "jiterator", "cpp_extension"}
"""torch's internals and machinery refused as an attribute whatever the chain starts at: a second name for
torch (``t = torch``, a default argument, ``[torch][0]``, ``G.torch``) is not known to be torch. ``.cuda``
is refused unless called (``x.cuda()``) or read for a harmless member (``torch.cuda.is_available()``:
:data:`utils.exercises._submodules.HARMLESS_CUDA`); a private ``._name`` unless :func:`.own_private_names` allows it."""
_NAMES = {"torch": "torch", "nn": "torch.nn", "F": "torch.nn.functional", "math": "math"}
"""What the names every exercise cell starts with stand for (:data:`utils.exercises.runner.PREAMBLE`)."""


def forbidden_in_source(source: str, forbidden: Sequence[str]) -> str | None:
    """Return the first forbidden dotted name the source uses (as an attribute, an import, or the
    ``utils`` package), or None. The function's own name is never flagged. Where two forbidden names end
    alike (``F.scaled_dot_product_attention`` and the course's own), the one the source reaches is named.

    >>> forbidden_in_source("def f(q):\\n    return F.scaled_dot_product_attention(q, q, q)",
    ...                     ["torch.nn.functional.scaled_dot_product_attention"])
    'torch.nn.functional.scaled_dot_product_attention'
    """
    try:
        tree = ast.parse(textwrap.dedent(source))
    except SyntaxError:
        return None
    forbidden = with_namesakes(forbidden)  # torch.native_layer_norm for F.layer_norm (red team R19)
    by_attr: dict[str, list[str]] = {}
    for name in forbidden:
        by_attr.setdefault(name.rpartition(".")[2], []).append(name)
    packages = {name for name in forbidden if "." not in name}
    strings = {name.rpartition(".")[2] for name in forbidden if "." in name} - AMBIGUOUS
    aliases = assigned_aliases(tree, _aliases(tree))
    own = own_attributes(tree, _sensitive(by_attr))[0] | own_methods(tree)  # unsafe_in_source: own_attributes' reason
    unbound = {id(read) for package in packages for read in unbound_reads(tree, package)}  # not the cell's own
    for node in ast.walk(tree):
        named = _named_by_string(node, strings, by_attr, aliases)
        if named:
            return named
        if isinstance(node, ast.Attribute) and node.attr in by_attr and id(node) not in own:
            chain = _attribute_chain(node)
            reached = ".".join([aliases.get(chain[0], chain[0]), *chain[1:]]) if chain else ""
            if node.attr not in AMBIGUOUS or resolves_to_torch(reached):  # r.grad, Blk(w).backward: the cell's
                return _named(by_attr[node.attr], reached)
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in packages:
                    return alias.name
        if isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if module.split(".")[0] in packages:
                return module
            for alias in node.names:
                if alias.name in by_attr and (alias.name not in AMBIGUOUS or resolves_to_torch(module)):
                    return _named(by_attr[alias.name], f"{module}.{alias.name}")
        if isinstance(node, ast.Name) and node.id in packages and id(node) in unbound:
            return node.id
        if isinstance(node, ast.MatchClass):  # case object(rms_norm=r) reads the attribute by its name
            for attr in node.kwd_attrs:
                if attr in by_attr:
                    return _named(by_attr[attr], attr)
    for field in field_names(tree):  # a dataclass field logsumexp: dataclasses.astuple reads it by its name
        if field in strings:
            return _named(by_attr[field], field)
    return None


def _named_by_string(node: ast.AST, strings: set[str], by_attr: Mapping[str, list[str]],
                     aliases: Mapping[str, str]) -> str | None:
    """The forbidden name a string constant spells (``getattr(torch.special, "logsumexp")``, a dict key that
    becomes a keyword or an attribute), or None. A string can become an attribute's name, so one equal to a
    forbidden name's last part counts as that name (named by what getattr's first argument reaches, when it
    is getattr's name); one any object may have (:data:`AMBIGUOUS`) only as getattr's name on torch's chain."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr") \
            and len(node.args) > 1 and _constant(node.args[1]) in by_attr:
        owner = node.args[0]
        chain = [owner.id] if isinstance(owner, ast.Name) else _attribute_chain(owner) \
            if isinstance(owner, ast.Attribute) else []
        reached = ".".join([aliases.get(chain[0], chain[0]), *chain[1:], node.args[1].value]) if chain else ""
        if node.args[1].value in strings or resolves_to_torch(reached):  # getattr(torch.autograd, "grad")
            return _named(by_attr[node.args[1].value], reached or node.args[1].value)
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in strings:
        return _named(by_attr[node.value], node.value)
    return None


def _aliases(tree: ast.AST) -> dict[str, str]:
    """Each name a module is bound to in ``tree`` (and the preamble's), mapped to the module's dotted name."""
    found = dict(_NAMES)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                bound = alias.asname or alias.name.split(".")[0]
                found[bound] = alias.name if alias.asname else bound
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                found[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return found


def _named(candidates: list[str], reached: str) -> str:
    """Of forbidden names ending alike, the one ``reached`` is (or ends with), else the first listed."""
    for name in candidates:
        if reached == name or reached.endswith("." + name) or name.endswith("." + reached):
            return name
    return candidates[0]


def unsafe_in_source(source: str) -> str | None:
    """What in ``source`` an exercise cell may not use, whatever the exercise, or None.

    An exercise cell needs only ``math``, ``torch``, ``nn``, ``F`` and its own code. Code that runs
    text (``exec``, ``eval``, ``compile``), imports by name (``__import__``, ``importlib``), reaches
    objects by computed names (``getattr`` with a name that is not a literal, ``vars``, ``setattr``,
    ``sys.modules``, dunder attributes), walks frames (``sys._getframe``, ``f_back``, ``gi_frame``,
    ``tb_frame``) or uses torch's internals (``torch._C``, ``torch.ops``, any ``_private`` name of
    ``torch``) could reach a forbidden function, or the machinery that checks it, without naming it.
    What may be imported, and which special methods and class patterns a class may use, are allow-lists
    (:mod:`utils.exercises._cell_rules`): a module, method or pattern nobody listed is refused.

    >>> unsafe_in_source("def f(q):\\n    return getattr(F, 'scaled_' + 'dot')(q)")
    'getattr with a computed attribute name'
    >>> unsafe_in_source("def f(x):\\n    return torch.softmax(x, dim=-1)") is None
    True
    """
    try:
        tree = ast.parse(textwrap.dedent(source))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    torch_names = {"torch", "F", "nn"}
    sys_names: set[str] = set()
    os_names: dict[str, str] = {}  # the name bound -> the module (os, posix, nt)
    for node in ast.walk(tree):  # the names that modules are bound to, wherever they are imported
        if isinstance(node, ast.Import):
            for alias in node.names:
                root = alias.name.split(".")[0]
                if root in _TORCH_MODULES:
                    torch_names.add((alias.asname or alias.name).split(".")[0])
                if root == "sys":
                    sys_names.add(alias.asname or "sys")
                if alias.name in OS_MODULES:
                    os_names[alias.asname or alias.name] = alias.name
    called = {id(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call)}
    own, own_reason = own_attributes(tree, _sensitive())
    own = own | harmless_cuda_reads(tree, torch_names)  # torch.cuda.is_available() (red team R19)
    own_private = own_private_names(tree)
    literal_getattr = {id(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call)
                       and isinstance(node.func, ast.Name) and node.func.id == "getattr" and len(node.args) > 1}
    for node in ast.walk(tree):
        if id(node) in own:  # self.utils, where the cell's own class sets it
            continue
        reason = refused(node) or _unsafe_node(node, torch_names, sys_names) or _starts_program(node, os_names)
        if reason:
            return reason
        if isinstance(node, ast.Name) and node.id == "getattr" and id(node) not in literal_getattr:
            return tr("getattr passed as a value (it reaches attributes by computed names)")
        if isinstance(node, ast.Attribute) and node.attr == "modules" and id(node) not in called:
            return ".modules"  # sys.modules reached through another module; self.modules() is a call
        if isinstance(node, ast.Attribute) and node.attr == "cuda" and id(node) not in called:
            return tr("{code} (torch's machinery that loads code or finds it by name)", code=".cuda")
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and node.attr not in SAFE_DUNDERS \
                and not (isinstance(node.value, ast.Name) and (node.value.id, node.attr) in own_private) \
                and not (node.attr in DOCUMENTED_PRIVATES and not torch_has(node.attr)):
            return tr("{code} (torch's internals)", code=f".{node.attr}")
    return refused_in_tree(tree) or own_reason


def _starts_program(node: ast.AST, os_names: Mapping[str, str]) -> str | None:
    """``os.system``, ``from os import popen``, ``posix.posix_spawn``, ... (:data:`PROGRAM_STARTERS`), or None."""
    if isinstance(node, ast.ImportFrom) and node.module in OS_MODULES:
        for alias in node.names:
            if PROGRAM_STARTERS.match(alias.name):
                return f"from {node.module} import {alias.name}"
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in os_names \
            and PROGRAM_STARTERS.match(node.attr):
        return f"{os_names[node.value.id]}.{node.attr}"
    return None


def _constant(node: ast.AST) -> object:
    return node.value if isinstance(node, ast.Constant) else None


def _unsafe_node(node: ast.AST, torch_names: set[str], sys_names: set[str]) -> str | None:
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.name.split(".")[0] in UNSAFE_MODULES - {"sys"} or alias.name.startswith("_"):
                return f"import {alias.name}"
            if alias.name.split(".")[0] == _COURSE_PACKAGE:
                return tr("{code} (the course's own code, including the machinery that checks it)",
                          code=f"import {alias.name}")
            if _torch_internal(alias.name):
                return tr("{code} (torch's internals)", code=f"import {alias.name}")
            if alias.name.split(".")[0] in _TORCH_MODULES and alias.name.split(".")[1:2] and \
                    alias.name.split(".")[1] in UNSAFE_TORCH:
                return tr("{code} (torch's machinery that loads code or finds it by name)", code=f"import {alias.name}")
    if isinstance(node, ast.ImportFrom):
        module = node.module or ""
        if module.split(".")[0] in UNSAFE_MODULES - {"sys"} or (module.startswith("_") and module != "__future__"):
            return f"from {module} import ..."
        if any(alias.name == "*" for alias in node.names):
            return tr("{code} (names that the check cannot see)", code=f"from {module} import *")
        if module.split(".")[0] == _COURSE_PACKAGE:
            return tr("{code} (the course's own code, including the machinery that checks it)",
                      code=f"from {module} import ...")
        if _torch_internal(module):
            return tr("{code} (torch's internals)", code=f"from {module} import ...")
        for alias in node.names:
            if alias.name in UNSAFE_BUILTINS | UNSAFE_ATTRIBUTES or (module == "sys" and alias.name in ("modules",
                                                                                                        "path")):
                return f"from {module} import {alias.name}"
            if module.split(".")[0] in _TORCH_MODULES and (alias.name.startswith("_") or alias.name == "ops"):
                return tr("{code} (torch's internals)", code=f"from {module} import {alias.name}")
            if module == "torch" and alias.name in UNSAFE_TORCH:
                return tr("{code} (torch's machinery that loads code or finds it by name)",
                          code=f"from {module} import {alias.name}")
    if isinstance(node, ast.Name) and node.id in UNSAFE_BUILTINS:
        return node.id
    if isinstance(node, ast.Attribute):
        if node.attr in UNSAFE_ATTRIBUTES | UNSAFE_MODULES | UNSAFE_BUILTINS - {"eval"}:  # a module's .eval() is fine
            return f".{node.attr}"
        if node.attr.startswith("__") and node.attr.endswith("__") and node.attr not in SAFE_DUNDERS:
            return f".{node.attr}"
        if isinstance(node.value, ast.Name) and node.value.id in sys_names and node.attr in ("modules", "path"):
            return f"sys.{node.attr}"
        chain = _attribute_chain(node)
        if chain and chain[0] in torch_names and any(part.startswith("_") or part == "ops" for part in chain[1:]):
            return tr("{code} (torch's internals)", code=".".join(chain))
        if chain and chain[0] in torch_names and len(chain) > 1 and chain[1] in UNSAFE_TORCH:
            return tr("{code} (torch's machinery that loads code or finds it by name)", code=".".join(chain[:2]))
        if node.attr in UNSAFE_ANYWHERE:
            return tr("{code} (torch's machinery that loads code or finds it by name)", code=f".{node.attr}")
    if isinstance(node, ast.MatchClass):  # case object(attr=x) reads x = subject.attr
        for attr in node.kwd_attrs:
            if attr in UNSAFE_ATTRIBUTES | UNSAFE_MODULES | UNSAFE_BUILTINS | UNSAFE_ANYWHERE or attr.startswith("_"):
                return tr("{code} (a pattern that reads an attribute the check forbids)", code=f"case ...({attr}=...)")
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr":
        name = node.args[1] if len(node.args) > 1 else None
        if not (isinstance(name, ast.Constant) and isinstance(name.value, str)):
            return tr("getattr with a computed attribute name")
        if name.value.startswith("_") or name.value in UNSAFE_ATTRIBUTES | UNSAFE_ANYWHERE or name.value == "modules":
            return f"getattr(..., {name.value!r})"
    return None


def _torch_internal(module: str) -> bool:
    """``torch._C``, ``torch.ops.aten``, and a private module below a public one
    (``torch.nn.attention.experimental._paged_attention``)."""
    root, *parts = module.split(".")
    return root in _TORCH_MODULES and any(part.startswith("_") or part == "ops" for part in parts)


def _sensitive(forbidden: Mapping[str, object] = {}) -> frozenset[str]:  # noqa: B006  (read only)
    """Attribute names refused on another object but allowed as the cell's own (:func:`own_attributes`). A string
    annotation is allowed: nothing a cell may call evaluates one (``get_type_hints``, ``ForwardRef``,
    ``functools.singledispatch`` are refused)."""
    return frozenset(UNSAFE_ATTRIBUTES | UNSAFE_MODULES | UNSAFE_BUILTINS | UNSAFE_ANYWHERE | LOADER_ATTRIBUTES
                     | NUMPY_ROUTES | {"cuda", "modules", "wraps", "update_wrapper", *forbidden})


def _attribute_chain(node: ast.Attribute) -> list[str]:
    """``["torch", "_C", "_nn"]`` for ``torch._C._nn``; ``[]`` when the chain does not start at a name."""
    parts: list[str] = []
    current: ast.AST = node
    while isinstance(current, ast.Attribute):
        parts.append(current.attr)
        current = current.value
    return [current.id, *reversed(parts)] if isinstance(current, ast.Name) else []


def forbidden_in_function(fn: Callable[..., Any], forbidden: Sequence[str], name: str | None = None) -> str | None:
    """The forbidden name ``fn`` (the notebook's ``name``) uses, found in its cell's source (when it has one) or
    through the globals and closure variables it reaches; or what in its source no exercise may use
    (:func:`unsafe_in_source`); None when it uses none."""
    return (_forbidden_in_own_source(fn, forbidden, name) or forbidden_in_globals(fn, forbidden)
            or _unsafe_in_own_source(fn, name))


def _unsafe_in_own_source(fn: Callable[..., Any], name: str | None = None) -> str | None:
    source = cell_source(fn, name)
    if source is None and out_of_sight(fn):  # made by exec or eval: the grader refuses the cell (R25)
        return tr("exec or eval (no cell defines {name} at its top level: define it with def there)",
                  name=name or getattr(fn, "__name__", "it"))
    return None if source is None else unsafe_in_source(source)


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
    forbidden = with_namesakes(forbidden)
    targets: dict[int, str] = {}
    packages = {name for name in forbidden if "." not in name}
    own_module = getattr(fn, "__module__", None) or ""
    if own_module.split(".")[0] in packages | {_COURSE_PACKAGE}:
        return None  # the course's own references and mistakes (a learner's cell runs in __main__)
    for dotted in forbidden:
        resolved = resolve(dotted)
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


def _forbidden_in_own_source(fn: Callable[..., Any], forbidden: Sequence[str], name: str | None = None) -> str | None:
    source = cell_source(fn, name) if forbidden else None
    return None if source is None else forbidden_in_source(source, forbidden)
