"""The fake CUDA driver can come prebuilt (DLPACKARRAY_FAKE_CUDA_PREBUILT), for a test run
with no compiler, such as the aarch64 wheels' under emulation (.ci/aarch64).

Each build() still gives a file of its own, so each test module's driver keeps its own
state, and a missing prebuilt file is a clear error, never a silent fallback.
"""

from __future__ import annotations

import fake_cuda
import pytest


def test_a_prebuilt_driver_is_copied_once_per_directory(tmp_path, monkeypatch):
    try:
        native = fake_cuda.build(tmp_path)
    except RuntimeError as e:
        pytest.skip(f"needs a C compiler to make the prebuilt driver: {e}")
    monkeypatch.setenv("DLPACKARRAY_FAKE_CUDA_PREBUILT", str(native))
    # No compiler can be found from here on: the copies must come from the prebuilt file.
    monkeypatch.setenv("CC", "/nonexistent-compiler")
    monkeypatch.setenv("PATH", str(tmp_path / "no-tools"))
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    one, two = fake_cuda.build(tmp_path / "one"), fake_cuda.build(tmp_path / "two")
    assert one != two and one.read_bytes() == two.read_bytes() == native.read_bytes()
    # Two files, two loaded libraries (two driver states), as two builds would give.
    assert fake_cuda.FakeCuda(one).lib._handle != fake_cuda.FakeCuda(two).lib._handle


def test_a_missing_prebuilt_driver_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("DLPACKARRAY_FAKE_CUDA_PREBUILT", str(tmp_path / "absent.so"))
    with pytest.raises(RuntimeError, match="DLPACKARRAY_FAKE_CUDA_PREBUILT=.*absent.so: no such"):
        fake_cuda.build(tmp_path)
