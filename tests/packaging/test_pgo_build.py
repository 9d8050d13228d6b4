"""The profile-guided release build (CMakeLists.txt DLPACKARRAY_PGO, tools/pgo_wheel.sh).

The training script must stay a correct smoke test of the routes it trains (a wrong
result fails the wheel build instead of being baked into its profile), and the CMake
option must refuse a stage it cannot build instead of silently making an ordinary build.
The whole generate -> train -> use cycle runs in CI (.ci/wheels), for every wheel.
"""

import importlib.util
import os
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
TRAIN = ROOT / "tools" / "pgo_train.py"


def _train_module():
    spec = importlib.util.spec_from_file_location("pgo_train", TRAIN)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_training_runs_every_route_and_checks_them():
    proc = subprocess.run(
        [sys.executable, str(TRAIN), "--rounds", "2"], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    trained = proc.stdout.rsplit("trained: ", 1)[1].strip()
    for route in ("wrap", "dlpack versioned", "np.asarray", "memoryview", "producer calls"):
        assert route in trained
    for group, module in (("arrow", "pyarrow"), ("torch", "torch")):
        installed = importlib.util.find_spec(module) is not None
        assert (group in trained.split(", ")) == installed, proc.stdout


def test_training_fails_when_a_route_copies(monkeypatch, capsys):
    mod = _train_module()
    # A consumer that silently copies: the values match, the memory is not shared.
    monkeypatch.setattr(mod.np, "from_dlpack", lambda x: np.array(np.asarray(x), copy=True))
    assert mod.main(["--rounds", "1"]) == 1
    err = capsys.readouterr().err
    assert "FAILED dlpack versioned: wrong values or a copy" in err


def test_training_fails_when_a_route_raises(monkeypatch, capsys):
    mod = _train_module()

    def broken(x):
        raise BufferError("broken on purpose")

    monkeypatch.setattr(mod, "_numpy_routes", lambda: {"broken": broken})
    assert mod.main(["--rounds", "1"]) == 1
    assert "FAILED broken: BufferError: broken on purpose" in capsys.readouterr().err


def test_training_fails_when_a_required_library_is_missing(monkeypatch, capsys):
    mod = _train_module()
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch -> ImportError
    assert mod.main(["--rounds", "1", "--require", "torch"]) == 1
    assert "FAILED torch: torch is not installed" in capsys.readouterr().err


def _configure(tmp_path, *defines):
    found = shutil.which(
        "cmake", path=os.pathsep.join([os.path.dirname(sys.executable), os.environ["PATH"]])
    )
    if found is None:
        pytest.skip('cmake is not installed: pip install ".[reliability]"')
    cmd = [found, "-S", str(ROOT), "-B", str(tmp_path / "build")]
    cmd += [f"-DPython_EXECUTABLE={sys.executable}", *defines]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize(
    ("defines", "message"),
    [
        (["-DDLPACKARRAY_PGO=sometimes"], "DLPACKARRAY_PGO must be OFF, generate or use"),
        (["-DDLPACKARRAY_PGO=generate"], "needs DLPACKARRAY_PGO_DIR, an absolute directory"),
        (["-DDLPACKARRAY_PGO=use", "-DDLPACKARRAY_PGO_DIR={empty}"], "no profiles (*.gcda)"),
    ],
)
def test_cmake_refuses_a_stage_it_cannot_build(tmp_path, defines, message):
    empty = tmp_path / "profiles"
    empty.mkdir()
    proc = _configure(tmp_path, *[d.format(empty=empty) for d in defines])
    assert proc.returncode != 0
    assert message in " ".join(proc.stderr.split()), proc.stderr


def test_cmake_use_stage_counts_its_profiles(tmp_path):
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    (profiles / "a.gcda").write_bytes(b"")
    (profiles / "b.gcda").write_bytes(b"")
    proc = _configure(tmp_path, "-DDLPACKARRAY_PGO=use", f"-DDLPACKARRAY_PGO_DIR={profiles}")
    if "needs GCC" in proc.stderr:
        pytest.skip("the compiler is not GCC")
    assert proc.returncode == 0, proc.stderr
    assert "profile-guided build from 2 profiles" in proc.stdout
