"""Repository-wide pytest hooks (tests/conftest.py holds the fixtures of the unit tests).

Prints the notebook budget report (tests/test_notebook_budgets.py) in the terminal summary: one line
per executed solution notebook, whether or not ``-s`` is given, and under pytest-xdist too (the
numbers travel in each report's ``user_properties``).
"""

from __future__ import annotations


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    rows = []
    for outcome in ("passed", "failed", "error"):
        for report in terminalreporter.stats.get(outcome, []):
            if getattr(report, "when", "call") != "call":
                continue
            for key, value in getattr(report, "user_properties", []):
                if key == "notebook_budget":
                    rows.append((outcome, value))
    if not rows:
        return
    terminalreporter.section("notebook budgets")
    for outcome, row in sorted(rows, key=lambda r: r[1]["notebook"]):
        rss = "n/a" if row["peak_rss_mib"] is None else f"{row['peak_rss_mib']:.0f} MiB"
        terminalreporter.write_line(
            f"{'ok  ' if outcome == 'passed' else 'FAIL'} {row['notebook']}: {row['wall_s']:.1f} s "
            f"(budget {row['budget_s']:.0f} s), kernel peak RSS {rss} (budget {row['budget_mib']:.0f} MiB)"
        )

# A template read as text by utils.builder, never imported (importing it would seed torch).
collect_ignore = ["utils/builder/setup_cell.py"]
