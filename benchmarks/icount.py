"""Instruction counts per operation of B1, B2 and B10's dlpackarray rows, for
comparing two builds under load (docs/install.rst "abi3 or one wheel per version").

``valgrind --tool=callgrind python -m benchmarks.icount CASE N`` runs CASE's
statement N times after its setup; the count per operation is the difference
between two runs with different N divided by the difference of their operations
(startup and setup cancel).  Timings belong to ``benchmarks.run``; this gives
numbers that the other processes on a shared machine do not move.
"""

from __future__ import annotations

import sys


def _statement(case: str):
    import numpy as np

    import dlpackarray

    d = dlpackarray.DLPackArray(np.arange(1024, dtype=np.float64))
    if case == "loop":  # the loop and the lambda call alone, to subtract from B1 and B2
        return lambda: None, 1
    if case == "B1":
        return lambda: d.__dlpack__(max_version=(1, 3)), 1
    if case == "B2":
        return lambda: np.from_dlpack(d), 1
    from benchmarks import cases_capi

    # Only the C loops of benchmarks/capi/b10_loops.c: the other contenders'
    # setup (torch, tvm-ffi) would dominate the counts.
    c = cases_capi._module("b10_c")
    if isinstance(c, Exception):
        raise c
    if case == "B10-wrap":
        loop = c.loop_capi
    elif case == "B10-from-object":
        x = np.zeros(1024)

        def loop(n):
            return c.loop_from_object(x, n)
    else:
        raise SystemExit(f"unknown case {case!r}: loop, B1, B2, B10-wrap, B10-from-object")
    return (lambda: loop(cases_capi.LOOP)), cases_capi.LOOP


def main() -> None:
    case, n = sys.argv[1], int(sys.argv[2])
    stmt, ops = _statement(case)
    stmt()  # warm: first-call caches outside the counted difference
    for _ in range(n):
        stmt()
    print(f"{case}: {n} calls, {n * ops} operations")


if __name__ == "__main__":
    main()
