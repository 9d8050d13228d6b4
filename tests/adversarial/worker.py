"""Child process that runs adversarial cases one at a time.

Reads a case id per line on stdin and answers one JSON line per case on
stdout: ``{"outcome": "done", "result": Case.run()}``.  A case that crashes the interpreter ends
this process; the parent (tests/adversarial/runner.py) records the crash for
that case and starts a new worker for the next one.
"""

from __future__ import annotations

import json
import os
import sys

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__))]
sys.setrecursionlimit(400)  # recursive protocol methods fail fast

import cases  # noqa: E402


def main() -> None:
    table = cases.all_cases()
    out = sys.stdout
    # Anything a case prints must not corrupt the protocol.
    sys.stdout = sys.stderr
    for line in sys.stdin:
        case = table[line.strip()]
        result = {"outcome": "done", "result": case.run()}
        out.write(json.dumps(result) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
