"""The supported CPythons are one list (.ci/pythons), and everything that names them agrees.

The wheel scripts read the list; pyproject.toml's classifiers, the README and
docs/install.rst name exactly its versions; the free-threaded section of docs/install.rst
names every piece of shared mutable state in the code; and a free-threaded interpreter's
wheel gets its own ``cp3XXt`` ABI tag.
"""

from __future__ import annotations

import fnmatch
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CI = ROOT / ".ci"


def _pythons() -> list[tuple[str, str]]:
    rows = []
    for line in (CI / "pythons").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            minor, source = line.split()
            rows.append((minor, source))
    return rows


def _minors() -> list[str]:
    return [minor for minor, _ in _pythons()]


def _spoken(minors: list[str]) -> str:
    return ", ".join(minors[:-1]) + " and " + minors[-1]


def _pyproject() -> dict:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        tomllib = pytest.importorskip("tomli", reason="reads pyproject.toml on 3.10")
    with open(ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)


def test_the_list_is_consecutive_minors_each_with_a_known_source():
    """.ci/pythons lists consecutive CPython 3 minors, oldest first, each from pyenv or sid."""
    rows = _pythons()
    assert rows, ".ci/pythons lists no interpreter"
    numbers = [int(minor.split(".")[1]) for minor, _ in rows]
    assert all(minor.startswith("3.") for minor, _ in rows)
    assert numbers == list(range(numbers[0], numbers[0] + len(numbers)))
    assert {source for _, source in rows} <= {"pyenv", "sid"}


def test_classifiers_name_exactly_the_listed_pythons():
    """PyPI's version classifiers are the versions that have wheels and tests, no more."""
    classifiers = _pyproject()["project"]["classifiers"]
    named = [
        c.rsplit(" :: ", 1)[1]
        for c in classifiers
        if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)
    ]
    assert named == _minors()


def test_the_version_gate_is_the_oldest_listed_python_with_no_upper_bound():
    """requires-python and CMake's find_package name the oldest listed CPython as the floor
    and cap nothing: a newer CPython still builds from the sdist."""
    oldest = _minors()[0]
    assert _pyproject()["project"]["requires-python"] == f">={oldest}"
    cmake = (ROOT / "CMakeLists.txt").read_text()
    assert re.search(rf"find_package\(Python {re.escape(oldest)} REQUIRED", cmake)


@pytest.mark.parametrize("page", ["README.md", "docs/install.rst"])
def test_pages_name_the_listed_pythons_and_no_older_range(page):
    """README and docs/install.rst name the wheel Pythons as the list spells them, and no
    'CPython 3.10-3.N' range that stops short of the newest."""
    text = " ".join((ROOT / page).read_text().split())
    minors = _minors()
    assert f"CPython {_spoken(minors)}" in text
    for low, high in re.findall(r"CPython (3\.\d+)\s*[-\u2013]\s*(3\.\d+)", text):
        assert (low, high) == (minors[0], minors[-1]), f"{page}: CPython {low}-{high}"


def test_install_page_lists_a_measured_wheel_for_every_listed_python():
    """docs/install.rst's x86-64 size table has a row for each listed CPython's wheel (the
    aarch64 wheels, of fewer Pythons, have a table of their own)."""
    text = (ROOT / "docs" / "install.rst").read_text()
    listed = re.findall(r"``dlpackarray-[^`]*-(cp\d+)-cp\d+t?-manylinux[^`]*_x86_64\.whl``", text)
    assert listed == ["cp" + minor.replace(".", "") for minor in _minors()]


@pytest.mark.parametrize("script", ["wheels", "sid_wheels", "sid_chroot"])
def test_wheel_scripts_read_the_list_instead_of_naming_versions(script):
    """The CI scripts take their interpreters from .ci/pythons, never from a literal list."""
    text = (CI / script).read_text()
    code = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    assert ".ci/pythons" in code
    assert not re.search(r"\b3\.1\d\b", code), f".ci/{script} names a CPython version"


def _wheel_tag(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(CI / "wheel_tag.py"), *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("version", "flags", "tag"),
    [
        ("3.13", "", "cp313-cp313"),
        ("3.13", "t", "cp313-cp313t"),
        ("3.14", "t", "cp314-cp314t"),
        ("3.15", "", "cp315-cp315"),
        ("3.14", "td", "cp314-cp314t"),  # a debug build shares the ABI tag since 3.8
    ],
)
def test_wheel_tags_give_a_free_threaded_interpreter_its_own_abi(version, flags, tag):
    """A free-threaded (ABI flag t) interpreter's wheel is cp3XX-cp3XXt, the default
    build's cp3XX-cp3XX."""
    result = _wheel_tag(version, flags)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == tag


