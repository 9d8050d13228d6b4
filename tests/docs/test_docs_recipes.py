"""Every python block of docs/recipes.md runs as printed.

The recipes page is what users copy first, so each block is executed on its own in a fresh
interpreter (the blocks show hazards such as torch's on negative strides, which must never be
reached).  A block that imports an optional library (torch, JAX, pyarrow) is skipped, naming
the library, when it is absent; the rest run with the small ``test`` extra.
"""

from __future__ import annotations

import pathlib
import re

import pytest
from conftest import require, run_python

PAGE = pathlib.Path(__file__).resolve().parents[2] / "docs" / "recipes.md"
BLOCKS = re.findall(r"^```python\n(.*?)^```", PAGE.read_text(encoding="utf-8"), re.S | re.M)
# Libraries outside the `test` extra that a block may import, and what the block needs them for.
OPTIONAL = {
    "torch": "the torch recipes hand data to torch",
    "jax": "the JAX recipe hands data to JAX",
    "pyarrow": "the pyarrow recipe hands data to pyarrow",
}


def _imports(code: str) -> set[str]:
    return set(re.findall(r"^(?:import|from) ([A-Za-z_]\w*)", code, re.M))


def test_page_has_a_block_per_library():
    """The page shows NumPy, torch, JAX and pyarrow, each in a block of its own."""
    seen = set().union(*(_imports(b) for b in BLOCKS))
    assert {"numpy", "torch", "jax", "pyarrow", "dlpackarray"} <= seen
    assert len(BLOCKS) >= 6


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_block_runs(index):
    """Block ``index`` of the page runs to its end without an error or a crash."""
    code = BLOCKS[index]
    for module in sorted(_imports(code) & OPTIONAL.keys()):
        require(module, OPTIONAL[module])
    proc = run_python(code + '\nprint("block done")\n', timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("block done"), (
        f"docs/recipes.md python block {index} failed:\n{code}\n{proc.stderr}"
    )
