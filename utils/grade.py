"""``python -m utils.grade``, the instructor's one command:

- ``python -m utils.grade SUBMISSIONS [--out DIR] [--jobs N] [--timeout SECONDS] [--seed N] ...`` grades a
  class (:mod:`utils.grading.cli`);
- ``python -m utils.grade gradescope-bundle OUT.zip [--seed N] [--hidden-visibility V] ...`` writes a
  Gradescope autograder (:mod:`utils.builder.gradescope_bundle`).

Each is imported only when asked for, so grading never loads the builder.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["gradescope-bundle"]:
        from utils.builder.gradescope_bundle import bundle_main

        return bundle_main(argv[1:])
    from utils.grading.cli import main as grade_class

    return grade_class(argv)


if __name__ == "__main__":
    raise SystemExit(main())
