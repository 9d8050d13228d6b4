"""``python -m dlpackarray [inspect|matrix|conform|bench]``: self-check, object inspector, interop
matrix, conformance report and benchmarks (see docs/cli.md)."""

import sys

from dlpackarray.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
