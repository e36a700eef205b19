"""What :func:`utils.exercises.forbidden.forbidden_in_source` needs to tell a forbidden name from a cell's own
(red team R17): where a bare name such as ``utils`` may still reach the package, which attribute names are too
common to refuse on any object, which field names a cell declares, and which private names are its own class's
(:func:`own_private_names`, moved here from :mod:`utils.exercises.forbidden` to keep that module short).

Trusted side; parses text only (:func:`torch_has` reads torch's loaded modules).
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Mapping

AMBIGUOUS = frozenset({"grad", "backward"})
"""Last parts of forbidden names (``torch.autograd.grad``, ``torch.autograd.backward``) that any object may have
as its own (a class's ``backward`` method, a namedtuple's ``grad`` field, a tensor's ``.grad``): refused only on
a chain that resolves to torch (``torch.autograd.grad``, ``ag.grad`` after ``import torch.autograd as ag`` or
``ag = torch.autograd``, ``torch.Tensor.backward``). ``loss.backward()`` passes the static check and is
blocked at run time: the method calls ``torch.autograd.backward``, which :func:`utils.exercises.runner.forbid`
patches out."""
FIELD_MAKERS = frozenset({"namedtuple", "NamedTuple", "make_dataclass", "TypedDict"})
"""Calls whose keyword arguments or string of names declare fields (``NamedTuple("T", logsumexp=int)``,
``namedtuple("T", "a logsumexp")``)."""
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)


def resolves_to_torch(reached: str) -> bool:
    """Whether a dotted chain, its first name resolved (``torch.autograd.grad``), starts at torch."""
    return reached == "torch" or reached.startswith("torch.")


def assigned_aliases(tree: ast.AST, aliases: Mapping[str, str]) -> dict[str, str]:
    """``{"ag": "torch.autograd"}`` for ``ag = torch.autograd``: a name assigned a chain that starts at a module."""
    found = dict(aliases)
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            chain = _chain(node.value)
            if chain and chain[0] in aliases:
                found[node.targets[0].id] = ".".join([aliases[chain[0]], *chain[1:]])
    return found


def _chain(node: ast.AST) -> list[str]:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return [node.id, *reversed(parts)] if isinstance(node, ast.Name) else []


def field_names(tree: ast.AST) -> list[str]:
    """The field names a cell declares: a class body's annotated names (a dataclass's or NamedTuple's fields:
    ``dataclasses.astuple`` reads each by its name, on a tensor subclass a tensor's method), the keywords and the
    names in a string given to :data:`FIELD_MAKERS` (``"a logsumexp"``, ``"a, logsumexp"``)."""
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            names += [item.target.id for item in node.body
                      if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)]
        if isinstance(node, ast.Call) and _called_name(node.func) in FIELD_MAKERS:
            names += [keyword.arg for keyword in node.keywords if keyword.arg]
            for arg in node.args[1:2]:
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    names += arg.value.replace(",", " ").split()
    return names


def _called_name(func: ast.AST) -> str:
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


def unbound_reads(tree: ast.Module, name: str) -> list[ast.Name]:
    """The reads of ``name`` that may reach a module-level ``name`` the cell did not bind (the course's package,
    imported by an earlier cell). A read is the cell's own where its function, lambda or comprehension binds
    the name (an argument, an assignment, a ``for``/``with``/comprehension target: Python then never reads the
    global, whatever runs), or an enclosing function does; at the top level, where an unconditional top-level
    assignment of the name comes first. An import binding the name does not count (``import utils`` is the
    package), nor does a ``global`` statement, a class body, or a binding that is conditional at the top level."""
    scope_of: dict[int, ast.AST] = {}
    parent: dict[int, ast.AST | None] = {id(tree): None}
    bound: dict[int, set[str]] = {id(tree): set()}
    declared_global: dict[int, set[str]] = {}
    reads: list[ast.Name] = []

    def visit(node: ast.AST, scope: ast.AST) -> None:
        if isinstance(node, (*_FUNCTIONS, ast.ClassDef, *_COMPREHENSIONS)):
            _enter(node, scope)
            return
        if isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Load) and node.id == name:
                reads.append(node)
                scope_of[id(node)] = scope
            elif not isinstance(node.ctx, ast.Load):
                bound[id(scope)].add(node.id)
        if isinstance(node, ast.NamedExpr) and isinstance(node.target, ast.Name):  # binds outside a comprehension
            outer = scope
            while isinstance(outer, _COMPREHENSIONS):
                outer = parent[id(outer)]
            bound[id(outer)].add(node.target.id)
            visit(node.value, scope)
            return
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            declared_global.setdefault(id(scope), set()).update(node.names)
        if isinstance(node, ast.ExceptHandler) and node.name:
            bound[id(scope)].add(node.name)
        for child in ast.iter_child_nodes(node):
            visit(child, scope)

    def _enter(node: ast.AST, scope: ast.AST) -> None:
        parent[id(node)] = scope
        bound[id(node)] = set()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound[id(scope)].add(node.name)
            for outer in [*node.decorator_list, *getattr(node, "bases", []), *getattr(node, "keywords", [])]:
                visit(outer, scope)
        if isinstance(node, _FUNCTIONS):
            args = node.args
            for default in [*args.defaults, *[d for d in args.kw_defaults if d is not None]]:
                visit(default, scope)
            every = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
            bound[id(node)].update(arg.arg for arg in every if arg is not None)
            for body in node.body if isinstance(node.body, list) else [node.body]:
                visit(body, node)
        elif isinstance(node, ast.ClassDef):
            for body in node.body:
                visit(body, node)
        else:  # a comprehension: its first iterable is read in the enclosing scope
            for index, generator in enumerate(node.generators):
                visit(generator.iter, scope if index == 0 else node)
                visit(generator.target, node)
                for condition in generator.ifs:
                    visit(condition, node)
            for part in (node.key, node.value) if isinstance(node, ast.DictComp) else (node.elt,):
                visit(part, node)

    for statement in tree.body:
        visit(statement, tree)
    first_top_assignment = min((s.lineno for s in tree.body if _assigns(s, name)), default=None)
    unbound = []
    for read in reads:
        scope: ast.AST | None = scope_of[id(read)]
        own = False
        while scope is not None and scope is not tree:
            if name in declared_global.get(id(scope), set()):
                break
            if not isinstance(scope, ast.ClassDef) and name in bound[id(scope)]:
                own = True
                break
            scope = parent[id(scope)]
        if not own and not (first_top_assignment is not None and first_top_assignment < read.lineno):
            unbound.append(read)
    return unbound


def _assigns(statement: ast.stmt, name: str) -> bool:
    """Whether a top-level statement is an unconditional assignment of ``name`` (``utils = ...``)."""
    if isinstance(statement, ast.Assign):
        return any(isinstance(target, ast.Name) and target.id == name for target in statement.targets)
    return isinstance(statement, ast.AnnAssign) and statement.value is not None and \
        isinstance(statement.target, ast.Name) and statement.target.id == name


def own_method_reads(tree: ast.AST) -> set[int]:
    """The attribute nodes (by ``id``) that provably read a method of the cell's own class (red team R18's F2:
    ``_Online().logsumexp(b)`` where the cell's class ``_Online`` defines ``logsumexp`` from ``exp`` and ``sum``).
    The class has no base but ``object``, no decorator or keyword, and defines the method by a plain ``def``;
    its name is bound only by its class statement and read only as ``C(...)``, so no method is ever called
    unbound with torch for ``self``; no attribute of that name is ever set. The receiver is ``C(...)``, a name
    every binding of which is ``name = C(...)``, or the first argument of one of ``C``'s methods, not bound
    again. Torch's own ``Tensor.logsumexp`` is still patched out at run time."""
    nodes = list(ast.walk(tree))
    stored = {node.attr for node in nodes if isinstance(node, ast.Attribute) and not isinstance(node.ctx, ast.Load)}
    parents = {id(child): node for node in nodes for child in ast.iter_child_nodes(node)}
    defines: dict[str, set[str]] = {}  # class name -> its methods
    selves: dict[str, set[int]] = {}  # class name -> the reads of its methods' first arguments
    classes = [node for node in nodes if isinstance(node, ast.ClassDef)]
    for cls in classes:
        if cls.keywords or cls.decorator_list or any(not (isinstance(b, ast.Name) and b.id == "object")
                                                     for b in cls.bases):
            continue
        if sum(1 for other in classes if other.name == cls.name) > 1 or any(
                isinstance(node, ast.Name) and node.id == cls.name and (not isinstance(node.ctx, ast.Load) or not (
                    isinstance(parents.get(id(node)), ast.Call) and parents[id(node)].func is node))
                for node in nodes) or any(_rebinds(node, cls.name) for node in nodes):
            continue
        methods = [item for item in cls.body if isinstance(item, ast.FunctionDef) and not item.decorator_list]
        others = {n.id for item in cls.body if not isinstance(item, ast.FunctionDef) for n in ast.walk(item)
                  if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
        others |= {item.name for item in cls.body if isinstance(item, ast.FunctionDef) and item.decorator_list}
        defines[cls.name] = {item.name for item in methods} - others
        selves[cls.name] = {id(inner) for item in methods if item.args.args for inner in ast.walk(item)
                            if isinstance(inner, ast.Name) and inner.id == item.args.args[0].arg and sum(
            1 for other in ast.walk(item) if isinstance(other, ast.arg) and other.arg == item.args.args[0].arg) == 1
            and not any(rebinds_name(other, item.args.args[0].arg) for other in ast.walk(item))}
    found: set[int] = set()
    for name, methods in defines.items():
        instances = _only_calls_of(nodes, name)
        for node in nodes:
            if not (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load) and node.attr in methods
                    and node.attr not in stored):
                continue
            receiver = node.value
            if (isinstance(receiver, ast.Call) and isinstance(receiver.func, ast.Name) and receiver.func.id == name) \
                    or (isinstance(receiver, ast.Name) and receiver.id in instances) \
                    or id(receiver) in selves[name]:
                found.add(id(node))
    return found


def _rebinds(node: ast.AST, name: str) -> bool:
    """A binding of ``name`` other than a class statement (a function, an import, ``global``...)."""
    if isinstance(node, ast.ClassDef):
        return False
    return rebinds_name(node, name)


def rebinds_name(node: ast.AST, name: str) -> bool:
    """Whether ``node`` binds ``name`` (not as an argument: :func:`own_method_reads` counts those itself)."""
    if isinstance(node, ast.Name):
        return node.id == name and not isinstance(node.ctx, ast.Load)
    if isinstance(node, (ast.Global, ast.Nonlocal)):
        return name in node.names
    if isinstance(node, ast.alias):
        return (node.asname or node.name.split(".")[0]) == name
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.ExceptHandler, ast.MatchAs,
                         ast.MatchStar)):
        return node.name == name
    return isinstance(node, ast.MatchMapping) and node.rest == name


