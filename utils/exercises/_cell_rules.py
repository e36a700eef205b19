"""What an exercise cell may import, and the class and pattern forms it may use: rules stated as what is
allowed, so that a route nobody listed is refused too (red team R15, issue 35).

:func:`utils.exercises.forbidden.unsafe_in_source` asks :func:`refused` about every node of a cell's syntax
tree before its own rules (so that a refused import's reason lists the modules allowed). Trusted side:
only parses text, and finds whether a name imported from an allowed module is itself a module.
"""

from __future__ import annotations

import ast
import importlib.util
import inspect
import sys

from utils.i18n.messages import tr

COURSE_MODULES = frozenset({"__future__", "math", "torch", "torch.nn", "torch.nn.functional", "numpy", "functools",
                            "itertools", "collections", "collections.abc", "typing", "dataclasses", "operator"})
"""The modules an exercise cell may import (the course's own exercise cells import none: every cell starts with
``math``, ``torch``, ``nn`` and ``F``). A module is allowed by its whole dotted name: ``torch`` allows neither
``torch.jit`` nor ``torch.ao.quantization.utils``, and ``numpy`` not ``numpy.lib``."""
PROCESS_MODULES = frozenset({"os", "os.path", "sys", "time", "json", "threading", "resource", "struct", "signal"})
"""Modules no exercise needs but the grader's own sandbox tests import in their cells (forking, sleeping,
reading the process's limits): none reaches code by a name, and the rules for ``os``'s program starters
and ``sys.modules``/``sys.path`` still hold. Drop this set once those tests switch the static check off."""
ALLOWED_IMPORTS = COURSE_MODULES | PROCESS_MODULES
SAFE_CLASS_DUNDERS = frozenset({"__init__", "__post_init__", "__call__", "__repr__", "__str__", "__len__",
                                "__getitem__", "__iter__", "__next__", "__contains__", "__eq__", "__ne__", "__hash__"})
"""The special methods a class of an exercise cell may define. ``__eq__`` is allowed: the judge asks for a
tensor or a number and names any other type (tests/test_grader_attacks.py's object equal to anything).
Not the hooks that run code when a class is checked, made, read or left (``__instancecheck__``,
``__init_subclass__``, ``__getattr__``, ``__exit__``, ...), nor the other operators and conversions, nor
attributes such as ``__match_args__`` (a class pattern reads the attributes it names)."""
PICKLE_SWITCHES = {"allow_pickle": False, "weights_only": True}
"""The keyword that makes numpy (``allow_pickle``) or torch (``weights_only``) unpickle, and its safe value:
any other value, a computed one included, is refused, and so is the keyword's name as a string."""
NUMPY_ROUTES = frozenset({"lib", "read_array", "ctypeslib", "f2py", "distutils"})
"""numpy's modules and functions that unpickle (``numpy.lib.format.read_array``, ``numpy.lib.npyio``; its
``load`` is refused as ``.load``), load a shared library (``ctypeslib``) or compile code (``f2py``)."""


def refused(node: ast.AST) -> str | None:
    """Why ``node`` may not be in an exercise cell under the rules above, or None."""
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return _refused_import(node)
    if isinstance(node, ast.keyword) and node.arg in PICKLE_SWITCHES and not _is_constant(
            node.value, PICKLE_SWITCHES[node.arg]):
        return tr("{code} (unpickling runs code; only {safe} is allowed)", code=f"{node.arg}=...",
                  safe=f"{node.arg}={PICKLE_SWITCHES[node.arg]}")
    if isinstance(node, ast.Constant) and node.value in PICKLE_SWITCHES:
        return tr("{code} (unpickling runs code; only {safe} is allowed)", code=repr(node.value),
                  safe=f"{node.value}={PICKLE_SWITCHES[node.value]}")
    name = _attribute_name(node)
    if name in NUMPY_ROUTES:
        return tr("{code} (numpy's readers that unpickle, and its machinery that loads or compiles code)",
                  code=f".{name}")
    if isinstance(node, ast.ClassDef):
        return _refused_class(node)
    if isinstance(node, ast.MatchClass) and node.patterns:
        return tr("{code} (a class pattern with positions reads the attributes its class names; write "
                  "case C(name=...) or use isinstance)", code=f"case {ast.unparse(node.cls)}(...)")
    spelled = node.value if isinstance(node, ast.Constant) else node.arg if isinstance(node, ast.keyword) else None
    if _dunder(spelled) and spelled not in SAFE_CLASS_DUNDERS | {"__main__", "__name__"}:  # 'x' or dict(x=...)
        return tr("{code} (a special name as a string can define or read one by its name)", code=repr(spelled))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "type" \
            and len(node.args) + len(node.keywords) > 1:
        return tr("{code} (makes a class whose special methods the check cannot see; write a class statement)",
                  code="type(name, bases, namespace)")
    return None


