"""CUDA support tested against the fake driver (tests/helpers/fake_cuda), on every CI run.

Each scenario of tests/helpers/fake_cuda/scenarios.py runs in a child interpreter
whose DLPACKARRAY_CUDA_DRIVER names the freshly built fake driver: its
"device" memory is mapped PROT_NONE, so a host read of device memory by
dlpackarray crashes that child and fails the one test.  No real GPU is used.
"""

from __future__ import annotations

import os
import pathlib

import pytest
from conftest import assert_clean_exit, run_python

HELPERS = pathlib.Path(__file__).resolve().parents[1] / "helpers"


def run_scenario(name, driver, extra_env=None):
    code = (
        f"import sys; sys.path.insert(0, {str(HELPERS / 'fake_cuda')!r}); "
        f"import scenarios; scenarios.{name}()"
    )
    env = {"DLPACKARRAY_CUDA_DRIVER": str(driver), **(extra_env or {})}
    return run_python(code, env=env, timeout=300)


@pytest.mark.parametrize(
    "name",
    [
        "cai_import_and_export",
        "cai_errors",
        "precedence_dlpack_before_cai",
        "strided_device_to_host_copies",
        "dlpack_export_to_cpu_is_a_copy",
        "device_copy_stays_on_device",
        "pinned_and_managed_synchronise_before_host_reads",
        "pinned_reported_as_cpu_by_its_capsule_is_waited_for",
        "dlpack_import_passes_the_consumer_stream",
        "export_orders_streams_exactly",
        "random_views_copy_to_host_exactly",
        "stream_given_at_import_orders_other_sources",
        "driver_errors_are_clean_exceptions",
        "every_api_on_device_data_is_safe",
    ],
)
def test_fake_driver_scenario(name, fake_driver):
    assert_clean_exit(run_scenario(name, fake_driver), name)


def test_host_reads_of_fake_device_memory_are_detected(fake_driver):
    # The guard the scenarios rely on: reading device memory from the host
    # kills the child (SIGSEGV) before it can print.
    # Under the sanitizer build (docs/reliability.md) this intended SIGSEGV must
    # not be reported as an AddressSanitizer finding: the child leaves the
    # signal to the kernel.
    asan = os.environ.get("ASAN_OPTIONS")
    extra = {"ASAN_OPTIONS": f"{asan}:handle_segv=0"} if asan else None
    proc = run_scenario("host_read_of_device_memory_faults", fake_driver, extra)
    assert proc.returncode != 0 and "READ SUCCEEDED" not in proc.stdout


def test_no_driver_needed_to_import(tmp_path):
    missing = str(tmp_path / "no-such-libcuda.so")
    for name in ("import_without_loading_the_driver", "missing_driver_is_a_clear_error"):
        assert_clean_exit(run_scenario(name, missing), name)
