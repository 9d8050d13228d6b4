"""``python -m dlpackarray [inspect|matrix|conform|bench]``: self-check, object inspector, interop
matrix, conformance report and benchmarks (see docs/cli.md)."""

import sys

from dlpackarray._cli import main

if __name__ == "__main__":
    sys.exit(main())