def test_wheel_tags_refuse_unknown_abi_flags():
    """An ABI flag the script does not know stops it, naming the flags."""
    result = _wheel_tag("3.14", "x")
    assert result.returncode != 0
    assert "unknown ABI flags 'x'" in result.stderr


def test_wheel_tags_of_this_interpreter():
    """With no arguments the tags are those of the running interpreter."""
    import sysconfig

    result = _wheel_tag()
    assert result.returncode == 0, result.stderr
    cp = f"cp{sys.version_info[0]}{sys.version_info[1]}"
    suffix = "t" if sysconfig.get_config_var("Py_GIL_DISABLED") else ""
    assert result.stdout.strip() == f"{cp}-{cp}{suffix}"


def test_a_tag_matches_only_its_own_wheel():
    """.ci/wheels picks a wheel by '-TAG-' in its name: the default build's tag never
    matches the free-threaded wheel, nor the other way round."""
    plain = "dlpackarray-0.1.0-cp314-cp314-manylinux_2_24_x86_64.whl"
    threaded = "dlpackarray-0.1.0-cp314-cp314t-manylinux_2_24_x86_64.whl"
    for tag, wheel, other in (("cp314-cp314", plain, threaded), ("cp314-cp314t", threaded, plain)):
        assert fnmatch.fnmatch(wheel, f"dlpackarray-*-{tag}-*manylinux*.whl")
        assert not fnmatch.fnmatch(other, f"dlpackarray-*-{tag}-*manylinux*.whl")
    wheels = (CI / "wheels").read_text()
    assert '-"$tag"-*manylinux*.whl' in wheels and '*"-$tag-"*' in wheels


@pytest.mark.parametrize("interpreter", ["/nonexistent/bin/python", "/bin/false"])
def test_wheels_script_fails_loudly_for_an_interpreter_it_cannot_use(tmp_path, interpreter):
    """An interpreter given to .ci/wheels that cannot run stops the script with its name,
    before anything is built (nothing is skipped)."""
    env = dict(os.environ, CI_PYTHONS=f"{sys.executable} {interpreter}")
    result = subprocess.run(
        ["bash", str(CI / "wheels"), str(ROOT / "pyproject.toml"), str(tmp_path / "out")],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert result.returncode != 0
    assert f"cannot use the interpreter {interpreter}" in result.stderr
    assert not (tmp_path / "out").exists()


def _free_threaded_section() -> str:
    text = (ROOT / "docs" / "install.rst").read_text()
    start = text.index("Free-threaded CPython\n")
    return text[start : text.index("Supported platforms\n", start)]


def test_free_threaded_section_names_every_module_global_that_is_rebound():
    """Every module-level name a Cython module rebinds (a ``global`` statement), every
    module-level memo dict and method table, and the per-type cache are in the list."""
    section = _free_threaded_section()
    names = set()
    for pyx in sorted((ROOT / "src" / "dlpackarray").glob("*.pyx")):
        source = pyx.read_text()
        for line in re.findall(r"^\s+global (.+)$", source, re.M):
            names.update(n.strip() for n in line.split(","))
        names.update(re.findall(r"^cdef dict (_\w+)", source, re.M))
        names.update(re.findall(r"^cdef _MethodDef (_\w+)", source, re.M))
        names.update(re.findall(r"^cdef _TypeFacts (_\w+)", source, re.M))
        names.update(re.findall(r"^cdef (?:CAPITable|DLPackExchangeAPI) (_\w+)", source, re.M))
    assert len(names) > 10
    missing = sorted(n for n in names if f"``{n}``" not in section)
    assert not missing, f"docs/install.rst's free-threaded list lacks {missing}"


def test_free_threaded_section_names_every_core_global():
    """Every namespace-scope ``g_`` variable of the C++ core is in the list (as safe or as
    work to do)."""
    section = _free_threaded_section()
    names = set()
    for cpp in sorted((ROOT / "cpp" / "src").glob("*.cpp")):
        names.update(
            re.findall(r"^[A-Za-z_][\w:<>*, ]* \*?(g_\w+)\s*(?:\[|=|\{|;)", cpp.read_text(), re.M)
        )
    assert len(names) > 10
    missing = sorted(n for n in names if f"``{n}``" not in section)
    assert not missing, f"docs/install.rst's free-threaded list lacks {missing}"
