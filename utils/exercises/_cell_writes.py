"""What an exercise cell may not write: a file of any kind (issue 35). The grader's worker writes each case's
outcome as files the trusted side reads; a cell that wrote them itself and ended its process could claim "not
mutated" or "gradients flow" for code that mutates its input or cuts the graph. No exercise writes a file.
Ending the process is refused with the modules that do it (``os._exit``, ``os.kill``, ``signal``: off
:data:`utils.exercises._cell_rules.ALLOWED_IMPORTS`); ``sys.exit`` stays allowed, as it only raises
``SystemExit``, which the worker catches and records as the cell's error ("sys.exit(0) was called"), every case
of the exercise failing with it, and then writes its own files.

Asked by :func:`utils.exercises._cell_rules.refused` (the writers' names) and
:func:`utils.exercises._cell_rules.refused_in_tree` (:func:`refused_write`, which needs the call around a name).
Trusted side: only parses text.
"""

from __future__ import annotations

import ast

from utils.i18n.messages import tr

WRITERS = frozenset({"save", "savez", "savez_compressed", "savetxt", "tofile", "dump", "DataSource", "FileStore",
                     "write_text", "write_bytes", "export_chrome_trace", "export_stacks", "export_memory_timeline",
                     "tensorboard_trace_handler", "distributed"})
"""numpy's and torch's routines that write a file (``np.save``, ``a.tofile``, ``a.dump``, ``torch.save``,
``np.DataSource().open(path, 'w')``, a profiler's trace, ``torch.distributed``'s file stores), refused by name on
any object and as a from-import."""
READ_ONLY = {"open": (1, "mode", {"r", "rb", "rt"}), "memmap": (2, "mode", {"r", "c", "readonly", "copyonwrite"}),
             "from_file": (1, "shared", {False, None})}
"""What may only read: for each, the position and keyword of the argument that makes it write, and the constants
that do not. Absent is safe for ``open`` and ``torch.from_file`` (``UntypedStorage.from_file``), not for
``np.memmap`` (its default mode ``r+`` writes)."""


def written(code: str) -> str:
    """The reason for a writer found as ``code``."""
    return tr("{code} (writes a file: an exercise cell may read files but write none)", code=code)


def refused_write(node: ast.AST, parents: dict[int, ast.AST]) -> str | None:
    """``open(path, 'w')``, ``np.memmap(path)``, ``torch.from_file(path, True)``: one of :data:`READ_ONLY` called
    with a mode that writes, a computed one, ``*args``, ``**kwargs`` or ``opener=``, or passed on uncalled (also
    reached as ``getattr(np, 'memmap')``); or None."""
    if isinstance(node, ast.Name) and node.id == "open" and isinstance(node.ctx, ast.Load):
        name = "open"
    elif isinstance(node, ast.Attribute) and node.attr in READ_ONLY:
        name = node.attr
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr") \
            and len(node.args) > 1 and isinstance(node.args[1], ast.Constant) and node.args[1].value in READ_ONLY:
        name = node.args[1].value
    else:
        return None
    call, (position, keyword, safe) = parents.get(id(node)), READ_ONLY[name]
    if not (isinstance(call, ast.Call) and call.func is node):
        return written(name)
    if any(isinstance(arg, ast.Starred) for arg in call.args) or any(
            item.arg in (None, "opener") for item in call.keywords):
        return written(f"{name}(*..., **...)")
    given = call.args[position] if len(call.args) > position else next(
        (item.value for item in call.keywords if item.arg == keyword), None)
    if given is None and name != "memmap":
        return None
    if isinstance(given, ast.Constant) and type(given.value) in (str, bool, type(None)) and given.value in safe:
        return None
    return written(f"{name}(..., {keyword}={'...' if given is None else ast.unparse(given)[:30]})")
