"""dlpackarray.testing on device data (the fake CUDA driver) and crash attribution of
``check_conformance(expr, isolate=True)``."""

from __future__ import annotations

import os
import pathlib

import pytest
from conftest import assert_clean_exit, require, run_python

from dlpackarray.testing import check_conformance

ROOT = pathlib.Path(__file__).resolve().parents[2]
HELPERS = ROOT / "tests" / "helpers"


@pytest.mark.parametrize(
    "name", ["dlpackarray_on_device_memory_conforms", "cuda_interface_only_object_conforms"]
)
def test_checker_on_fake_device_memory(name, fake_driver):
    code = (
        f"import sys; sys.path.insert(0, {str(HELPERS / 'fake_cuda')!r}); "
        f"import conform_scenarios; conform_scenarios.{name}()"
    )
    proc = run_python(code, env={"DLPACKARRAY_CUDA_DRIVER": str(fake_driver)}, timeout=300)
    assert_clean_exit(proc, name)


@pytest.fixture
def child_env(monkeypatch):
    # The isolated children import conform_corpus from here.  A sanitizer build must
    # leave the intended SIGSEGV to the kernel (it is the observation, not a finding).
    import sys

    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in sys.path if p))
    asan = os.environ.get("ASAN_OPTIONS")
    if asan:
        monkeypatch.setenv("ASAN_OPTIONS", f"{asan}:handle_segv=0")


def _by_id(report):
    return {r.rule.id: r for r in report.results}


def test_a_crashing_probe_is_named_and_the_rest_still_probed(child_env):
    expr = "__import__('conform_corpus').Made(cuda=True, segfault_stream=-2)"
    report = check_conformance(expr, isolate=True)
    got = _by_id(report)
    crash = got["process.no-crash"]
    assert crash.status == "fail"
    msg = crash.message
    # The rule and call that were running, the signal, and the child's Python traceback.
    assert "dlpack.stream.below-minus-one-rejected" in msg, msg
    assert "stream=-2" in msg and "SIGSEGV" in msg, msg
    assert "Fatal Python error" in msg and "_check_stream" in msg, msg
    # The crashing rule fails; the rerun without it reports every other rule.
    assert got["dlpack.stream.below-minus-one-rejected"].status == "fail"
    assert got["dlpack.stream.cuda-zero-rejected"].status == "pass"
    assert got["dlpack.copy.true-new-memory"].status == "pass"
    assert {r.rule.id for r in report.failures()} == {
        "process.no-crash",
        "dlpack.stream.below-minus-one-rejected",
    }


def test_a_crash_at_exit_keeps_the_finished_report(child_env):
    expr = (
        "[__import__('atexit').register(lambda: __import__('os').kill("
        "__import__('os').getpid(), 11)), np.arange(3.0)][1]"
    )
    report = check_conformance(expr, isolate=True)
    got = _by_id(report)
    assert got["process.no-crash"].status == "fail"
    assert "interpreter exit" in got["process.no-crash"].message
    assert got["dlpack.tensor.layout-agrees"].status == "pass"


def test_an_escaped_exception_is_named_with_its_traceback(child_env):
    report = check_conformance("1 / 0", isolate=True)
    msg = _by_id(report)["process.no-crash"].message
    assert "exit status 1" in msg and "evaluating 1 / 0" in msg, msg
    assert "Traceback" in msg and "ZeroDivisionError" in msg, msg


def test_a_hung_probe_is_killed_named_and_skipped(child_env, monkeypatch):
    from dlpackarray.testing import _isolate

    monkeypatch.setattr(_isolate, "TIMEOUT", 20.0)
    expr = "__import__('conform_corpus').Made(cuda=True, hang_stream=0)"
    report = check_conformance(expr, isolate=True)
    got = _by_id(report)
    msg = got["process.no-crash"].message
    assert "SIGKILL" in msg and "dlpack.stream.cuda-zero-rejected" in msg, msg
    assert "the probe hung" in msg, msg
    assert got["dlpack.stream.cuda-zero-rejected"].status == "fail"
    assert got["dlpack.stream.below-minus-one-rejected"].status == "pass"


def test_gpu_conform_tool_writes_both_reports(tmp_path, child_env):
    # tools/gpu_conform.py is run on a GPU machine; here its subjects' expressions must
    # parse, and one subject that needs no GPU goes through the whole path.
    import importlib.util
    import json

    spec = importlib.util.spec_from_file_location("gpu_conform", ROOT / "tools" / "gpu_conform.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    for _name, _needs, expr in tool.SUBJECTS:
        compile(expr, "<subject>", "eval")
    require("jax", "the subject under test")
    assert tool.main(["--out", str(tmp_path), "--only", "JAX (default backend)"]) == 0
    doc = json.loads((tmp_path / "gpu_conformance.json").read_text())
    entry = doc["subjects"]["JAX (default backend)"]
    assert entry["results"]["process.no-crash"][0] == "pass"
    assert "| JAX (default backend) |" in (tmp_path / "gpu_conformance.md").read_text()
