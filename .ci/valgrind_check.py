"""Reads valgrind memcheck logs and fails on errors in dlpackarray's code.

An error (invalid read/write, use of uninitialised memory, a definitely
lost block) counts when the innermost frame that is not an allocator
wrapper lies in one of dlpackarray's extension modules or C++ sources.
Reports inside CPython, NumPy, glibc's dynamic loader and the other
libraries loaded by the tests are listed as a count only: they are not
project code (docs/reliability.md).

Usage: python .ci/valgrind_check.py LOG...
"""

from __future__ import annotations

import re
import sys

ERROR_HEADS = ("Invalid read", "Invalid write", "Invalid free", "uninitialised", "definitely lost")
# Frames of the allocation machinery: the report is about their caller.
WRAPPERS = re.compile(r"vgpreload_|rtld-malloc|operator new|operator delete|libstdc\+\+")
PROJECT = re.compile(r"/dlpackarray/[^ ]*\.so|cpp/src/|/cython/_\w+\.cpp|python_shim")
FRAME = re.compile(r"^==\d+==\s+(?:at|by) 0x[0-9A-F]+: (.*)$")


def records(text: str):
    # Valgrind separates records by a line holding only the "==pid==" prefix.
    return re.split(r"\n==\d+== ?\n", text)


def classify(record: str):
    if not any(head in record for head in ERROR_HEADS):
        return None
    frames = [m.group(1) for m in map(FRAME.match, record.splitlines()) if m]
    for frame in frames:
        if WRAPPERS.search(frame):
            continue
        return "project" if PROJECT.search(frame) else "other"
    return "other"


def main(paths: list[str]) -> int:
    project, other = [], 0
    for path in paths:
        with open(path, errors="replace") as f:
            for record in records(f.read()):
                kind = classify(record)
                if kind == "project":
                    project.append(record)
                elif kind == "other":
                    other += 1
    for record in project:
        print(record, end="\n\n")
    print(f"valgrind: {len(project)} error record(s) in project code, {other} elsewhere")
    return 1 if project else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
