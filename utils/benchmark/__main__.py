"""``python -m utils.benchmark [subcommand]``: see :mod:`utils.benchmark`."""

from utils.benchmark.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
