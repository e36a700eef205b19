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

from utils.exercises._cell_writes import READ_ONLY, WRITERS, refused_write, written
from utils.exercises._submodules import refused_reach
from utils.i18n.messages import tr

COURSE_MODULES = frozenset({"__future__", "math", "torch", "torch.nn", "torch.nn.functional", "torch.linalg",
                            "torch.special", "torch.fft", "numpy", "functools", "itertools", "collections",
                            "collections.abc", "typing", "dataclasses", "operator"})
"""The modules an exercise cell may import (the course's own exercise cells import none: every cell starts with
``math``, ``torch``, ``nn`` and ``F``). A module is allowed by its whole dotted name: ``torch`` allows neither
``torch.jit`` nor ``torch.ao.quantization.utils``, and ``numpy`` not ``numpy.lib``."""
ALLOWED_IMPORTS = COURSE_MODULES | {"sys"}
"""``sys`` besides: only its numbers, limits and standard streams (:data:`SYS_MEMBERS`). Not ``os``, ``time``,
``json``, ``threading``, ``signal``...: with them a cell could write the grader's result files itself and end its
process (issue 35); the grader's sandbox tests that need them switch the static check off."""
SAFE_CLASS_DUNDERS = frozenset({"__init__", "__post_init__", "__call__", "__repr__", "__str__", "__len__",
                                "__getitem__", "__iter__", "__next__", "__contains__", "__eq__", "__ne__", "__hash__",
                                "__enter__", "__exit__", "__lt__", "__le__", "__gt__", "__ge__", "__neg__", "__pos__",
                                "__abs__", *(f"__{prefix}{op}__" for op in ("add", "sub", "mul", "truediv", "floordiv",
                                                                             "mod", "pow", "matmul")
                                             for prefix in ("", "r", "i"))})
"""The special methods a class of an exercise cell may define. ``__eq__`` is allowed: the judge asks for a
tensor or a number and names any other type (tests/test_grader_attacks.py's object equal to anything).
A context manager's ``__enter__``/``__exit__`` and the comparison and arithmetic operators only run code the
cell wrote where it uses them (a ``ForbiddenCall`` an ``__exit__`` swallows is still recorded). Not the hooks
that run code when a class is checked, made or read (``__instancecheck__``, ``__init_subclass__``,
``__getattr__``, ...), nor conversions, nor attributes such as ``__match_args__`` (a class pattern reads the
attributes it names); ``__slots__`` only as constant names (:func:`_refused_class`)."""
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
    if name in WRITERS:
        return written(f".{name}")
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
    for alias in node.names if isinstance(node, ast.ImportFrom) else []:
        if alias.name in WRITERS or alias.name in READ_ONLY:
            return written(f"from {node.module} import {alias.name}")
    for module, code in modules:
        if module not in ALLOWED_IMPORTS:
            return tr("{code}: {module} is not among the modules an exercise cell may import ({allowed})",
                      code=code, module=module, allowed=", ".join(sorted(ALLOWED_IMPORTS)))
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
    for item, name in _class_bindings(node):
        if not _dunder(name) or (name == "__slots__" and isinstance(item, ast.Assign) and item in node.body
                                 and _constant_names(item.value)):
            continue
        if name not in SAFE_CLASS_DUNDERS or not (isinstance(item, ast.FunctionDef) and item in node.body):
            return tr("{code} (a class may define only these special methods: {allowed})",
                      code=f"{node.name}.{name}", allowed=", ".join(sorted(SAFE_CLASS_DUNDERS)))
    return None


