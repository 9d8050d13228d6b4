"""The aarch64 wheels' CI script (.ci/aarch64) stays runnable and its test subset stays whole.

Under emulation only a subset of the suite runs on every CI run; it must name test modules
that exist (a renamed module would otherwise drop out silently and pytest would fail on a
missing path only under qemu) and cover every protocol family the package exports.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / ".ci" / "aarch64"

# A module of each protocol family and of the binaries' ELF facts.
FAMILIES = {
    "DLPack": "tests/dlpack/",
    "buffer protocol": "tests/buffer/",
    "NumPy array interfaces": "tests/array_interface/",
    "CUDA array interface": "tests/cuda/",
    "Arrow PyCapsule interface": "tests/arrow/",
    "C API": "tests/capi/",
    "pickling": "tests/processes/",
    "self-check report": "tests/cli/",
    "glibc symbol versions": "tests/packaging/test_glibc_versions.py",
}


def _script() -> str:
    if not SCRIPT.is_file():
        pytest.skip("needs the source tree (.ci/aarch64)")
    return SCRIPT.read_text()


def _subset(text: str) -> list[str]:
    block = re.search(r"^subset=\((.*?)^\)", text, re.S | re.M)
    assert block, "no subset=( ... ) in .ci/aarch64"
    return block.group(1).split()


def test_the_script_parses():
    _script()
    bash = shutil.which("bash")
    assert bash is not None
    subprocess.run([bash, "-n", str(SCRIPT)], check=True, timeout=60)


def test_every_subset_module_exists():
    missing = [p for p in _subset(_script()) if not (ROOT / p).is_file()]
    assert missing == []


def test_the_subset_covers_every_protocol_family():
    subset = _subset(_script())
    uncovered = [
        f for f, prefix in FAMILIES.items() if not any(p.startswith(prefix) for p in subset)
    ]
    assert uncovered == []


def test_the_targets_shares_run_each_subset_module_exactly_once():
    """subset_share splits the subset between the targets: together they run every module,
    none twice (a module left out would go untested on aarch64 with nothing failing)."""
    text = _script()
    bash = shutil.which("bash")
    assert bash is not None
    functions = "\n".join(
        re.search(pattern, text, re.S | re.M).group(0)
        for pattern in (
            r"^targets=\(.*?^\)",
            r"^subset=\(.*?^\)",
            r"^die\(\) .*?$",
            r"^subset_share\(\) \{.*?^\}",
        )
    )
    shares = {}
    for tag in _targets(text):
        proc = subprocess.run(
            [bash, "-c", f"{functions}\nsubset_share {tag}"],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        shares[tag] = proc.stdout.split()
        assert shares[tag], f"{tag} runs none of the subset"
    ran = [m for share in shares.values() for m in share]
    assert sorted(ran) == sorted(_subset(text))
    unknown = subprocess.run(
        [bash, "-c", f"{functions}\nsubset_share cp00"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert unknown.returncode != 0 and "unknown target cp00" in unknown.stderr


def _targets(text: str) -> list[str]:
    block = re.search(r"^targets=\((.*?)^\)", text, re.S | re.M)
    assert block, "no targets=( ... ) in .ci/aarch64"
    return [m.split()[0] for m in re.findall(r'"([^"]+)"', block.group(1))]


def test_ci_builds_and_tests_every_target_once_after_starting_prepare():
    """CI runs build-test once for each of .ci/aarch64's targets (the lanes split them, each
    naming its target), every run in an output folder of its own (build-test empties its
    folder first, and two lanes run at once), all after prepare has started."""
    run = (ROOT / ".ci" / "run").read_text()
    lines = [line.strip() for line in run.splitlines() if not line.lstrip().startswith("#")]
    prepare = [i for i, line in enumerate(lines) if "bash .ci/aarch64 prepare" in line]
    builds = {
        i: re.search(r"AARCH64_TARGETS=(\S+) bash \.ci/aarch64 build-test ([^\s']+)", line)
        for i, line in enumerate(lines)
        if "bash .ci/aarch64 build-test" in line
    }
    assert len(prepare) == 1 and builds
    assert all(m is not None for m in builds.values()), "a build-test line without its target"
    tags = [m.group(1) for m in builds.values()]
    folders = [m.group(2) for m in builds.values()]
    assert sorted(tags) == sorted(_targets(_script()))
    assert len(set(folders)) == len(folders)
    assert all(prepare[0] < i for i in builds)


def test_the_toolchain_file_targets_aarch64_linux():
    text = (ROOT / "cmake" / "toolchain-aarch64-linux-gnu.cmake").read_text()
    assert "set(CMAKE_SYSTEM_NAME Linux)" in text
    assert "set(CMAKE_SYSTEM_PROCESSOR aarch64)" in text


def test_the_fake_cuda_driver_is_cross_built_with_the_helpers_flags():
    """The CUDA tests under emulation load a cross-compiled fake driver; it must be built
    as tests/helpers/fake_cuda builds it natively (-Werror included), from the same
    sources."""
    import fake_cuda

    command = next(
        c for c in _script().replace("\\\n", " ").splitlines() if "aarch64-linux-gnu-gcc" in c
    )
    assert " ".join(fake_cuda.FLAGS) in command
    named = re.findall(r'"\$fake_cuda/([\w.]+)"', command)
    assert named == [source.name for source in fake_cuda.SOURCES]
