"""``python -m dlpackarray``: the environment report and its live zero-copy checks."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import subprocess
import sys
import textwrap

import pytest

import dlpackarray as dla
from dlpackarray.cli import selfcheck as _report


def run_module(*args: str, extra_path: str | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    if extra_path is not None:
        # Put the fake packages first so they shadow the real ones.
        env["PYTHONPATH"] = os.pathsep.join(p for p in (extra_path, env.get("PYTHONPATH")) if p)
    return subprocess.run(
        [sys.executable, "-m", "dlpackarray", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


@pytest.fixture(scope="module")
def text_run() -> subprocess.CompletedProcess:
    return run_module()


@pytest.fixture(scope="module")
def json_run() -> subprocess.CompletedProcess:
    return run_module("--json")


def test_text_report_header_and_exit_code(text_run):
    assert "Traceback" not in text_run.stderr, text_run.stderr
    out = text_run.stdout.splitlines()
    assert out[0].startswith(f"dlpackarray {dla.__version__} (DLPack 1.3, max ndim 64)")
    assert out[1].startswith(f"Python {sys.version.split()[0]} ")
    # The exit status is non-zero exactly when some check failed.
    assert (text_run.returncode != 0) == any("[FAIL]" in line for line in out)
    assert text_run.returncode == 0, text_run.stdout


def _installed_version(name: str, dist: str) -> str | None:
    """The version of whichever distribution provides module ``name``
    (``cupy`` comes from ``cupy-cuda13x`` and the like); None if the module
    cannot be imported."""
    if importlib.util.find_spec(name) is None:
        return None
    for candidate in [dist, *importlib.metadata.packages_distributions().get(name, [])]:
        try:
            return importlib.metadata.version(candidate)
        except importlib.metadata.PackageNotFoundError:
            pass
    raise AssertionError(f"{name} is importable but no distribution provides it")


def test_text_report_lists_every_library_with_its_version(text_run):
    lines = text_run.stdout.splitlines()
    for name, dist in _report.LIBRARIES:
        (line,) = [ln for ln in lines if ln.split()[:1] == [name]]
        version = _installed_version(name, dist)
        assert line.split(None, 1)[1] == (version or "not installed"), name


def test_version_of_a_module_whose_distribution_has_another_name(tmp_path):
    # CuPy installs module "cupy" from distributions named after the CUDA
    # version: the report finds that distribution instead of saying "unknown".
    _fake_package(tmp_path, "cupy", "raise ImportError('not for import')\n")
    info = tmp_path / "cupy_cuda13x-14.2.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: cupy-cuda13x\nVersion: 14.2.0\n")
    (info / "top_level.txt").write_text("cupy\n")
    result = run_module("--json", extra_path=str(tmp_path))
    report = json.loads(result.stdout)
    (cupy,) = [lib for lib in report["libraries"] if lib["name"] == "cupy"]
    assert cupy == {"name": "cupy", "installed": True, "version": "14.2.0"}


def test_text_report_has_one_marked_line_per_check(text_run):
    check_lines = [ln.strip() for ln in text_run.stdout.splitlines() if ln.strip()[:1] == "["]
    assert len(check_lines) == len(_report.CHECKS)
    for line, check in zip(check_lines, _report.CHECKS, strict=True):
        assert line[:6] in ("[PASS]", "[SKIP]"), line
        assert check.name in line
    summary = text_run.stdout.strip().splitlines()[-2]
    passed = sum(ln.startswith("[PASS]") for ln in check_lines)
    assert summary.startswith(f"{passed} passed, 0 failed")


@pytest.mark.parametrize("library", ["numpy", "torch", "jax", "ml_dtypes", "tvm_ffi"])
def test_installed_test_libraries_pass_their_round_trip(json_run, library):
    report = json.loads(json_run.stdout)
    (check,) = [c for c in report["checks"] if c["name"] == library]
    installed = {lib["name"]: lib["installed"] for lib in report["libraries"]}
    if not installed[library]:
        assert check["status"] == "skip"
        pytest.skip(f'{library} is not installed: pip install ".[interop]"')
    assert check["status"] == "pass", check["detail"]


def test_json_report_matches_the_runtime(json_run):
    assert json_run.returncode == 0, json_run.stdout + json_run.stderr
    report = json.loads(json_run.stdout)
    assert report["ok"] is True
    assert report["dlpackarray"] == {
        "version": dla.__version__,
        "dlpack_version": list(dla.DLPACK_VERSION),
        "max_ndim": dla.MAX_NDIM,
    }
    assert [c["name"] for c in report["checks"]] == [c.name for c in _report.CHECKS]
    assert {c["status"] for c in report["checks"]} <= {"pass", "skip"}
    stdlib = [c for c in report["checks"] if c["library"] == "stdlib"]
    assert stdlib and all(c["status"] == "pass" for c in stdlib)


def _fake_package(root, name: str, body: str) -> None:
    pkg = root / name
    pkg.mkdir()
    (pkg / "__init__.py").write_text(textwrap.dedent(body))


def test_broken_library_gives_a_fail_line_not_a_traceback(tmp_path):
    _fake_package(tmp_path, "torch", 'raise RuntimeError("simulated broken install")\n')
    _fake_package(tmp_path, "cupy", "raise SystemExit(3)\n")
    result = run_module(extra_path=str(tmp_path))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    lines = [ln.strip() for ln in result.stdout.splitlines()]
    assert "[FAIL] torch -- RuntimeError: simulated broken install" in lines
    assert "[FAIL] cupy -- SystemExit: 3" in lines
    # The other checks still ran.
    assert any(ln.startswith("[PASS] stdlib: bytearray") for ln in lines)
    assert "failed" in lines[-2] and not lines[-2].startswith("0 passed")


def test_broken_library_in_json_mode(tmp_path):
    _fake_package(tmp_path, "numpy", 'raise ImportError("simulated ABI mismatch")\n')
    result = run_module("--json", extra_path=str(tmp_path))
    assert result.returncode == 1
    report = json.loads(result.stdout)
    assert report["ok"] is False
    (numpy_check,) = [c for c in report["checks"] if c["name"] == "numpy"]
    assert numpy_check == {
        "name": "numpy",
        "library": "numpy",
        "status": "fail",
        "detail": "ImportError: simulated ABI mismatch",
    }


def test_a_copy_is_detected_as_a_failure():
    def copies() -> str:
        buf = bytearray(16)
        a = dla.DLPackArray(buf, copy=True)
        _report._same_pointer(_report._first(a), _report._addr(buf), "copy=True")
        return "unreachable"

    result = _report.run_check(_report.Check("copy", "stdlib", copies))
    assert result.status == "fail"
    assert result.detail.startswith("CheckFailed: copy=True: data pointer")
    assert "data was copied" in result.detail


def test_main_exit_status_follows_the_checks(capsys):
    def fails() -> str:
        raise _report.CheckFailed("values differ")

    def skips() -> str:
        raise _report.Skipped("no device")

    ok = _report.Check("ok", "lib", lambda: "fine")
    bad = _report.Check("bad", "lib", fails)
    skip = _report.Check("skip", "lib", skips)

    assert _report.main([], checks=[ok, skip]) == 0
    out = capsys.readouterr().out
    assert "  [PASS] lib: ok -- fine" in out
    assert "  [SKIP] lib: skip -- no device" in out
    assert out.strip().splitlines()[-2].endswith("1 passed, 0 failed, 1 skipped")

    assert _report.main([], checks=[ok, bad]) == 1
    assert "  [FAIL] lib: bad -- CheckFailed: values differ" in capsys.readouterr().out

    assert _report.main(["--json"], checks=[bad]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is False and report["checks"][0]["status"] == "fail"


def test_unknown_option_is_rejected():
    result = run_module("--no-such-option")
    assert result.returncode == 2
    assert "unrecognized arguments" in result.stderr
