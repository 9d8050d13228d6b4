"""The no_cuda_driver marker (tests/helpers/no_cuda_driver.py): where a driver loads,
a marked test runs in a child without one, and its outcome is the test's."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import textwrap

import no_cuda_driver

HELPERS = pathlib.Path(__file__).resolve().parents[1] / "helpers"

SAMPLE = """
import os
import pytest

@pytest.mark.no_cuda_driver
def test_sees_no_driver():
    assert os.environ["DLPACKARRAY_CUDA_DRIVER"] == {missing!r}

@pytest.mark.no_cuda_driver
def test_fails():
    assert False, "the child's failure"

@pytest.mark.no_cuda_driver
def test_skips():
    pytest.skip("the child's reason")

def test_unmarked_runs_here():
    assert os.environ["DLPACKARRAY_CUDA_DRIVER"] == {loadable!r}
"""


def test_marked_tests_run_in_a_child_without_a_driver(tmp_path):
    # Any loadable library stands for a driver: the parent dispatches.
    loadable = "libc.so.6"
    (tmp_path / "conftest.py").write_text(
        f"import sys\nsys.path.insert(0, {str(HELPERS)!r})\n"
        "from no_cuda_driver import pytest_pyfunc_call  # noqa: F401\n"
    )
    (tmp_path / "pytest.ini").write_text(
        "[pytest]\naddopts = -ra --strict-markers\nmarkers =\n    no_cuda_driver: test\n"
    )
    (tmp_path / "test_sample.py").write_text(
        textwrap.dedent(SAMPLE.format(missing=no_cuda_driver.MISSING_DRIVER, loadable=loadable))
    )
    # The child's options are its pytest.ini's alone: PYTEST_ADDOPTS of the
    # outer run (-rs, say) would replace the -ra whose summary is read below.
    outer = {"DLPACKARRAY_TEST_NO_CUDA_DRIVER_CHILD", "PYTEST_ADDOPTS"}
    env = {k: v for k, v in os.environ.items() if k not in outer}
    env["DLPACKARRAY_CUDA_DRIVER"] = loadable
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "test_sample.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    out = proc.stdout
    assert "2 passed, 1 skipped" in out and "1 failed" in out, out
    assert "FAILED test_sample.py::test_fails" in out
    assert "the child's failure" in out
    assert "(run without a CUDA driver in a child)" in out and "the child's reason" in out
