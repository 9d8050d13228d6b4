"""Project files a user or a service reads: CHANGELOG.md, .readthedocs.yaml, the URLs."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(
    not (ROOT / "pyproject.toml").is_file(), reason="needs a source checkout"
)


def _pyproject() -> dict:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        tomllib = pytest.importorskip("tomli", reason="reads pyproject.toml on 3.10")
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _tracked(*paths: str) -> list:
    """The files git tracks under ``paths``; skips outside a git checkout (an sdist)."""
    import subprocess

    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    if shutil.which("git") is None:
        pytest.skip("git is not installed (a checkout used without it)")
    return subprocess.run(
        ["git", "ls-files", *paths], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()


def test_changelog_keeps_a_changelog_format():
    text = (ROOT / "CHANGELOG.md").read_text()
    assert text.startswith("# Changelog\n")
    versions = re.findall(r"^## \[([^\]]+)\](.*)$", text, re.M)
    assert versions[0] == ("Unreleased", "")
    for name, date in versions[1:]:
        assert re.fullmatch(r"\d+\.\d+\.\d+", name), name
        assert re.fullmatch(r" - \d{4}-\d{2}-\d{2}", date), date
    assert _pyproject()["project"]["version"] in [v for v, _ in versions]
    allowed = {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}
    assert set(re.findall(r"^### (.+)$", text, re.M)) <= allowed
    # Every version heading has its link reference at the bottom.
    for name, _ in versions:
        assert re.search(rf"^\[{re.escape(name)}\]: https://", text, re.M), name


def test_changelog_url_points_at_the_changelog_file():
    url = _pyproject()["project"]["urls"]["Changelog"]
    assert url.endswith("/CHANGELOG.md")


def test_readthedocs_configuration():
    yaml = pytest.importorskip(
        "yaml", reason='PyYAML is not installed (reads .readthedocs.yaml): pip install ".[interop]"'
    )  # dask, in the interop extra, brings it
    conf = yaml.safe_load((ROOT / ".readthedocs.yaml").read_text())
    assert conf["version"] == 2
    assert conf["build"]["tools"]["python"] == "3.11"
    assert (ROOT / conf["sphinx"]["configuration"]).is_file()
    (install,) = conf["python"]["install"]
    assert install["path"] == "." and install["extra_requirements"] == ["docs"]
    assert "docs" in _pyproject()["project"]["optional-dependencies"]


CI_TEST_COMMAND = 'pip install ".[test,interop]" && python -m pytest -q tests'


def test_ci_runs_the_readme_whole_suite_command_verbatim():
    readme = (ROOT / "README.md").read_text()
    assert f"```bash\n{CI_TEST_COMMAND}\n```" in readme
    assert f"\n{CI_TEST_COMMAND}\n" in (ROOT / ".ci" / "run").read_text()


def test_test_extra_is_small_and_interop_holds_the_array_libraries():
    extras = _pyproject()["project"]["optional-dependencies"]

    def names(extra):
        return {re.split(r"[<>=!\[ ;]", r, maxsplit=1)[0].lower() for r in extras[extra]}

    assert names("test") == {"pytest", "hypothesis", "numpy", "ml_dtypes", "cython", "tomli"}
    assert "tomli>=1.1; python_version < '3.11'" in extras["test"]  # tomllib from 3.11
    assert {"torch", "jax", "pyarrow", "polars", "duckdb", "nanoarrow"} <= names("interop")
    assert "torch==2.13.0" in extras["interop"]  # never an unpinned torch


def test_benchmark_results_are_written_outside_the_source_tree():
    """A benchmark run's default output folder lies outside the checkout, so results are
    never committed by accident (docs/performance.md keeps the latest figures)."""
    if not (ROOT / "benchmarks" / "run.py").is_file():
        pytest.skip("no benchmarks/ next to the tests")
    import sys

    sys.path.insert(0, str(ROOT))
    try:
        from benchmarks import run
    finally:
        sys.path.remove(str(ROOT))
    default = Path(run.parse_args([]).out_dir).resolve()
    assert ROOT not in default.parents and default != ROOT, default


def test_no_benchmark_results_are_tracked():
    """Generated results (JSON, tables, plots) stay out of git and out of the sdist."""
    assert _tracked("benchmarks/results", "dlpackarray-bench-*") == []
    assert "benchmarks/results" in _pyproject()["tool"]["scikit-build"]["sdist"]["exclude"]


def test_code_files_stay_small():
    """Every tracked source, header, script and test file holds at most 800 lines: a file
    that grows past it has taken on a second job and is split by job (generated data
    and corpora are not code)."""
    suffixes = (".py", ".pyx", ".pxd", ".pyi", ".c", ".cpp", ".h", ".hpp", ".cu", ".sh")
    tracked = _tracked("src", "cpp", "tests", "benchmarks", "tools", ".ci", "fuzz", "cmake")
    code = [p for p in tracked if p.endswith(suffixes) or p.startswith(".ci/")]
    assert len(code) > 100, "the listing found too few files to check"
    long = {}
    for path in code:
        file = ROOT / path
        if file.is_file():
            lines = file.read_bytes().count(b"\n")
            if lines > 800:
                long[path] = lines
    assert long == {}
