"""Each chapter's own probes (:class:`utils.exercises.probes.Probe`), one module per chapter named like the
chapter's exercise module (``probing/sdpa.py`` for ``utils/exercises/sdpa.py``), and :mod:`.kit`, the
helpers they share. A chapter module imports its own probing module only."""
