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
exclude_patterns = ["_build", "examples/downstream_pkg"]
myst_enable_extensions = ["colon_fence"]

# Docstrings are numpydoc-style.  Cython writes each def's signature as its __text_signature__
# (embedsignature.format=clinic), which autodoc reads through inspect.signature; api.rst
# still spells out the class signatures, since autodoc would take a builtin __new__'s.
napoleon_google_docstring = False
napoleon_numpy_docstring = True
autodoc_docstring_signature = True
autodoc_member_order = "groupwise"
autodoc_default_options = {"members": True, "undoc-members": False}

html_theme = "furo"
html_title = f"dlpackarray {release}"


def _collect_benchmark_results() -> None:
    """Write one page per recorded benchmark run into _generated/runs/.

    A run is ``benchmarks/results/<name>.md`` (its tables) and the plots
    ``<name>_*.png``; benchmarks_runs.md lists the pages with a glob.  The results are
    produced by ``python -m benchmarks.run`` and may be absent; one page then says so,
    so that the glob matches and the build does not fail.
    """
    results = ROOT / "benchmarks" / "results"
    out_dir = DOCS / "_generated"
    runs = out_dir / "runs"
    shutil.rmtree(out_dir, ignore_errors=True)
    runs.mkdir(parents=True)
    tables = {p.stem: p for p in sorted(results.glob("*.md"))} if results.is_dir() else {}
    images = sorted(results.glob("*.png")) if results.is_dir() else []
    names = set(tables) | {image.stem.rsplit("_", 1)[0] for image in images}
    if not names:
        (runs / "none.md").write_text(
            "# No recorded runs\n\nRun `python -m benchmarks.run` to write results to "
            "`benchmarks/results/`, then rebuild the documentation.\n"
        )
    for name in sorted(names):
        text = tables[name].read_text() if name in tables else f"# Benchmark run `{name}`\n"
        for image in images:
            if image.stem.rsplit("_", 1)[0] == name:
                shutil.copy2(image, runs / image.name)
                text += f"\n![{image.stem}]({image.name})\n"
        (runs / f"{name}.md").write_text(text)


_collect_benchmark_results()
