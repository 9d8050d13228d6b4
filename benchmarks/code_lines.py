"""The instruction-cache footprint of one B9 statement: how many 64-byte lines
of code each shared object executes per call, and the simulated L1i misses in
them (issue 23, round 8).

``python -m benchmarks.code_lines STMT [STMT ...]`` runs each statement (with
benchmarks/arrow_instructions.py's setup: ``pa_array``, ``arrow_only``,
``fst``, the floors) 0 and N times under callgrind with ``--dump-instr=yes
--cache-sim=yes``; a line counts when the difference executes at least half an
instruction in it per call.  The host's L1i (callgrind prints its geometry,
32 KiB of 64-byte lines here) holds 512 lines: a loop whose lines exceed that
misses on every call, and the more so the further past it.

``--sets`` (round 9) also lists the cache sets that hold more of the loop's lines
than the cache has ways: an 8-way L1i of 64 sets indexes a line by its address
within a 4 KiB page, so a loop far below 512 lines still misses on every call
when more than 8 of its lines share a set (conflict misses).  Shared objects are
mapped at page boundaries, so the set of a line follows from its offset in the
object, which callgrind reports.
"""

from __future__ import annotations

import collections
import os
import re
import subprocess
import sys
import tempfile

N = 10_000
LINE = 64


def parse(lines) -> tuple[collections.Counter, collections.Counter]:
    """(instructions, I1 misses) per (object file name, code line) of a
    callgrind output written with ``--dump-instr=yes``: self costs only (the
    cost line after ``calls=`` is the call's inclusive cost, and is skipped)."""
    names: dict[str, str] = {}
    events: list[str] | None = None
    npos = 1  # position columns before the costs ("positions: instr line": 2)
    ob = "?"
    addr = 0
    skip = False
    ir: collections.Counter = collections.Counter()
    miss: collections.Counter = collections.Counter()

    def resolve(spec: str) -> str:
        m = re.match(r"\((\d+)\)(?: (.*))?", spec)
        if not m:
            return spec
        if m.group(2) is not None:
            names[m.group(1)] = m.group(2)
        return names.get(m.group(1), spec)

    for line in lines:
        if line.startswith("positions:"):
            npos = len(line.split()) - 1
        elif line.startswith("events:"):
            events = line.split()[1:]
        elif line.startswith("ob="):
            ob = os.path.basename(resolve(line[3:].strip()))
        elif line.startswith("cob="):
            resolve(line[4:].strip())  # names an object for later references
        elif line.startswith("calls="):
            skip = True
        elif events and (line[:1] in "+-*" or line.startswith("0x")):
            parts = line.split()
            head = parts[0]
            if head.startswith("0x"):
                addr = int(head, 16)
            elif head[0] == "+":
                addr += int(head[1:])
            elif head[0] == "-":
                addr -= int(head[1:])
            if skip:
                skip = False
                continue
            costs = dict(zip(events, parts[npos:], strict=False))
            key = (ob, addr // LINE)
            if costs.get("Ir", "*").isdigit():
                ir[key] += int(costs["Ir"])
            if costs.get("I1mr", "*").isdigit():
                miss[key] += int(costs["I1mr"])
    return ir, miss


def per_call(before, after, n: int) -> dict[str, tuple[int, float, float]]:
    """Object -> (lines executed per call, instructions, misses per call) from
    the parses of an n-call run and a 0-call run."""
    (ir0, m0), (ir1, m1) = before, after
    out: dict[str, list] = collections.defaultdict(lambda: [0, 0.0, 0.0])
    for key in set(ir1) | set(ir0):
        ins = (ir1[key] - ir0[key]) / n
        if ins >= 0.5:
            row = out[key[0]]
            row[0] += 1
            row[1] += ins
            row[2] += (m1[key] - m0[key]) / n
    return {k: (v[0], v[1], v[2]) for k, v in out.items()}


def overfull_sets(before, after, n: int, sets: int = 64, ways: int = 8) -> dict:
    """Set index -> sorted (object, line, misses per call) of the lines executed
    per call (as per_call counts them), for the sets holding more than ``ways``."""
    (ir0, m0), (ir1, m1) = before, after
    found: dict[int, list] = collections.defaultdict(list)
    for key in set(ir1) | set(ir0):
        if (ir1[key] - ir0[key]) / n >= 0.5:
            found[key[1] % sets].append((key[0], key[1], round((m1[key] - m0[key]) / n, 1)))
    return {k: sorted(v) for k, v in sorted(found.items()) if len(v) > ways}


def _run(stmt: str, n: int):
    from benchmarks.arrow_instructions import _script

    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", PYTHONHASHSEED="0")
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "cg.out")
        subprocess.run(
            ["valgrind", "--tool=callgrind", "--cache-sim=yes", "--dump-instr=yes",
             "--separate-threads=yes", f"--callgrind-out-file={out}",
             sys.executable, "-c", _script(stmt, n, 0)],
            capture_output=True, text=True, check=True, env=env,
        )  # fmt: skip
        with open(out + "-01") as f:
            return parse(f)


def main(argv: list[str]) -> None:
    show_sets = "--sets" in argv
    for stmt in (a for a in argv if a != "--sets"):
        before, after = _run(stmt, 0), _run(stmt, N)
        rows = per_call(before, after, N)
        total = [sum(r[i] for r in rows.values()) for i in range(3)]
        print(f"{stmt}: {total[0]} lines, {total[1]:.0f} instructions, "
              f"{total[2]:.1f} L1i misses per call")  # fmt: skip
        for ob, (lines, ins, miss) in sorted(rows.items(), key=lambda kv: -kv[1][0]):
            print(f"  {lines:4d} lines {ins:7.0f} instructions {miss:6.1f} misses  {ob}")
        if show_sets:
            full = overfull_sets(before, after, N)
            print(f"  sets holding more than 8 of these lines: {len(full)}")
            for index, members in full.items():
                print(f"    set {index}: " + ", ".join(f"{o} line {ln} ({m} misses)"
                                               for o, ln, m in members))  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1:])
