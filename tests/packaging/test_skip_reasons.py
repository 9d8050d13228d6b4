"""CI's small-extra run (.ci/small_extra) fails on a skip without a reason.

.ci/skip_reasons.py reads pytest's -rs summary: a skip passes only when it names a missing
library with the extra that installs it or a real property of the machine or the
installation; anything else is listed and fails the run.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _check(tmp_path, *lines: str) -> subprocess.CompletedProcess:
    log = tmp_path / "log"
    log.write_text("\n".join(["....s.. [100%]", *lines, "1 passed, 1 skipped"]) + "\n")
    return subprocess.run(
        [sys.executable, str(ROOT / ".ci" / "skip_reasons.py"), str(log)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_skips_with_allowed_reasons_pass(tmp_path):
    """Skips naming an extra, a missing system tool or an opt-in variable are allowed."""
    result = _check(
        tmp_path,
        'SKIPPED [3] tests/conftest.py:51: torch is not installed: pip install ".[interop]"',
        'SKIPPED [1] tests/a.py:75: cmake is not installed: pip install ".[reliability]"',
        "SKIPPED [1] tests/b.py:35: NO cuda.h FOUND (set CUDA_HOME)",
        "SKIPPED [1] tests/c.py:103: git is not installed (a checkout used without it)",
        "SKIPPED [2] tests/d.py:7: needs the ASan build (DLPACKARRAY_SANITIZED=1, as in .ci/run)",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "5 skip lines, each for an allowed reason" in result.stdout


def test_a_skip_without_a_reason_fails_and_is_listed(tmp_path):
    """A skip that names no extra and no allowed reason fails the run and is printed."""
    result = _check(
        tmp_path,
        'SKIPPED [1] tests/conftest.py:51: torch is not installed: pip install ".[interop]"',
        "SKIPPED [4] tests/packaging/test_pgo_build.py:75: cmake is not installed",
    )
    assert result.returncode == 1
    assert "tests/packaging/test_pgo_build.py:75: cmake is not installed" in result.stdout
    assert "torch" not in result.stdout
