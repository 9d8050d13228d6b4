"""``python -m dlpackarray [inspect|matrix|bench]``: self-check, object inspector, interop
matrix and benchmarks (see docs/cli.md)."""

import sys

from dlpackarray._cli import main

if __name__ == "__main__":
    sys.exit(main())
