"""What an exercise cell may reach through an allowed module's attributes (red team R18, issue 35): a submodule
only if it is allowed too, and none of the few attributes that run text as code or walk torch's autograd graph.

``np.testing.measure("import os ...")`` compiles and runs a string in the caller's globals: ``numpy.testing`` is
never imported by the cell, only reached as an attribute of the allowed ``numpy``. So an attribute chain rooted at
a name bound to a module (the preamble's ``torch``, ``nn``, ``F``, ``math``, any import, ``t = torch``) is resolved
to dotted names, and each prefix that names a module must be allowed. Trusted side: parses text, and finds whether
a dotted name is a module with :func:`importlib.util.find_spec`, only below a module that is allowed (so that
finding it imports nothing a cell could not import itself).
"""

from __future__ import annotations

import ast
import importlib.util
import inspect
import sys

from utils.exercises._forbidden_scopes import assigned_aliases
from utils.i18n.messages import tr

HARMLESS_SUBMODULES = frozenset({"numpy.linalg", "numpy.random", "numpy.fft", "torch.cuda", "torch.nn.init",
                                 "torch.nn.parameter", "torch.nn.modules", "torch.autograd", "torch.random",
                                 "torch.types", "torch.func", "torch.autograd.functional", "torch.autograd.forward_ad",
                                 "torch.distributions", "torch.futures"})
"""Submodules a fair cell may reach as attributes besides the importable ones
(:data:`utils.exercises._cell_rules.COURSE_MODULES`): ``np.linalg.norm``, ``np.random.default_rng``,
``nn.init.xavier_uniform_``, ``nn.Parameter``'s module, ``torch.autograd.Function``, ``torch.func.vmap``,
``torch.futures.Future`` (no code runs from a string there),
``torch.distributions.Categorical``... (an exercise that forbids autodiff lists torch.func's and autograd's
functions by name). ``torch.cuda`` is still refused where it is not called by :mod:`utils.exercises.forbidden`.
``torch.distributions`` allows its own modules (``torch.distributions.constraints``); ``torch.nn.modules`` is
listed, but the attribute ``.modules`` is refused on its own (as ``sys.modules``), so a cell writes ``nn.Linear``.
A module reached under another module's name counts by its own name (red team R26). Not
``numpy.testing`` (``measure`` and ``rundocs`` run text as code), ``torch.testing``, ``torch.classes``
(``load_library``), ``torch.backends``, ``torch.autograd.graph``..."""
RUNS_CODE = frozenset({"measure", "rundocs", "load_library"})
"""Attributes refused on any object: numpy.testing's functions that compile and run a string, and
``torch.classes.load_library`` (a second net where the chain's root is not known to be a module)."""
AUTOGRAD_GRAPH = frozenset({"grad_fn", "next_functions", "register_hook", "register_prehook",
                            "register_full_backward_hook", "register_full_backward_pre_hook",
                            "register_backward_hook", "saved_tensors", "saved_variables", "retains_grad"})
"""Attributes that walk or hook torch's autograd graph: calling each node of ``y.grad_fn`` and its
``next_functions`` computes a gradient with torch's derivative code (red team R18's G1 in chapter 6's block
gradient). A private ``_saved_self`` is refused as a private name; so is each of these names on any object."""
HARMLESS_CUDA = frozenset({"is_available", "device_count", "current_device", "get_device_name", "is_bf16_supported",
                           "synchronize", "memory_allocated", "max_memory_allocated", "empty_cache",
                           "reset_peak_memory_stats"})
"""The members of ``torch.cuda`` a fair cell may read (red team R19's F8: ``torch.device("cuda" if
torch.cuda.is_available() else "cpu")`` was refused), each only as ``torch.cuda.<member>`` itself, read or called,
on a name bound to torch by the preamble or an import (:func:`harmless_cuda_reads`). They query or wait for the
device and load no code; the rest of ``torch.cuda`` (``jiterator`` compiles a string, ``set_device``, ``memory``...)
and ``torch.cuda`` under another name stay refused (:mod:`utils.exercises.forbidden`)."""
HARMLESS_MPS = frozenset({"is_available", "is_built"})
"""The members of ``torch.backends.mps`` a fair cell may read, as :data:`HARMLESS_CUDA` (red team R20: the Mac
device line ``"mps" if torch.backends.mps.is_available() else "cpu"``), only as ``torch.backends.mps.<member>``."""
SELF_CHECK_MODULES = frozenset({"torch.testing", "numpy.testing"})
"""Modules a learner reaches for to check a result in the cell (red team R19's F9: ``torch.testing.assert_close``):
still refused (``numpy.testing.measure`` runs a string as code), with a pointer to ``torch.allclose``."""
_HARMLESS_BELOW = ("torch.nn.modules.", "torch.distributions.")
_PREAMBLE = {"torch": "torch", "nn": "torch.nn", "F": "torch.nn.functional", "math": "math"}


