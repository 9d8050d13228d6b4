"""``python -m dlpackarray [COMMAND]``: dispatch to the self-check or a sub-command.

``--include``, ``--cmake-dir`` and ``--pkgconfig-dir`` print the folders a build system
needs (the C header, ``dlpackarrayConfig.cmake``, ``dlpackarray.pc``).

No command (or only options) runs the environment report and self-check
(:mod:`dlpackarray.cli.selfcheck`); ``inspect``, ``matrix``, ``conform`` and ``bench`` have
their own modules beside this one.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

COMMANDS = ("inspect", "matrix", "bench", "conform")

#: One line per sub-command for ``python -m dlpackarray --help``.
COMMAND_HELP = {
    "inspect": "what DLPackArray sees in an object and which consumers take it zero-copy",
    "matrix": "every producer into every consumer: zero-copy, copied, refused or crashed",
    "bench": "the benchmark suite (source checkout) into a new results directory",
    "conform": "check an object against every rule of the protocols it offers",
}


def _help() -> str:
    lines = [
        "usage: python -m dlpackarray [--json] | --version | COMMAND [options]",
        "",
        "With no command: report the environment and run live zero-copy round trips",
        "through DLPackArray for every installed array library (--json for JSON).",
        "",
        "commands (python -m dlpackarray COMMAND --help for each):",
    ]
    lines += [f"  {name:<9} {COMMAND_HELP.get(name, '')}" for name in COMMANDS]
    lines += [
        "",
        "options:",
        "  --version        print the installed version",
        "  --json           the self-check's report as JSON",
        *(f"  {opt:<16} print the {'/'.join(parts)} folder" for opt, parts in _PATHS.items()),
    ]
    return "\n".join(lines)


def _bench(argv: Sequence[str]) -> int:
    import argparse
    import importlib

    parser = argparse.ArgumentParser(
        prog="python -m dlpackarray bench",
        description="Run the benchmark suite (benchmarks/ of a source checkout); one "
        "progress line per case.",
    )
    parser.add_argument("--quick", action="store_true", help="the smoke run (seconds)")
    parser.add_argument(
        "--output",
        "--out-dir",
        metavar="DIR",
        help="a new or empty directory for the results (default: a new "
        "dlpackarray-bench-<UTC time> directory under the current one)",
    )
    args, rest = parser.parse_known_args(argv)
    output = _bench_output(args.output)
    if output is None:
        return 2
    try:
        run = importlib.import_module("benchmarks.run")
    except ImportError:
        print(
            "the benchmark suite ships with the source tree, not the wheel: run this from a "
            'checkout of dlpackarray after `pip install ".[bench]"`',
            file=sys.stderr,
        )
        return 2
    print(f"results go to {output}", flush=True)
    run.main((["--smoke", "--no-plots"] if args.quick else []) + ["--out-dir", output, *rest])
    return 0


def _bench_output(output: str | None) -> str | None:
    """The results directory, never one that already holds files (so never the checkout's
    committed benchmarks/results/); None after saying why."""
    import os
    import time

    if output is None:
        stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
        output = os.path.abspath(f"dlpackarray-bench-{stamp}")
        suffix = 1
        while os.path.exists(output):
            suffix += 1
            output = os.path.abspath(f"dlpackarray-bench-{stamp}-{suffix}")
    output = os.path.abspath(output)
    if os.path.exists(output) and (not os.path.isdir(output) or os.listdir(output)):
        print(
            f"bench: --output {output} already exists and is not an empty directory; "
            "accepted: a new or an empty directory (the default is a new one)",
            file=sys.stderr,
        )
        return None
    return output


# Build-system queries (as nanobind's and pybind11's): one path on standard output.
_PATHS = {
    "--include": ("include",),
    "--cmake-dir": ("share", "cmake", "dlpackarray"),
    "--pkgconfig-dir": ("share", "pkgconfig"),
}


def _print_path(option: str) -> int:
    import os

    import dlpackarray

    # The folders sit in the package itself, one level above this sub-package.
    package = os.path.dirname(os.path.abspath(dlpackarray.__file__))
    path = os.path.join(package, *_PATHS[option])
    if not os.path.isdir(path):
        print(f"{option}: {path} is missing: a broken installation", file=sys.stderr)
        return 1
    print(path)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args in (["-h"], ["--help"]):
        print(_help())
        return 0
    if args == ["--version"]:
        from dlpackarray import __version__

        print(f"dlpackarray {__version__}")
        return 0
    if len(args) == 1 and args[0] in _PATHS:
        return _print_path(args[0])
    if args and args[0] == "inspect":
        from dlpackarray.cli.inspect import main as inspect_main

        return inspect_main(args[1:])
    if args and args[0] == "matrix":
        from dlpackarray.cli.matrix import main as matrix_main

        return matrix_main(args[1:])
    if args and args[0] == "conform":
        from dlpackarray.cli.conform import main as conform_main

        return conform_main(args[1:])
    if args and args[0] == "bench":
        return _bench(args[1:])
    if args and not args[0].startswith("-"):
        print(
            f"python -m dlpackarray: unknown command {args[0]!r}; accepted: "
            f"{', '.join(COMMANDS)} (or no command for the self-check; --help)",
            file=sys.stderr,
        )
        return 2
    from dlpackarray.cli.selfcheck import main as report_main

    return report_main(args)
