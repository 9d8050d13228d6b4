"""The CUDA driver layer (cpp/src/cuda_*.cpp) against the strict fake driver:
the GIL released around blocking calls, copies within the pitch limit and
over 2 GiB, pointer queries without a current context, streams and events of
different contexts, and MemoryError, cuInit errors and fork.  Each scenario of
tests/helpers/fake_cuda/driver_scenarios.py runs in a
child interpreter, so a crash or a deadlock fails one test."""

from __future__ import annotations

import pathlib

import pytest
from conftest import assert_clean_exit, require, run_python

HELPERS = pathlib.Path(__file__).resolve().parents[1] / "helpers"


@pytest.mark.parametrize(
    "name",
    [
        "blocking_calls_release_the_gil",
        "arrow_release_releases_the_gil",
        "copies_respect_the_device_pitch_limit",
        "copies_over_2_gib",
        "failed_host_copies_leave_nothing_pending",
        "pointer_device_needs_no_current_context",
        "streams_of_other_contexts",
        "out_of_memory_is_memory_error",
        "failing_cuinit_names_the_error",
        "forked_child_gets_a_clear_error",
    ],
)
def test_driver_layer(name, fake_driver):
    if name.startswith("arrow_"):
        require("pyarrow", "the scenario's Arrow export")
    code = (
        f"import sys; sys.path.insert(0, {str(HELPERS / 'fake_cuda')!r}); "
        f"import driver_scenarios; driver_scenarios.{name}()"
    )
    proc = run_python(code, env={"DLPACKARRAY_CUDA_DRIVER": str(fake_driver)}, timeout=300)
    assert_clean_exit(proc, name)