def _only_calls_of(nodes: list[ast.AST], class_name: str) -> set[str]:
    """Names every binding of which is ``name = C(...)`` (a single target), none an argument or other binding."""
    good: set[str] = set()
    bad: set[str] = set()
    assigned = {id(node.targets[0]) for node in nodes if isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name) and isinstance(node.value, ast.Call)
                and isinstance(node.value.func, ast.Name) and node.value.func.id == class_name}
    for node in nodes:
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            (good if id(node) in assigned else bad).add(node.id)
        elif isinstance(node, ast.arg):
            bad.add(node.arg)
    bad.update(name for node in nodes if not isinstance(node, ast.Name) for name in good if rebinds_name(node, name))
    return good - bad


def own_private_names(tree: ast.AST) -> set[tuple[str, str]]:
    """``("self", "_w")`` for each private name a class of the source sets on its methods' first argument
    (``self._w = ...``) or defines in its body (``def _twice(self, x)``), less any name a loaded module of
    torch's, or a tensor, has: a method called unbound (``A.get(torch)``) has torch for ``self``."""
    classes = [node for node in ast.walk(tree) if isinstance(node, ast.ClassDef)]
    methods = [item for cls in classes for item in cls.body
               if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))]
    selves = {m.args.args[0].arg for m in methods if m.args.args}
    names = {m.name for m in methods} | {target.id for cls in classes for item in cls.body
                                          if isinstance(item, (ast.Assign, ast.AnnAssign))
                                          for target in getattr(item, "targets", [getattr(item, "target", None)])
                                          if isinstance(target, ast.Name)}
    names |= {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)
              and isinstance(node.ctx, ast.Store) and isinstance(node.value, ast.Name) and node.value.id in selves}
    names = {name for name in names if name.startswith("_") and not torch_has(name)}
    return {(owner, name) for owner in selves for name in names}


def torch_has(name: str) -> bool:
    """Whether a tensor, or a module of torch's that is loaded, has an attribute ``name``."""
    import torch  # the grader has torch; imported here so that the module itself stays light

    modules = [module for key, module in list(sys.modules.items()) if key == "torch" or key.startswith("torch.")]
    return hasattr(torch.Tensor, name) or any(name in getattr(module, "__dict__", {}) for module in modules)