def refused_reach(tree: ast.AST, allowed: frozenset[str]) -> str | None:
    """Why a node of the cell's syntax tree ``tree`` reaches what no cell may, or None. ``allowed``: the modules a
    cell may import."""
    modules = assigned_aliases(tree, _module_aliases(tree))
    harmless = harmless_cuda_reads(tree, {name for name, module in modules.items() if module == "torch"})
    for node in ast.walk(tree):
        chain = _chain(node) if isinstance(node, ast.Attribute) and id(node) not in harmless else []
        if not chain or chain[0] not in modules:
            continue
        dotted = modules[chain[0]]
        for part in chain[1:]:
            if not _fair(dotted, allowed):
                break  # the chain left the modules: what it reaches from an allowed one was checked below
            # a module by its own name: torch.distributions.kl.torch is torch, and .testing below it torch.testing (R26)
            dotted = _module_named(dotted, part)
            if dotted is None:
                break  # an attribute that is no module
            if not _fair(dotted, allowed):
                allowed_text = ", ".join(sorted(allowed | HARMLESS_SUBMODULES))
                if dotted in SELF_CHECK_MODULES:  # the pointer inside the reason: it is quoted in longer sentences
                    allowed_text += tr("; to check a result in the cell, use torch.allclose(a, b) or torch.equal(a, b)")
                return tr("{code}: {module} is a module an exercise cell may not use (only {allowed})",
                          code=ast.unparse(node)[:60], module=dotted, allowed=allowed_text)
    for node in ast.walk(tree):  # after the modules, so that np.testing.measure names numpy.testing
        name = node.attr if isinstance(node, ast.Attribute) else None
        if name in RUNS_CODE:
            return tr("{code} (runs text as code or loads a shared library)", code=f".{name}")
        if name in AUTOGRAD_GRAPH:
            return tr("{code} (walks or hooks torch's autograd graph, which computes gradients with torch's "
                      "derivative code)", code=f".{name}")
    return None


def harmless_cuda_reads(tree: ast.AST, torch_names: set[str]) -> set[int]:
    """The nodes (by ``id``) of each ``torch.cuda.<member>`` of :data:`HARMLESS_CUDA` and
    ``torch.backends.mps.<member>`` of :data:`HARMLESS_MPS` in ``tree``, and of the chain below it, where ``torch``
    is one of ``torch_names`` and nothing further is read from the member."""
    inner = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    found: set[int] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or id(node) in inner:
            continue
        for path, members in ((("cuda",), HARMLESS_CUDA), (("backends", "mps"), HARMLESS_MPS)):
            chain, value = [id(node)], node.value
            for attr in reversed(path):
                if not (isinstance(value, ast.Attribute) and value.attr == attr):
                    break
                chain.append(id(value))
                value = value.value
            else:
                if node.attr in members and isinstance(value, ast.Name) and value.id in torch_names:
                    found.update(chain)
    return found


def _module_aliases(tree: ast.AST) -> dict[str, str]:
    """Each name bound to a module in ``tree`` (and the preamble's), mapped to the module's dotted name."""
    found = dict(_PREAMBLE)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                found[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else \
                    alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                found[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return found


def _chain(node: ast.Attribute) -> list[str]:
    parts: list[str] = []
    current: ast.AST = node
    while isinstance(current, ast.Attribute):
        parts.append(current.attr)
        current = current.value
    if isinstance(current, ast.Call) and isinstance(current.func, ast.Name) and current.func.id == "getattr" \
            and len(current.args) > 1 and isinstance(current.args[0], ast.Name) \
            and isinstance(current.args[1], ast.Constant) and isinstance(current.args[1].value, str):
        parts.append(current.args[1].value)  # getattr(np, "testing").measure
        current = current.args[0]
    return [current.id, *reversed(parts)] if isinstance(current, ast.Name) else []


def _fair(dotted: str, allowed: frozenset[str]) -> bool:
    return dotted in allowed | HARMLESS_SUBMODULES or dotted.startswith(_HARMLESS_BELOW)


def _module_named(parent: str, name: str) -> str | None:
    """The name of the module ``parent.name`` is, by the module's own ``__name__`` (a module a loaded parent holds
    under another name: ``torch.distributions.kl.torch`` is ``torch``), or None when it is no module. Never imports
    ``parent.name`` itself: a loaded parent's ``__dict__`` is read, not its attributes (torch's module
    ``__getattr__`` imports lazily), and otherwise its spec is only looked up, below a parent that is allowed."""
    loaded = sys.modules.get(parent)
    value = getattr(loaded, "__dict__", {}).get(name) if loaded is not None else None
    if inspect.ismodule(value):
        own = getattr(value, "__name__", None)
        return own if isinstance(own, str) and own else f"{parent}.{name}"
    dotted = f"{parent}.{name}"
    if dotted in sys.modules:
        return dotted
    try:
        return dotted if importlib.util.find_spec(dotted) is not None else None
    except (ImportError, ValueError, AttributeError):
        return None