def _refused_import(node: ast.Import | ast.ImportFrom) -> str | None:
    if isinstance(node, ast.Import):
        modules = [(alias.name, f"import {alias.name}") for alias in node.names]
    elif node.level or not node.module:
        modules = [("." * node.level + (node.module or ""), f"from {'.' * node.level}{node.module or ''} import ...")]
    else:
        modules = [(node.module, f"from {node.module} import ...")]
        modules += [(f"{node.module}.{alias.name}", f"from {node.module} import {alias.name}")
                    for alias in node.names if _is_module(node.module, alias.name)]
    for module, code in modules:
        if module not in ALLOWED_IMPORTS:
            return tr("{code}: {module} is not among the modules an exercise cell may import ({allowed})",
                      code=code, module=module, allowed=", ".join(sorted(COURSE_MODULES)))
    return None


def _is_module(package: str, name: str) -> bool:
    """Whether ``from package import name`` binds a module (``from torch import jit``, ``from os import
    path``). ``package`` is an allowed module, so importing it to look is safe."""
    if package not in ALLOWED_IMPORTS or name == "*":
        return False
    loaded = sys.modules.get(package)
    if loaded is not None and inspect.ismodule(getattr(loaded, name, None)):
        return True
    try:
        return importlib.util.find_spec(f"{package}.{name}") is not None
    except (ImportError, ValueError, AttributeError):
        return False


def _refused_class(node: ast.ClassDef) -> str | None:
    if node.keywords:
        return tr("{code} (a class made by a metaclass or with class keywords)",
                  code=f"class {node.name}({node.keywords[0].arg or '**'}=...)")
    for item in node.body:
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names = [item.name]
        elif isinstance(item, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = item.targets if isinstance(item, ast.Assign) else [item.target]
            names = [n.id for target in targets for n in ast.walk(target) if isinstance(n, ast.Name)]
        else:
            names = []
        for name in names:
            if _dunder(name) and (name not in SAFE_CLASS_DUNDERS or not isinstance(item, ast.FunctionDef)):
                return tr("{code} (a class may define only these special methods: {allowed})",
                          code=f"{node.name}.{name}", allowed=", ".join(sorted(SAFE_CLASS_DUNDERS)))
    return None


def _attribute_name(node: ast.AST) -> str | None:
    """The attribute ``node`` reads by a name written in the source: ``x.name``, ``getattr(x, 'name')``,
    ``case C(name=...)`` (each keyword's)."""
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr") \
            and len(node.args) > 1 and isinstance(node.args[1], ast.Constant):
        return node.args[1].value if isinstance(node.args[1].value, str) else None
    if isinstance(node, ast.MatchClass):
        return next((attr for attr in node.kwd_attrs if attr in NUMPY_ROUTES), None)
    return None


def _dunder(name: object) -> bool:
    return isinstance(name, str) and len(name) > 4 and name.startswith("__") and name.endswith("__")


def _is_constant(node: ast.AST, value: bool) -> bool:
    return isinstance(node, ast.Constant) and node.value is value
