"""``python -m dlpackarray [COMMAND]``: dispatch to the self-check or a sub-command.

``--include``, ``--cmake-dir`` and ``--pkgconfig-dir`` print the folders a build system
needs (the C header, ``dlpackarrayConfig.cmake``, ``dlpackarray.pc``).

No command (or only options) runs the environment report and self-check
(:mod:`dlpackarray._report`); ``inspect``, ``matrix``, ``conform`` and ``bench`` have their
own modules.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

COMMANDS = ("inspect", "matrix", "bench", "conform")


def _bench(argv: Sequence[str]) -> int:
    import argparse
    import importlib

    parser = argparse.ArgumentParser(
        prog="python -m dlpackarray bench",
        description="Run the benchmark suite (benchmarks/ of a source checkout); one "
        "progress line per case.",
    )
    parser.add_argument("--quick", action="store_true", help="the smoke run (seconds)")
    args, rest = parser.parse_known_args(argv)
    try:
        run = importlib.import_module("benchmarks.run")
    except ImportError:
        print(
            "the benchmark suite ships with the source tree, not the wheel: run this from a "
            'checkout of dlpackarray after `pip install ".[bench]"`',
            file=sys.stderr,
        )
        return 2
    run.main((["--smoke", "--no-plots"] if args.quick else []) + list(rest))
    return 0


# Build-system queries (as nanobind's and pybind11's): one path on standard output.
_PATHS = {
    "--include": ("include",),
    "--cmake-dir": ("share", "cmake", "dlpackarray"),
    "--pkgconfig-dir": ("share", "pkgconfig"),
}


def _print_path(option: str) -> int:
    import os

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), *_PATHS[option])
    if not os.path.isdir(path):
        print(f"{option}: {path} is missing: a broken installation", file=sys.stderr)
        return 1
    print(path)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) == 1 and args[0] in _PATHS:
        return _print_path(args[0])
    if args and args[0] == "inspect":
        from dlpackarray._inspect import main as inspect_main

        return inspect_main(args[1:])
    if args and args[0] == "matrix":
        from dlpackarray._matrix import main as matrix_main

        return matrix_main(args[1:])
    if args and args[0] == "conform":
        from dlpackarray._conform import main as conform_main

        return conform_main(args[1:])
    if args and args[0] == "bench":
        return _bench(args[1:])
    from dlpackarray._report import main as report_main

    return report_main(args)