def _class_bindings(node: ast.ClassDef) -> list[tuple[ast.AST, str]]:
    """``(statement or node, name)`` for every name the class body binds in its own scope, however: a ``def`` or
    ``class`` at any depth of its blocks, an assignment, loop, ``with``, walrus, ``except ... as``, ``match``
    capture, ``import ... as`` or ``del`` (red team R22: ``if True: def __del__`` passed), not inside a nested
    function or class body."""
    stack, found = [(item, item) for item in node.body], []
    while stack:
        statement, current = stack.pop()
        if isinstance(current, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.append((statement, current.name))
            stack.extend((statement, d) for d in current.decorator_list)
            continue  # its body is another scope
        if isinstance(current, ast.Lambda):
            continue
        if isinstance(current, ast.Name) and isinstance(current.ctx, (ast.Store, ast.Del)):
            found.append((statement, current.id))
        elif isinstance(current, ast.alias):
            found.append((statement, current.asname or current.name.split(".")[0]))
        elif isinstance(current, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and current.name:
            found.append((statement, current.name))
        elif isinstance(current, ast.MatchMapping) and current.rest:
            found.append((statement, current.rest))
        stack.extend((statement, child) for child in ast.iter_child_nodes(current))
    return found


def _attribute_name(node: ast.AST) -> str | None:
    """The attribute ``node`` reads by a name written in the source: ``x.name``, ``getattr(x, 'name')``,
    ``case C(name=...)`` (each keyword's)."""
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr") \
            and len(node.args) > 1 and isinstance(node.args[1], ast.Constant):
        return node.args[1].value if isinstance(node.args[1].value, str) else None
    if isinstance(node, ast.MatchClass):
        return next((attr for attr in node.kwd_attrs if attr in NUMPY_ROUTES | WRITERS), None)
    return None


def _dunder(name: object) -> bool:
    return isinstance(name, str) and len(name) > 4 and name.startswith("__") and name.endswith("__")


def _is_constant(node: ast.AST, value: bool) -> bool:
    return isinstance(node, ast.Constant) and node.value is value


def _constant_names(node: ast.AST) -> bool:
    """``"eps"`` or ``("eps", "scale")``: slot names written out, none of them special (``__dict__``)."""
    items = node.elts if isinstance(node, (ast.Tuple, ast.List)) else [node]
    return all(isinstance(item, ast.Constant) and isinstance(item.value, str) and item.value.isidentifier()
               and not item.value.startswith("__") for item in items)


FUNCTOOLS_MEMBERS = frozenset({"reduce", "partial", "partialmethod", "lru_cache", "cache", "cached_property", "wraps",
                               "update_wrapper", "cmp_to_key", "total_ordering"})
"""What of ``functools`` a cell may use. Not ``singledispatch`` (its ``register`` evaluates a string annotation
as code), and ``wraps``/``update_wrapper`` only with their default attribute lists: ``assigned`` and ``updated``
read and set attributes by computed names (red team R16, :data:`WRAPPER_ARGUMENTS`)."""
WRAPPER_ARGUMENTS = {"wraps": 1, "update_wrapper": 2}
"""How many arguments ``functools.wraps`` and ``update_wrapper`` may get (no keywords): not their name lists."""
SYS_MEMBERS = frozenset({"float_info", "int_info", "hash_info", "maxsize", "maxunicode", "version_info", "version",
                         "hexversion", "byteorder", "platform", "float_repr_style", "flags", "getrecursionlimit",
                         "setrecursionlimit", "getsizeof", "stdout", "stderr", "stdin", "exit", "argv"})
"""What of ``sys`` a cell may use: numbers, limits and the standard streams. Not ``sys.meta_path`` and the other
import machinery, which imports a module by a string (red team R16)."""
_MEMBERS = {"functools": FUNCTOOLS_MEMBERS, "sys": SYS_MEMBERS}
LOADER_ATTRIBUTES = frozenset({"getattr", "meta_path", "path_hooks", "path_importer_cache", "find_spec",
                               "exec_module", "create_module", "load_module", "make_dataclass", "functools"})
"""Attribute names refused on any object: a module's ``getattr`` (``builtins`` reached by a loader), the import
machinery, ``dataclasses.make_dataclass`` (a class from a computed namespace) and ``functools`` reached
through another module."""
TYPE_USES = frozenset({"isinstance", "issubclass", "print", "str", "repr", "id", "hash"})
"""Where ``type(x)`` and ``x.__class__`` may go besides a comparison, an f-string and ``.__name__``: never
called, bound or passed on, since calling a class's class (``type(int)``) with three arguments makes a class."""


def refused_in_tree(tree: ast.AST) -> str | None:
    """Why the cell's syntax tree ``tree`` may not run, for the rules that need a node's context, or None."""
    parents = {id(child): node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    modules = {(alias.asname or alias.name): alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
               for alias in node.names if alias.name in _MEMBERS}
    wrappers = {alias.asname or alias.name: alias.name for node in ast.walk(tree)
                if isinstance(node, ast.ImportFrom) and node.module == "functools" for alias in node.names
                if alias.name in WRAPPER_ARGUMENTS}
    held = _module_names(tree)
    for node in ast.walk(tree):
        reason = (_refused_member(node, modules, parents) or _refused_wrapper(node, wrappers, parents)
                  or refused_write(node, parents)
                  or _refused_class_maker(node, parents) or _refused_module_change(node, held))
        if reason:
            return reason
    return refused_reach(tree, ALLOWED_IMPORTS)


_PREAMBLE_NAMES = frozenset({"torch", "nn", "F", "math"})
"""The modules every exercise cell starts with (:data:`utils.exercises.runner.PREAMBLE`)."""


def _root(node: ast.AST) -> str | None:
    """``"torch"`` for ``torch.Tensor.clone``: the name an attribute chain starts at, or None."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _module_names(tree: ast.AST) -> set[str]:
    """The names bound to a module or to something reached from one: the preamble's, every import's, and a name
    assigned one of those or an attribute chain from one (``t = torch``, ``T = torch.Tensor``)."""
    names = set(_PREAMBLE_NAMES)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update(alias.asname or alias.name.split(".")[0] for alias in node.names)
    pairs = []
    for node in ast.walk(tree):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, (ast.AnnAssign, ast.NamedExpr)) and node.value is not None else []
        for target in targets:
            if isinstance(target, (ast.Tuple, ast.List)) and isinstance(node.value, (ast.Tuple, ast.List)):
                pairs += list(zip(target.elts, node.value.elts))
            else:
                pairs.append((target, node.value))
    while True:
        more = {target.id for target, value in pairs if isinstance(target, ast.Name) and target.id not in names
                and _root(value) in names}
        if not more:
            return names
        names |= more


def _refused_module_change(node: ast.AST, held: set[str]) -> str | None:
    """``torch.equal = ...``, ``del json.dumps``, ``T.clone = ...`` (``T = torch.Tensor``): an attribute of a
    module, or of what it holds, set or deleted. No exercise needs it, and it would change the code that runs
    beside the learner's (issue 35: a cell rebound ``torch.equal`` and ``json.dumps`` to hide a verdict)."""
    if isinstance(node, ast.Attribute) and isinstance(node.ctx, (ast.Store, ast.Del)) and _root(node.value) in held:
        code = f"del {ast.unparse(node)}" if isinstance(node.ctx, ast.Del) else f"{ast.unparse(node)} = ..."
        return tr("{code} (a cell may not change a module or what it holds: that would change the code that checks "
                  "it too)", code=code)
    return None


def _refused_member(node: ast.AST, modules: dict[str, str], parents: dict[int, ast.AST]) -> str | None:
    if isinstance(node, ast.ImportFrom):
        for alias in node.names:
            if alias.name in LOADER_ATTRIBUTES:
                return tr("{code} (reaches a module, an attribute or a class by a computed name)",
                          code=f"from {node.module} import {alias.name}")
            if node.module in _MEMBERS and alias.name not in _MEMBERS[node.module]:
                return tr("{code}: a cell may use only these names of {module}: {allowed}",
                          code=f"from {node.module} import {alias.name}", module=node.module,
                          allowed=", ".join(sorted(_MEMBERS[node.module])))
    if isinstance(node, ast.Name) and node.id in modules and isinstance(node.ctx, ast.Load):
        module, parent = modules[node.id], parents.get(id(node))
        if not isinstance(parent, ast.Attribute):
            return tr("{code} (a module passed on or bound again: only its names may be used)", code=node.id)
        if parent.attr not in _MEMBERS[module]:
            return tr("{code}: a cell may use only these names of {module}: {allowed}", code=f"{module}.{parent.attr}",
                      module=module, allowed=", ".join(sorted(_MEMBERS[module])))
    name = node.attr if isinstance(node, ast.Attribute) else node.args[1].value if (
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr")
        and len(node.args) > 1 and isinstance(node.args[1], ast.Constant)) else None
    if name in LOADER_ATTRIBUTES:
        return tr("{code} (reaches a module, an attribute or a class by a computed name)", code=f".{name}")
    return None


def _refused_wrapper(node: ast.AST, wrappers: dict[str, str], parents: dict[int, ast.AST]) -> str | None:
    if isinstance(node, ast.Attribute) and node.attr in WRAPPER_ARGUMENTS:
        name = node.attr
    elif isinstance(node, ast.Name) and node.id in wrappers and isinstance(node.ctx, ast.Load):
        name = wrappers[node.id]
    else:
        return None
    call = parents.get(id(node))
    if not (isinstance(call, ast.Call) and call.func is node and not call.keywords
            and len(call.args) <= WRAPPER_ARGUMENTS[name] and not any(isinstance(a, ast.Starred) for a in call.args)):
        return tr("{code} (only as {allowed}: its name lists read and set attributes by computed names)",
                  code=f"functools.{name}",
                  allowed="wraps(wrapped)" if name == "wraps" else "update_wrapper(wrapper, wrapped)")
    return None


def _refused_class_maker(node: ast.AST, parents: dict[int, ast.AST]) -> str | None:
    """``type`` other than as ``type(x)``, ``type(x)`` or ``x.__class__`` other than compared, named or checked
    (:data:`TYPE_USES`), and any metaclass by name (``typing.NamedTupleMeta``): a class made from a computed
    namespace has special methods the check cannot see."""
    meta = node.attr if isinstance(node, ast.Attribute) else next(
        (alias.name for alias in node.names if alias.name.endswith("Meta")), None) \
        if isinstance(node, ast.ImportFrom) else None
    if meta and meta.endswith("Meta"):
        return tr("{code} (makes a class whose special methods the check cannot see; write a class statement)",
                  code=meta)
    if isinstance(node, ast.Name) and node.id == "type" and isinstance(node.ctx, ast.Load):
        call = parents.get(id(node))
        if not (isinstance(call, ast.Call) and call.func is node and len(call.args) == 1 and not call.keywords
                and not isinstance(call.args[0], ast.Starred)):
            return tr("{code} (makes a class whose special methods the check cannot see; write a class statement)",
                      code="type(name, bases, namespace)" if isinstance(call, ast.Call) and call.func is node
                      else "type")
        return _refused_class_use(call, parents, "type(...)")
    if isinstance(node, ast.Attribute) and node.attr == "__class__":
        return _refused_class_use(node, parents, ".__class__")
    return None


def _refused_class_use(node: ast.AST, parents: dict[int, ast.AST], code: str) -> str | None:
    parent = parents.get(id(node))
    if isinstance(parent, (ast.Compare, ast.FormattedValue)) or (
            isinstance(parent, ast.Attribute) and parent.attr == "__name__") or (
            isinstance(parent, ast.Call) and parent.func is not node and isinstance(parent.func, ast.Name)
            and parent.func.id in TYPE_USES and node in parent.args):
        return None
    return tr("{code} only compared, named (.__name__) or given to isinstance: a class's class makes classes",
              code=code)


def own_attributes(tree: ast.AST, sensitive: frozenset[str]) -> tuple[set[int], str | None]:
    """The attribute nodes (by ``id``) that are a method's own object's attributes: ``self.compile`` in a method
    of a class of the cell that also sets ``self.compile``; and why they may not count as such, or None.

    ``self`` is the instance only when the method is called on one: where a method reads a ``sensitive`` name
    (one refused on any other object), each method of the cell's classes must be called on ``self``, on
    ``super()``, on ``C(...)`` or on a name bound only to ``C(...)`` (``C.method(torch)`` would read torch's)."""
    classes = [node for node in ast.walk(tree) if isinstance(node, ast.ClassDef)]
    methods = [item for cls in classes for item in cls.body
               if isinstance(item, ast.FunctionDef) and item.args.args and not item.decorator_list]
    accesses: list[tuple[ast.FunctionDef, ast.Attribute]] = []
    for method in methods:
        me, body = method.args.args[0].arg, _own_scope(method)
        if not any(_binds(node, me) for node in body):
            accesses += [(method, node) for node in body if isinstance(node, ast.Attribute)
                         and isinstance(node.value, ast.Name) and node.value.id == me]
    stored = {node.attr for _method, node in accesses if isinstance(node.ctx, ast.Store)}
    own = {id(node) for _method, node in accesses if node.attr in stored and not node.attr.startswith("_")}
    if not any(id(node) in own and node.attr in sensitive for _method, node in accesses):
        return own, None
    names = {method.name for cls in classes for method in cls.body if isinstance(method, ast.FunctionDef)}
    class_names = {cls.name for cls in classes}
    selves = {method.args.args[0].arg for method in methods}
    instances = _instance_names(tree, class_names)
    for node in ast.walk(tree):
        receiver = node.value if isinstance(node, ast.Attribute) and node.attr in names else None
        if receiver is not None and not (
                (isinstance(receiver, ast.Name) and receiver.id in selves | instances)
                or (isinstance(receiver, ast.Call) and isinstance(receiver.func, ast.Name)
                    and receiver.func.id in class_names | {"super"})):
            return own, tr("{code} (a method that reads {attr} of its object may be called only on an instance)",
                           code=f"{ast.unparse(receiver)[:40]}.{node.attr}", attr=", ".join(sorted(sensitive & stored)))
        if isinstance(node, ast.Constant) and node.value in names:
            return own, tr("{code} (a method that reads {attr} of its object may be called only on an instance)",
                           code=repr(node.value), attr=", ".join(sorted(sensitive & stored)))
    return own, None


def _own_scope(function: ast.FunctionDef) -> list[ast.AST]:
    """The nodes of ``function``'s body, not those of functions, lambdas or classes nested in it."""
    found, stack = [], list(function.body)
    while stack:
        node = stack.pop()
        found.append(node)
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            stack.extend(ast.iter_child_nodes(node))
    return found


def _binds(node: ast.AST, name: str) -> bool:
    """Whether ``node`` binds ``name`` again (an assignment, a loop, ``except ... as``, a pattern, ``global``)."""
    if isinstance(node, ast.Name):
        return node.id == name and not isinstance(node.ctx, ast.Load)
    if isinstance(node, (ast.Global, ast.Nonlocal)):
        return name in node.names
    if isinstance(node, ast.alias):
        return (node.asname or node.name.split(".")[0]) == name
    return getattr(node, "name", None) == name or getattr(node, "rest", None) == name  # except, match


def _instance_names(tree: ast.AST, class_names: set[str]) -> set[str]:
    """Names every binding of which is ``name = C(...)`` for a class ``C`` of the cell."""
    good: set[str] = set()
    bad: set[str] = set()
    assigned = {id(target) for node in ast.walk(tree) if isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Name)
                and node.value.func.id in class_names for target in node.targets}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            (good if id(node) in assigned else bad).add(node.id)
        elif isinstance(node, ast.arg):
            bad.add(node.arg)
    bad.update(name for node in ast.walk(tree) if not isinstance(node, ast.Name) for name in good
               if _binds(node, name))
    return good - bad
