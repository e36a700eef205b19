"""Repository-wide pytest hooks (tests/conftest.py holds the fixtures of the unit tests).

Runs the ``slow``-marked tests first and groups the users of a module-scoped fixture for
pytest-xdist (:func:`pytest_collection_modifyitems`). The notebook budgets are a plugin of their own,
loaded by ``make nbval-solutions`` (tests/nbval_budgets.py).
"""

from __future__ import annotations

import pytest


def _module_fixtures(item) -> list[str]:
    """The module-scoped fixtures ``item`` uses (an environment, a graded batch, an export)."""
    info = getattr(item, "_fixtureinfo", None)  # None: nbval cells, doctests
    names = info.name2fixturedefs.items() if info is not None else ()
    return sorted(name for name, defs in names if defs and defs[-1].scope == "module")


@pytest.hookimpl(tryfirst=True)  # before xdist's own, which reads the groups
def pytest_collection_modifyitems(session, config, items):
    """Order and group the tests for pytest-xdist (``make unit``: ``--dist loadgroup
    --no-loadscope-reorder``).

    - The slow tests (whole notebooks, fresh venvs, the grader's round trips) come first; slow and
      other tests each keep the order they were collected in. The two workers then start on the long
      tests at once and the fast ones fill in around them, instead of two long tests meeting in one
      worker at the end while the other idles.
    - The tests of a module that use the same module-scoped fixtures form one xdist group, so such a
      fixture is built once, by one worker (``xdist_group`` marks already present are kept). Every
      other test is handed out on its own.
    """
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
    for item in items:
        fixtures = _module_fixtures(item)
        if fixtures and item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(f"{item.path.stem}:{'+'.join(fixtures)}"))


# A template read as text by utils.builder, never imported (importing it would seed torch).
collect_ignore = ["utils/builder/setup_cell.py"]
