"""``python -m utils.grade SUBMISSIONS [--out DIR] [--jobs N] [--timeout SECONDS] [--seed N]``."""

from utils.grading.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
