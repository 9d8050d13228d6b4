"""Every test the small `test` extra skips is skipped for an allowed reason.

    python .ci/skip_reasons.py LOG

LOG is pytest's output with the skip summary (-rs).  Exits non-zero, listing them, when a
skip names neither a missing library with the extra that installs it nor one of the real
reasons below (a property of the machine or of the installation).  Used by
.ci/small_extra.
"""

import re
import sys

# Reasons a test may skip with the small extra besides a missing interop library: each is
# a property of the machine or of the installation that the reason names.
ALLOWED_SKIPS = [
    # A Python library the small extra leaves out, with the extra that installs it
    # (tests/conftest.py require(): interop; the typecheck and reliability tools).
    r'pip install "\.\[(interop|typecheck|reliability|docs)\]"',
    # No accelerator on this machine, or a CUDA test run without the driver.
    r"\b(CUDA|GPU|cuda\.h|libcuda)\b",
    # A system tool the tests drive that the machine lacks.
    r"COMPILER|C compiler|readelf|objdump|binutils|Chromium|\bgit is not installed",
    # The suite run from an installed copy of tests/ rather than a checkout.
    r"source checkout|next to the tests|source tree",
    # Interpreter or platform variants: a feature from a later Python, free-threading.
    r"Python \(?3[.,] ?\d+|PEP \d+|free-threaded|long double|little-endian|glibc",
    # Opt-in runs, named by the environment variable that enables them.
    r"DLPACKARRAY_[A-Z_]+=",
]
lines = open(sys.argv[1], encoding="utf-8", errors="replace").read().splitlines()
skips = [m.group(1) for line in lines if (m := re.match(r"SKIPPED \[\d+\] (.*)$", line))]
bad = [s for s in skips if not any(re.search(p, s) for p in ALLOWED_SKIPS)]
if bad:
    print("small extra: skips that name neither the interop extra nor an allowed reason:")
    print("\n".join(f"  {s}" for s in bad))
    sys.exit(1)
print(f"small extra: {len(skips)} skip lines, each for an allowed reason")
