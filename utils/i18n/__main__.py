"""``python -m utils.i18n``: see :mod:`utils.i18n.cli`."""

import sys

from utils.i18n.cli import main

if __name__ == "__main__":
    sys.exit(main())
