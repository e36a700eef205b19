"""Repository-wide pytest settings (tests/conftest.py holds the fixtures of the unit tests and the order
the tests run in). The notebook budgets are a plugin of their own, loaded by ``make nbval-solutions``
(tests/nbval_budgets.py).
"""

from __future__ import annotations

# A template read as text by utils.builder, never imported (importing it would seed torch).
collect_ignore = ["utils/builder/setup_cell.py"]
