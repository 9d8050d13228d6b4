"""``python -m dlpackarray``: versions, installed array libraries and live zero-copy checks."""

import sys

from dlpackarray._report import main

if __name__ == "__main__":
    sys.exit(main())
