"""Sphinx configuration for the dlpackarray documentation.

Build: ``pip install ".[docs]" && sphinx-build -b html docs docs/_build`` (autodoc imports the
installed package; an in-tree build installed into ``./.site`` is used when present).
"""

from __future__ import annotations

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
