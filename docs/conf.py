"""Sphinx configuration for the dlpackarray documentation.

Build: ``pip install ".[docs]" && sphinx-build -b html docs docs/_build`` (autodoc imports the
installed package; an in-tree build installed into ``./.site`` is used when present).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent

# Developers build into ./.site (see the contributor notes); prefer it when it exists so
# autodoc documents the tree being edited rather than an older installed copy.
if (ROOT / ".site" / "dlpackarray").is_dir():
    sys.path.insert(0, str(ROOT / ".site"))

import dlpackarray  # noqa: E402  (after the path set-up above)

project = "dlpackarray"
author = "dlpackarray contributors"
copyright = "dlpackarray contributors, Apache License 2.0"  # noqa: A001
release = dlpackarray.__version__
version = ".".join(release.split(".")[:2])

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "myst_parser",
]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
# The example package is source (install.rst links it), not a page of the site.
exclude_patterns = ["_build", "_generated", "examples/downstream_pkg"]
myst_enable_extensions = ["colon_fence"]

# Docstrings are numpydoc-style.  Cython writes each def's signature as its __text_signature__
# (embedsignature.format=clinic), which autodoc reads through inspect.signature; api.rst
# still spells out the class signatures, since autodoc would take a builtin __new__'s.
napoleon_google_docstring = False
napoleon_numpy_docstring = True
autodoc_docstring_signature = True
autodoc_member_order = "groupwise"
autodoc_default_options = {"members": True, "undoc-members": False}

html_theme = "alabaster"
html_title = f"dlpackarray {release}"


def _collect_benchmark_results() -> None:
    """Write _generated/benchmark_results.md from benchmarks/results/*.md and *.png.

    The results are produced by ``python -m benchmarks.run`` and may be absent; the
    benchmarks page then says so instead of failing the build.
    """
    results = ROOT / "benchmarks" / "results"
    out_dir = DOCS / "_generated"
    copies = out_dir / "results"
    shutil.rmtree(out_dir, ignore_errors=True)
    copies.mkdir(parents=True)
    tables = sorted(results.glob("*.md")) if results.is_dir() else []
    images = sorted(results.glob("*.png")) if results.is_dir() else []
    lines = []
    if not tables and not images:
        lines.append(
            "No benchmark results yet: run `python -m benchmarks.run` to write them to "
            "`benchmarks/results/`, then rebuild the documentation."
        )
    for table in tables:
        shutil.copy2(table, copies / table.name)
        # Nested includes resolve against the including page (docs/benchmarks.md).
        lines += [f"```{{include}} _generated/results/{table.name}", ":relative-images:", "```", ""]
    for image in images:
        shutil.copy2(image, copies / image.name)
        lines += [f"![{image.stem}](_generated/results/{image.name})", ""]
    (out_dir / "benchmark_results.md").write_text("\n".join(lines) + "\n")


_collect_benchmark_results()
