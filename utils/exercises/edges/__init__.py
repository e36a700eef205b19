"""Hidden edge cases and part tables, one module per chapter (trusted side: the sandbox never imports them).

Each chapter module of :mod:`utils.exercises` passes these to its :class:`~utils.exercises.definition.Exercise`
as ``make_edge_cases`` and ``parts``. The modules import no chapter module (no cycle); cases derived
from a chapter's own generator get it as an argument (:func:`utils.exercises.edges.derive.derived`).
"""
